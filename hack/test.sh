#!/usr/bin/env bash
# `make test`: build, then unit tests, policy scenarios and integration tests against a
# private control plane (own state dir and ports: a running `make run` is untouched).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

hack/deps.sh
log "formatting check"
cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"

log "building (native)"
cargo build --workspace --all-targets

log "building policies (wasm32)"
hack/policy.sh --fixtures

export CLUSTER_DIR="$ROOT/.cluster-test"
trap 'hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
hack/cluster.sh down >/dev/null 2>&1 || true
hack/cluster.sh up || die "the test control plane did not start; integration tests cannot run"

export PODSET_TEST_KUBECONFIG="$CLUSTER_DIR/kubeconfig"
export PODSET_TEST_AUDIT_LOG="$CLUSTER_DIR/logs/audit.log"
export PODSET_POLICY_DIR="$ROOT/target/policy"

log "policy scenarios on the compiled component"
target/debug/podset-host policy test target/policy/podset.wasm guest-podset/scenarios/*.yaml

log "unit and integration tests"
cargo test --workspace --no-fail-fast
