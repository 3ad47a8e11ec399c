#!/usr/bin/env bash
# Locate (or build once and cache) etcd, kube-apiserver and kube-controller-manager.
# Prints three lines: ETCD=..., KUBE_APISERVER=..., KUBE_CONTROLLER_MANAGER=...
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
  log "building kube-apiserver and kube-controller-manager $K8S_VERSION from Debian source (one-time, ~5 min)"
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
  CGO_ENABLED=0 make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; die "kubernetes build failed (full log: $work/build.log)"; }
  mkdir -p "$BIN_CACHE"
  cp _output/bin/kube-apiserver _output/bin/kube-controller-manager "$BIN_CACHE/"
  log "cached in $BIN_CACHE"
  # The source tree and Go cache are ~2 GB and only needed to build these two binaries.
  cd / && rm -rf "$work"
}

etcd=$(find_bin etcd TEST_ASSET_ETCD) || { apt_install etcd-server; etcd=$(find_bin etcd TEST_ASSET_ETCD) || die "etcd not found after installing etcd-server"; }
if ! apiserver=$(find_bin kube-apiserver TEST_ASSET_KUBE_APISERVER) || ! kcm=$(find_bin kube-controller-manager TEST_ASSET_KUBE_CONTROLLER_MANAGER); then
  (build_from_debian_source)
  apiserver=$(find_bin kube-apiserver TEST_ASSET_KUBE_APISERVER) || die "kube-apiserver missing after build"
  kcm=$(find_bin kube-controller-manager TEST_ASSET_KUBE_CONTROLLER_MANAGER) || die "kube-controller-manager missing after build"
fi
echo "ETCD=$etcd"
echo "KUBE_APISERVER=$apiserver"
echo "KUBE_CONTROLLER_MANAGER=$kcm"
