#!/usr/bin/env bash
# Locate (or build once and cache) a Go tool the tests use, and print its path:
#   hack/go-tool.sh kstatus   hack/kstatus/: cli-utils' status.Compute as a command (what
#                             Flux and kpt read health with); host/tests/cluster/kstatus.rs
#   hack/go-tool.sh helm      helm, from its build module hack/helm/ (the chart's tests,
#                             host/tests/cluster/chart.rs)
#   hack/go-tool.sh peers     hack/peers/: the seeds' own Go operators (operator-sdk's PodSet
#                             tutorial and Memcached sample, the Netperf operator;
#                             controller-runtime), benchmark peers; prints the directory that
#                             holds podset-operator, memcached-operator and netperf-operator
#                             (host/tests/cluster/peers.rs)
# Each is built from the Go module proxy with its module's go.sum, like Kubernetes
# (lib.sh's go_build), and cached under a key of its module's files: a change builds it
# again. --cached builds nothing and exits non-zero when it is missing. On 2 cores,
# 2026-11-28: kstatus 34 s alone, helm 131 s at nice 19 beside other work, peers 110 s alone
# (204 s of CPU, its modules downloaded); 2026-11-29, the Netperf operator added: peers 130 s
# (209 s of CPU).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tool=${1:-}
# packages: what one `go build` builds; binaries: what it leaves in the tool's directory;
# print: the path printed (one binary, or the directory of several); own: our own Go
# (vetted, and gofmt-checked, after the build).
case "$tool" in
  kstatus) packages=(.) binaries=(kstatus) module=sigs.k8s.io/cli-utils own=1 ;;
  helm) packages=(helm.sh/helm/v3/cmd/helm) binaries=(helm) module=helm.sh/helm/v3 own=0 ;;
  peers) packages=(./cmd/podset-operator ./cmd/memcached-operator ./cmd/netperf-operator)
    binaries=(podset-operator memcached-operator netperf-operator)
    module=sigs.k8s.io/controller-runtime own=1 ;;
  *) die "usage: $0 kstatus|helm|peers [--cached]" ;;
esac
dir="$ROOT/hack/$tool"
version=$(awk -v m="$module" '$1 == m { sub(/^v/, "", $2); print $2; exit }' "$dir/go.mod")
key=$(cd "$dir" && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)
out="$CACHE_DIR/$tool-v$version-$key"
built() {
  local b
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if [ ${#binaries[@]} = 1 ]; then print="$out/${binaries[0]}"; else print=$out; fi
if ! built; then
  [ "${2:-}" != --cached ] || exit 1
  ensure_go
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    if ! built; then
      rm -rf "$out".tmp.*
      # A build cache of its own: Kubernetes' build may be using (and then removes) the shared one.
      cache="$CACHE_DIR/go-build-$tool"
      GO_BUILD_CACHE="$cache" go_build "$dir" "$out" "-s -w" "${packages[@]}" >&2
      # Our own Go is vetted, with the build's cache while it is there, and must be
      # gofmt'ed; a failure leaves nothing cached. Vetted with the build's settings
      # (CGO_ENABLED=0, -trimpath), whose compiled dependencies it then finds in that cache:
      # with others it compiles them all again (12 min of controller-runtime at nice 19).
      if [ "$own" = 1 ]; then
        (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE="$cache" go vet -trimpath ./...) >&2 \
          || { rm -rf "$out"; die "go vet of hack/$tool failed"; }
        unformatted=$(cd "$dir" && gofmt -l .)
        [ -z "$unformatted" ] || { rm -rf "$out"; die "gofmt would change hack/$tool: $unformatted"; }
      fi
      rm -rf "$cache"
    fi
  ) 9>"$CACHE_DIR/$tool.lock"
fi
echo "$print"
