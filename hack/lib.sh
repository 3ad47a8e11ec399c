# Shared helpers for the hack/ scripts. Sourced, never executed.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PODSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/podset-host}"
# The versions the embedded cluster runs are the ones its build modules pin.
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { sub(/^v/, "", $2); print $2; exit }' "$ROOT/hack/k8s/go.mod")
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v3\./ { sub(/^v/, "", $2); print $2; exit }' "$ROOT/hack/etcd/go.mod")

log() { printf '\033[1m[%s]\033[0m %s\n' "${0##*/}" "$*" >&2; }
die() { printf '\033[31m[%s] error:\033[0m %s\n' "${0##*/}" "$*" >&2; exit 1; }

# Run a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_install PKG... installs the Debian packages that are not installed yet.
# A no-op (no apt-get update, no lock taken) when everything is present.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq || die "apt-get update failed"
  # Packages such as memcached start their service on install; the cluster runs its
  # own copies, so no service is started (policy-rc.d says so, for the install only).
  local guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null && as_root chmod +x /usr/sbin/policy-rc.d
    guard=1
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
  [ -z "$guard" ] || as_root rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed"
}

# Ensure deb-src entries exist for the suites already configured for binaries
# (needed for `apt-get source kubernetes`).
ensure_deb_src() {
  local f=/etc/apt/sources.list.d/podset-host-src.sources
  if apt-cache showsrc kubernetes >/dev/null 2>&1 && apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package:'; then
    return 0
  fi
  [ -f "$f" ] || {
    log "enabling deb-src for bookworm (for the kubernetes source package)"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      | as_root tee "$f" >/dev/null
  }
  as_root apt-get update -qq || die "apt-get update failed"
}

# test_cluster DIR: starts a private control plane in DIR for integration tests (stopped
# on exit; a caller setting its own EXIT trap must stop it too) and exports what the
# tests read: its kubeconfig, the policies' directory, its kubectl first on PATH.
test_cluster() {
  export CLUSTER_DIR="$1"
  trap 'hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
  hack/cluster.sh down >/dev/null 2>&1 || true
  hack/cluster.sh up || die "the control plane in ${CLUSTER_DIR#"$ROOT"/} did not start; integration tests cannot run"
  # The tests' kubectl is the cluster's own version.
  export PATH="$CLUSTER_DIR/bin:$PATH"
  export PODSET_TEST_KUBECONFIG="$CLUSTER_DIR/kubeconfig"
  export PODSET_POLICY_DIR="$ROOT/target/policy"
}
