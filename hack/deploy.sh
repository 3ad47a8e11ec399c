#!/usr/bin/env bash
# `make deploy` / `make undeploy`: the operator as a Deployment (manifests/, kustomize).
#
#   hack/deploy.sh deploy     build the policies (and, without IMAGE, the image), apply, wait for the rollout
#   hack/deploy.sh undeploy   remove what deploy applied (the CRDs too, and with them every custom resource)
#   hack/deploy.sh render     print what deploy applies, for the cluster at hand (the policies built first)
#
# Without IMAGE: the embedded cluster (CLUSTER_DIR, default .cluster; started if it is not
# up). The image is built here and pushed to the cluster's registry; the node pulls it
# with an imagePullSecret made from the registry's credentials.
# With IMAGE=registry/name:tag (or @sha256:...): the cluster of KUBECONFIG, and your image,
# which its nodes pull; nothing is built. REGISTRY_AUTH=FILE (a Docker config.json with
# the registry's credentials) makes the imagePullSecret from it; without it the nodes pull
# with what they have.
#
#   WATCH_NAMESPACE=ns   the operator serves only that namespace (default: all)
#   IMAGE_PROFILE=debug  build the image from the debug binary (tests: no release build)
#   IMG                  the former name of IMAGE, still read
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

DEFAULT_IMAGE=podset-host:0.1.0
IMAGE=${IMAGE:-${IMG:-}}
WATCH_NAMESPACE=${WATCH_NAMESPACE:-}
# The Secret the operator's pods pull their image with, when there are credentials.
PULL_SECRET=podset-host-registry
EMBEDDED=0
if [ -z "$IMAGE" ]; then
  EMBEDDED=1
  export CLUSTER_DIR="${CLUSTER_DIR:-$ROOT/.cluster}"
  export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
fi

embedded_up() {
  hack/cluster.sh up
  PATH="$CLUSTER_DIR/bin:$PATH"
  # shellcheck disable=SC1091
  set -a && . "$CLUSTER_DIR/env" && set +a
  [ -S "$CONTAINERD_SOCK" ] || die "the embedded cluster has no real node to run the operator on (REAL_NODE=0?)"
}

# pull_secret: the imagePullSecret from REGISTRY_AUTH, in the operator's namespace
# (made first, so the first pull already has it).
pull_secret() {
  [ -f "$REGISTRY_AUTH" ] || die "REGISTRY_AUTH=$REGISTRY_AUTH: no such file"
  kubectl create namespace podset-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n podset-system create secret generic "$PULL_SECRET" --type=kubernetes.io/dockerconfigjson \
    --from-file=.dockerconfigjson="$REGISTRY_AUTH" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

# The kustomization as this cluster takes it: the image and the watched namespace.
render() {
  kubectl kustomize manifests/ | python3 -c '
import sys
img, ns, secret = sys.argv[1:4]
out = []
kind = None
for line in sys.stdin.read().split("\n"):
    if line.startswith("kind: "):
        kind = line[6:]
    elif line == "---":
        kind = None
    stripped = line.strip()
    if stripped == "serviceAccountName: podset-host" and secret:
        indent = line[: line.index("serviceAccountName")]
        out += [line, indent + "imagePullSecrets:", indent + "  - name: " + secret]
        continue
    # An operator limited to one namespace cannot serve a cluster-scoped parent: the
    # Tenant policy and its grant go only with WATCH_NAMESPACE empty.
    # (kustomize renders the args one per line: drop the value and the flag before it.)
    if ns and stripped in ("- /policies/tenant.wasm", "- /policies/tenant-reach.yaml"):
        out.pop()
        continue
    if stripped == "image: podset-host:0.1.0":
        line = line.replace("podset-host:0.1.0", img)
    elif stripped == "- name: WATCH_NAMESPACE":
        out.append(line)
        continue
    elif out and out[-1].strip() == "- name: WATCH_NAMESPACE" and stripped.startswith("value:"):
        line = line[: line.index("value:")] + "value: \"" + ns + "\""
    out.append(line)
print("\n".join(out))
' "${IMAGE:-$DEFAULT_IMAGE}" "$WATCH_NAMESPACE" "${REGISTRY_AUTH:+$PULL_SECRET}"
}

# policies: the default policy modules into manifests/policy/, each replaced by a rename
# when it changed (a render running beside this one never reads half a file).
policies() {
  hack/policy.sh >/dev/null
  mkdir -p manifests/policy
  local name
  for name in podset memcached netperf cronjob reloader tenant; do
    cmp -s "target/policy/$name.wasm" "manifests/policy/$name.wasm" && continue
    cp "target/policy/$name.wasm" "manifests/policy/.$name.wasm.$$"
    mv "manifests/policy/.$name.wasm.$$" "manifests/policy/$name.wasm"
  done
}

case "${1:-}" in
  deploy)
    [ "$EMBEDDED" = 0 ] || embedded_up
    policies
    if [ "$EMBEDDED" = 1 ]; then
      log "building the operator's image and pushing it to the embedded registry ($REGISTRY)"
      IMAGE=$(hack/images.sh --push podset-host) || die "building or pushing the operator's image failed"
      log "image $IMAGE"
    fi
    [ -z "${REGISTRY_AUTH:-}" ] || pull_secret
    render | kubectl apply --server-side --force-conflicts -f -
    log "waiting for the rollout ($(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'))"
    kubectl -n podset-system rollout status deployment/podset-host --timeout=180s
    kubectl -n podset-system get pods -l app.kubernetes.io/name=podset-host -o wide
    ;;
  undeploy)
    [ "$EMBEDDED" = 0 ] || [ -f "$CLUSTER_DIR/env" ] || { log "no embedded cluster in $CLUSTER_DIR: nothing to undeploy"; exit 0; }
    policies
    render | kubectl delete --ignore-not-found -f -
    ;;
  render)
    policies
    render
    ;;
  *)
    echo "usage: $0 deploy|undeploy|render   (IMAGE=registry/name:tag for an external cluster)" >&2
    exit 2
    ;;
esac
