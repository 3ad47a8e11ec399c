#!/usr/bin/env bash
# Installs what every entry point needs on a fresh Debian machine. Idempotent: a
# no-op (no apt-get update) when everything is there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v cargo >/dev/null || die "no Rust toolchain (cargo) on PATH: install rustup from https://rustup.rs"
apt_install curl openssl ca-certificates python3
# kubectl: the embedded cluster brings its own, of its version (hack/k8s-binaries.sh);
# with a cluster of your own, the kubectl you use for it.
