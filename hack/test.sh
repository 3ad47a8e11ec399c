#!/usr/bin/env bash
# `make test`: everything. First what needs no cluster (hack/check.sh: formatting, clippy,
# rustdoc, the one build of every crate, the policies, unit, in-process and scenario
# tests), then everything else against a private control plane (own state dir and ports:
# a running `make run` is untouched). Prints the time of each phase at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PODSET_BUILD=test
started=$(date +%s)

results="$(mktemp)"
PHASE_LOG="$(mktemp)"
export PHASE_LOG
trap 'rm -f "$results" "$PHASE_LOG"' EXIT

phase "Debian packages (one apt-get step)"
hack/deps.sh cluster
phase_end

CHECK_RESULTS="$results" hack/check.sh

phase "control plane up (Kubernetes and etcd are built once per machine)"
test_cluster "$ROOT/.cluster-test"
trap 'rm -f "$results" "$PHASE_LOG"; hack/cluster.sh down >/dev/null 2>&1 || true' EXIT

phase "images are reproducible: rebuilding one gives the same digest"
images=0
before=$(sha256sum target/images/busybox.oci.tar | cut -d' ' -f1)
hack/images.sh busybox >/dev/null 2>&1 || images=1
after=$(sha256sum target/images/busybox.oci.tar | cut -d' ' -f1)
if [ "$before" = "$after" ]; then
  echo "busybox image: sha256:$before both times"
else
  echo "busybox image changed on rebuild: sha256:$before, then sha256:$after" && images=1
fi

phase "scaffold: a new policy crate compiles, passes its own test, builds to Wasm and passes its scenario"
scaffold=0
scaffold_dir=$(mktemp -d)
{
  target/debug/podset-host policy new demo --dir "$scaffold_dir" >/dev/null \
    && (cd "$scaffold_dir/guest-demo" && CARGO_TARGET_DIR="$ROOT/target" cargo test -q) \
    && hack/policy.sh --crate "$scaffold_dir/guest-demo" \
    && target/debug/podset-host policy test target/policy/demo.wasm "$scaffold_dir"/guest-demo/scenarios/*.yaml
} 2>&1 | tee -a "$results" || scaffold=1
rm -rf "$scaffold_dir"

# hack/check.sh ran the unit and in-process tests; here every other test target of the
# workspace (read from cargo metadata, so a new one is never left out), but the fault
# suite, which runs alone and last.
phase "integration tests on the control plane"
tests=0
mapfile -t targets < <(test_targets_except in_process faults)
cargo test --workspace --features "$TEST_FEATURES" --no-fail-fast "${targets[@]}" 2>&1 | tee -a "$results" || tests=$?

phase "doc tests"
cargo test --workspace --features "$TEST_FEATURES" --doc 2>&1 | tee -a "$results" || tests=$?

# Every benchmark once, small, with the debug builds: they must keep running (their
# figures mean nothing here; `make bench` measures).
phase "benchmarks, smoke run (BENCH_QUICK=1)"
bench=0
{
  target/debug/podset-host policy bench target/policy/podset.wasm --budget 50ms \
    && BENCH_QUICK=1 cargo test -q --workspace --features "$TEST_FEATURES" --bench operator
} 2>&1 | tee -a "$results" || bench=$?

# Alone and last: it restarts the test cluster's API server and etcd under the operator.
phase "fault suite (FAULT_RUNS=${FAULT_RUNS:-20} random kills${FAULT_SEED:+, FAULT_SEED=$FAULT_SEED})"
faults=0
cargo test --workspace --features "$TEST_FEATURES" --test faults -- --test-threads=1 --nocapture 2>&1 \
  | tee -a "$results" || faults=$?

# cluster-down must stop exactly what cluster-up started: it fails naming any process,
# shim, mount, bridge or cgroup left behind.
phase "stopping the test control plane"
down=0
hack/cluster.sh down || down=$?
phase_end

phase_report
echo "make test: $(($(date +%s) - started)) s"
# One closing line for the whole run: every cargo test binary and the scenarios.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3 }
     END { printf "total: %d passed, %d failed\n", p, f }' "$results"
[ "$scaffold" = 0 ] && [ "$tests" = 0 ] && [ "$faults" = 0 ] && [ "$images" = 0 ] \
  && [ "$bench" = 0 ] || die "tests failed"
[ "$down" = 0 ] || die "cluster-down left something behind (see above)"
