#!/usr/bin/env bash
# `make fuzz-cluster`: more Acto-style sequences than `make test` runs (host/tests/sequences.rs),
# SEQUENCE_SEEDS new seeds (default 30) on a private control plane. A failing seed is printed
# with its steps; `FAULT_SEED=N make fuzz-cluster` replays it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

test_build
hack/policy.sh

test_cluster "$ROOT/.cluster-fuzz"
export SEQUENCE_SEEDS="${SEQUENCE_SEEDS:-30}"
if [ -n "${FAULT_SEED:-}" ]; then
  log "sequences: replaying FAULT_SEED=$FAULT_SEED"
else
  log "sequences: $SEQUENCE_SEEDS new seeds"
fi
cargo test --workspace --features "$TEST_FEATURES" --test cluster -- sequences:: --nocapture
