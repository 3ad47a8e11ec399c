#!/usr/bin/env bash
# `make test`: build, then unit tests, policy scenarios and integration tests against a
# private control plane (own state dir and ports: a running `make run` is untouched).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

hack/deps.sh
# The registry tests copy tags with skopeo (images.sh --push installs it too, for make deploy).
apt_install skopeo
log "formatting check"
cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"

log "building (native)"
# native-podset: the property tests compare the policy's native build with its .wasm,
# and the benchmarks' smoke run decides both ways.
cargo build --workspace --all-targets --features podset-host/native-podset,podset-host/cluster-tests,podset-node-sim/cluster-tests
cargo build -p podset-host --features fault-suite,native-podset --tests

log "building policies (wasm32)"
hack/policy.sh --fixtures

test_cluster "$ROOT/.cluster-test"

results="$(mktemp)"
trap 'rm -f "$results"; hack/cluster.sh down >/dev/null 2>&1 || true' EXIT

log "images are reproducible: rebuilding one gives the same digest"
images=0
before=$(sha256sum target/images/busybox.oci.tar | cut -d' ' -f1)
hack/images.sh busybox >/dev/null 2>&1 || images=1
after=$(sha256sum target/images/busybox.oci.tar | cut -d' ' -f1)
if [ "$before" = "$after" ]; then
  echo "busybox image: sha256:$before both times"
else
  echo "busybox image changed on rebuild: sha256:$before, then sha256:$after" && images=1
fi

log "policy scenarios on the compiled components"
scenarios=0
for dir in guest-*/; do
  name=$(basename "$dir")
  target/debug/podset-host policy test "target/policy/${name#guest-}.wasm" "$dir"scenarios/*.yaml | tee -a "$results" \
    || scenarios=$?
done

log "scaffold: a new policy crate compiles, passes its own test, builds to Wasm and passes its scenario"
scaffold=0
scaffold_dir=$(mktemp -d)
{
  target/debug/podset-host policy new demo --dir "$scaffold_dir" >/dev/null \
    && (cd "$scaffold_dir/guest-demo" && CARGO_TARGET_DIR="$ROOT/target" cargo test -q) \
    && hack/policy.sh --crate "$scaffold_dir/guest-demo" \
    && target/debug/podset-host policy test target/policy/demo.wasm "$scaffold_dir"/guest-demo/scenarios/*.yaml
} 2>&1 | tee -a "$results" || scaffold=1
rm -rf "$scaffold_dir"

log "unit and integration tests"
tests=0
cargo test --workspace --features podset-host/native-podset,podset-host/cluster-tests,podset-node-sim/cluster-tests --no-fail-fast 2>&1 | tee -a "$results" || tests=$?

# Every benchmark once, small, with the debug builds: they must keep running (their
# figures mean nothing here; `make bench` measures).
log "benchmarks, smoke run (BENCH_QUICK=1)"
bench=0
{
  target/debug/podset-host policy bench target/policy/podset.wasm --budget 50ms \
    && BENCH_QUICK=1 cargo test -q -p podset-host --features native-podset --bench operator
} 2>&1 | tee -a "$results" || bench=$?

# Alone and last: it restarts the test cluster's API server and etcd under the operator.
log "fault suite (FAULT_RUNS=${FAULT_RUNS:-20} random kills${FAULT_SEED:+, FAULT_SEED=$FAULT_SEED})"
faults=0
cargo test -p podset-host --features fault-suite,native-podset --test faults -- --test-threads=1 --nocapture 2>&1 \
  | tee -a "$results" || faults=$?

# cluster-down must stop exactly what cluster-up started: it fails naming any process,
# shim, mount, bridge or cgroup left behind.
log "stopping the test control plane"
down=0
hack/cluster.sh down || down=$?

# One closing line for the whole run: every cargo test binary and the scenarios.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3 }
     END { printf "total: %d passed, %d failed\n", p, f }' "$results"
[ "$scenarios" = 0 ] && [ "$scaffold" = 0 ] && [ "$tests" = 0 ] && [ "$faults" = 0 ] && [ "$images" = 0 ] \
  && [ "$bench" = 0 ] || die "tests failed"
[ "$down" = 0 ] || die "cluster-down left something behind (see above)"
