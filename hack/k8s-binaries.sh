#!/usr/bin/env bash
# Locate (or build once and cache) etcd and the Kubernetes binaries: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet.
# Prints one NAME=path line each: ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET.
#
# Order of preference (envtest conventions first, so users with envtest assets or a
# distro install never build anything):
#   1. TEST_ASSET_ETCD / TEST_ASSET_KUBE_APISERVER / TEST_ASSET_KUBE_CONTROLLER_MANAGER
#   2. KUBEBUILDER_ASSETS/<name>
#   3. PATH
#   4. the project cache (~/.cache/podset-host/k8s-1.20.2/)
#   5. build from Debian's kubernetes source package (Go 1.19), then cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BIN_CACHE="$CACHE_DIR/k8s-$K8S_VERSION"

find_bin() { # name envvar
  local name=$1 var=$2 v
  v="${!var:-}"
  if [ -n "$v" ]; then [ -x "$v" ] || die "$var=$v is not an executable"; echo "$v"; return; fi
  if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$name" ]; then echo "$KUBEBUILDER_ASSETS/$name"; return; fi
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  if [ -x "$BIN_CACHE/$name" ]; then echo "$BIN_CACHE/$name"; return; fi
  return 1
}

build_from_debian_source() {
  log "building the Kubernetes $K8S_VERSION binaries from Debian source (one-time, ~10 min on 2 cores)"
  apt_install golang-go rsync jq golang-github-modern-go-reflect2-dev dpkg-dev
  ensure_deb_src
  local work="$CACHE_DIR/build"
  mkdir -p "$work"
  cd "$work"
  # Debian names the tree kubernetes-1.20.5+really1.20.2: match on the real version.
  local src
  src=$(ls -d kubernetes-*"$K8S_VERSION" 2>/dev/null | head -1 || true)
  if [ -z "$src" ]; then
    apt-get source -qq kubernetes >/dev/null 2>&1 || apt-get source kubernetes || die "apt-get source kubernetes failed"
    src=$(ls -d kubernetes-*"$K8S_VERSION" 2>/dev/null | head -1 || true)
    [ -n "$src" ] || die "apt-get source kubernetes did not unpack a $K8S_VERSION tree in $work"
  fi
  cd "$src"
  # The vendored reflect2 1.0.1 segfaults under Go >= 1.18 on the first custom-resource
  # create (mapiterinit); Debian's packaged reflect2 is fixed.
  if [ ! -f vendor/github.com/modern-go/reflect2/.podset-swapped ]; then
    rm -rf vendor/github.com/modern-go/reflect2
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
    rm -f vendor/github.com/modern-go/reflect2/go.mod
    touch vendor/github.com/modern-go/reflect2/.podset-swapped
  fi
  export GOPATH="$PWD/.go" GOCACHE="$CACHE_DIR/build/gocache"
  mkdir -p .go/src/k8s.io
  ln -sfn ../../.. .go/src/k8s.io/kubernetes
  CGO_ENABLED=0 make WHAT="${K8S_COMMANDS[*]/#/cmd/}" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; die "kubernetes build failed (full log: $work/build.log)"; }
  mkdir -p "$BIN_CACHE"
  for c in "${K8S_COMMANDS[@]}"; do cp "_output/bin/$c" "$BIN_CACHE/"; done
  log "cached in $BIN_CACHE"
  # The source tree and Go cache are ~2 GB and only needed to build these binaries.
  cd / && rm -rf "$work"
}

K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
var_of() { local v=${1//-/_}; echo "TEST_ASSET_${v^^}"; }

etcd=$(find_bin etcd TEST_ASSET_ETCD) || { apt_install etcd-server; etcd=$(find_bin etcd TEST_ASSET_ETCD) || die "etcd not found after installing etcd-server"; }
echo "ETCD=$etcd"
missing=0
for c in "${K8S_COMMANDS[@]}"; do find_bin "$c" "$(var_of "$c")" >/dev/null || missing=1; done
[ "$missing" = 0 ] || (build_from_debian_source)
for c in "${K8S_COMMANDS[@]}"; do
  path=$(find_bin "$c" "$(var_of "$c")") || die "$c missing after the build"
  v=${c//-/_}
  echo "${v^^}=$path"
done
