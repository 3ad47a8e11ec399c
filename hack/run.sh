#!/usr/bin/env bash
# `make run`: the operator in the foreground with the default policies, against the
# cluster of KUBECONFIG when it answers (or USE_EXISTING_CLUSTER=true), otherwise
# against the embedded control plane (.cluster/).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

hack/deps.sh
cargo build -p podset-host --bin podset-host
hack/policy.sh

reachable() { kubectl version --request-timeout=5s >/dev/null 2>&1; }
if [ "${USE_EXISTING_CLUSTER:-}" = true ]; then
  reachable || die "USE_EXISTING_CLUSTER=true but the cluster of KUBECONFIG=${KUBECONFIG:-~/.kube/config} does not answer"
  log "using the existing cluster of KUBECONFIG=${KUBECONFIG:-~/.kube/config}"
elif { [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; } && reachable; then
  log "using the cluster of KUBECONFIG=${KUBECONFIG:-~/.kube/config}"
else
  hack/cluster.sh up
  export KUBECONFIG="$ROOT/.cluster/kubeconfig" PATH="$ROOT/.cluster/bin:$PATH"
  log "embedded control plane: export KUBECONFIG=$KUBECONFIG PATH=$ROOT/.cluster/bin:\$PATH"
fi

kubectl apply --server-side --force-conflicts -f manifests/crd/
exec target/debug/podset-host run --policy target/policy/podset.wasm --policy target/policy/memcached.wasm \
  --policy target/policy/netperf.wasm "$@"
