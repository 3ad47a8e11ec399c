#!/usr/bin/env bash
# `make fuzz-cluster`: more Acto-style sequences than `make test` runs (host/tests/sequences.rs),
# SEQUENCE_SEEDS new seeds (default 30) on a private control plane. A failing seed is printed
# with its steps; `FAULT_SEED=N make fuzz-cluster` replays it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

hack/deps.sh
cargo build -p podset-host --features native-podset --tests
hack/policy.sh

export CLUSTER_DIR="$ROOT/.cluster-fuzz"
trap 'hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
hack/cluster.sh down >/dev/null 2>&1 || true
hack/cluster.sh up || die "the control plane did not start"
export PATH="$CLUSTER_DIR/bin:$PATH"
export PODSET_TEST_KUBECONFIG="$CLUSTER_DIR/kubeconfig"
export PODSET_POLICY_DIR="$ROOT/target/policy"
export SEQUENCE_SEEDS="${SEQUENCE_SEEDS:-30}"
log "sequences: ${FAULT_SEED:+FAULT_SEED=$FAULT_SEED}${FAULT_SEED:-$SEQUENCE_SEEDS new seeds}"
cargo test -p podset-host --features native-podset --test sequences -- --nocapture
