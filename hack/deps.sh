#!/usr/bin/env bash
# Installs, in one apt-get step (one `apt-get update`), every Debian package an entry
# point needs on a fresh machine:
#   hack/deps.sh check     the checks without a cluster (the wasm32 toolchain, Node.js, shellcheck)
#   hack/deps.sh cluster   and the embedded control plane, its real node and images
#   hack/deps.sh MODE --missing   installs nothing: prints what MODE would install, and
#                                 exits non-zero when that is nothing
# Idempotent: a no-op (no apt-get update) when everything is there. The scripts that use
# a package still ask for it, so each works alone too.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v cargo >/dev/null || die "no Rust toolchain (cargo) on PATH: install rustup from https://rustup.rs"
packages=("${BASE_PACKAGES[@]}" "${CHECK_PACKAGES[@]}")
rustup_has_wasm32 || packages+=("${WASM_PACKAGES[@]}")
command -v node >/dev/null && command -v npm >/dev/null || packages+=("${NODE_JS_PACKAGES[@]}")
case "${1:-check}" in
  check) ;;
  cluster)
    packages+=("${CLUSTER_PACKAGES[@]}" "${NODE_PACKAGES[@]}" "${IMAGE_PACKAGES[@]}")
    command -v go >/dev/null || packages+=(golang-go)
    ;;
  *) die "usage: $0 [check | cluster] [--missing]" ;;
esac
if [ "${2:-}" = --missing ]; then
  missing_packages "${packages[@]}" || exit 1
  echo "${MISSING[*]}"
  exit 0
fi
apt_install "${packages[@]}"
# kubectl: the embedded cluster brings its own, of its version (hack/k8s-binaries.sh);
# with a cluster of your own, the kubectl you use for it.
