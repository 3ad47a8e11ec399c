#!/usr/bin/env bash
# `make check`: what needs no cluster, fast when warm — formatting, clippy, rustdoc's
# links, the import-layer test, unit tests (the generated references and CRDs included), the
# in-process tests and every policy's scenarios on its compiled component.
#
#   hack/check.sh           all of it: formatting, then clippy and rustdoc beside the rest
#   hack/check.sh --lint    formatting and clippy (`make lint`)
#   hack/check.sh --static  clippy and rustdoc
#   hack/check.sh --tests   the build, the policies, unit, in-process and scenario tests
#
# `make test` runs --tests first and --static in the background beside the integration
# tests, which leave a core idle most of the time. Every cargo command here and in
# hack/test.sh uses one feature set ($TEST_FEATURES) over the whole workspace, so each
# crate compiles once per target, whichever command comes first. Clippy and rustdoc
# keep their own target directory (check-mode artifacts share nothing with a build), so
# that they never wait for the build directory's lock that the tests' cargo holds.
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

clippy() {
  phase "clippy -D warnings"
  CARGO_TARGET_DIR="$CHECKS_TARGET" cargo clippy -q --workspace --all-targets --features "$TEST_FEATURES" -- -D warnings
}

doc_links() {
  phase "rustdoc -D warnings (links between modules follow them when they move)"
  RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR="$CHECKS_TARGET" cargo doc -q -p podset-host --no-deps
}

tests() {
  # Only what the checks run (the operator binary comes with the in-process tests); `make
  # test` builds the other test targets with the same features, so nothing compiles twice.
  local unit=(--workspace --features "$TEST_FEATURES" --lib --bins --test in_process)
  phase "building the unit and in-process tests and the operator (native)"
  # The binaries by name, so that cargo puts them in target/debug/ (a test build alone
  # leaves the operator there stale, and hack/policy.sh would then build every target);
  # a test target beside them keeps the tests' dependency features, so nothing rebuilds.
  cargo build -q --workspace --features "$TEST_FEATURES" --bins --test in_process
  cargo test -q --no-run "${unit[@]}"

  phase "policies and the hostile fixtures (wasm32)"
  hack/deps.sh check
  hack/policy.sh --fixtures >/dev/null

  typescript
  go_policies

  phase "unit tests, import layers, in-process tests"
  local results=${CHECK_RESULTS:-/dev/null}
  cargo test -q "${unit[@]}" 2>&1 | tee -a "$results"

  phase "policy scenarios on the compiled components"
  local dir name scenarios
  for dir in guest-*/; do
    name=$(basename "$dir")
    target/debug/podset-host policy test "target/policy/${name#guest-}.wasm" "$dir"scenarios/*.yaml | tee -a "$results" | tail -1
  done
  # A policy in another language passes its Rust twin's scenarios (typescript/guest-NAME/
  # or go/guest-NAME/: guest-NAME/scenarios/), unless it has its own.
  local lang
  for lang in typescript:ts go:go; do
    for dir in "${lang%%:*}"/guest-*/; do
      name=$(basename "$dir")
      scenarios="$dir"scenarios
      [ -d "$scenarios" ] || scenarios="$name/scenarios"
      target/debug/podset-host policy test "target/policy/${name#guest-}-${lang#*:}.wasm" "$scenarios"/*.yaml \
        | tee -a "$results" | tail -1
    done
  done
}

# The TypeScript SDK and policies: their types still those of wit/, `tsc --strict`, their
# native tests (`node --test`, each test file bundled by rolldown), their components.
typescript() {
  phase "TypeScript: contract types, tsc --strict, node --test, components"
  ts_deps
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
}

# The Go SDK and policies: their bindings still those of wit/, gofmt, go vet (natively
# and for wasip1), their native tests (`go test`), their components.
go_policies() {
  phase "Go: contract bindings, gofmt, go vet, go test, components"
  go_deps
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
}

started=$(date +%s)
case "${1:-}" in
  --lint) formatting; clippy ;;
  --static) clippy; doc_links ;;
  --tests) tests ;;
  "")
    formatting
    # Clippy and rustdoc beside the build and the tests: they only check, in a target
    # directory of their own, so the two halves share the cores instead of taking turns.
    # At the lowest CPU priority, as in `make test`: the in-process tests hold wall-clock
    # deadlines. After touching host/src/reconcile/flow.rs (2 cores, 2026-11-27): 70-74 s
    # one after the other, 52-59 s side by side.
    static_log="$(mktemp)"
    (
      renice -n 19 -p "$BASHPID" >/dev/null
      _PHASE_NAME="" PHASE_PREFIX="beside the tests: "
      clippy && doc_links && phase_end
    ) >"$static_log" 2>&1 &
    static=$!
    trap 'kill "$static" 2>/dev/null || true; rm -f "$static_log"' EXIT
    tests
    phase "waiting for clippy and rustdoc"
    static_ok=0
    wait "$static" || static_ok=$?
    cat "$static_log"
    [ "$static_ok" = 0 ] || die "clippy or rustdoc failed (above)"
    ;;
  *) die "usage: $0 [--lint | --static | --tests]" ;;
esac
phase_end
log "passed in $(($(date +%s) - started)) s"
