#!/usr/bin/env bash
# `make soak` (not part of `make test`): SOAK_MINUTES (30) of random spec changes, policy
# swaps, leader kills and API server restarts over SOAK_PARENTS (1000) PodSets on the
# simulated node of a private control plane, the fault suite's invariants checked every
# minute and the operator's RSS recorded (host/tests/faults.rs, `soak`). FAULT_SEED=N
# replays a run's choices.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

test_build
# The PodSet policy in each language: the soak swaps between them.
hack/policy.sh
hack/policy.sh --typescript
hack/policy.sh --go

test_cluster "$ROOT/.cluster-soak"
export SOAK_MINUTES="${SOAK_MINUTES:-30}" SOAK_PARENTS="${SOAK_PARENTS:-1000}"
log "soak: $SOAK_MINUTES minutes over $SOAK_PARENTS parents${FAULT_SEED:+, FAULT_SEED=$FAULT_SEED}"
cargo test --workspace --features "$TEST_FEATURES" --test faults soak:: -- --ignored --nocapture
