#!/usr/bin/env bash
# `make check`: what needs no cluster, fast when warm — formatting, clippy, rustdoc's
# links, the import-layer test, unit tests (the generated references and CRDs included), the
# in-process tests and every policy's scenarios on its compiled component.
# CI runs it before `make test`, which runs everything on a private control plane.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

started=$(date +%s)
log "formatting"
cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"

log "clippy -D warnings"
cargo clippy -q --workspace --all-targets --features podset-host/native-podset,podset-host/fault-suite,podset-host/cluster-tests,podset-node-sim/cluster-tests -- -D warnings

log "rustdoc -D warnings (links between modules follow them when they move)"
RUSTDOCFLAGS="-D warnings" cargo doc -q -p podset-host --no-deps

log "policies and the hostile fixtures (wasm32)"
hack/policy.sh --fixtures >/dev/null

log "unit tests, import layers, in-process tests"
cargo test -q --workspace --lib --bins --features podset-host/native-podset
cargo test -q -p podset-host --features native-podset --test in_process

log "policy scenarios on the compiled components"
for dir in guest-*/; do
  name=$(basename "$dir")
  target/debug/podset-host policy test "target/policy/${name#guest-}.wasm" "$dir"scenarios/*.yaml | tail -1
done
log "passed in $(($(date +%s) - started)) s"
