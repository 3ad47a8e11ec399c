#!/usr/bin/env bash
# `make run`: the operator in the foreground with the default policies, against the
# embedded control plane (.cluster/), or against an existing cluster only when asked:
# KUBECONFIG set in the environment, or USE_EXISTING_CLUSTER=true (as controller-runtime's
# envtest has it; then ~/.kube/config's current context). A ~/.kube/config alone is never
# used: a developer's production context must not be one `make run` away. The cluster
# is named before anything is written to it.
#
# The embedded control plane's real node (containerd, runc, the kubelet) needs root;
# without root it starts without it (REAL_NODE=0) and says so: the simulated node, then
# untainted, takes every pod and reports it Running (no container runs).
#
# A first run on a fresh machine installs packages and builds for several minutes: each
# step says what it does and how long it took cold on 2 cores (docs/how-to/set-up.md has
# the measured figures); a warm step takes seconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

reachable() { command -v kubectl >/dev/null && kubectl version --request-timeout=5s >/dev/null 2>&1; }
if [ "${USE_EXISTING_CLUSTER:-}" = true ] || [ -n "${KUBECONFIG:-}" ]; then
  why=${KUBECONFIG:+"KUBECONFIG=$KUBECONFIG"}
  reachable || die "${why:-USE_EXISTING_CLUSTER=true} asks for an existing cluster, and it does not answer (unset KUBECONFIG and USE_EXISTING_CLUSTER for the embedded control plane)"
  embedded=""
else
  embedded=1
  [ ! -f "$HOME/.kube/config" ] \
    || log "not using ~/.kube/config (USE_EXISTING_CLUSTER=true or KUBECONFIG=... would): the embedded control plane it is"
  if [ "$(id -u)" != 0 ] && [ "${REAL_NODE:-}" != 0 ]; then
    export REAL_NODE=0
    log "not root: the embedded control plane starts without its real node (containerd and the kubelet need root);" \
      "the simulated node takes the pods and reports them Running, but no container runs. Run as root for containers."
  fi
fi

# step N WHAT COLD: one line per step, with the cold estimate when it has not run before.
steps=4
step() { log "[$1/$steps] $2${3:+ (first time: $3)}"; }

cold=""
missing=$(hack/deps.sh "${embedded:+cluster}" --missing) && cold="~1 min: $missing"
step 1 "Debian packages" "$cold"
hack/deps.sh ${embedded:+cluster}
[ -z "$embedded" ] || k8s_in_background

cold=""
[ -x target/debug/podset-host ] && [ -x target/debug/podset-node-sim ] || cold="~6 min"
step 2 "building the operator and the node simulator (debug)" "$cold"
# cargo shows its own progress bar on a terminal.
cargo build -p podset-host -p podset-node-sim --bins

cold=""
[ -f target/policy/podset.wasm ] || cold="~2 min, the wasm32 standard library included"
step 3 "building the default policies (wasm32)" "$cold"
hack/policy.sh

if [ -n "$embedded" ]; then
  cold=""
  [ -z "$K8S_BUILD_PID" ] || cold="Kubernetes and etcd built from Go modules once per machine, in the background since step 1"
  step 4 "starting the embedded control plane" "$cold"
  k8s_built
  hack/cluster.sh up
  export KUBECONFIG="$ROOT/.cluster/kubeconfig" PATH="$ROOT/.cluster/bin:$PATH"
  log "embedded control plane: export KUBECONFIG=$KUBECONFIG PATH=$ROOT/.cluster/bin:\$PATH"
  log "the control plane stays up when the operator stops (the next make run starts in seconds); make cluster-down stops it"
else
  step 4 "using an existing cluster: context $(kubectl config current-context 2>/dev/null || echo '(none)'), server $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null)"
fi

log "installing the CRDs of manifests/crd/ into $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null)"
kubectl apply --server-side --force-conflicts -f manifests/crd/
log "serving: /metrics, /healthz and /readyz on ${METRICS_ADDR:-127.0.0.1:8080}"
exec target/debug/podset-host run --policy target/policy/podset.wasm --policy target/policy/memcached.wasm \
  --policy target/policy/netperf.wasm --policy target/policy/cronjob.wasm --policy target/policy/reloader.wasm \
  --policy target/policy/tenant.wasm \
  --reach manifests/reach/tenant.yaml "$@"
