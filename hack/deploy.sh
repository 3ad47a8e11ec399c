#!/usr/bin/env bash
# `make deploy` / `make undeploy`: the operator as a Deployment (manifests/, kustomize).
#
#   hack/deploy.sh deploy     build the policies (and, without IMG, the image), apply, wait for the rollout
#   hack/deploy.sh undeploy   remove what deploy applied (the CRDs too, and with them every custom resource)
#   hack/deploy.sh render     print what deploy applies, for the cluster at hand
#
# Without IMG: the embedded cluster (CLUSTER_DIR, default .cluster; started if it is not
# up). The image podset-host:0.1.0 is built here and imported into its node: nothing is
# pushed or pulled.
# With IMG=registry/name:tag: the cluster of KUBECONFIG, and your image, which its nodes
# pull; nothing is built or loaded into a node.
#
#   WATCH_NAMESPACE=ns   the operator serves only that namespace (default: all)
#   IMAGE_PROFILE=debug  build the image from the debug binary (tests: no release build)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

DEFAULT_IMG=podset-host:0.1.0
IMG=${IMG:-}
WATCH_NAMESPACE=${WATCH_NAMESPACE:-}
EMBEDDED=0
if [ -z "$IMG" ]; then
  EMBEDDED=1
  export CLUSTER_DIR="${CLUSTER_DIR:-$ROOT/.cluster}"
  export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
fi

embedded_up() {
  hack/cluster.sh up
  PATH="$CLUSTER_DIR/bin:$PATH"
  CONTAINERD_SOCK=$(sed -n 's/^CONTAINERD_SOCK=//p' "$CLUSTER_DIR/env")
  [ -S "$CONTAINERD_SOCK" ] || die "the embedded cluster has no real node to load the image into (REAL_NODE=0?)"
}

# The kustomization as this cluster takes it: the image and the watched namespace.
render() {
  [ -f manifests/policy/podset.wasm ] && [ -f manifests/policy/memcached.wasm ] \
    && [ -f manifests/policy/netperf.wasm ] \
    || die "manifests/policy/ has no policy modules: run hack/deploy.sh deploy (it builds them)"
  kubectl kustomize manifests/ | python3 -c '
import sys
img, ns = sys.argv[1:3]
out = []
kind = None
for line in sys.stdin.read().split("\n"):
    if line.startswith("kind: "):
        kind = line[6:]
    elif line == "---":
        kind = None
    stripped = line.strip()
    if stripped == "image: podset-host:0.1.0":
        line = line.replace("podset-host:0.1.0", img)
    elif stripped == "- name: WATCH_NAMESPACE":
        out.append(line)
        continue
    elif out and out[-1].strip() == "- name: WATCH_NAMESPACE" and stripped.startswith("value:"):
        line = line[: line.index("value:")] + "value: \"" + ns + "\""
    out.append(line)
print("\n".join(out))
' "${IMG:-$DEFAULT_IMG}" "$WATCH_NAMESPACE"
}

policies() {
  hack/policy.sh >/dev/null
  mkdir -p manifests/policy
  cp target/policy/podset.wasm target/policy/memcached.wasm target/policy/netperf.wasm manifests/policy/
}

case "${1:-}" in
  deploy)
    [ "$EMBEDDED" = 0 ] || embedded_up
    policies
    if [ "$EMBEDDED" = 1 ]; then
      log "building the operator's image and importing it into the embedded node"
      hack/images.sh --import "$CONTAINERD_SOCK" podset-host
    fi
    render | kubectl apply --server-side --force-conflicts -f -
    log "waiting for the rollout ($(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'))"
    kubectl -n podset-system rollout status deployment/podset-host --timeout=180s
    kubectl -n podset-system get pods -l app.kubernetes.io/name=podset-host -o wide
    ;;
  undeploy)
    [ "$EMBEDDED" = 0 ] || [ -f "$CLUSTER_DIR/env" ] || { log "no embedded cluster in $CLUSTER_DIR: nothing to undeploy"; exit 0; }
    [ -f manifests/policy/podset.wasm ] || policies
    render | kubectl delete --ignore-not-found -f -
    ;;
  render)
    [ -f manifests/policy/podset.wasm ] || policies
    render
    ;;
  *)
    echo "usage: $0 deploy|undeploy|render   (IMG=registry/name:tag for an external cluster)" >&2
    exit 2
    ;;
esac
