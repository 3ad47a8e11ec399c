#!/usr/bin/env bash
# `make check`: what needs no cluster, fast when warm — formatting, clippy, rustdoc's
# links, the import-layer test, unit tests (the generated references and CRDs included), the
# in-process tests and every policy's scenarios on its compiled component.
# `make test` runs it first, then everything that needs the private control plane.
#
# Every cargo command here and in hack/test.sh uses one feature set ($TEST_FEATURES) over
# the whole workspace, so each crate compiles once per target, whichever command comes first.
#   hack/check.sh          all of it
#   hack/check.sh --lint   formatting and clippy only (`make lint`)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PODSET_BUILD=test

started=$(date +%s)
phase "formatting"
cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"

phase "clippy -D warnings"
cargo clippy -q --workspace --all-targets --features "$TEST_FEATURES" -- -D warnings
if [ "${1:-}" = --lint ]; then phase_end; exit 0; fi

hack/deps.sh check

phase "rustdoc -D warnings (links between modules follow them when they move)"
RUSTDOCFLAGS="-D warnings" cargo doc -q -p podset-host --no-deps

phase "building every crate and test (native)"
build_binaries

phase "policies and the hostile fixtures (wasm32)"
hack/policy.sh --fixtures >/dev/null

phase "unit tests, import layers, in-process tests"
results=${CHECK_RESULTS:-/dev/null}
cargo test -q --workspace --features "$TEST_FEATURES" --lib --bins --test in_process 2>&1 | tee -a "$results"

phase "policy scenarios on the compiled components"
for dir in guest-*/; do
  name=$(basename "$dir")
  target/debug/podset-host policy test "target/policy/${name#guest-}.wasm" "$dir"scenarios/*.yaml | tee -a "$results" | tail -1
done
phase_end
log "passed in $(($(date +%s) - started)) s"
