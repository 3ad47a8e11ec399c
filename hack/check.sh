#!/usr/bin/env bash
# `make check`: what needs no cluster, fast when warm — formatting, clippy, rustdoc's
# links, the import-layer test, unit tests (the generated references and CRDs included), the
# in-process tests and every policy's scenarios on its compiled component, their output
# checked against the kinds' schemas.
#
#   hack/check.sh           all of it: formatting, then rustdoc beside the rest
#   hack/check.sh --lint    formatting and clippy alone (`make lint`)
#   hack/check.sh --static  rustdoc
#   hack/check.sh --tests   the build (clippy in it), the policies, unit, in-process and scenario tests
#
# Clippy runs inside the build: the workspace's crates are compiled by clippy-driver
# (lib.sh's lint_in_build), every target of the workspace with one feature set
# ($TEST_FEATURES), so each crate compiles once per target and is linted as it does; `make
# test` runs --tests first, then the rest against a cluster with nothing left to compile.
# Rustdoc keeps its own target directory (check-mode artifacts share nothing with a
# build), so that it never waits for the build directory's lock that the tests' cargo holds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PODSET_BUILD=test
keep_compiled_policies
CHECKS_TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/checks"

formatting() {
  phase "formatting"
  cargo fmt --all -- --check || die "cargo fmt would change files: run cargo fmt --all"
}

# `make lint` alone: clippy's own check build, apart from the tests' build.
clippy() {
  phase "clippy -D warnings"
  CARGO_TARGET_DIR="$CHECKS_TARGET" cargo clippy -q --workspace --all-targets --features "$TEST_FEATURES" -- -D warnings
}

doc_links() {
  phase "rustdoc -D warnings (links between modules follow them when they move)"
  RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR="$CHECKS_TARGET" cargo doc -q -p podset-host --no-deps
}

tests() {
  local unit=(--workspace --features "$TEST_FEATURES" --lib --bins --test in_process)
  # `make check` builds (and so lints) what it runs: the libraries, the binaries and the
  # unit and in-process tests, in one cargo command (building the in-process tests puts
  # the operator binary they run in target/debug/ too); `make test` (CHECK_RESULTS set)
  # every target at once, the cluster tests and benchmarks too, so that what runs next has
  # nothing left to compile. After touching one host source file (2026-11-28): 20 s for
  # every target, 17-23 s for these (two measurements that day).
  phase "building, clippy in the build (native)"
  lint_in_build
  if [ -n "${CHECK_RESULTS:-}" ]; then
    cargo build -q --workspace --all-targets --features "$TEST_FEATURES"
  else
    cargo test -q --no-run "${unit[@]}"
  fi || die "the build failed, or clippy found something (above)"

  phase "policies and the hostile fixtures (wasm32)"
  hack/deps.sh check
  hack/policy.sh --fixtures >/dev/null

  shell_scripts
  alert_rules

  typescript
  go_policies

  phase "unit tests, import layers, in-process tests"
  local results=${CHECK_RESULTS:-/dev/null}
  cargo test -q "${unit[@]}" 2>&1 | tee -a "$results"

  # Each decision's output is checked against the kinds' schemas too: the built-in
  # kinds' and the CRDs of manifests/crd/.
  phase "policy scenarios on the compiled components, their output against the schemas"
  local dir name scenarios runs=()
  for dir in guest-*/; do
    name=$(basename "$dir")
    runs+=("target/policy/${name#guest-}.wasm ${dir}scenarios")
  done
  # A policy in another language passes its Rust twin's scenarios (typescript/guest-NAME/
  # or go/guest-NAME/: guest-NAME/scenarios/), unless it has its own.
  local lang
  for lang in typescript:ts go:go; do
    for dir in "${lang%%:*}"/guest-*/; do
      name=$(basename "$dir")
      scenarios="$dir"scenarios
      [ -d "$scenarios" ] || scenarios="$name/scenarios"
      runs+=("target/policy/${name#guest-}-${lang#*:}.wasm $scenarios")
    done
  done
  # Two at a time (each loads its module and the schemas it checks against), their
  # reports in order.
  local out k pids=() failed=0
  out=$(mktemp -d)
  for ((k = 0; k < ${#runs[@]}; k++)); do
    # shellcheck disable=SC2086 # a module and a directory, neither with spaces
    set -- ${runs[k]}
    target/debug/podset-host policy test "$1" "$2"/*.yaml --schemas manifests/crd >"$out/$k" 2>&1 &
    pids[k]=$!
    if ((k >= 1)); then wait "${pids[k - 1]}" || failed=1; fi
  done
  wait "${pids[k - 1]}" || failed=1
  for ((k = 0; k < ${#runs[@]}; k++)); do
    tee -a "$results" <"$out/$k" | tail -1
  done
  [ "$failed" = 0 ] || cat "$out"/* >&2
  rm -rf "$out"
  [ "$failed" = 0 ] || die "a policy's scenarios failed (above)"
}

# unchanged NAME PATH...: a plain `make check` passed NAME since nothing under PATH changed
# (and the toolchain it names in $STAMP_TOOLS is the same); `make test` always runs it.
# `passed NAME` records a pass.
unchanged() {
  local stamp="$STAMPS/$1"
  shift
  [ -z "${CHECK_RESULTS:-}" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$STAMP_TOOLS" ] \
    && [ -z "$(find "$@" -newer "$stamp" -print -quit 2>/dev/null)" ]
}
passed() { mkdir -p "$STAMPS" && printf '%s' "$STAMP_TOOLS" >"$STAMPS/$1"; }
STAMPS="${CARGO_TARGET_DIR:-$ROOT/target}/check-stamps"

# The scripts, linted by shellcheck (settings in .shellcheckrc): 6 s of CPU. Skipped by a plain
# `make check` when no script changed since it last passed.
shell_scripts() {
  phase "shellcheck of hack/ and .ci/"
  apt_install "${CHECK_PACKAGES[@]}"
  STAMP_TOOLS="$(shellcheck --version | sed -n 2p)"
  if unchanged shellcheck hack .ci .shellcheckrc; then
    log "shellcheck: no script changed since it last passed"
    return 0
  fi
  shellcheck hack/*.sh .ci/run || die "shellcheck found something in the scripts (above)"
  passed shellcheck
}

# The alert rules on synthetic series (monitoring/alerts.test.yaml); that the rules and
# the dashboard name only exported metrics is an in-process test. Skipped by a plain
# `make check` when monitoring/ did not change since it last passed.
alert_rules() {
  phase "alert rules: promtool check rules, promtool test rules"
  apt_install "${CHECK_PACKAGES[@]}"
  STAMP_TOOLS="$(promtool --version 2>&1 | head -1)"
  if unchanged alert-rules monitoring; then
    log "alert rules: monitoring/ unchanged since they last passed"
    return 0
  fi
  promtool check rules monitoring/alerts.yaml >/dev/null || die "promtool check rules monitoring/alerts.yaml failed"
  (cd monitoring && promtool test rules alerts.test.yaml) || die "the alert rules' tests failed (above)"
  passed alert-rules
}

# The TypeScript SDK and policies: their types still those of wit/, `tsc --strict`, their
# native tests (`node --test`, each test file bundled by rolldown), their components.
# Skipped by a plain `make check` when none of their inputs changed since it last passed.
typescript() {
  phase "TypeScript: contract types, tsc --strict, node --test, components"
  ts_deps
  STAMP_TOOLS="$(node --version)"
  if unchanged typescript typescript wit package-lock.json tsconfig.json; then
    log "TypeScript: nothing changed since its checks last passed; only its components are brought up to date"
    hack/policy.sh --typescript >/dev/null
    return 0
  fi
  local generated
  generated=$(mktemp -d)
  node typescript/policy-sdk/generate.mjs "$generated"
  diff -r "$generated" typescript/policy-sdk/src/generated >/dev/null \
    || { rm -rf "$generated"; die "typescript/policy-sdk/src/generated/ is out of date with wit/: run make ts-bindings"; }
  rm -rf "$generated"
  node_modules/.bin/tsc -p tsconfig.json || die "tsc --strict failed (above)"
  rm -rf target/ts-test && mkdir -p target/ts-test
  local test
  for test in typescript/*/test/*.test.ts; do
    node typescript/policy-sdk/bundle.mjs --node "$test" "target/ts-test/$(dirname "$test" | cut -d/ -f2)-$(basename "${test%.ts}").mjs"
  done
  node --test target/ts-test/ 2>&1 | tee -a "${CHECK_RESULTS:-/dev/null}" | tail -8
  [ "${PIPESTATUS[0]}" = 0 ] || die "TypeScript tests failed (above)"
  hack/policy.sh --typescript >/dev/null
  passed typescript
}

# The Go SDK and policies: their bindings still those of wit/, gofmt, go vet (natively
# and for wasip1), their native tests (`go test`), their components.
go_policies() {
  phase "Go: contract bindings, gofmt, go vet, go test, components"
  go_deps
  STAMP_TOOLS="$(go version)"
  # The test tools' Go (hack/kstatus/, hack/peers/; vetted where it is built: hack/go-tool.sh).
  [ -z "$(gofmt -l hack/kstatus hack/peers)" ] || die "not gofmt-formatted: $(gofmt -l hack/kstatus hack/peers | tr '\n' ' ')"
  if unchanged go go wit Cargo.lock; then
    log "Go: nothing changed since its checks last passed; only its components are brought up to date"
    hack/policy.sh --go >/dev/null
    return 0
  fi
  local fresh dir
  fresh=$(mktemp -d)
  go_bindings "$fresh/sdk" "$fresh/go-pkg"
  for dir in wit witpodset contract; do
    diff -r -x 'export_*' "$fresh/sdk/internal/$dir" "go/policy-sdk/internal/$dir" >/dev/null \
      || { rm -rf "$fresh"; die "go/policy-sdk/internal/$dir/ is out of date with wit/ and go-bindgen: run make go-bindings"; }
  done
  diff -r "$fresh/go-pkg" go/go-pkg >/dev/null \
    || { rm -rf "$fresh"; die "go/go-pkg/ is out of date with go-bindgen's crate: run make go-bindings"; }
  rm -rf "$fresh"
  [ -z "$(gofmt -l go)" ] || die "not gofmt-formatted: $(gofmt -l go | tr '\n' ' ')"
  for dir in go/policy-sdk go/guest-*/; do
    go_checks "${dir%/}"
  done
  hack/policy.sh --go >/dev/null
  passed go
}

started=$(date +%s)
case "${1:-}" in
  --lint) formatting; clippy ;;
  --static) doc_links ;;
  --tests) tests ;;
  "")
    formatting
    # Rustdoc beside the build and the tests: it only checks, in a target directory of
    # its own, so the two halves share the cores instead of taking turns. At the lowest
    # CPU priority, as in `make test`: the in-process tests hold wall-clock deadlines.
    static_log="$(mktemp)"
    (
      renice -n 19 -p "$BASHPID" >/dev/null
      _PHASE_NAME="" PHASE_PREFIX="beside the tests: "
      doc_links && phase_end
    ) >"$static_log" 2>&1 &
    static=$!
    trap 'kill "$static" 2>/dev/null || true; rm -f "$static_log"' EXIT
    tests
    phase "waiting for rustdoc"
    static_ok=0
    wait "$static" || static_ok=$?
    cat "$static_log"
    [ "$static_ok" = 0 ] || die "rustdoc failed (above)"
    ;;
  *) die "usage: $0 [--lint | --static | --tests]" ;;
esac
phase_end
log "passed in $(($(date +%s) - started)) s"
