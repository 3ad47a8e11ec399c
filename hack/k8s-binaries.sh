#!/usr/bin/env bash
# Locate (or build once and cache) etcd and the Kubernetes binaries: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl.
# Prints one NAME=path line each: ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER,
# KUBE_SCHEDULER, KUBELET, KUBECTL. With --cached, builds nothing and exits non-zero
# when something is missing.
#
# Order of preference for the server binaries (envtest conventions first, so users
# with envtest assets or a distro install never build anything):
#   1. TEST_ASSET_ETCD / TEST_ASSET_KUBE_APISERVER / TEST_ASSET_KUBE_CONTROLLER_MANAGER / ...
#   2. KUBEBUILDER_ASSETS/<name>
#   3. PATH
#   4. the project cache (~/.cache/podset-host/k8s-v<version>/, etcd-v<version>/)
#   5. build from Go modules with the build modules hack/k8s/ and hack/etcd/, then cache.
# kubectl is the client the scripts talk to the cluster with, so it follows the
# cluster's version: KUBECTL or TEST_ASSET_KUBECTL when set, otherwise the cached build
# (a kubectl on PATH, often a distribution's of another minor, is not preferred).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

K8S_CACHE="$CACHE_DIR/k8s-v$K8S_VERSION"
ETCD_CACHE="$CACHE_DIR/etcd-v$ETCD_VERSION"
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

find_bin() { # name envvar cachedir
  local name=$1 var=$2 cache=$3 v
  v="${!var:-}"
  [ -n "$v" ] || [ "$name" != kubectl ] || v="${KUBECTL:-}"
  if [ -n "$v" ]; then [ -x "$v" ] || die "$var=$v is not an executable"; echo "$v"; return; fi
  if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$name" ]; then echo "$KUBEBUILDER_ASSETS/$name"; return; fi
  if [ "$name" != kubectl ] && command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  if [ -x "$cache/$name" ]; then echo "$cache/$name"; return; fi
  return 1
}

# The version stamps Kubernetes' own build (hack/lib/version.sh) sets, so that
# `kubectl version` and /version say v1.34.x rather than v0.0.0-master.
k8s_ldflags() {
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.} flags="-s -w" pkg
  minor=${minor%%.*}
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  echo "$flags"
}

build_kubernetes() {
  ensure_go
  mkdir -p "$CACHE_DIR"
  log "building Kubernetes v$K8S_VERSION from Go modules (one-time; docs/how-to/set-up.md gives the time it takes)"
  local t0=$SECONDS
  go_build "$ROOT/hack/k8s" "$K8S_CACHE" "$(k8s_ldflags)" "${K8S_COMMANDS[@]/#/k8s.io/kubernetes/cmd/}"
  log "Kubernetes v$K8S_VERSION built in $((SECONDS - t0)) s, cached in $K8S_CACHE"
  rm -rf "$CACHE_DIR/go-build"
}

build_etcd() {
  ensure_go
  mkdir -p "$CACHE_DIR"
  local t0=$SECONDS
  go_build "$ROOT/hack/etcd" "$ETCD_CACHE" "-s -w" go.etcd.io/etcd/server/v3
  # The main package is the module's root, go.etcd.io/etcd/server/v3: go names the
  # binary after the path without its major-version suffix.
  mv "$ETCD_CACHE/server" "$ETCD_CACHE/etcd"
  log "etcd v$ETCD_VERSION built in $((SECONDS - t0)) s, cached in $ETCD_CACHE"
  rm -rf "$CACHE_DIR/go-build"
}

var_of() { local v=${1//-/_}; echo "TEST_ASSET_${v^^}"; }

# Two cluster-ups at once (make test starts more than one) must not build twice or
# move each other's half-built output: builds run under one lock, and whoever gets it
# second finds the cache filled. A build killed midway leaves OUT.tmp.PID behind;
# clear those under the lock.
build_locked() { # build-function
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    rm -rf "$K8S_CACHE".tmp.* "$ETCD_CACHE".tmp.*
    "$@"
  ) 9>"$CACHE_DIR/build.lock"
}
have_k8s() {
  local c
  for c in "${K8S_COMMANDS[@]}"; do
    find_bin "$c" "$(var_of "$c")" "$K8S_CACHE" >/dev/null || return 1
  done
}
etcd_if_missing() { find_bin etcd TEST_ASSET_ETCD "$ETCD_CACHE" >/dev/null || build_etcd; }
k8s_if_missing() { have_k8s || build_kubernetes; }

# --cached: only say (by the exit code) whether everything is there, building nothing.
if [ "${1:-}" = --cached ]; then
  find_bin etcd TEST_ASSET_ETCD "$ETCD_CACHE" >/dev/null && have_k8s
  exit
fi

etcd=$(find_bin etcd TEST_ASSET_ETCD "$ETCD_CACHE") || {
  build_locked etcd_if_missing
  etcd=$(find_bin etcd TEST_ASSET_ETCD "$ETCD_CACHE") || die "etcd missing after the build"
}
echo "ETCD=$etcd"
have_k8s || build_locked k8s_if_missing
for c in "${K8S_COMMANDS[@]}"; do
  path=$(find_bin "$c" "$(var_of "$c")" "$K8S_CACHE") || die "$c missing after the build"
  v=${c//-/_}
  echo "${v^^}=$path"
done
