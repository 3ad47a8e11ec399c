#!/usr/bin/env bash
# Locate (or build once and cache) a Go tool the tests use, and print its path:
#   hack/go-tool.sh kstatus   hack/kstatus/: cli-utils' status.Compute as a command (what
#                             Flux and kpt read health with); host/tests/cluster/kstatus.rs
#   hack/go-tool.sh helm      helm, from its build module hack/helm/ (the chart's tests,
#                             host/tests/cluster/chart.rs)
# Each is built from the Go module proxy with its module's go.sum, like Kubernetes
# (lib.sh's go_build), and cached under a key of its module's files: a change builds it
# again. --cached builds nothing and exits non-zero when it is missing. On 2 cores,
# 2026-11-28: kstatus 34 s alone, helm 131 s at nice 19 beside other work.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tool=${1:-}
case "$tool" in
  kstatus) package=. module=sigs.k8s.io/cli-utils ;;
  helm) package=helm.sh/helm/v3/cmd/helm module=helm.sh/helm/v3 ;;
  *) die "usage: $0 kstatus|helm [--cached]" ;;
esac
dir="$ROOT/hack/$tool"
version=$(awk -v m="$module" '$1 == m { sub(/^v/, "", $2); print $2; exit }' "$dir/go.mod")
key=$(find "$dir" -maxdepth 1 -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | sort | xargs cat | sha256sum | cut -c1-12)
out="$CACHE_DIR/$tool-v$version-$key"
if [ ! -x "$out/$tool" ]; then
  [ "${2:-}" != --cached ] || exit 1
  ensure_go
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    if [ ! -x "$out/$tool" ]; then
      rm -rf "$out".tmp.*
      # A build cache of its own: Kubernetes' build may be using (and then removes) the shared one.
      cache="$CACHE_DIR/go-build-$tool"
      GO_BUILD_CACHE="$cache" go_build "$dir" "$out" "-s -w" "$package" >&2
      # Our own Go is vetted, with the build's cache while it is there (seconds).
      if [ "$package" = . ]; then
        (cd "$dir" && GOFLAGS=-mod=readonly GOCACHE="$cache" go vet .) >&2 || die "go vet of hack/$tool failed"
      fi
      rm -rf "$cache"
    fi
  ) 9>"$CACHE_DIR/$tool.lock"
fi
echo "$out/$tool"
