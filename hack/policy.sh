#!/usr/bin/env bash
# Builds the default policy components (every guest-NAME/ crate ->
# target/policy/NAME.wasm) and, with --fixtures, the hostile test policies
# (target/policy/fixtures/*.wasm); with --typescript, the TypeScript policies (every
# typescript/guest-NAME/ package -> target/policy/NAME-ts.wasm: rolldown bundles
# src/component.ts, jco componentizes it with its QuickJS backend); with --go, the Go
# policies (every go/guest-NAME/ module -> target/policy/NAME-go.wasm: go builds a wasip1
# reactor, wizer snapshots its start-up, `policy componentize` adds the deterministic WASI
# adapter).
#
# Uses the rustup toolchain when it has the wasm32-unknown-unknown target; otherwise
# Debian's rustc-web, whose std source lets cargo build std for wasm32 (-Zbuild-std).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Usage: hack/policy.sh [--fixtures | --typescript | --go | --crate DIR]
#   --fixtures    also the hostile test policies
#   --typescript  the TypeScript policies only
#   --go          the Go policies only
#   --crate DIR   one policy crate (Cargo.toml), package (package.json) or Go module (go.mod) elsewhere
FIXTURES=0
CRATE=""
case "${1:-}" in
  --fixtures) FIXTURES=1 ;;
  --typescript) TYPESCRIPT=1 ;;
  --go) GO=1 ;;
  --crate) CRATE=$(cd "${2:?--crate needs a directory}" && pwd) || die "no crate directory ${2:-}" ;;
  "") ;;
  *) die "usage: $0 [--fixtures | --typescript | --go | --crate DIR]" ;;
esac

OUT="$ROOT/target/policy"
mkdir -p "$OUT"

# build_ts_entry ENTRY.ts OUTPUT: a TypeScript component entry, bundled (rolldown) and
# componentized (jco).
build_ts_entry() {
  local entry=$1 out=$2 work world
  work="$ROOT/target/ts-build/$(basename "$(dirname "$(dirname "$entry")")")-$(basename "${entry%.ts}")"
  mkdir -p "$work"
  world=$(node "$ROOT/typescript/policy-sdk/bundle.mjs" "$entry" "$work/component.js") || die "bundling $entry failed"
  # jco reads its source relative to the working directory. QuickJS, not StarlingMonkey:
  # 1.6 MiB and ~0.1 ms a decision, against 11 MiB (over the module cap) and 20x slower
  # (measured 2026-11-26). Every WASI import is stubbed: the component imports only `log`.
  (cd "$work" && "$ROOT/node_modules/.bin/jco" componentize component.js --wit "$ROOT/wit/policy.wit" \
      -n "$world" --backend quickjs --backend-qjs-stub-wasi --backend-qjs-disable-async -o "$out" >/dev/null) \
    || die "jco componentize $entry failed"
}

# build_ts DIR OUTPUT: the TypeScript policy package DIR (its src/component.ts) as a component.
build_ts() {
  build_ts_entry "$1/src/component.ts" "$2"
}

# The host (for `componentize`) builds where every native build goes...
NATIVE_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

# host_bin: $HOST_BIN, the host binary that makes components (wit-component), built by
# the native toolchain when missing or older than its sources.
host_bin() {
  HOST_BIN="${PODSET_HOST_BIN:-$NATIVE_TARGET_DIR/debug/podset-host}"
  if [ ! -x "$HOST_BIN" ] || [ -n "$(find "$ROOT/host/src" "$ROOT/wit" -newer "$HOST_BIN" -print -quit 2>/dev/null)" ]; then
    (cd "$ROOT" && unset RUSTC RUSTC_BOOTSTRAP && export CARGO_TARGET_DIR="$NATIVE_TARGET_DIR" PATH="$HOME/.cargo/bin:$PATH" \
        && build_binaries) \
      || die "building podset-host (needed to make components) failed"
  fi
}

# build_go DIR OUTPUT: the Go policy module DIR (its main package) as a component. A
# reactor (c-shared: the host calls exports, main never runs); go-pkg's allocator links
# runtime.sbrk (-checklinkname=0). Wizer runs the Go runtime's start-up once, at build
# time: a fresh instance then starts from the snapshot (~0.15 ms a decision instead of
# ~0.5 ms, measured 2026-11-26). The snapshot holds the start-up's clock and random
# bytes: two builds differ, every instance of one build decides alike.
build_go() {
  local dir=$1 out=$2 work
  work="$ROOT/target/go-build/$(basename "$dir")"
  mkdir -p "$work"
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -ldflags=-checklinkname=0 \
      -o "$work/core.wasm" .) || die "go build of $dir for wasip1 failed"
  "$ROOT/node_modules/.bin/wizer" "$work/core.wasm" -o "$work/snapshot.wasm" --allow-wasi --init-func _initialize \
    || die "wizer could not snapshot the start-up of $dir"
  "$HOST_BIN" policy componentize "$work/snapshot.wasm" -o "$out" >/dev/null || die "componentize $work/snapshot.wasm failed"
}

if [ "${GO:-0}" = 1 ] || { [ -n "$CRATE" ] && [ -f "$CRATE/go.mod" ]; }; then
  go_deps
  ts_deps # wizer comes with the TypeScript toolchain's lock
  host_bin
  if [ -n "$CRATE" ]; then
    name=$(basename "$(sed -n 's/^module //p' "$CRATE/go.mod")")
    go_checks "$CRATE"
    build_go "$CRATE" "$OUT/${name#guest-}-go.wasm"
    log "target/policy/${name#guest-}-go.wasm: $(stat -c %s "$OUT/${name#guest-}-go.wasm") bytes"
    exit 0
  fi
  for dir in "$ROOT"/go/guest-*/; do
    name=$(basename "$dir")
    out="$OUT/${name#guest-}-go.wasm"
    [ -f "$out" ] && [ -z "$(find "$dir" "$ROOT/go/policy-sdk" "$ROOT/go/go-pkg" "$ROOT/wit" "$ROOT/host/src/author" \
      -newer "$out" -print -quit 2>/dev/null)" ] || build_go "${dir%/}" "$out"
    log "target/policy/${name#guest-}-go.wasm: $(stat -c %s "$out") bytes"
  done
  exit 0
fi

if [ "${TYPESCRIPT:-0}" = 1 ] || { [ -n "$CRATE" ] && [ -f "$CRATE/package.json" ]; }; then
  ts_deps
  if [ -n "$CRATE" ]; then
    pkg=$(node -p "require('$CRATE/package.json').name")
    # Its types and its tests first (a package made elsewhere has its own tsconfig.json,
    # pointing at this repository's SDK).
    tsconfig="$CRATE/tsconfig.json"
    [ -f "$tsconfig" ] || tsconfig="$ROOT/tsconfig.json"
    "$ROOT/node_modules/.bin/tsc" -p "$tsconfig" || die "tsc --strict failed for $CRATE (above)"
    tests="$ROOT/target/ts-test/$pkg"
    rm -rf "$tests" && mkdir -p "$tests"
    for test in "$CRATE"/test/*.test.ts; do
      [ -f "$test" ] || continue
      node "$ROOT/typescript/policy-sdk/bundle.mjs" --node "$test" "$tests/$(basename "${test%.ts}").mjs"
    done
    if [ -n "$(ls "$tests")" ]; then node --test "$tests"/ >&2 || die "the tests of $CRATE failed (above)"; fi
    build_ts "$CRATE" "$OUT/${pkg#guest-}.wasm"
    log "target/policy/${pkg#guest-}.wasm: $(stat -c %s "$OUT/${pkg#guest-}.wasm") bytes"
    exit 0
  fi
  for dir in "$ROOT"/typescript/guest-*/; do
    name=$(basename "$dir")
    out="$OUT/${name#guest-}-ts.wasm"
    [ -f "$out" ] && [ -z "$(find "$dir" "$ROOT/typescript/policy-sdk" "$ROOT/wit" "$ROOT/package-lock.json" -newer "$out" \
      -print -quit 2>/dev/null)" ] || build_ts "${dir%/}" "$out"
    log "target/policy/${name#guest-}-ts.wasm: $(stat -c %s "$out") bytes"
  done
  exit 0
fi

TARGET=wasm32-unknown-unknown
# ...the policies apart from it: another compiler's artifacts would evict ours.
export CARGO_TARGET_DIR="$ROOT/target/wasm"
mkdir -p "$OUT/fixtures"

if rustup_has_wasm32; then
  CARGO=(cargo)
  BUILD_STD=()
else
  apt_install "${WASM_PACKAGES[@]}"
  export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=/usr/bin/wasm-ld
  # Debian's cargo must not pick rustup's rustc from PATH for build scripts and proc macros.
  export PATH="/usr/bin:$PATH"
  CARGO=(/usr/bin/cargo)
  # One argument: cargo's list of crates is comma-separated.
  # shellcheck disable=SC2054
  BUILD_STD=(-Zbuild-std=std,panic_abort)
fi

host_bin

# What a component of this workspace is made from, besides its own crate: the SDK, the
# contract, the lock and profiles, and the host's componentize step.
SHARED_INPUTS=("$ROOT/policy-sdk" "$ROOT/wit" "$ROOT/Cargo.lock" "$ROOT/Cargo.toml" "$ROOT/host/src/author/componentize.rs")

# up_to_date OUTPUT INPUT...: OUTPUT exists and no input is newer. The fixtures are one crate
# built once per feature, so cargo rebuilds each every time (32 s of a warm make check
# went there); an output newer than all it is made from is kept instead.
up_to_date() {
  local out=$1
  shift
  [ -f "$out" ] && [ -z "$(find "$@" "${SHARED_INPUTS[@]}" -newer "$out" -print -quit 2>/dev/null)" ]
}

build() { # package features output-name [crate-dir]
  local pkg=$1 features=$2 name=$3 dir=${4:-$ROOT} core
  # Without `make check`'s clippy wrapper (lib.sh's lint_in_build): clippy lints the
  # policies' crates in the native test build; for wasm32 they are compiled by the
  # compiler that has the wasm32 standard library. The guest crates declare only an rlib
  # (see their Cargo.toml); the core module is asked for here.
  (cd "$dir" && unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS \
      && "${CARGO[@]}" rustc -q --profile wasm --target "$TARGET" "${BUILD_STD[@]}" -p "$pkg" --lib \
      --crate-type cdylib ${features:+--features "$features"}) || die "building $pkg ${features:+($features)} for $TARGET failed"
  core="$CARGO_TARGET_DIR/$TARGET/wasm/${pkg//-/_}.wasm"
  "$HOST_BIN" policy componentize "$core" -o "$name" >/dev/null || die "componentize $core failed"
}

if [ -n "$CRATE" ]; then
  pkg=$(sed -n 's/^name = "\(.*\)"/\1/p' "$CRATE/Cargo.toml" | head -1)
  [ -n "$pkg" ] || die "$CRATE/Cargo.toml names no package"
  build "$pkg" "" "$OUT/${pkg#guest-}.wasm" "$CRATE"
  log "target/policy/${pkg#guest-}.wasm: $(stat -c %s "$OUT/${pkg#guest-}.wasm") bytes"
  exit 0
fi

# Every guest-NAME/ crate is a default policy: target/policy/NAME.wasm.
for dir in "$ROOT"/guest-*/; do
  name=$(basename "$dir")
  up_to_date "$OUT/${name#guest-}.wasm" "$dir" || build "$name" "" "$OUT/${name#guest-}.wasm"
  log "target/policy/${name#guest-}.wasm: $(stat -c %s "$OUT/${name#guest-}.wasm") bytes"
done

if [ "$FIXTURES" = 1 ]; then
  # The default policy's visibly different variant, for hot-swap tests.
  up_to_date "$OUT/fixtures/canary.wasm" "$ROOT/guest-podset" || build guest-podset canary "$OUT/fixtures/canary.wasm"
  # Rollout fixtures: one pod too many (refused by the host), a trap for one parent in ten.
  for f in one-too-many trap-one-in-ten; do
    up_to_date "$OUT/fixtures/$f.wasm" "$ROOT/guest-podset" || build guest-podset "$f" "$OUT/fixtures/$f.wasm"
  done
  for f in infinite-loop memory-bomb panic action-flood wrong-contract wasi-import generic-hostile forbidden-kind missing-kind \
    trapping-memcached trapping-tenant; do
    up_to_date "$OUT/fixtures/$f.wasm" "$ROOT/policy-fixtures" || build policy-fixtures "$f" "$OUT/fixtures/$f.wasm"
  done
  # A core module that never became a component (the last fixture's core module).
  up_to_date "$OUT/fixtures/core-module.wasm" "$ROOT/policy-fixtures" \
    || cp "$CARGO_TARGET_DIR/$TARGET/wasm/policy_fixtures.wasm" "$OUT/fixtures/core-module.wasm"
  printf '#!/bin/sh\necho "this is not a wasm module"\n' > "$OUT/fixtures/not-wasm.wasm"
  # The TypeScript policies, and a TypeScript component that reads the clock and
  # randomness (the in-process determinism test).
  "$0" --typescript
  clock="$OUT/fixtures/ts-clock-reader.wasm"
  [ -f "$clock" ] && [ -z "$(find "$ROOT/typescript/policy-sdk" "$ROOT/wit" -newer "$clock" -print -quit)" ] \
    || build_ts_entry "$ROOT/typescript/policy-sdk/test/fixtures/clock-reader.ts" "$clock"
  # The Go policies, and a Go component that reads the clock, randomness, map order, the
  # scheduler and the GC (the same test).
  # (CARGO_TARGET_DIR is the policies' own here: the host binary is the native one.)
  CARGO_TARGET_DIR="$NATIVE_TARGET_DIR" PODSET_HOST_BIN="$HOST_BIN" "$0" --go
  clock="$OUT/fixtures/go-clock-reader.wasm"
  [ -f "$clock" ] && [ -z "$(find "$ROOT/go/fixtures/clock-reader" "$ROOT/go/policy-sdk" "$ROOT/go/go-pkg" "$ROOT/wit" "$ROOT/host/src/author" \
    -newer "$clock" -print -quit)" ] || build_go "$ROOT/go/fixtures/clock-reader" "$clock"
  log "fixtures: $(find "$OUT/fixtures" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' ')"
fi
