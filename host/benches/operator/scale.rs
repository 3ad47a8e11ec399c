//! Scale: many PodSets with three policies loaded (time, memory, a resync with nothing
//! to do, a shadow on every PodSet, the owner-UID index), and the curve of cost against
//! the number of objects, beside the ReplicaSet controller.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use podset_test_support as common;

use crate::at_size::{Alone, isolated_decisions};
use crate::machine::{Resident, component_cpu, component_pid, cpu_seconds, rss};
use crate::metrics::{Decisions, Deferrals, Writes};
use crate::peer::{Heap, Peer, apiserver_metrics, controller_writes, writes_in};
use crate::queueing::{self, Jumped};
use crate::round::{bench_namespace, create_all, drop_namespace, kcm_rate};
use crate::shared::{Shared, Since};
use crate::sizes::{CURVE_REPLICAS, Sizes};
use crate::stats::{lowest_first, median};
use crate::table::{Table, Unit};
use crate::watch::{T, settle};

/// Many PodSets with three policies loaded: time to converge, memory, a resync with
/// nothing to do (writes and CPU), and the memory an extra loaded policy costs.
pub async fn scale(client: &Client, s: &Sizes, label: &str) -> Table {
    let policies: Vec<std::path::PathBuf> =
        ["podset.wasm", "memcached.wasm", "netperf.wasm"].iter().map(|p| common::policy_dir().join(p)).collect();
    let all: Vec<&std::path::Path> = policies.iter().map(|p| p.as_path()).collect();
    let resync = format!("{}s", s.resync.as_secs());

    // Idle, with one policy and with three: what an extra loaded policy costs.
    let mut idle = Vec::new();
    let mut splits = Vec::new();
    for loaded in [&all[..1], &all[..]] {
        let op = common::Operator::spawn_shard("bench-idle", label, loaded, &common::kubeconfig_path(), &[]);
        op.ready().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        idle.push(rss(op.pid()));
        splits.push(Resident::of(op.pid()));
    }
    let per_policy = (idle[1] - idle[0]) / 2.0;
    let (one_policy_split, idle_split) = (splits[0], splits[1]);

    let op =
        common::Operator::spawn_shard("bench-scale", label, &all, &common::kubeconfig_path(), &["--resync", &resync]);
    op.ready().await;
    let ns = bench_namespace(client, "bench-scale", label).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &Peer::PodSet.resource());
    let started = Instant::now();
    let names: Vec<String> = (0..s.scale_objects).map(|i| format!("s-{i:04}")).collect();
    for chunk in names.chunks(200) {
        create_all(&api, Peer::PodSet, chunk, s.replicas, started).await;
    }
    settle(Peer::PodSet, &api, s.scale_objects, i64::from(s.replicas), started).await;
    let converge = started.elapsed();
    let busy = rss(op.pid());
    let busy_split = Resident::of(op.pid());
    let cached = op.sum("podset_cached_objects", "").await;

    // A resync with nothing to do: every PodSet reconciled again, no write.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = op.metrics().await;
    let (writes_before, requests_before) = (common::cluster_writes(&m), Writes::of(&m));
    let reconciles_before = op.sum("podset_reconciles_total", "").await;
    let decisions_before = Decisions::of(&op.metrics().await);
    let cpu_before = cpu_seconds(op.pid());
    tokio::time::sleep(s.resync + Duration::from_secs(5)).await;
    let m = op.metrics().await;
    let writes = common::cluster_writes(&m) - writes_before;
    let resync_requests = Writes::of(&m).since(&requests_before, |r| !common::NOT_CLUSTER_WRITES.contains(&r));
    let reconciled = op.sum("podset_reconciles_total", "").await - reconciles_before;
    let cpu = cpu_seconds(op.pid()) - cpu_before;
    // The same decisions as in the rounds (a few pods), with the control plane idle.
    let resync_decisions = Decisions::of(&op.metrics().await).minus(&decisions_before);
    let alone = isolated_decisions(&common::read_policy("podset.wasm"), s.replicas as usize);

    // A shadow of the same module on every PodSet: loading it re-queues them all, so
    // each is decided again, live and shadow. Memory and writes, apart from the
    // shadow's own throttled status.
    // The writes a decision can cause: pods, and PodSets (metadata and status).
    const DECIDED: [&str; 3] = ["pods", "podsets", "podsets/status"];
    let decided_writes = |m: &str| {
        DECIDED
            .iter()
            .map(|r| common::sum_metric(m, "podset_api_writes_total", &format!(r#"resource="{r}""#)))
            .sum::<f64>()
    };
    let m = op.metrics().await;
    let (writes_before, events_before) =
        (decided_writes(&m), common::sum_metric(&m, "podset_api_writes_total", r#"resource="events""#));
    let requests_before = Writes::of(&m);
    let status_before = op.sum("podset_api_writes_total", r#"resource="reconcilepolicies"#).await;
    let podset = common::read_policy("podset.wasm");
    common::publish_shadow(client, &ns, "shadow", "shadow-module", &podset, None).await;
    common::policy_loaded(client, &ns, "shadow", &op).await;
    let label = format!(r#"policy="{ns}/shadow""#);
    let shadowed = common::eventually("the shadow to decide for every PodSet", T, || async {
        let n = op.sum("podset_shadow_decisions_total", &label).await;
        (n >= s.scale_objects as f64).then_some(n)
    })
    .await;
    tokio::time::sleep(podset_host::sources::cluster::SHADOW_REPORT + Duration::from_secs(1)).await;
    let shadow_rss = rss(op.pid());
    let shadow_split = Resident::of(op.pid());
    let status_writes = op.sum("podset_api_writes_total", r#"resource="reconcilepolicies"#).await - status_before;
    let m = op.metrics().await;
    let shadow_writes = decided_writes(&m) - writes_before;
    let shadow_requests = Writes::of(&m).since(&requests_before, |r| DECIDED.contains(&r));
    let events = common::sum_metric(&m, "podset_api_writes_total", r#"resource="events""#) - events_before;
    drop(op);
    let (indexed, scanned) = children_lookup(client, &ns, &api).await;
    drop_namespace(client, &ns).await;

    let figures = Scaled {
        converge,
        busy,
        idle_split,
        one_policy_split,
        busy_split,
        cached,
        per_policy,
        reconciled,
        writes,
        resync_requests,
        cpu,
        alone,
        resync_decisions,
        shadowed,
        shadow_rss,
        shadow_split,
        status_writes,
        events,
        shadow_writes,
        shadow_requests,
        indexed,
        scanned,
    };
    scale_table(s, &figures)
}

/// What [`scale`] measured.
pub struct Scaled {
    pub converge: Duration,
    /// RSS (MiB): converged, and per extra loaded policy.
    pub busy: f64,
    /// Where the memory lies: idle with the three policies, converged, after the shadow.
    pub idle_split: Resident,
    /// Idle with one policy loaded: what the two more grew.
    pub one_policy_split: Resident,
    pub busy_split: Resident,
    pub shadow_split: Resident,
    /// The objects the caches held, converged.
    pub cached: f64,
    pub per_policy: f64,
    /// A resync with nothing to do: reconciles, writes, CPU seconds.
    pub reconciled: f64,
    pub writes: f64,
    /// Those writes by verb and resource ("none" if none).
    pub resync_requests: String,
    pub cpu: f64,
    /// The module alone, and the decisions of that resync.
    pub alone: Alone,
    pub resync_decisions: Decisions,
    /// A shadow on every PodSet: its decisions, the RSS after, the ReconcilePolicy's
    /// status writes and Events, the writes to pods and PodSets.
    pub shadowed: f64,
    pub shadow_rss: f64,
    pub status_writes: f64,
    pub events: f64,
    pub shadow_writes: f64,
    /// Those writes by verb and resource ("none" if none).
    pub shadow_requests: String,
    /// A parent's children: by index, and by a scan of the namespace.
    pub indexed: Duration,
    pub scanned: Duration,
}

/// The table of what [`scale`] measured.
pub fn scale_table(s: &Sizes, f: &Scaled) -> Table {
    let mut t = Table::new(&format!("Scale: {} PodSets × {} replicas, 3 policies loaded", s.scale_objects, s.replicas));
    t.alone("time until every PodSet reports all replicas available", f.converge.as_secs_f64(), Unit::Seconds, None);
    t.alone("operator RSS, converged", f.busy, Unit::MiB, Some(60.0));
    t.because(&grown(&f.busy_split, &f.idle_split, "idle"));
    // The measured reason beside a miss: where the memory lies, and what the caches cost.
    t.split("… of it: the heap and stacks / the Wasm instance pool / the binary and libraries", &f.busy_split);
    t.split("… the same, idle with the three policies loaded", &f.idle_split);
    t.alone(
        &format!("… the heap grown since idle, per cached object ({} objects cached)", f.cached),
        (f.busy_split.heap - f.idle_split.heap) * 1024.0 / f.cached.max(1.0),
        Unit::KiB,
        None,
    );
    t.alone("RSS per extra loaded policy (idle, 3 policies vs 1)", f.per_policy, Unit::MiB, Some(2.0));
    t.because(&grown(&f.idle_split, &f.one_policy_split, "one policy"));
    let reconciled = f.reconciled;
    t.alone(
        &format!("writes during a resync with nothing to do ({reconciled} reconciles)"),
        f.writes,
        Unit::Count,
        Some(0.0),
    );
    t.because(&format!("by request, {}", f.resync_requests));
    t.alone("CPU of that resync", f.cpu, Unit::Seconds, None);
    // Beside the busy rounds' figure: how much of the gap to the module alone is the
    // operator's, and how much a machine whose cores the control plane fills.
    t.decisions(
        "a decision of that resync, the machine otherwise quiet: alone (p50) vs inside the operator (mean)",
        &f.alone,
        &f.resync_decisions,
        None,
    );
    let (shadowed, status_writes, events) = (f.shadowed, f.status_writes, f.events);
    t.alone(
        &format!("operator RSS after a shadow of the same module decided for every PodSet ({shadowed} decisions)"),
        f.shadow_rss,
        Unit::MiB,
        Some(60.0),
    );
    // Converged above the goal already, the shadow's growth is not the reason: said first.
    t.because(&format!("{} converged; {}", Unit::MiB.show(f.busy), grown(&f.shadow_split, &f.busy_split, "then")));
    t.split("… of it: the heap and stacks / the Wasm instance pool / the binary and libraries", &f.shadow_split);
    t.alone(
        &format!(
            "writes to pods and PodSets those decisions caused (the ReconcilePolicy's: {status_writes} to its status, \
             {events} Events)"
        ),
        f.shadow_writes,
        Unit::Count,
        Some(0.0),
    );
    t.because(&format!("by request, {}", f.shadow_requests));
    t.ratio(
        &format!(
            "a parent's children out of {} cached pods: by owner-UID index vs a scan of the namespace (peer column)",
            s.scale_objects * s.replicas as usize
        ),
        f.scanned.as_secs_f64() * 1e6,
        f.indexed.as_secs_f64() * 1e6,
        Unit::Micros,
        None,
    );
    t
}

/// How cost grows with work: at each size of the curve, PodSets with a fresh operator
/// (one policy) and ReplicaSets with the controller manager, one after the other,
/// [`Sizes::curve_rounds_at`] times (who goes first alternating).
pub async fn curve(client: &Client, s: &Sizes, label: &str) -> Table {
    let policy = common::policy_dir().join("podset.wasm");
    // The peer at the rate the rounds give it (`BENCH_SCALE_ONLY` runs no rounds first).
    kcm_rate(1000, 1000);
    let mut points = Vec::new();
    let mut jumped = None;
    for &n in &s.curve {
        let rounds = s.curve_rounds_at(n);
        let mut point =
            CurvePoint { n, peer: Vec::new(), ours: Vec::new(), deferred: Vec::new(), kcm_rss: 0.0, ours_rss: 0.0 };
        for r in 0..rounds {
            let mut order = [Peer::PodSet, Peer::ReplicaSet];
            if r % 2 == 1 {
                order.reverse();
            }
            for peer in order {
                if peer == Peer::ReplicaSet {
                    let kcm = component_pid("kube-controller-manager");
                    let (figures, ns) = curve_point(client, peer, kcm, label, n).await;
                    drop_namespace(client, &ns).await;
                    point.kcm_rss = point.kcm_rss.max(rss(kcm));
                    eprintln!("curve {n}, round {}: ReplicaSet {figures}", r + 1);
                    point.peer.push(figures);
                    continue;
                }
                let mut op =
                    common::Operator::spawn_shard("bench-curve", label, &[&policy], &common::kubeconfig_path(), &[]);
                op.ready().await;
                let before = Deferrals::of(&op.metrics().await);
                let (figures, ns) = curve_point(client, peer, op.pid(), label, n).await;
                let deferred = Deferrals::of(&op.metrics().await).minus(&before);
                point.ours_rss = point.ours_rss.max(rss(op.pid()));
                // At the largest size, once: a new PodSet while a restarted operator
                // re-decides them all.
                if Some(&n) == s.curve.last() && jumped.is_none() {
                    let j = queueing::new_parent_during_sweep(client, &mut op, &ns, n).await;
                    eprintln!("curve {n}: a new PodSet during the sweep: {j:?}");
                    jumped = Some(j);
                }
                drop(op);
                drop_namespace(client, &ns).await;
                eprintln!(
                    "curve {n}, round {}: PodSet {figures}; reconciles deferred: {} behind a status write, {} after a \
                     conflict",
                    r + 1,
                    deferred.behind,
                    deferred.conflict
                );
                point.ours.push(figures);
                point.deferred.push(deferred);
            }
        }
        eprintln!("curve {n}: RSS {:.1} vs {:.1} MiB", point.kcm_rss, point.ours_rss);
        points.push(point);
    }
    curve_table(s, &points, jumped)
}

/// One size of the curve: `n` objects of each, per round (seconds to converge, writes
/// per object, API server CPU seconds per object), and the peak RSS of the controller
/// manager and of ours.
pub struct CurvePoint {
    pub n: usize,
    pub peer: Vec<CurveRound>,
    pub ours: Vec<CurveRound>,
    /// Our reconciles cut short in each of our rounds.
    pub deferred: Vec<Deferrals>,
    pub kcm_rss: f64,
    pub ours_rss: f64,
}

/// A row of a point of the curve: its label, what it reads of a round, how it is written.
type CurveRow = (&'static str, fn(&CurveRound) -> f64, Unit);

/// The rows of each point of the curve beneath its time, the peer's median against ours.
const COMPARED: &[CurveRow] = &[
    ("API writes per object", |p| p.writes, Unit::Count),
    ("API server CPU per object", |p| p.apiserver_cpu * 1e3, Unit::MsCpu),
    ("… memory it allocated per object", |p| p.apiserver_heap.allocated / 1e6, Unit::MB),
    ("… its garbage collector's CPU per object", |p| p.apiserver_heap.gc_cpu * 1e3, Unit::MsCpu),
    // The measured reason beside a miss: what the controller itself cost the two cores …
    (
        "controller CPU per object (ours: the operator; theirs: the whole controller manager)",
        |p| p.controller_cpu * 1e3,
        Unit::MsCpu,
    ),
    // … and what the API server made of the steps both go through.
    ("API server answering the scheduler's bindings (median)", |p| p.shared.bindings, Unit::Millis),
    ("… the simulated node's pod status writes", |p| p.shared.node_writes, Unit::Millis),
    ("… pod writes waiting for an answer at once (mean)", |p| p.shared.waiting, Unit::Count),
    ("… pod writes answered per second", |p| p.shared.answered, Unit::Count),
];

/// The table of the curve's points, and of the new PodSet created during the sweep at
/// the largest.
pub fn curve_table(s: &Sizes, points: &[CurvePoint], jumped: Option<Jumped>) -> Table {
    let mut t = Table::new(&format!(
        "Scale curve: {} objects × {CURVE_REPLICAS} pods, {} (medians; RSS: the operator vs the whole controller \
         manager, peaks)",
        s.curve.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
        s.curve_rounds_said()
    ));
    for CurvePoint { n, peer, ours, deferred, kcm_rss, ours_rss } in points {
        let at = |what: &str| format!("{n} objects: {what}");
        let med = |v: &[CurveRound], f: fn(&CurveRound) -> f64| median(v, &f);
        let time = |p: &CurveRound| p.converge;
        t.ratio(
            &at("time until every object reports all replicas available"),
            med(peer, time),
            med(ours, time),
            Unit::Seconds,
            Some(1.0),
        );
        t.each(
            &lowest_first(peer.iter().map(time)),
            &lowest_first(ours.iter().map(time)),
            &lowest_first(peer.iter().zip(ours).map(|(p, o)| o.converge / p.converge)),
            Unit::Seconds,
        );
        for (what, f, unit) in COMPARED {
            t.ratio(&at(what), med(peer, *f), med(ours, *f), *unit, None);
        }
        t.ratio(&at("RSS"), *kcm_rss, *ours_rss, Unit::MiB, None);
        // Each deferral decides a parent 50 or 200 ms later than it could have been: beside
        // the time, how often that happened.
        t.alone(
            &at("our reconciles cut short per round: the cache behind our own status write (again in 50 ms)"),
            median(deferred, &|d: &Deferrals| d.behind),
            Unit::Count,
            None,
        );
        t.alone(
            &at("… the parent changed under the decision (again in 200 ms)"),
            median(deferred, &|d: &Deferrals| d.conflict),
            Unit::Count,
            None,
        );
    }
    if let Some(Jumped { first_pod, before, swept, sweep }) = jumped {
        t.alone(
            &format!(
                "a new PodSet's first pod, created as a restarted operator re-decides {swept} converged ones \
                 ({before} of them decided by then; all in {:.2} s)",
                sweep.as_secs_f64()
            ),
            first_pod.as_secs_f64(),
            Unit::Seconds,
            Some(0.5),
        );
    }
    t
}

/// One round of one contender at one size of the curve, per object where it says so.
#[derive(Clone, Copy, Debug)]
pub struct CurveRound {
    /// Seconds until every object reported all replicas available.
    pub converge: f64,
    /// Seconds until the first object did, and half of them: beside `converge`, whether a
    /// slower round was late throughout or in its last few objects (printed with each round).
    pub first: f64,
    pub half: f64,
    pub writes: f64,
    /// CPU seconds per object of the API server, and of the controller: the operator, or
    /// the whole controller manager for the ReplicaSets. With both cores busy, time
    /// follows the CPU the cluster spends: this row says whose.
    pub apiserver_cpu: f64,
    pub controller_cpu: f64,
    /// What the API server allocated and spent collecting, per object.
    pub apiserver_heap: Heap,
    /// How fast the API server answered the steps shared with the scheduler and the node.
    pub shared: Shared,
}

impl std::fmt::Display for CurveRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "converged in {:.2} s (the first object at {:.2} s, half of them at {:.2} s), {:.2} writes, API server \
             {:.1} ms CPU ({:.2} MB allocated, {:.1} ms collecting), controller {:.1} ms CPU per object; {}",
            self.converge,
            self.first,
            self.half,
            self.writes,
            self.apiserver_cpu * 1e3,
            self.apiserver_heap.allocated / 1e6,
            self.apiserver_heap.gc_cpu * 1e3,
            self.controller_cpu * 1e3,
            self.shared
        )
    }
}

/// `n` objects of `peer` × [`CURVE_REPLICAS`] in a fresh namespace, created 200 at a
/// time, reconciled by the process `controller`; and the namespace, for the caller to
/// drop.
async fn curve_point(client: &Client, peer: Peer, controller: u32, label: &str, n: usize) -> (CurveRound, String) {
    let ns = bench_namespace(client, "bench-curve", label).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &peer.resource());
    let names: Vec<String> = (0..n).map(|i| format!("c-{i:05}")).collect();
    // Read before the API server's CPU: the read costs it some.
    let metrics_before = apiserver_metrics(client).await;
    let (before, heap_before) = (writes_in(&metrics_before), Heap::of(&metrics_before));
    let (apiserver_before, controller_before) = (component_cpu("kube-apiserver"), cpu_seconds(controller));
    let audit = Since::now();
    let started = Instant::now();
    for chunk in names.chunks(200) {
        create_all(&api, peer, chunk, CURVE_REPLICAS, started).await;
    }
    let settled = settle(peer, &api, n, i64::from(CURVE_REPLICAS), started).await;
    let converge = started.elapsed().as_secs_f64();
    let mut each: Vec<f64> = settled.values().map(Duration::as_secs_f64).collect();
    each.sort_by(f64::total_cmp);
    let at = |share: f64| each.get((share * each.len() as f64) as usize).or(each.last()).copied().unwrap_or(converge);
    // Writes that trail the last status count too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics_after = apiserver_metrics(client).await;
    let writes: f64 = controller_writes(peer, &before, &writes_in(&metrics_after)).iter().sum();
    let per = |spent: f64| spent / n as f64;
    let round = CurveRound {
        converge,
        first: at(0.0),
        half: at(0.5),
        writes: per(writes),
        apiserver_cpu: per(component_cpu("kube-apiserver") - apiserver_before),
        apiserver_heap: Heap::of(&metrics_after).per_object_since(&heap_before, n),
        controller_cpu: per(cpu_seconds(controller) - controller_before),
        shared: Shared::of(&audit.entries(), &ns),
    };
    (round, ns)
}

/// The effect of the owner-UID index: the operator's own child store, filled with
/// the pods of `ns` as the API server lists them, asked for every PodSet's pods by
/// index and by a scan of the namespace. Mean per lookup, `(indexed, scanned)`.
async fn children_lookup(client: &Client, ns: &str, podsets: &Api<DynamicObject>) -> (Duration, Duration) {
    use podset_host::kubernetes::object::Object;
    use podset_host::kubernetes::store::{ObjectStore, controller_uid};
    let pods: Api<Object> = Api::namespaced_with(
        client.clone(),
        ns,
        &std::sync::Arc::new(ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))),
    );
    let store = ObjectStore::default();
    store.apply(kube::runtime::watcher::Event::Init);
    for pod in pods.list(&Default::default()).await.expect("list pods").items {
        store.apply(kube::runtime::watcher::Event::InitApply(pod));
    }
    store.apply(kube::runtime::watcher::Event::InitDone);
    let uids: Vec<String> =
        podsets.list(&Default::default()).await.expect("list").items.iter().filter_map(|p| p.uid()).collect();
    let time = |f: &dyn Fn(&str) -> usize| {
        let t = Instant::now();
        let found: usize = uids.iter().map(|u| f(u)).sum();
        assert_eq!(found, store.len(), "every pod found once");
        t.elapsed() / u32::try_from(uids.len().max(1)).unwrap_or(u32::MAX)
    };
    let indexed = time(&|uid| store.controlled_by(uid).len());
    let scanned = time(&|uid| store.in_namespace(ns, |o| controller_uid(o) == Some(uid)).len());
    (indexed, scanned)
}

/// What of `after` grew since `before` (`since`), part by part, for a memory row that
/// missed: "since idle, the heap +32.7 MiB", or that nothing did.
fn grown(after: &Resident, before: &Resident, since: &str) -> String {
    let parts = [
        ("the heap", after.heap, before.heap),
        ("the instance pool", after.pool, before.pool),
        ("the binary and libraries", after.files, before.files),
    ];
    let grown: Vec<String> = parts
        .into_iter()
        .filter(|(_, after, before)| after > before)
        .map(|(part, after, before)| format!("{part} {}", Unit::MiB.show_signed(after - before)))
        .collect();
    if grown.is_empty() {
        format!("nothing grew since {since}")
    } else {
        format!("since {since}, {}", grown.join(", "))
    }
}
