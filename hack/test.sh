#!/usr/bin/env bash
# `make test`: everything `make check` runs, then everything else against a private
# control plane (own state dir and ports: a running `make run` is untouched). Prints the
# time of each phase at the end.
#
# On 2 cores the builds keep both busy most of the time, while the integration tests leave
# one idle most of the time. So the order is: formatting; the build, clippy in it, the
# policies, unit, in-process and scenario tests (hack/check.sh --tests); rustdoc then
# started in the background at the lowest CPU priority (in a target directory of its own:
# its check build of every dependency takes what the foreground leaves); the control plane;
# the scaffold test in the background too; the integration and doc tests; then, once the
# background is done, the benchmarks' smoke run and the fault suite, alone. Rustdoc started
# beside the build instead took 909 s of the build's cores at nice 19 and the build phases
# 10-30% longer (a cold run, 2026-11-28).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PODSET_BUILD=test
keep_compiled_policies
# Every cargo command below compiles with the same wrapper as hack/check.sh's build, so
# that nothing it built is built again.
lint_in_build
started=$(date +%s)

results="$(mktemp)"
background_log="$(mktemp)"
PHASE_LOG="$(mktemp)"
export PHASE_LOG
disk_log="$(mktemp)"
disk_watch "$disk_log"
# A cold run on a new machine used up to 17 GiB more than it found, while Kubernetes built
# (target/ 5.5, Go's module and build caches, the Debian packages, the control plane;
# 2026-11-28): say so before it runs out.
free=$(disk_free "$ROOT")
[ "${free:-0}" -ge 20480 ] || log "warning: $free MiB free here; a cold make test has needed up to 17 GiB (a warm one far less)"
# What every exit removes; the control plane's step adds stopping it.
cleanup() {
  kill "$DISK_WATCH" 2>/dev/null
  rm -f "$results" "$background_log" "$PHASE_LOG" "$disk_log"
}
trap cleanup EXIT

# Every Debian package in one apt-get step, in the background: downloading and unpacking
# overlap the first build, which needs none of them (check.sh's own deps step waits for
# this one, with the packages it needs itself). Then, on a machine that has not built
# them yet, Kubernetes and etcd, at the lowest CPU priority: they take what the build
# leaves of the cores.
deps_log="$(mktemp)"
(hack/deps.sh cluster && build_k8s_once && build_go_tools_once) >"$deps_log" 2>&1 &
deps=$!

phase "formatting"
cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"
phase_end

CHECK_RESULTS="$results" hack/check.sh --tests

log "background, at the lowest CPU priority: rustdoc (its log follows the doc tests)"
(
  renice -n 19 -p "$BASHPID" >/dev/null
  export PHASE_PREFIX="background: "
  hack/check.sh --static
) >"$background_log" 2>&1 &
background=$!

phase "control plane up (Kubernetes and etcd are built once per machine)"
wait "$deps" || { cat "$deps_log" >&2; die "installing the Debian packages or building Kubernetes failed"; }
cat "$deps_log" >&2
rm -f "$deps_log"
test_cluster "$ROOT/.cluster-test"
PODSET_KSTATUS=$(hack/go-tool.sh kstatus --cached) || die "the kstatus helper is missing after its build"
PODSET_HELM=$(hack/go-tool.sh helm --cached) || die "helm is missing after its build"
PODSET_PEERS=$(hack/go-tool.sh peers --cached) || die "the seeds' Go operators are missing after their build"
export PODSET_KSTATUS PODSET_HELM PODSET_PEERS
trap 'cleanup; hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
phase_end

# The scaffold: a new policy crate compiles, passes its own test, builds to Wasm and passes
# its scenario (in a target directory of its own: the tests' cargo holds target/'s lock).
scaffold() {
  phase "scaffold test"
  local dir
  dir=$(mktemp -d)
  target/debug/podset-host policy new demo --dir "$dir" >/dev/null \
    && (cd "$dir/guest-demo" && CARGO_TARGET_DIR="$ROOT/target/scaffold" cargo test -q) \
    && PODSET_HOST_BIN="$ROOT/target/debug/podset-host" hack/policy.sh --crate "$dir/guest-demo" \
    && target/debug/podset-host policy test target/policy/demo.wasm "$dir"/guest-demo/scenarios/*.yaml
  local rc=$?
  rm -rf "$dir"
  # The same in TypeScript and in Go, outside the repository: their checks (tsc --strict;
  # gofmt and go vet), their test, their component, their scenario.
  local lang
  for lang in ts go; do
    dir=$(mktemp -d)
    [ "$rc" = 0 ] && target/debug/podset-host policy new demo --lang "$lang" --dir "$dir" >/dev/null \
      && PODSET_HOST_BIN="$ROOT/target/debug/podset-host" hack/policy.sh --crate "$dir/guest-demo" \
      && target/debug/podset-host policy test "target/policy/demo-$lang.wasm" "$dir"/guest-demo/scenarios/*.yaml
    rc=$?
    rm -rf "$dir"
  done
  phase_end
  return $rc
}
log "background, at the lowest CPU priority: the scaffold test (its log follows the doc tests)"
scaffold_log="$(mktemp)"
(
  renice -n 19 -p "$BASHPID" >/dev/null
  export PHASE_PREFIX="background: "
  scaffold
) >"$scaffold_log" 2>&1 &
scaffolding=$!

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

# hack/check.sh ran the unit and in-process tests; here every other test target of the
# workspace (read from cargo metadata, so a new one is never left out), but the fault
# suite, which runs alone and last.
phase "integration tests on the control plane"
tests=0
mapfile -t targets < <(test_targets_except in_process faults)
cargo test --workspace --features "$TEST_FEATURES" --no-fail-fast "${targets[@]}" 2>&1 | tee -a "$results" || tests=$?

phase "doc tests"
cargo test --workspace --features "$TEST_FEATURES" --doc 2>&1 | tee -a "$results" || tests=$?

# The smoke bench's decisions run against a deadline and the fault suite times the
# operator: neither shares the cores with the background. (Measured: with clippy beside it
# at nice 19, a smoke-bench decision at 1000 pods exceeded its 100 ms deadline.)
phase "waiting for the background: rustdoc, scaffold"
static=0
wait "$background" || static=$?
wait "$scaffolding" || static=$?
tee -a "$results" <"$background_log"
tee -a "$results" <"$scaffold_log"
rm -f "$scaffold_log"

# Every benchmark once, small, with the debug builds: they must keep running (their
# figures mean nothing here; `make bench` measures).
phase "benchmarks, smoke run (BENCH_QUICK=1)"
bench=0
{
  target/debug/podset-host policy bench target/policy/podset.wasm --budget 50ms \
    && BENCH_QUICK=1 cargo test -q --workspace --features "$TEST_FEATURES" --bench operator
} 2>&1 | tee -a "$results" || bench=$?

# Alone of the tests and last: it restarts the test cluster's API server and etcd under
# the operator.
# Its faults that each touch one namespace (an operator, API server or proxy of their own)
# side by side, three at a time: they mostly wait on the cluster (one at a time they took
# 620 of the suite's 722 s, 2026-11-27). Four at a time, operators starting side by side
# (each compiling its modules) overran a policy's 100 ms wall-clock deadline at load once.
# Then those that restart or compact the whole control plane, one at a time.
phase "fault suite, side by side (FAULT_RUNS=${FAULT_RUNS:-20} random kills${FAULT_SEED:+, FAULT_SEED=$FAULT_SEED})"
faults=0
cargo test --workspace --features "$TEST_FEATURES" --test faults -- --skip whole_control_plane:: \
  --test-threads=3 --nocapture 2>&1 | tee -a "$results" || faults=$?
phase "fault suite, the whole control plane (one at a time)"
cargo test --workspace --features "$TEST_FEATURES" --test faults whole_control_plane:: -- \
  --test-threads=1 --nocapture 2>&1 | tee -a "$results" || faults=$?

# cluster-down must stop exactly what cluster-up started: it fails naming any process,
# shim, mount, bridge or cgroup left behind.
phase "stopping the test control plane"
down=0
hack/cluster.sh down || down=$?
phase_end

phase_report
disk_report "$disk_log"
echo "make test: $(($(date +%s) - started)) s"
# One closing line for the whole run: every cargo test binary and the scenarios.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3 }
     /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 }
     END { printf "total: %d passed, %d failed\n", p, f }' "$results"
[ "$static" = 0 ] || die "rustdoc or the scaffold test failed (their log is above)"
[ "$tests" = 0 ] && [ "$faults" = 0 ] && [ "$images" = 0 ] && [ "$bench" = 0 ] || die "tests failed"
[ "$down" = 0 ] || die "cluster-down left something behind (see above)"
