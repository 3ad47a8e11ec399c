//! The tables of the alternating rounds: PodSets against the ReplicaSet controller, the
//! Wasm policy against the same logic linked in natively, and the operator with a shadow
//! against it without.

use crate::round::Round;
use crate::sizes::Sizes;
use crate::stats::{median, percentile, secs};
use crate::table::{Read, Row, Table, Unit};

const VERSUS_REPLICASETS: &[Row] = &[
    Row::medians("time until every object reports all replicas available", |r| secs(r.converge), Unit::Seconds)
        .goal(1.0)
        .each_round(),
    Row::medians("per object, p50", |r| secs(percentile(&r.per_object, 0.5)), Unit::Seconds),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    Row::medians("the API server accepting all the creates", |r| secs(r.last_created), Unit::Seconds),
    Row::medians("per object from its own create, p50", |r| secs(percentile(&r.after_create, 0.5)), Unit::Seconds),
    Row::medians("per object from its own create, p99", |r| secs(percentile(&r.after_create, 0.99)), Unit::Seconds),
    Row::medians("API writes per object (apiserver_request_total)", |r| r.writes_per_object, Unit::Count).goal(1.0),
    // Where the writes go, in the order of `Peer::writes`: the parent's own writes
    // include the create by the benchmark.
    Row::medians("… of which pods", |r| r.writes_by_resource[0], Unit::Count),
    Row::medians("… of which the parent (its create included)", |r| r.writes_by_resource[1], Unit::Count),
    Row::medians("… of which the parent's status", |r| r.writes_by_resource[2], Unit::Count),
    Row::medians("… of which Events", |r| r.writes_by_resource[3], Unit::Count),
    // What the writes cost the control plane: with about as many writes, a ratio above
    // the writes' says each of ours costs more.
    Row::medians("API server CPU per object while converging", |r| r.apiserver_cpu * 1e3, Unit::MsCpu),
    Row::medians("… memory it allocated per object", |r| r.apiserver_heap.allocated / 1e6, Unit::MB),
    Row::medians("… its garbage collector's CPU per object", |r| r.apiserver_heap.gc_cpu * 1e3, Unit::MsCpu),
    Row::medians("etcd CPU per object while converging", |r| r.etcd_cpu * 1e3, Unit::MsCpu),
    Row::medians(
        "controller CPU per object while converging (the peer: the whole controller manager)",
        |r| r.controller_cpu * 1e3,
        Unit::MsCpu,
    ),
    Row::ours("… the controller manager's beside the operator", |r| r.kcm_beside_cpu * 1e3, Unit::MsCpu),
    Row::medians("scheduler CPU per object while converging", |r| r.scheduler_cpu * 1e3, Unit::MsCpu),
    Row::medians("simulated node CPU per object while converging", |r| r.node_cpu * 1e3, Unit::MsCpu),
    // The sum of everything, the benchmark itself included: its ratio against the time's
    // says whether the time is the work.
    Row::medians("the machine's CPU per object while converging", |r| r.machine_cpu * 1e3, Unit::MsCpu),
    Row::medians("… its cores idle until the last converged, %", |r| r.idle * 100.0, Unit::Percent),
    Row::medians("scale {replicas} → 1, all objects", |r| secs(r.down), Unit::Seconds).goal(1.0).each_round(),
    Row::medians(
        "… until the removed pods were gone, when the scale up starts",
        |r| secs(r.down_pods_gone),
        Unit::Seconds,
    ),
    Row::medians("scale 1 → {replicas}, all objects", |r| secs(r.up), Unit::Seconds).goal(1.0).each_round(),
    // What the scale up waits for besides the controller's status: its pods made,
    // bound, started and ready on the node. A later last pod with a costlier API server
    // says the controller's writes slowed everyone's.
    Row::medians("… until the last new pod was ready", |r| secs(r.up_pods_ready), Unit::Seconds),
    Row::medians("… API server CPU per object while scaling up", |r| r.up_apiserver_cpu * 1e3, Unit::MsCpu),
    // The measured reason beside a slower convergence: the API server answering the
    // steps both controllers' objects go through (audit log, medians while converging).
    Row::medians("API server answering the scheduler's bindings (median)", |r| r.shared.bindings, Unit::Millis)
        .each_round(),
    Row::medians("… the simulated node's pod status writes", |r| r.shared.node_writes, Unit::Millis).each_round(),
    Row::medians("… the controller's pod creates", |r| r.shared.pod_creates, Unit::Millis),
    // Little's law on those pod writes: as many answered a second with more waiting at
    // once is a longer queue at the API server, not a slower etcd (shared.rs).
    Row::medians("… those pod writes waiting for an answer at once (mean)", |r| r.shared.waiting, Unit::Count),
    Row::medians("… those pod writes answered per second", |r| r.shared.answered, Unit::Count),
    // What deleting a namespace of them costs: a pod the namespace controller removes
    // prompts a replacement, which the API server refuses.
    Row::medians(
        "pod creates refused per object while their namespace is deleted",
        |r| r.refused_on_delete,
        Unit::Count,
    ),
];

/// PodSet against the ReplicaSet controller.
pub fn versus_replicasets(s: &Sizes, peer: &[Round], ours: &[Round], default_rate: &Round) -> Table {
    let mut t = Table::new(&format!(
        "PodSet vs the ReplicaSet controller: {} objects × {} replicas, {} alternating rounds (medians)",
        s.objects, s.replicas, s.peer_rounds
    ));
    t.rows(VERSUS_REPLICASETS, peer, ours, s);
    // The peer at its default client rate ran once.
    t.ratio(
        "converge, against the controller manager at its default 20 QPS",
        secs(default_rate.converge),
        median(ours, &|r| secs(r.converge)),
        Unit::Seconds,
        None,
    );
    t.ratio(
        "writes per object, against it at 20 QPS",
        default_rate.writes_per_object,
        median(ours, &|r| r.writes_per_object),
        Unit::Count,
        None,
    );
    t
}

const NATIVE_VS_WASM: &[Row] = &[
    Row::medians("time until every PodSet reports all replicas available", |r| secs(r.converge), Unit::Seconds)
        .goal(1.05),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    Row::medians("mean decision inside the operator", |r| r.split.mean_decision() * 1e6, Unit::Micros),
    Row::medians("decisions' share of reconcile time, %", |r| r.split.decision_share() * 100.0, Unit::Count),
];

/// The same operator with guest-podset linked in natively, against its .wasm.
pub fn native_vs_wasm(s: &Sizes, native: &[Round], ours: &[Round]) -> Table {
    let mut t = Table::new(&format!(
        "Same logic, native vs Wasm: guest-podset linked into the operator vs its .wasm, {} × {}, {} alternating rounds (medians)",
        s.objects, s.replicas, s.peer_rounds
    ));
    t.rows(NATIVE_VS_WASM, native, ours, s);
    t
}

const WITH_A_SHADOW: &[Row] = &[
    Row::medians("time until every PodSet reports all replicas available", |r| secs(r.converge), Unit::Seconds)
        .goal(1.1),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    // The total, without a goal: the PodSets' status writes fold by timing, so it moves
    // with nothing changed (2026-11-29 18:31, writes per PodSet: with a shadow 17.2–17.9,
    // without 17.0–17.6, the native contender 17.0–17.4); the rows beneath say where.
    Row::medians("API writes per object (pods, PodSets, their status, Events)", |r| r.writes_per_object, Unit::Count)
        .each_round(),
    Row::medians("… of which pods", |r| r.writes_by_resource[0], Unit::Count),
    Row::medians("… of which the PodSet (its create included)", |r| r.writes_by_resource[1], Unit::Count),
    Row::medians("… of which the PodSet's status", |r| r.writes_by_resource[2], Unit::Count),
    Row::medians("… of which Events", |r| r.writes_by_resource[3], Unit::Count),
    // What a shadow must never add: a write to a child or to its parent.
    Row::medians(
        "writes to pods and PodSets, their status aside (a shadow's would be here)",
        |r| r.writes_by_resource[0] + r.writes_by_resource[1],
        Unit::Count,
    )
    .goal(1.0),
    Row::ours("ReconcilePolicy status writes per round (the throttled tally)", |r| r.shadow.status_writes, Unit::Count),
    Row::ours("shadow decisions per round", |r| r.shadow.decisions, Unit::Count),
    Row::ours("… of which agreed, %", |r| 100.0 * r.shadow.agreed / r.shadow.decisions.max(1.0), Unit::Count),
    Row::ours("… dropped (queue full)", |r| r.shadow.dropped, Unit::Count),
    // The shadow's cost per decision against the live decision's, in the same rounds.
    Row {
        what: "one decision in the same rounds: live vs shadow (means)",
        read: Read::Within(|r| r.split.mean_decision() * 1e6, |r| r.shadow.mean() * 1e6),
        unit: Unit::Micros,
        goal: None,
        each_round: false,
    },
];

/// The operator with a shadow of the same module, against it without: the shadowed
/// rounds are ours.
pub fn with_a_shadow(s: &Sizes, ours: &[Round], shadowed: &[Round]) -> Table {
    let mut t = Table::new(&format!(
        "Shadow: {} × {}, a shadow of the same module beside every decision vs none, {} alternating rounds (medians)",
        s.objects, s.replicas, s.peer_rounds
    ));
    t.rows(WITH_A_SHADOW, ours, shadowed, s);
    t
}
