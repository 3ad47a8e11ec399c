# Shared helpers for the hack/ scripts. Sourced, never executed.
# shellcheck shell=bash disable=SC2034 # sourced: its variables are for the scripts that source it

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PODSET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/podset-host}"
# The versions the embedded cluster runs are the ones its build modules pin.
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { sub(/^v/, "", $2); print $2; exit }' "$ROOT/hack/k8s/go.mod")
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v3\./ { sub(/^v/, "", $2); print $2; exit }' "$ROOT/hack/etcd/go.mod")

# A script a test runs (hack/deploy.sh builds the operator's image) inherits what cargo
# sets for a test process: CARGO_PKG_NAME, CARGO_MANIFEST_DIR, … Build scripts declare
# some of these with rerun-if-env-changed (ring's does), so a cargo started with them
# rebuilds ring and all that depends on it (kube, reqwest, the operator), and the next
# cargo started from a shell rebuilds them back: 98 s cold of `make test`'s doc tests
# were that. Forget them; CARGO_HOME, CARGO_TARGET_DIR and cargo's own settings stay.
while read -r _var; do
  case $_var in
    CARGO | CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_NAME | CARGO_BIN_NAME | CARGO_BIN_EXE_* | CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR | CARGO_RUSTC_CURRENT_DIR) unset "$_var" ;;
  esac
done < <(compgen -e)
unset _var

# The one build that `make check`, `make test`, `make lint` and `make fuzz-cluster` share: every
# crate and target of the workspace with every test feature, so that each crate compiles
# once per target (a second feature set recompiles the host and whatever depends on it).
TEST_FEATURES=podset-host/native-podset,podset-host/fault-suite,podset-host/cluster-tests,podset-node-sim/cluster-tests

# lint_in_build: every cargo command of `make check` and `make test` compiles the
# workspace's own crates with clippy-driver as their compiler (cargo's
# RUSTC_WORKSPACE_WRAPPER; the dependencies are compiled by rustc alone), so that the one
# test build is the lint too: clippy's own check build of every dependency, which shares
# nothing with a build, is not made at all. -D warnings, as `cargo clippy -- -D warnings`
# (clippy-driver reads its arguments from CLIPPY_ARGS, as cargo-clippy passes them). The
# wrapper is part of each workspace crate's fingerprint: a plain `cargo test` of your own
# rebuilds the workspace's crates (not their dependencies), and the next `make check`
# rebuilds them back. Policies built for wasm32 are compiled without it (hack/policy.sh).
lint_in_build() {
  local driver
  driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) \
    || die "clippy-driver not found: rustup component add clippy"
  export RUSTC_WORKSPACE_WRAPPER="$driver"
  export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}

# The Debian packages each part needs, named once: the part's script asks for its own
# (apt_install is a no-op when they are there), and hack/deps.sh installs what an entry
# point needs in one apt-get step first.
BASE_PACKAGES=(curl openssl ca-certificates python3)
# The shell scripts' linter (settings in .shellcheckrc) and promtool (Debian's prometheus
# ships it), for the alert rules' tests (hack/check.sh).
CHECK_PACKAGES=(shellcheck prometheus)
# Debian's rustc-web builds std for wasm32, when rustup has no wasm32 target (hack/policy.sh).
WASM_PACKAGES=(rustc-web cargo-web rust-web-src lld)
# The control plane's registry and credentials (hack/cluster.sh).
CLUSTER_PACKAGES=(openssl curl iproute2 docker-registry apache2-utils)
# The real node (hack/node.sh).
NODE_PACKAGES=(containerd runc containernetworking-plugins iproute2 iptables gcc libc6-dev)
# The node's images, built from Debian's binaries (hack/images.sh), and skopeo, which
# pushes them and copies tags in the registry tests.
IMAGE_PACKAGES=(busybox-static memcached iperf3 gcc libc6-dev skopeo)

# Node.js and npm, for the TypeScript policies (hack/policy.sh --typescript), when the
# machine has none.
NODE_JS_PACKAGES=(nodejs npm)

# rustup_has_wasm32: the rustup toolchain can build policies itself (no Debian rustc-web).
rustup_has_wasm32() { rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; }

log() { printf '\033[1m[%s]\033[0m %s\n' "${0##*/}" "$*" >&2; }
die() { printf '\033[31m[%s] error:\033[0m %s\n' "${0##*/}" "$*" >&2; exit 1; }

# Run a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_install PKG... installs the Debian packages that are not installed yet.
# A no-op (no apt-get update, no lock taken) when everything is present. One install at
# a time across the scripts (`make test` installs in the background while clippy runs):
# a second caller waits for the first, then installs only what is still missing.
apt_install() {
  missing_packages "$@" || return 0
  command -v apt-get >/dev/null || die "missing Debian packages: ${MISSING[*]}; and no apt-get to install them"
  if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
    die "missing Debian packages: ${MISSING[*]}; not root and no sudo: install them as root (apt-get install ${MISSING[*]}), then run this again"
  fi
  # One lock per user: a file another user made first (root's earlier run) cannot be
  # opened for writing by this one; apt-get holds its own lock across users.
  local lock
  lock="${TMPDIR:-/tmp}/podset-host-apt.$(id -u).lock"
  (
    flock 9
    missing_packages "$@" || exit 0
    log "installing Debian packages: ${MISSING[*]}"
    local t0=$SECONDS
    as_root apt-get update -qq || die "apt-get update failed"
    # Packages such as memcached start their service on install; the cluster runs its
    # own copies, so no service is started (policy-rc.d says so, for the install only).
    local guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null && as_root chmod +x /usr/sbin/policy-rc.d
      guard=1
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/dev/null || rc=$?
    [ -z "$guard" ] || as_root rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || die "apt-get install ${MISSING[*]} failed"
    log "installed ${#MISSING[@]} packages in $((SECONDS - t0)) s"
  ) 9>"$lock"
}

# missing_packages PKG...: sets MISSING to those not installed; fails when none is missing.
missing_packages() {
  MISSING=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || MISSING+=("$p")
  done
  [ ${#MISSING[@]} -gt 0 ]
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

# build_binaries: the operator and the node simulator, as the caller needs them. Under
# `make check`/`make test` (PODSET_BUILD=test) the shared test build, of which they are
# part; otherwise (`make run`, `make cluster-up`) only the two binaries, in one cargo
# invocation so that their dependencies' features unify once. A no-op when up to date.
build_binaries() {
  if [ "${PODSET_BUILD:-}" = test ]; then
    cargo build -q --workspace --all-targets --features "$TEST_FEATURES"
  else
    cargo build -q -p podset-host -p podset-node-sim --bins
  fi
}

# The Go fetched when the Go on PATH is older than 1.21: the approved newer Go.
GO_TOOLCHAIN=go1.27.3

# ensure_go: a Go >= 1.21 on PATH, from which GOTOOLCHAIN (auto by default) fetches the
# toolchain a go.mod asks for. None: Debian's golang-go. Older (Debian 12's golang-go is
# 1.19, which cannot fetch a toolchain itself): that Go downloads $GO_TOOLCHAIN from the
# Go module proxy as the module golang.org/toolchain, as a newer Go would, into
# $CACHE_DIR/$GO_TOOLCHAIN (executable: a module's files are extracted read-only), put
# first on PATH. Once per machine: 253 MB, 2026-11-28.
# go_minor: the minor version of the Go on PATH (19 for go1.19.8), or nothing.
go_minor() { go env GOVERSION 2>/dev/null | sed -nE 's/^go1\.([0-9]+).*/\1/p'; }

ensure_go() {
  command -v go >/dev/null || apt_install golang-go
  local v
  v=$(go_minor)
  [[ "$v" =~ ^[0-9]+$ ]] || die "the Go on PATH does not work: $(go version 2>&1)"
  [ "$v" -lt 21 ] || return 0
  local root="$CACHE_DIR/$GO_TOOLCHAIN"
  if [ ! -x "$root/bin/go" ]; then
    log "$(go env GOVERSION) on PATH is older than 1.21: fetching $GO_TOOLCHAIN from the Go module proxy (once)"
    local module dir
    module="golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.$(go env GOOS)-$(go env GOARCH)"
    dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "$module" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p') \
      && [ -x "$dir/bin" ] || die "could not download $module with $(go env GOVERSION)"
    mkdir -p "$CACHE_DIR" && rm -rf "$root.tmp" && cp -r "$dir" "$root.tmp" && chmod -R u+w "$root.tmp" \
      && chmod +x "$root.tmp"/bin/* "$root.tmp"/pkg/tool/*/* && mv "$root.tmp" "$root" \
      || die "could not install $module into $root"
  fi
  export PATH="$root/bin:$PATH"
  go version >/dev/null || die "$root/bin/go does not run"
}

# go_build MODULE_DIR OUT_DIR LDFLAGS PACKAGE... builds every package of one build
# module in one `go build`, so that the packages they share compile once.
go_build() {
  local mod=$1 out=$2 ldflags=$3
  shift 3
  local tmp="$out.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # The build cache is only needed while building (~3 GB for Kubernetes); the module
  # cache keeps the sources, checked against the committed go.sum.
  local gocache="${GO_BUILD_CACHE:-$CACHE_DIR/go-build}"
  log "go build in ${mod#"$ROOT"/}: ${*##*/} (log: $CACHE_DIR/${out##*/}.build.log)"
  # go build prints nothing for minutes: a line every 30 s says it is still at work.
  local t0=$SECONDS
  (while sleep 30; do log "still building ${out##*/}: $((SECONDS - t0)) s"; done) &
  local ticker=$! rc=0
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE="$gocache" \
    go build -trimpath -ldflags "$ldflags" -o "$tmp/" "$@") >"$CACHE_DIR/${out##*/}.build.log" 2>&1 || rc=$?
  # The ticker handles the TERM only once its sleep returns: end that sleep too, or the
  # wait below lasts up to 30 s.
  kill "$ticker" 2>/dev/null || true
  pkill -P "$ticker" sleep 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  [ "$rc" = 0 ] || { tail -40 "$CACHE_DIR/${out##*/}.build.log" >&2; die "go build in $mod failed (full log: $CACHE_DIR/${out##*/}.build.log)"; }
  rm -rf "$out" && mv "$tmp" "$out"
}

# build_k8s_once: on a machine that has not built Kubernetes and etcd yet (once per
# machine, ~5 min on 2 cores), builds them at the lowest CPU priority, so that beside a
# Rust build they take only what it leaves of the cores. Run it in a subshell (it renices
# the shell it runs in), after hack/deps.sh (it needs Go). `hack/cluster.sh up` later
# takes the build's lock and finds the cache filled.
build_k8s_once() {
  hack/k8s-binaries.sh --cached >/dev/null 2>&1 && return
  renice -n 19 -p "$BASHPID" >/dev/null
  PHASE_PREFIX="background: " phase "building Kubernetes and etcd"
  hack/k8s-binaries.sh >/dev/null
  phase_end
}

# build_go_tools_once: the Go tools the cluster tests run (hack/go-tool.sh: kstatus,
# helm, the seeds' Go operators), built at the lowest CPU priority when they are not
# cached yet.
GO_TOOLS=(kstatus helm peers)
build_go_tools_once() {
  local tool absent=()
  for tool in "${GO_TOOLS[@]}"; do
    hack/go-tool.sh "$tool" --cached >/dev/null 2>&1 || absent+=("$tool")
  done
  [ ${#absent[@]} -gt 0 ] || return 0
  renice -n 19 -p "$BASHPID" >/dev/null
  PHASE_PREFIX="background: " phase "building the tests' Go tools: ${absent[*]}"
  for tool in "${absent[@]}"; do
    hack/go-tool.sh "$tool" >/dev/null
  done
  phase_end
}

# k8s_in_background: build_k8s_once in the background, when there is anything to build;
# k8s_built waits for it, following its log.
k8s_in_background() {
  K8S_BUILD_PID=""
  hack/k8s-binaries.sh --cached >/dev/null 2>&1 && return
  K8S_BUILD_LOG=$(mktemp)
  log "building Kubernetes and etcd in the background, at the lowest CPU priority (log: $K8S_BUILD_LOG)"
  (build_k8s_once) >"$K8S_BUILD_LOG" 2>&1 &
  K8S_BUILD_PID=$!
}

# k8s_built: waits for k8s_in_background's build, if one runs, following its log.
k8s_built() {
  [ -n "${K8S_BUILD_PID:-}" ] || return 0
  tail -n +1 --pid="$K8S_BUILD_PID" -f "$K8S_BUILD_LOG" >&2
  wait "$K8S_BUILD_PID" || die "building Kubernetes and etcd failed (log above)"
  rm -f "$K8S_BUILD_LOG"
  K8S_BUILD_PID=""
}

# test_build: what a run of tests against a private control plane builds first (`make
# fuzz-cluster`, `make soak`): the shared test build, linted, and the cluster's packages.
test_build() {
  export PODSET_BUILD=test
  lint_in_build
  hack/deps.sh cluster
  build_binaries
}

# Phase times: `phase NAME` ends the phase running (if any) and starts NAME; `phase_end`
# ends it. Each ended phase appends "SECONDS NAME" to $PHASE_LOG (when set: `make test`
# sets it and prints the table at the end, so that a regression of a cold phase shows in
# every run's output rather than in a timed test).
phase() {
  phase_end
  _PHASE_NAME="${PHASE_PREFIX:-}$1"
  _PHASE_START=$(date +%s)
  log "$1"
}
phase_end() {
  if [ -n "${_PHASE_NAME:-}" ] && [ -n "${PHASE_LOG:-}" ]; then
    printf '%s %s\n' "$(($(date +%s) - _PHASE_START))" "$_PHASE_NAME" >>"$PHASE_LOG"
  fi
  _PHASE_NAME=""
}
# Free disk: `disk_watch FILE` samples, every 15 s in the background until its caller
# exits, the space left on the file systems of the checkout and of $TMPDIR (MiB, one line
# "ROOT TMP" a sample); `disk_report FILE` says the first, the lowest and the last. A run
# that fills the disk fails far from its cause ("No space left on device" in whatever
# wrote next, then tests timing out): this line says how close each run came.
disk_free() { df -Pm "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
disk_watch() {
  local file=$1
  (
    trap 'exit 0' TERM
    while :; do
      printf '%s %s\n' "$(disk_free "$ROOT")" "$(disk_free "${TMPDIR:-/tmp}")" >>"$file"
      sleep 15
    done
  ) >/dev/null 2>&1 &
  DISK_WATCH=$!
}
disk_report() {
  [ -s "$1" ] || return 0
  [ -z "${DISK_WATCH:-}" ] || kill "$DISK_WATCH" 2>/dev/null || true
  awk 'NR == 1 { f = $1; ft = $2; lo = $1; lot = $2 } { if ($1 < lo) lo = $1; if ($2 < lot) lot = $2; l = $1; lt = $2 }
    END { printf "disk free (MiB), checkout / tmp: %d / %d at the start, %d / %d at the lowest, %d / %d at the end\n",
          f, ft, lo, lot, l, lt }' "$1"
}

phase_report() { # prints the phases of $PHASE_LOG as a table, longest first
  [ -s "${PHASE_LOG:-}" ] || return 0
  printf '\n%8s  %s\n' "seconds" "phase"
  sort -rn "$PHASE_LOG" | awk '{ n = $1; if ($2 != "background:") t += n; $1 = ""; printf "%8d %s\n", n, $0 }
    END { printf "%8d  total, the background (beside the integration tests) left out\n", t }'
}

# test_targets_except NAME...: `--test T` for every integration-test target of the
# workspace's members but NAME..., one a line (from cargo metadata: a new test file is
# never left out).
test_targets_except() {
  cargo metadata -q --no-deps --format-version 1 | python3 -c '
import json, sys
skip = set(sys.argv[1:])
names = sorted({t["name"] for p in json.load(sys.stdin)["packages"] for t in p["targets"]
                if "test" in t["kind"] and t["name"] not in skip})
for n in names:
    print("--test"); print(n)
' "$@"
}

# ts_deps: the TypeScript toolchain of package-lock.json (jco with its QuickJS backend,
# rolldown, tsc) in node_modules/, installed by `npm ci` from the npm registry (cached
# in ~/.npm) when node_modules/ is missing or older than the lock. Idempotent.
ts_deps() {
  command -v node >/dev/null && command -v npm >/dev/null || apt_install "${NODE_JS_PACKAGES[@]}"
  local stamp="$ROOT/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$ROOT/package-lock.json" -nt "$stamp" ]; then
    log "installing the TypeScript toolchain (npm ci: jco, rolldown, typescript)"
    (cd "$ROOT" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null) \
      || die "npm ci failed (the TypeScript toolchain of package-lock.json)"
  fi
}


# go_deps: a Go toolchain that builds policies: Go >= 1.25 (go:wasmexport, and the go
# directive of the bindings' runtime package). A Go from 1.21 to 1.24 on PATH fetches the
# approved newer toolchain ($GO_TOOLCHAIN) from the module proxy, cached with the
# modules; an older one is replaced by that toolchain first (ensure_go).
go_deps() {
  local v
  ensure_go
  v=$(go_minor)
  if [ "$v" -lt 25 ]; then export GOTOOLCHAIN=$GO_TOOLCHAIN; fi
}

# go_checks DIR: a Go module's gofmt, go vet (natively and for wasip1, which a component
# is built for) and go test. The SDK's generated bindings are not vetted: their unsafe
# pointer arithmetic and unkeyed literals are the generator's (go test still runs vet's
# default checks over them). Test results go to $CHECK_RESULTS too, when set.
go_checks() {
  local unformatted packages
  unformatted=$(gofmt -l "$1")
  [ -z "$unformatted" ] || die "not gofmt-formatted: $(echo "$unformatted" | tr '\n' ' ')"
  packages=$(cd "$1" && go list ./... | grep -Ev '/internal/wit(podset)?/(podset_policy_|wit_exports)') \
    || die "go list failed in $1 (above)"
  # shellcheck disable=SC2086 # one word per package
  (cd "$1" && go vet $packages && GOOS=wasip1 GOARCH=wasm go vet $packages) || die "go vet failed in $1 (above)"
  (cd "$1" && go test ./... 2>&1) | grep -v 'no test files' | tee -a "${CHECK_RESULTS:-/dev/null}" >&2
  [ "${PIPESTATUS[0]}" = 0 ] || die "go test failed in $1 (above)"
}

# keep_compiled_policies: every engine the checks and tests start (the CLI's, the
# in-process tests', the operators') keeps compiled policy modules, by digest, in
# target/compiled/: a Go component compiles in ~13 s in a debug build, and loads from
# there in milliseconds.
keep_compiled_policies() {
  export PODSET_COMPILED_CACHE="${PODSET_COMPILED_CACHE:-${CARGO_TARGET_DIR:-$ROOT/target}/compiled}"
}

# go_bindings SDK_DIR GO_PKG_DIR: the Go SDK's contract bindings, generated from wit/ by
# go-bindgen (wit-bindgen-go, the release the Rust guests use): the reconcile-policy
# world into SDK_DIR/internal/wit/, the podset-policy world into internal/witpodset/
# (each beside its hand-written export_* packages), the version into internal/contract/;
# and the runtime package they import, go.bytecodealliance.org/pkg, copied from the same
# crate's source into GO_PKG_DIR (the module proxy serves no version of it), with
# go/bindgen/cabi-realloc-arena.patch applied. `make go-bindings` writes the committed copies;
# `make check` writes both into a temporary directory and compares.
go_bindings() {
  local sdk=$1 pkg=$2 crate
  local bindgen="${CARGO_TARGET_DIR:-$ROOT/target}/debug/go-bindgen"
  [ -x "$bindgen" ] || (cd "$ROOT" && cargo build -q -p go-bindgen) || die "building go-bindgen failed"
  find "$sdk/internal/wit" "$sdk/internal/witpodset" -mindepth 1 -maxdepth 1 ! -name 'export_*' -exec rm -rf {} + 2>/dev/null \
    || true
  rm -rf "$sdk/internal/contract"
  "$bindgen" "$ROOT/wit" "$sdk/internal" --package podset.dev/policy-sdk/internal \
    --world reconcile-policy=wit --world podset-policy=witpodset || die "go-bindgen failed"
  gofmt -w "$sdk/internal/wit" "$sdk/internal/witpodset" "$sdk/internal/contract"
  crate=$(cd "$ROOT" && cargo metadata --format-version 1 --locked \
    | node -e 'const m = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const p = m.packages.find((p) => p.name === "wit-bindgen-go");
      if (!p) process.exit(1);
      console.log(require("path").dirname(p.manifest_path));') || die "cargo metadata names no wit-bindgen-go"
  rm -rf "$pkg" && mkdir -p "$pkg/wit"
  cp "$crate/src/pkg/go.mod" "$crate/src/pkg/LICENSE" "$pkg/"
  cp -r "$crate/src/pkg/wit/runtime" "$crate/src/pkg/wit/types" "$crate/src/pkg/wit/async" "$pkg/wit/"
  # Ours on top: cabi_realloc bumps through an arena before it takes the GC heap (the
  # patch says why: issue 42).
  command -v patch >/dev/null || apt_install patch
  patch -s -p1 -d "$pkg" <"$ROOT/go/bindgen/cabi-realloc-arena.patch" || die "patching $pkg (go/bindgen/cabi-realloc-arena.patch) failed"
}
