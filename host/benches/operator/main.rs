//! `make bench`: the operator (release build) beside its peer, on a private control
//! plane with the simulated node. Measurements only; nothing here asserts a speed.
//!
//! - **Peer**: N PodSets × R replicas against N ReplicaSets × R of the same pod
//!   template, reconciled by kube-controller-manager's own ReplicaSet controller,
//!   in alternating rounds; time to converge (all, and p50/p99 per object), the
//!   writes the API server counted (`apiserver_request_total`, not our metrics),
//!   scale to 1 and back. The controller manager runs with a client rate high
//!   enough not to be what is measured, and once more at its default.
//! - **Shadow**: the same rounds with a shadow of the same module beside every
//!   decision (a Shadow ReconcilePolicy in the round's namespace), against none.
//! - **Hot swap** across the PodSets of the last round.
//! - **Languages**: the PodSet and the Memcached policies in TypeScript and in Go
//!   against the same in Rust, each in an operator of its own, in alternating rounds.
//! - **The seeds' operators**: operator-sdk's PodSet tutorial operator and Memcached
//!   sample (Go, controller-runtime; hack/peers/) on the same objects, in alternating
//!   rounds; then the three seeds' operators (the Netperf one too) as three processes
//!   against one podset-host serving the three policies: memory.
//! - **Scale**: many PodSets with three policies loaded: time, memory, the writes
//!   and CPU of a resync with nothing to do, memory per extra policy; the curve of
//!   cost against the number of PodSets, and at its largest size, a new PodSet
//!   created while a restarted operator re-decides them all.
//!
//! `BENCH_QUICK=1` runs every group small and once (`make test` does, so that they
//! cannot rot); it checks that they run, not how fast. `BENCH_ROUNDS_ONLY=1` stops
//! after the alternating rounds (every group of them: 33–34 minutes on 2026-11-29)
//! and prints their tables without writing them; `BENCH_PEER_ONLY=1` runs the rounds
//! against the ReplicaSet controller alone: for trying a change to convergence, or an
//! operator setting, which the operators inherit from the environment
//! (`RECONCILE_CONCURRENCY=16 BENCH_PEER_ONLY=1 make bench`). `BENCH_SEEDS_ONLY=1`
//! runs the rounds against the seeds' own operators alone. A full run keeps each group
//! as it ends; `BENCH_RESUME=1` finishes one cut short ([`kept`]).
//!
//! Measuring and drawing are apart: each group measures into its figures, and a
//! function of those figures alone draws its table ([`table`]), so that what a table
//! prints can be read and tried without a cluster.

mod at_size;
mod compared;
mod kept;
mod languages;
mod machine;
mod metrics;
mod peer;
mod queueing;
mod report;
mod round;
mod rounds;
mod scale;
mod seeds;
mod shared;
mod sizes;
mod stats;
mod table;
mod together;
mod watch;

use podset_test_support as common;

use kept::{Part, Stamp};
use sizes::{Group, Run, Sizes};

#[tokio::main]
async fn main() {
    let (s, run) = Sizes::from_env();
    let client = common::client().await;
    let run_label = format!("podset.dev/bench={}", std::process::id());
    let heading = report::Heading::of(&client, run).await;
    // Only a full run keeps its groups, for `BENCH_RESUME=1` to finish it.
    let stamp = match run {
        Run::Full => Stamp::now(heading.machine.clone(), heading.kubernetes.clone())
            .inspect_err(|why| eprintln!("the groups of this run are not kept for BENCH_RESUME=1: {why:#}"))
            .ok(),
        _ => None,
    };
    if kept::resuming() && stamp.is_none() {
        eprintln!("BENCH_RESUME=1 finishes a full run of a commit: every group of this one is measured");
    }
    let (mut parts, mut resumed) = (Vec::new(), false);
    for group in Group::ALL.into_iter().filter(|g| run.runs(*g)) {
        let found = stamp.as_ref().filter(|_| kept::resuming()).and_then(|stamp| kept::find(stamp, group));
        if let Some(part) = found {
            eprintln!("{}: as kept on {}", group.key(), part.date);
            parts.push(part);
            resumed = true;
            continue;
        }
        let tables = measure(group, &client, &s, &run_label).await;
        let markdown = tables.iter().map(|(t, against)| t.markdown(against)).collect::<Vec<_>>().join("\n");
        let part = Part { group, date: report::date(), markdown };
        if let Some(stamp) = &stamp {
            kept::keep(stamp, &part);
        }
        parts.push(part);
    }
    report::report(&heading, &parts, resumed);
}

/// The tables of `group`, each with the name of the peer its ratios are against.
async fn measure(group: Group, client: &kube::Client, s: &Sizes, run_label: &str) -> Vec<(table::Table, &'static str)> {
    match group {
        Group::Peer => rounds::tables(client, s, run_label).await,
        Group::Languages => languages::tables(client, s).await,
        Group::Seeds => {
            let mut tables = seeds::tables(client, s).await;
            tables.push((together::table(client, s).await, "three Go operators"));
            tables
        }
        // The scale table and the curve start operators of their own.
        Group::Scale => vec![
            (scale::scale(client, s, run_label).await, "reference"),
            (scale::curve(client, s, run_label).await, "ReplicaSet controller"),
        ],
    }
}
