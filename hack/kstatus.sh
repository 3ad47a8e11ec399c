#!/usr/bin/env bash
# Locate (or build once and cache) the kstatus helper (hack/kstatus/: cli-utils'
# status.Compute, what Flux and kpt read health with) and print its path. The cluster
# tests run it on the shipped parents (host/tests/cluster/kstatus.rs). With --cached,
# builds nothing and exits non-zero when it is missing. ~35 s to build on 2 cores.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

version=$(awk '$1 == "sigs.k8s.io/cli-utils" { sub(/^v/, "", $2); print $2; exit }' "$ROOT/hack/kstatus/go.mod")
# Keyed by the sources too: a change to main.go builds again.
key=$(cat "$ROOT/hack/kstatus/go.mod" "$ROOT/hack/kstatus/go.sum" "$ROOT/hack/kstatus/main.go" | sha256sum | cut -c1-12)
out="$CACHE_DIR/kstatus-v$version-$key"
if [ ! -x "$out/kstatus" ]; then
  [ "${1:-}" != --cached ] || exit 1
  ensure_go
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    if [ ! -x "$out/kstatus" ]; then
      rm -rf "$out".tmp.*
      # A build cache of its own: Kubernetes' build may be using (and then removes) the shared one.
      GO_BUILD_CACHE="$CACHE_DIR/go-build-kstatus" go_build "$ROOT/hack/kstatus" "$out" "-s -w" . >&2
      # Vetted with the build's cache, while it is there (seconds; cold it would compile
      # its dependencies again).
      (cd "$ROOT/hack/kstatus" && GOFLAGS=-mod=readonly GOCACHE="$CACHE_DIR/go-build-kstatus" go vet .) >&2 \
        || die "go vet of hack/kstatus failed"
      rm -rf "$CACHE_DIR/go-build-kstatus"
    fi
  ) 9>"$CACHE_DIR/kstatus.lock"
fi
echo "$out/kstatus"
