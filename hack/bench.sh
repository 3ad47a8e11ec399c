#!/usr/bin/env bash
# `make bench`: release builds, then two tables — the policy sandbox's decision
# latency (`podset-host policy bench`) and the operator on a private control plane.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

hack/deps.sh
log "building (release)"
# native-podset: the operator can also decide with guest-podset linked in natively
# (`--native-podset`), for the native-vs-Wasm table. The Wasm path is the same code.
cargo build --release -p podset-host --bin podset-host --features native-podset
PODSET_HOST_BIN="$ROOT/target/release/podset-host" hack/policy.sh --fixtures

# The PodSet policy in three languages (guest-podset/ and its twins in typescript/ and go/):
# a fresh instance and a call at 10, 100 and 1000 pods.
for policy in podset podset-ts podset-go; do
  echo
  echo "## Policy decisions: fresh instance + call, target/policy/$policy.wasm: $(stat -c %s "target/policy/$policy.wasm") bytes"
  echo
  target/release/podset-host policy bench "target/policy/$policy.wasm" --budget "${BENCH_BUDGET:-2s}"
done
# The any-kind policies on their scenarios: one call each (a Reloader reconcile whose
# lookups chain takes three calls the first time, then one).
for policy in reloader tenant cronjob; do
  echo
  echo "## Policy decisions: target/policy/$policy.wasm on guest-$policy/scenarios"
  echo
  target/release/podset-host policy bench "target/policy/$policy.wasm" guest-"$policy"/scenarios/*.yaml \
    --budget "${BENCH_BUDGET:-2s}"
done

# The same policy in three languages, side by side: the Memcached's size, its compile
# (no compiled-module cache: `loaded … in`), and a decision at 10, 100 and 1000 related
# pods (the scenario's pods, repeated).
unset PODSET_COMPILED_CACHE
echo
echo "## Policy decisions by language: the Memcached policy on guest-memcached/scenarios/status-from-pods.yaml"
for policy in memcached memcached-ts memcached-go; do
  echo
  echo "### target/policy/$policy.wasm: $(stat -c %s "target/policy/$policy.wasm") bytes"
  echo
  target/release/podset-host policy bench "target/policy/$policy.wasm" guest-memcached/scenarios/status-from-pods.yaml \
    --related 10,100,1000 --budget "${BENCH_BUDGET:-2s}"
done

export CLUSTER_DIR="$ROOT/.cluster-bench"
trap 'hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
hack/cluster.sh down >/dev/null 2>&1 || true
# The benchmarks run on the simulated node only: no real node to start.
REAL_NODE=0 hack/cluster.sh up >/dev/null || die "the benchmark control plane did not start"
export PATH="$CLUSTER_DIR/bin:$PATH"
export PODSET_TEST_KUBECONFIG="$CLUSTER_DIR/kubeconfig" PODSET_POLICY_DIR="$ROOT/target/policy"
# The operator the benchmark runs: the release build. The seeds' Go operators, its peers
# beside the ReplicaSet controller, built (once per machine) before anything is measured.
export PODSET_HOST_BIN="$ROOT/target/release/podset-host"
PODSET_PEERS=$(hack/go-tool.sh peers) || die "the seeds' Go operators did not build"
export PODSET_PEERS
echo
echo "## Operator"
cargo bench -q -p podset-host --features native-podset --bench operator
