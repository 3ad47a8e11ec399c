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
//! - **Languages**: the PodSet policy in TypeScript and in Go against the same in Rust,
//!   each in an operator of its own, in alternating rounds.
//! - **Scale**: many PodSets with three policies loaded: time, memory, the writes
//!   and CPU of a resync with nothing to do, memory per extra policy.
//!
//! `BENCH_QUICK=1` runs every group small and once (`make test` does, so that they
//! cannot rot); it checks that they run, not how fast. `BENCH_ROUNDS_ONLY=1` stops
//! after the alternating rounds and prints their tables without writing them (about
//! 12 minutes instead of 38): for trying a change to convergence, or an operator
//! setting, which the operators inherit from the environment
//! (`RECONCILE_DEBOUNCE=100ms BENCH_ROUNDS_ONLY=1 make bench`).

use podset_test_support as common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use podset_host::sandbox::Digest;
use serde_json::json;

const T: Duration = Duration::from_secs(600);

/// The sizes of one run of the benchmark.
struct Sizes {
    objects: usize,
    replicas: i32,
    rounds: usize,
    scale_objects: usize,
    resync: Duration,
    /// The scale curve: objects at each point, of `CURVE_REPLICAS` pods.
    curve: &'static [usize],
}

/// Pods per object on the scale curve.
const CURVE_REPLICAS: i32 = 2;

impl Sizes {
    fn from_env() -> (Sizes, Run) {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
        let run = match (set("BENCH_QUICK"), set("BENCH_ROUNDS_ONLY"), set("BENCH_SCALE_ONLY")) {
            (true, _, _) => Run::Quick,
            (false, true, _) => Run::RoundsOnly,
            (false, false, true) => Run::ScaleOnly,
            (false, false, false) => Run::Full,
        };
        let sizes = if run == Run::Quick {
            Sizes {
                objects: 10,
                replicas: 2,
                rounds: 1,
                scale_objects: 20,
                resync: Duration::from_secs(5),
                curve: &[10, 20],
            }
        } else {
            Sizes {
                objects: 200,
                replicas: 5,
                rounds: 3,
                scale_objects: 1000,
                resync: Duration::from_secs(30),
                curve: &[100, 1000, 5000],
            }
        };
        (sizes, run)
    }
}

/// What this run of the benchmark is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Full,
    /// `BENCH_QUICK=1`: every group, small.
    Quick,
    /// `BENCH_ROUNDS_ONLY=1`: the alternating rounds only.
    RoundsOnly,
    /// `BENCH_SCALE_ONLY=1`: the scale table and the curve only.
    ScaleOnly,
}

impl Run {
    /// What the results' heading says of the run.
    fn note(self) -> &'static str {
        match self {
            Run::Full => "",
            Run::Quick => " (BENCH_QUICK=1: a smoke run, sizes not meaningful)",
            Run::RoundsOnly => " (BENCH_ROUNDS_ONLY=1: the alternating rounds only)",
            Run::ScaleOnly => " (BENCH_SCALE_ONLY=1: the scale table and the curve only)",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    ReplicaSet,
    PodSet,
}

impl Peer {
    fn resource(self) -> ApiResource {
        match self {
            Peer::ReplicaSet => ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "ReplicaSet")),
            Peer::PodSet => ApiResource::from_gvk(&GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodSet")),
        }
    }

    /// The object, with the pod template every peer runs (on the simulated node).
    fn object(self, name: &str, replicas: i32) -> DynamicObject {
        let ps = common::podset(name, replicas);
        let mut template = serde_json::to_value(ps.spec.template).expect("template");
        let value = match self {
            Peer::PodSet => json!({
                "apiVersion": "app.example.com/v1alpha1", "kind": "PodSet",
                "metadata": { "name": name },
                "spec": { "replicas": replicas, "template": template }
            }),
            Peer::ReplicaSet => {
                template["metadata"]["labels"]["bench-rs"] = json!(name);
                // The security context the operator gives a PodSet's pods, which the
                // namespace's restricted Pod Security admission requires of these too.
                if let Some(spec) = template.get_mut("spec") {
                    podset_host::reconcile::restrict::pod_spec("spec", spec, Default::default())
                        .expect("the template is restricted");
                }
                json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": { "name": name },
                    "spec": { "replicas": replicas, "selector": { "matchLabels": { "bench-rs": name } }, "template": template }
                })
            }
        };
        serde_json::from_value(value).expect("object")
    }

    /// Whether `o`'s status says it has exactly `replicas`, all available, for its
    /// current spec.
    fn settled(self, o: &DynamicObject, replicas: i64) -> bool {
        let st = &o.data["status"];
        let current = st["observedGeneration"].as_i64() == o.metadata.generation;
        let count = match self {
            Peer::ReplicaSet => st["replicas"].as_i64(),
            Peer::PodSet => st["podNames"].as_array().map(|a| a.len() as i64),
        };
        current && count == Some(replicas) && st["availableReplicas"].as_i64() == Some(replicas)
    }

    /// The resources whose writes are the controller's own (not the scheduler's
    /// bindings, not the node's pod status).
    fn writes(self) -> [(&'static str, &'static str); 4] {
        let parent = match self {
            Peer::ReplicaSet => "replicasets",
            Peer::PodSet => "podsets",
        };
        [("pods", ""), (parent, ""), (parent, "status"), ("events", "")]
    }
}

/// The API server's own count of write requests, by (resource, subresource).
async fn apiserver_writes(client: &Client) -> HashMap<(String, String), f64> {
    let req = http::Request::get("/metrics").body(Vec::new()).expect("request");
    let text = client.request_text(req).await.expect("the API server's /metrics");
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        let label = |k: &str| {
            let from = labels.find(&format!("{k}=\""))? + k.len() + 2;
            Some(labels[from..].split('"').next()?.to_string())
        };
        let verb = label("verb").unwrap_or_default();
        if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "DELETE" | "DELETECOLLECTION") {
            continue;
        }
        let key = (label("resource").unwrap_or_default(), label("subresource").unwrap_or_default());
        *out.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// The controller's writes between `before` and `after`, in the order of [`Peer::writes`].
fn controller_writes(
    peer: Peer,
    before: &HashMap<(String, String), f64>,
    after: &HashMap<(String, String), f64>,
) -> [f64; 4] {
    peer.writes().map(|(r, s)| {
        let k = (r.to_string(), s.to_string());
        after.get(&k).unwrap_or(&0.0) - before.get(&k).unwrap_or(&0.0)
    })
}

/// Who reconciles a round's objects.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Who {
    ReplicaSet,
    /// The operator, guest-podset in the sandbox.
    Wasm,
    /// The same operator build, guest-podset linked in natively.
    Native,
    /// The operator, guest-podset in the sandbox, with a shadow of the same module.
    Shadowed,
}

impl Who {
    fn peer(self) -> Peer {
        match self {
            Who::ReplicaSet => Peer::ReplicaSet,
            Who::Wasm | Who::Native | Who::Shadowed => Peer::PodSet,
        }
    }
}

/// Where an operator's reconcile time went, from its own metrics (all sums, seconds).
#[derive(Clone, Copy, Default)]
struct Split {
    decisions: f64,
    decision_seconds: f64,
    reconcile_seconds: f64,
}

impl Split {
    fn of(m: &str) -> Split {
        Split {
            decisions: common::sum_metric(m, "podset_policy_decision_duration_seconds_count", ""),
            decision_seconds: common::sum_metric(m, "podset_policy_decision_duration_seconds_sum", ""),
            reconcile_seconds: common::sum_metric(m, "podset_reconcile_duration_seconds_sum", ""),
        }
    }

    fn minus(&self, before: &Split) -> Split {
        Split {
            decisions: self.decisions - before.decisions,
            decision_seconds: self.decision_seconds - before.decision_seconds,
            reconcile_seconds: self.reconcile_seconds - before.reconcile_seconds,
        }
    }

    fn mean_decision(&self) -> f64 {
        self.decision_seconds / self.decisions.max(1.0)
    }

    /// The decisions' share of the time spent reconciling.
    fn decision_share(&self) -> f64 {
        self.decision_seconds / self.reconcile_seconds.max(f64::MIN_POSITIVE)
    }
}

/// An operator's decisions about a few pods (1-9, the rounds' size), from its metrics:
/// count, wall and CPU seconds.
#[derive(Clone, Copy, Default)]
struct Decisions {
    count: f64,
    wall: f64,
    cpu: f64,
}

impl Decisions {
    fn of(metrics: &str) -> Decisions {
        let few = r#"children="1-9""#;
        Decisions {
            count: common::sum_metric(metrics, "podset_policy_decision_duration_seconds_count", few),
            wall: common::sum_metric(metrics, "podset_policy_decision_duration_seconds_sum", few),
            cpu: common::sum_metric(metrics, "podset_policy_decision_cpu_seconds_sum", few),
        }
    }

    fn minus(&self, before: &Decisions) -> Decisions {
        Decisions { count: self.count - before.count, wall: self.wall - before.wall, cpu: self.cpu - before.cpu }
    }

    fn plus(&self, other: &Decisions) -> Decisions {
        Decisions { count: self.count + other.count, wall: self.wall + other.wall, cpu: self.cpu + other.cpu }
    }

    fn mean_wall(&self) -> f64 {
        self.wall / self.count.max(1.0)
    }

    fn mean_cpu(&self) -> f64 {
        self.cpu / self.count.max(1.0)
    }
}

/// One round: create, converge, scale to 1, back up.
struct Round {
    converge: Duration,
    per_object: Vec<Duration>,
    /// The same from each object's own create returning.
    after_create: Vec<Duration>,
    /// When the last create returned.
    last_created: Duration,
    writes_per_object: f64,
    /// The same by resource, in the order of [`Peer::writes`].
    writes_by_resource: [f64; 4],
    /// CPU seconds the API server and etcd spent while it converged, per object.
    apiserver_cpu: f64,
    etcd_cpu: f64,
    /// CPU seconds the controller spent meanwhile, per object: the operator, or the
    /// whole controller manager for the ReplicaSet controller.
    controller_cpu: f64,
    /// The rest of the cluster meanwhile, per object: the controller manager beside the
    /// operator (zero for the peer, whose controller it is), the scheduler and the
    /// simulated node.
    kcm_beside_cpu: f64,
    scheduler_cpu: f64,
    node_cpu: f64,
    /// The whole machine's busy CPU per object (/proc/stat), and the share of its cores
    /// left idle until the last object converged: with the cores saturated, time follows
    /// the work; with idle cores, something waits.
    machine_cpu: f64,
    idle: f64,
    down: Duration,
    /// From the scale down's start until the pods it removed were gone from the API
    /// server (the node's work after the deletions), when the scale up starts.
    down_pods_gone: Duration,
    up: Duration,
    /// During the scale up: when the last new pod was ready (the API server, scheduler
    /// and node's work, before any status could say so), and the API server's CPU per
    /// object.
    up_pods_ready: Duration,
    up_apiserver_cpu: f64,
    /// The operator's decision and reconcile time during the round.
    split: Split,
    /// Its decisions of 1-9 pods during the round.
    few_pods: Decisions,
    /// What the shadow did during the round, when there was one.
    shadow: ShadowSplit,
}

/// A shadow's work in a round, from the operator's metrics and the API server's.
#[derive(Clone, Copy, Default)]
struct ShadowSplit {
    decisions: f64,
    agreed: f64,
    dropped: f64,
    seconds: f64,
    /// Writes to ReconcilePolicy status (the throttled tally).
    status_writes: f64,
}

impl ShadowSplit {
    async fn of(op: &common::Operator, ns: &str) -> ShadowSplit {
        let m = op.metrics().await;
        let policy = format!(r#"policy="{ns}/shadow""#);
        let outcome =
            |o: &str| common::sum_metric(&m, "podset_shadow_decisions_total", &format!(r#"{policy},outcome="{o}""#));
        ShadowSplit {
            decisions: ["agree", "differ", "failed"].iter().map(|o| outcome(o)).sum(),
            agreed: outcome("agree"),
            dropped: outcome("dropped"),
            seconds: common::sum_metric(&m, "podset_shadow_decision_duration_seconds_sum", &policy),
            status_writes: 0.0,
        }
    }

    fn mean(&self) -> f64 {
        self.seconds / self.decisions.max(1.0)
    }
}

/// Waits until every object in `api` is settled at `replicas`; each one's time from `since`.
async fn settle(
    peer: Peer,
    api: &Api<DynamicObject>,
    n: usize,
    replicas: i64,
    since: Instant,
) -> HashMap<String, Duration> {
    let what = format!("{peer:?}: every object settled at {replicas}");
    until_all(api, n, since, &what, |o| peer.settled(o, replicas)).await
}

/// When each of `n` pods of `ns` was first seen ready and not terminating, from `since`.
async fn pods_ready(client: &Client, ns: &str, n: usize, since: Instant) -> HashMap<String, Duration> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ready = |p: &Pod| p.metadata.deletion_timestamp.is_none() && common::is_ready(p);
    until_all(&pods, n, since, &format!("{n} pods of {ns} ready"), ready).await
}

/// Waits until `ns` holds no more than `n` pods: those a scale down marked for deletion
/// are gone. A list every 200 ms, between the phases, where nothing is measured.
async fn pods_gone(client: &Client, ns: &str, n: usize) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    common::eventually_ok(&format!("no more than {n} pods in {ns}"), T, || async {
        let left = pods.list_metadata(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
        if left <= n { Ok(()) } else { Err(format!("{left} pods left")) }
    })
    .await;
}

/// Watches `api` until `n` of its objects have met `done`; each one's first time from
/// `since`, by name. A watch, not a list in a loop: listing every object ten times a
/// second cost the API server (and this process, on the same two cores) a share of
/// what is measured, and timed each object to the nearest poll only.
async fn until_all<K>(
    api: &Api<K>,
    n: usize,
    since: Instant,
    what: &str,
    done: impl Fn(&K) -> bool,
) -> HashMap<String, Duration>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut at: HashMap<String, Duration> = HashMap::new();
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    let deadline = tokio::time::Instant::from_std(since + T);
    while at.len() < n {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(o))) if done(&o) => {
                at.entry(o.name_any()).or_insert_with(|| since.elapsed());
            }
            // A watch error is retried by the watcher (with backoff); its objects come again.
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch for {what} ended"),
            Err(_) => panic!("{what}: {} of {n} after {T:?}", at.len()),
        }
    }
    at
}

fn sorted(times: impl IntoIterator<Item = Duration>) -> Vec<Duration> {
    let mut v: Vec<Duration> = times.into_iter().collect();
    v.sort();
    v
}

/// Creates every object at once; when each create returned, from `since`, by name.
async fn create_all(
    api: &Api<DynamicObject>,
    peer: Peer,
    names: &[String],
    replicas: i32,
    since: Instant,
) -> HashMap<String, Duration> {
    let params = &PostParams::default();
    let created = join_all(names.iter().map(|name| async move {
        let object = peer.object(name, replicas);
        retrying("create", || async {
            match api.create(params, &object).await {
                // An earlier attempt reached the server after all.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                r => r.map(drop),
            }
        })
        .await;
        (name.clone(), since.elapsed())
    }))
    .await;
    created.into_iter().collect()
}

async fn scale_all(api: &Api<DynamicObject>, names: &[String], replicas: i32) {
    let patch = json!({ "spec": { "replicas": replicas } });
    let params = PatchParams::default();
    let merge = Patch::Merge(&patch);
    join_all(names.iter().map(|n| retrying("scale", || async { api.patch(n, &params, &merge).await.map(drop) }))).await;
}

/// Sends a request again when the connection failed under it. On the 1.34 cluster one
/// create of round 2's burst of 200 failed with hyper's `IncompleteMessage` (the
/// connection closed before a response came), which ended the whole run. The API
/// server's refusals are not retried.
async fn retrying<F, Fut>(what: &str, call: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    for attempt in 1.. {
        match call().await {
            Ok(()) => return,
            Err(e @ kube::Error::Api(_)) => panic!("{what}: {e}"),
            Err(e) if attempt < 3 => eprintln!("{what}: {e}; sending it again"),
            Err(e) => panic!("{what}: {e} (3 attempts)"),
        }
    }
}

async fn round(client: &Client, peer: Peer, controller: u32, ns: &str, s: &Sizes, scale: bool) -> Round {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &peer.resource());
    let names: Vec<String> = (0..s.objects).map(|i| format!("b-{i:04}")).collect();
    let before = apiserver_writes(client).await;
    let (apiserver_before, etcd_before) = (component_cpu("kube-apiserver"), component_cpu("etcd"));
    let controller_before = cpu_seconds(controller);
    let kcm = component_pid("kube-controller-manager");
    let others = || [cpu_seconds(kcm), component_cpu("kube-scheduler"), component_cpu("node-sim")];
    let others_before = others();
    let machine_before = Machine::now();
    let started = Instant::now();
    let created = create_all(&api, peer, &names, s.replicas, started).await;
    let settled = settle(peer, &api, s.objects, i64::from(s.replicas), started).await;
    let per_object = sorted(settled.values().copied());
    // From each object's own create: what the controller took, whatever the API server
    // took to accept the creates before it.
    let last_created = created.values().max().copied().unwrap_or_default();
    let after_create = sorted(settled.iter().map(|(name, at)| at.saturating_sub(created[name])));
    let converge = started.elapsed();
    let idle = Machine::now().idle_since(&machine_before);
    // Writes that trail the last status (a late condition, an Event) count too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes_by_resource =
        controller_writes(peer, &before, &apiserver_writes(client).await).map(|w| w / s.objects as f64);
    let apiserver_cpu = (component_cpu("kube-apiserver") - apiserver_before) / s.objects as f64;
    let etcd_cpu = (component_cpu("etcd") - etcd_before) / s.objects as f64;
    let controller_cpu = (cpu_seconds(controller) - controller_before) / s.objects as f64;
    let machine_cpu = Machine::now().busy_since(&machine_before) / s.objects as f64;
    let others_after = others();
    let spent = |i: usize| (others_after[i] - others_before[i]) / s.objects as f64;
    let kcm_beside_cpu = if controller == kcm { 0.0 } else { spent(0) };
    let (scheduler_cpu, node_cpu) = (spent(1), spent(2));

    let (mut down, mut down_pods_gone, mut up, mut up_pods_ready, mut up_apiserver_cpu) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO, 0.0);
    if scale {
        let t = Instant::now();
        scale_all(&api, &names, 1).await;
        settle(peer, &api, s.objects, 1, t).await;
        down = t.elapsed();
        // Both controllers settle once the surplus pods are marked for deletion; the node
        // removes them up to 2 s later. Scaling up before they are gone measured the
        // removals too, and more of them for whichever settled first: with our scale down
        // at 0.70× the peer's, the scale up read 1.14× with 1.16× the API server's CPU,
        // against 0.96× and 1.02× when ours settled later (docs/performance.md).
        pods_gone(client, ns, s.objects).await;
        down_pods_gone = t.elapsed();
        let apiserver_before = component_cpu("kube-apiserver");
        let t = Instant::now();
        let all_pods = s.objects * usize::try_from(s.replicas).unwrap_or_default();
        let (_, ready) = tokio::join!(
            async {
                scale_all(&api, &names, s.replicas).await;
                settle(peer, &api, s.objects, i64::from(s.replicas), t).await
            },
            pods_ready(client, ns, all_pods, t),
        );
        up = t.elapsed();
        up_pods_ready = ready.values().max().copied().unwrap_or_default();
        up_apiserver_cpu = (component_cpu("kube-apiserver") - apiserver_before) / s.objects as f64;
    }
    let writes_per_object = writes_by_resource.iter().sum();
    Round {
        converge,
        per_object,
        after_create,
        last_created,
        writes_per_object,
        writes_by_resource,
        apiserver_cpu,
        etcd_cpu,
        controller_cpu,
        kcm_beside_cpu,
        scheduler_cpu,
        node_cpu,
        machine_cpu,
        idle,
        down,
        down_pods_gone,
        up,
        up_pods_ready,
        up_apiserver_cpu,
        split: Split::default(),
        few_pods: Decisions::default(),
        shadow: ShadowSplit::default(),
    }
}

/// A fresh namespace of this benchmark (the operator serves namespaces labelled so).
async fn bench_namespace(client: &Client, prefix: &str, label: &str) -> String {
    let ns = common::namespace(client, prefix).await;
    let (ok, out) = common::kubectl(&["label", "namespace", &ns, label]);
    assert!(ok, "{out}");
    ns
}

/// Deletes `ns` and waits until it is gone, so the next round starts on a quiet cluster.
async fn drop_namespace(client: &Client, ns: &str) {
    common::delete_namespace(client, ns).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    common::eventually(&format!("namespace {ns} to be gone"), T, || async {
        namespaces.get_opt(ns).await.ok()?.is_none().then_some(())
    })
    .await;
}

fn kcm_rate(qps: u32, burst: u32) {
    let out = std::process::Command::new(common::workspace().join("hack/cluster.sh"))
        .args(["restart", "kube-controller-manager", "TERM"])
        .arg(format!("--kube-api-qps={qps}"))
        .arg(format!("--kube-api-burst={burst}"))
        .env("CLUSTER_DIR", common::cluster_dir())
        .output()
        .expect("hack/cluster.sh runs");
    assert!(out.status.success(), "restarting the controller manager: {}", String::from_utf8_lossy(&out.stderr));
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// The median over `rounds` of what `f` reads from a round.
fn median(rounds: &[Round], f: &dyn Fn(&Round) -> f64) -> f64 {
    let v = lowest_first(rounds.iter().map(f));
    v[v.len() / 2]
}

/// `values`, lowest first (as [`sorted`] for durations).
fn lowest_first(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Resident memory of `pid` from /proc, in MiB (0 if it cannot be read).
fn rss(pid: u32) -> f64 {
    podset_host::heap::resident_bytes(Some(pid)).map_or(0.0, |b| b as f64 / f64::from(1 << 20))
}

/// CPU seconds `pid` has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

/// The machine's CPU time so far, from the first line of /proc/stat (clock ticks).
struct Machine {
    busy: f64,
    idle: f64,
}

impl Machine {
    fn now() -> Machine {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<f64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0.0))
            .collect();
        let field = |i: usize| ticks.get(i).copied().unwrap_or(0.0);
        // user nice system idle iowait irq softirq steal (guest time is within user).
        let idle = field(3) + field(4);
        let busy = field(0) + field(1) + field(2) + field(5) + field(6) + field(7);
        Machine { busy: busy / 100.0, idle: idle / 100.0 }
    }

    /// CPU seconds the machine spent busy since `before`.
    fn busy_since(&self, before: &Machine) -> f64 {
        self.busy - before.busy
    }

    /// The share of the machine's CPU time since `before` that was idle.
    fn idle_since(&self, before: &Machine) -> f64 {
        let (busy, idle) = (self.busy - before.busy, self.idle - before.idle);
        if busy + idle > 0.0 { idle / (busy + idle) } else { 0.0 }
    }
}

/// CPU seconds the control plane's `component` has used.
fn component_cpu(component: &str) -> f64 {
    cpu_seconds(component_pid(component))
}

/// The pid of the control plane's `component`, from the cluster's state dir.
fn component_pid(component: &str) -> u32 {
    let file = common::cluster_dir().join(format!("pids/{component}.pid"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{}: {text:?} is not a pid: {e}", file.display()))
}

/// A table: peer, ours, ratio, goal, pass/fail.
struct Table {
    title: String,
    rows: Vec<[String; 6]>,
}

impl Table {
    fn new(title: &str) -> Table {
        Table { title: title.into(), rows: Vec::new() }
    }

    /// A row comparing `ours` with `peer` (lower is better), with the goal a ratio.
    fn ratio(&mut self, what: &str, peer: f64, ours: f64, unit: &str, goal: Option<f64>) {
        let ratio = if peer > 0.0 { ours / peer } else { f64::NAN };
        let (goal_s, verdict) = match goal {
            Some(g) => (format!("≤ {g:.2}×"), if ratio <= g { "pass" } else { "miss" }.to_string()),
            None => ("—".into(), "—".into()),
        };
        self.rows.push([what.into(), fmt(peer, unit), fmt(ours, unit), format!("{ratio:.2}×"), goal_s, verdict]);
    }

    /// A decision inside the operator (`d`, means) against the module alone (p50):
    /// `first` against the module back to back (wall time, `goal`), the deciding
    /// thread's CPU time, and against the module with the CPU caches emptied before each
    /// decision, as a decision inside the operator runs: alone between network and JSON
    /// work.
    fn decisions(&mut self, first: &str, alone: &Alone, d: &Decisions, goal: Option<f64>) {
        let (hot, cold) = (alone.hot.as_secs_f64() * 1e6, alone.cold.as_secs_f64() * 1e6);
        self.ratio(first, hot, d.mean_wall() * 1e6, "µs", goal);
        self.ratio("… the deciding thread's CPU time (mean)", hot, d.mean_cpu() * 1e6, "µs", None);
        self.ratio(
            "… against the module alone with the CPU caches emptied first",
            cold,
            d.mean_wall() * 1e6,
            "µs",
            None,
        );
    }

    /// A row comparing the medians over the rounds of `peer` and `ours` of what `f`
    /// reads from a round.
    fn medians(
        &mut self,
        what: &str,
        peer: &[Round],
        ours: &[Round],
        f: &dyn Fn(&Round) -> f64,
        unit: &str,
        goal: Option<f64>,
    ) {
        self.ratio(what, median(peer, f), median(ours, f), unit, goal);
    }

    /// Beneath a row of medians: each round's figure of `peer` and of `ours`, lowest
    /// first, and the ratio within each round (the two ran one after the other), so
    /// that a median is read with its spread: the scale-down row read 1.01×, 1.30×,
    /// 1.14× and 1.54× in four runs of `make bench`.
    fn rounds(&mut self, peer: &[Round], ours: &[Round], f: &dyn Fn(&Round) -> f64, unit: &str) {
        let each =
            |rs: &[Round]| lowest_first(rs.iter().map(f)).iter().map(|v| fmt(*v, unit)).collect::<Vec<_>>().join(", ");
        let ratios = lowest_first(peer.iter().zip(ours).map(|(p, o)| f(o) / f(p)));
        let ratios = ratios.iter().map(|r| format!("{r:.2}×")).collect::<Vec<_>>().join(", ");
        self.rows.push(["… each round, lowest first".into(), each(peer), each(ours), ratios, "—".into(), "—".into()]);
    }

    /// A row of ours alone, against an absolute goal (lower is better).
    fn alone(&mut self, what: &str, ours: f64, unit: &str, goal: Option<f64>) {
        let (goal_s, verdict) = match goal {
            Some(g) => (format!("≤ {}", fmt(g, unit)), if ours <= g { "pass" } else { "miss" }.to_string()),
            None => ("—".into(), "—".into()),
        };
        self.rows.push([what.into(), "—".into(), fmt(ours, unit), "—".into(), goal_s, verdict]);
    }

    fn markdown(&self, peer: &str) -> String {
        let mut out =
            format!("### {}\n\n| | {peer} | ours | ratio | goal | |\n|---|---:|---:|---:|---:|---|\n", self.title);
        for r in &self.rows {
            let _ = writeln!(out, "| {} | {} | {} | {} | {} | {} |", r[0], r[1], r[2], r[3], r[4], r[5]);
        }
        out
    }
}

fn fmt(v: f64, unit: &str) -> String {
    match unit {
        "s" => format!("{v:.2} s"),
        "ms" => format!("{:.0} ms", v * 1000.0),
        "MiB" => format!("{v:.1} MiB"),
        "µs" => format!("{v:.0} µs"),
        "ms CPU" => format!("{v:.1} ms"),
        "" => format!("{v:.1}"),
        u => format!("{v:.2} {u}"),
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cores} cores, {}", model.unwrap_or_else(|| "unknown CPU".into()))
}

/// The operator under test: a shard for the rounds, and the same build deciding natively.
struct Contenders {
    op: common::Operator,
    native_op: common::Operator,
    run_label: String,
    native_label: String,
    file: std::path::PathBuf,
    good: Vec<u8>,
    canary: Vec<u8>,
}

impl Contenders {
    /// Stops the operator that `who` is not, and starts the one it is (none for the
    /// peer). An operator serving none of a round's namespaces still watches every
    /// PodSet and pod its policies declare (a shard filters its caches, it does not
    /// scope its watches), so with both running, each operator round paid the API
    /// server and the machine for a second operator's watches, which the peer's round
    /// never did.
    async fn run_only(&mut self, who: Who) {
        let (op, native) = match who {
            Who::Wasm | Who::Shadowed => (true, false),
            Who::Native => (false, true),
            Who::ReplicaSet => (false, false),
        };
        for (o, wanted) in [(&mut self.op, op), (&mut self.native_op, native)] {
            let running = o.exited().is_none();
            if running && !wanted {
                o.kill();
            } else if !running && wanted {
                o.respawn();
                o.ready().await;
            }
        }
    }
}

/// What the rounds measured.
struct Rounds {
    by: HashMap<Who, Vec<Round>>,
    /// The peer at the controller manager's default client rate.
    default_rate: Round,
    swap: Option<Duration>,
    busy_rss: f64,
}

#[tokio::main]
async fn main() {
    let (s, run) = Sizes::from_env();
    let client = common::client().await;
    let run_label = format!("podset.dev/bench={}", std::process::id());
    let mut tables = Vec::new();
    if run != Run::ScaleOnly {
        tables.extend(rounds_tables(&client, &s, &run_label).await);
        tables.extend(by_language(&client, &s).await);
    }
    if run != Run::RoundsOnly {
        // The scale table and the curve start operators of their own.
        tables.push((scale(&client, &s, &run_label).await, "reference"));
        tables.push((curve(&client, &s, &run_label).await, "ReplicaSet controller"));
    }
    report(&client, run, &tables).await;
}

/// The alternating rounds and what is measured beside them, as tables; the operators
/// they ran are stopped on return.
async fn rounds_tables(client: &Client, s: &Sizes, run_label: &str) -> Vec<(Table, &'static str)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("podset.wasm");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    std::fs::write(&file, &good).expect("policy file");
    let op = common::Operator::spawn_shard("bench", run_label, &[&file], &common::kubeconfig_path(), &[]);
    // The same operator build, with guest-podset's decision linked in natively
    // (`--features native-podset`), serving namespaces of its own.
    let native_label = format!("podset.dev/bench-native={}", std::process::id());
    let native_op = common::Operator::spawn_shard(
        "bench-native",
        &native_label,
        &[&file],
        &common::kubeconfig_path(),
        &["--native-podset"],
    );
    op.ready().await;
    native_op.ready().await;
    let idle_rss = rss(op.pid());
    let mut c = Contenders { op, native_op, run_label: run_label.to_string(), native_label, file, good, canary };

    let rounds = alternating_rounds(client, s, &mut c).await;
    let by = &rounds.by;
    let (peer, ours, native, shadowed) =
        (&by[&Who::ReplicaSet], &by[&Who::Wasm], &by[&Who::Native], &by[&Who::Shadowed]);
    let t1 = versus_replicasets(s, peer, ours, &rounds.default_rate);
    let tn = native_vs_wasm(s, native, ours);
    let ts = with_a_shadow(s, ours, shadowed);
    let t2 = operator_at_size(s, &c, &rounds, idle_rss).await;
    vec![(t1, "ReplicaSet controller"), (tn, "native"), (ts, "no shadow"), (t2, "reference")]
}

/// The alternating rounds of the four contenders (the peer, the operator, its native
/// build, the operator with a shadow), then one round of the peer at its default client
/// rate; the hot swap after the operator's last round.
async fn alternating_rounds(client: &Client, s: &Sizes, c: &mut Contenders) -> Rounds {
    // Alternating rounds, the controller manager's client rate out of the way.
    kcm_rate(1000, 1000);
    let mut rounds: HashMap<Who, Vec<Round>> = HashMap::new();
    let mut swap = None;
    let mut busy_rss = 0.0;
    for r in 0..s.rounds {
        let mut order = [Who::ReplicaSet, Who::Wasm, Who::Native, Who::Shadowed];
        if r % 2 == 1 {
            order.reverse();
        }
        for who in order {
            c.run_only(who).await;
            let (op, native_op, run_label, native_label) = (&c.op, &c.native_op, &c.run_label, &c.native_label);
            let (file, good, canary) = (&c.file, &c.good, &c.canary);
            let (label, operator) = match who {
                Who::Native => (native_label, Some(native_op)),
                Who::Wasm | Who::Shadowed => (run_label, Some(op)),
                Who::ReplicaSet => (run_label, None),
            };
            let ns = bench_namespace(client, "bench", label).await;
            let (before, few_before) = match operator {
                Some(o) => {
                    let m = o.metrics().await;
                    (Split::of(&m), Decisions::of(&m))
                }
                None => (Split::default(), Decisions::default()),
            };
            if who == Who::Shadowed {
                common::publish_shadow(client, &ns, "shadow", "shadow-module", good, None).await;
                common::policy_loaded(client, &ns, "shadow", op).await;
            }
            let rp_writes = apiserver_writes(client).await;
            // The native build and the shadowed operator are compared on converging only.
            let controller = operator.map_or_else(|| component_pid("kube-controller-manager"), |o| o.pid());
            let mut result =
                round(client, who.peer(), controller, &ns, s, !matches!(who, Who::Native | Who::Shadowed)).await;
            if let Some(o) = operator {
                let m = o.metrics().await;
                result.split = Split::of(&m).minus(&before);
                result.few_pods = Decisions::of(&m).minus(&few_before);
            }
            if who == Who::Shadowed {
                // The tally is written every few seconds: let the last one land.
                tokio::time::sleep(podset_host::sources::cluster::SHADOW_REPORT).await;
                result.shadow = ShadowSplit::of(op, &ns).await;
                let key = ("reconcilepolicies".to_string(), "status".to_string());
                let after = apiserver_writes(client).await;
                result.shadow.status_writes = after.get(&key).unwrap_or(&0.0) - rp_writes.get(&key).unwrap_or(&0.0);
                eprintln!(
                    "round {} shadow: {:.0} decisions, {:.0} agreed, {:.0} dropped, {:.0} µs each, {:.0} status writes",
                    r + 1,
                    result.shadow.decisions,
                    result.shadow.agreed,
                    result.shadow.dropped,
                    result.shadow.mean() * 1e6,
                    result.shadow.status_writes
                );
            }
            eprintln!(
                "round {} {who:?}: converged {:.2?}, {:.1} writes/object, 5→1 {:.2?}, 1→5 {:.2?}, decision {:.0} µs, {:.1} % of reconcile time",
                r + 1,
                result.converge,
                result.writes_per_object,
                result.down,
                result.up,
                result.split.mean_decision() * 1e6,
                result.split.decision_share() * 100.0,
            );
            if who == Who::Wasm {
                busy_rss = f64::max(busy_rss, rss(op.pid()));
                if r + 1 == s.rounds {
                    swap = Some(hot_swap(client, &ns, file, good, canary, s.objects, s.replicas).await);
                }
            }
            rounds.entry(who).or_default().push(result);
            drop_namespace(client, &ns).await;
        }
    }
    // The same, once, at the controller manager's default client rate (20 QPS, burst 30).
    c.run_only(Who::ReplicaSet).await;
    kcm_rate(20, 30);
    let ns = bench_namespace(client, "bench", &c.run_label).await;
    let default_rate = round(client, Peer::ReplicaSet, component_pid("kube-controller-manager"), &ns, s, false).await;
    drop_namespace(client, &ns).await;
    kcm_rate(1000, 1000);
    // What follows measures the operator.
    c.run_only(Who::Wasm).await;

    Rounds { by: rounds, default_rate, swap, busy_rss }
}

/// PodSet against the ReplicaSet controller.
fn versus_replicasets(s: &Sizes, peer: &[Round], ours: &[Round], default_rate: &Round) -> Table {
    let secs = |d: Duration| d.as_secs_f64();
    let mut t1 = Table::new(&format!(
        "PodSet vs the ReplicaSet controller: {} objects × {} replicas, {} alternating rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    t1.medians(
        "time until every object reports all replicas available",
        peer,
        ours,
        &|r| secs(r.converge),
        "s",
        Some(1.0),
    );
    t1.rounds(peer, ours, &|r| secs(r.converge), "s");
    t1.medians("per object, p50", peer, ours, &|r| secs(percentile(&r.per_object, 0.5)), "s", None);
    t1.medians("per object, p99", peer, ours, &|r| secs(percentile(&r.per_object, 0.99)), "s", None);
    t1.medians("the API server accepting all the creates", peer, ours, &|r| secs(r.last_created), "s", None);
    t1.medians(
        "per object from its own create, p50",
        peer,
        ours,
        &|r| secs(percentile(&r.after_create, 0.5)),
        "s",
        None,
    );
    t1.medians(
        "per object from its own create, p99",
        peer,
        ours,
        &|r| secs(percentile(&r.after_create, 0.99)),
        "s",
        None,
    );
    t1.medians("API writes per object (apiserver_request_total)", peer, ours, &|r| r.writes_per_object, "", Some(1.0));
    // Where the writes go: the parent's own writes include the create by the benchmark.
    let parts = ["pods", "the parent (its create included)", "the parent's status", "Events"];
    for (i, part) in parts.iter().enumerate() {
        t1.medians(&format!("… of which {part}"), peer, ours, &|r| r.writes_by_resource[i], "", None);
    }
    // What the writes cost the control plane: with about as many writes, a ratio above
    // the writes' says each of ours costs more.
    t1.medians("API server CPU per object while converging", peer, ours, &|r| r.apiserver_cpu * 1e3, "ms CPU", None);
    t1.medians("etcd CPU per object while converging", peer, ours, &|r| r.etcd_cpu * 1e3, "ms CPU", None);
    t1.medians(
        "controller CPU per object while converging (the peer: the whole controller manager)",
        peer,
        ours,
        &|r| r.controller_cpu * 1e3,
        "ms CPU",
        None,
    );
    t1.alone(
        "… the controller manager's beside the operator",
        median(ours, &|r| r.kcm_beside_cpu * 1e3),
        "ms CPU",
        None,
    );
    t1.medians("scheduler CPU per object while converging", peer, ours, &|r| r.scheduler_cpu * 1e3, "ms CPU", None);
    t1.medians("simulated node CPU per object while converging", peer, ours, &|r| r.node_cpu * 1e3, "ms CPU", None);
    // The sum of everything, the benchmark itself included: its ratio against the time's
    // says whether the time is the work.
    t1.medians("the machine's CPU per object while converging", peer, ours, &|r| r.machine_cpu * 1e3, "ms CPU", None);
    t1.medians("… its cores idle until the last converged, %", peer, ours, &|r| r.idle * 100.0, "%", None);
    t1.medians(&format!("scale {} → 1, all objects", s.replicas), peer, ours, &|r| secs(r.down), "s", Some(1.0));
    t1.rounds(peer, ours, &|r| secs(r.down), "s");
    t1.medians(
        "… until the removed pods were gone, when the scale up starts",
        peer,
        ours,
        &|r| secs(r.down_pods_gone),
        "s",
        None,
    );
    t1.medians(&format!("scale 1 → {}, all objects", s.replicas), peer, ours, &|r| secs(r.up), "s", Some(1.0));
    t1.rounds(peer, ours, &|r| secs(r.up), "s");
    // What the scale up waits for besides the controller's status: its pods made,
    // bound, started and ready on the node. A later last pod with a costlier API server
    // says the controller's writes slowed everyone's.
    t1.medians("… until the last new pod was ready", peer, ours, &|r| secs(r.up_pods_ready), "s", None);
    t1.medians(
        "… API server CPU per object while scaling up",
        peer,
        ours,
        &|r| r.up_apiserver_cpu * 1e3,
        "ms CPU",
        None,
    );
    t1.ratio(
        "converge, against the controller manager at its default 20 QPS",
        secs(default_rate.converge),
        median(ours, &|r| secs(r.converge)),
        "s",
        None,
    );
    t1.ratio(
        "writes per object, against it at 20 QPS",
        default_rate.writes_per_object,
        median(ours, &|r| r.writes_per_object),
        "",
        None,
    );

    t1
}

/// The same operator with guest-podset linked in natively, against its .wasm.
fn native_vs_wasm(s: &Sizes, native: &[Round], ours: &[Round]) -> Table {
    let secs = |d: Duration| d.as_secs_f64();
    let mut tn = Table::new(&format!(
        "Same logic, native vs Wasm: guest-podset linked into the operator vs its .wasm, {} × {}, {} alternating rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    tn.medians(
        "time until every PodSet reports all replicas available",
        native,
        ours,
        &|r| secs(r.converge),
        "s",
        Some(1.05),
    );
    tn.medians("per object, p99", native, ours, &|r| secs(percentile(&r.per_object, 0.99)), "s", None);
    tn.medians("mean decision inside the operator", native, ours, &|r| r.split.mean_decision() * 1e6, "µs", None);
    tn.medians("decisions' share of reconcile time, %", native, ours, &|r| r.split.decision_share() * 100.0, "", None);

    tn
}

/// The default PodSet policy's twins (`guest-podset/`, `typescript/guest-podset/`,
/// `go/guest-podset/`): each language's module and its target/policy file.
const LANGUAGES: [(&str, &str); 3] =
    [("Rust", "podset.wasm"), ("TypeScript", "podset-ts.wasm"), ("Go", "podset-go.wasm")];

/// One language's operator and what its rounds measured.
struct LanguageRun {
    file: std::path::PathBuf,
    name: String,
    label: String,
    /// Started for its first round, stopped after each.
    op: Option<common::Operator>,
    module_bytes: f64,
    /// Measured once the operator is ready, before its first round.
    idle_rss: f64,
    busy_rss: f64,
    rounds: Vec<Round>,
}

/// The PodSet policy in TypeScript and in Go against the same in Rust, inside the
/// operator: each language served by an operator of its own, the only one running during
/// its rounds (as in the alternating rounds), in alternating rounds of the rounds' size,
/// converging only. A table per language against Rust.
async fn by_language(client: &Client, s: &Sizes) -> Vec<(Table, &'static str)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs: Vec<LanguageRun> = LANGUAGES
        .iter()
        .map(|(lang, module)| {
            let bytes = common::read_policy(module);
            let file = dir.path().join(module);
            std::fs::write(&file, &bytes).expect("policy file");
            let name = format!("bench-{}", lang.to_lowercase());
            let label = format!("podset.dev/{name}={}", std::process::id());
            let module_bytes = bytes.len() as f64;
            LanguageRun { file, name, label, op: None, module_bytes, idle_rss: 0.0, busy_rss: 0.0, rounds: Vec::new() }
        })
        .collect();
    for r in 0..s.rounds {
        let mut order: Vec<usize> = (0..runs.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let run = &mut runs[i];
            let mut op = match run.op.take() {
                Some(mut op) => {
                    op.respawn();
                    op
                }
                None => {
                    common::Operator::spawn_shard(&run.name, &run.label, &[&run.file], &common::kubeconfig_path(), &[])
                }
            };
            op.ready().await;
            if run.rounds.is_empty() {
                run.idle_rss = rss(op.pid());
            }
            let ns = bench_namespace(client, "bench-lang", &run.label).await;
            let before = Split::of(&op.metrics().await);
            let mut result = round(client, Peer::PodSet, op.pid(), &ns, s, false).await;
            result.split = Split::of(&op.metrics().await).minus(&before);
            run.busy_rss = f64::max(run.busy_rss, rss(op.pid()));
            eprintln!(
                "round {} {}: converged {:.2?}, decision {:.0} µs, {:.1} % of reconcile time",
                r + 1,
                LANGUAGES[i].0,
                result.converge,
                result.split.mean_decision() * 1e6,
                result.split.decision_share() * 100.0,
            );
            run.rounds.push(result);
            drop_namespace(client, &ns).await;
            op.kill();
            run.op = Some(op);
        }
    }
    let secs = |d: Duration| d.as_secs_f64();
    let rust = &runs[0];
    runs[1..]
        .iter()
        .zip(&LANGUAGES[1..])
        .map(|(run, (lang, module))| {
            let mut t = Table::new(&format!(
                "The PodSet policy in {lang} (target/policy/{module}) vs in Rust, inside the operator: {} × {}, {} alternating rounds (medians)",
                s.objects, s.replicas, s.rounds
            ));
            t.medians(
                "time until every PodSet reports all replicas available",
                &rust.rounds,
                &run.rounds,
                &|r| secs(r.converge),
                "s",
                None,
            );
            t.medians("per object, p99", &rust.rounds, &run.rounds, &|r| secs(percentile(&r.per_object, 0.99)), "s", None);
            // The issue's goal for a decision in another language: ≤ 10× Rust's.
            t.medians(
                "mean decision inside the operator",
                &rust.rounds,
                &run.rounds,
                &|r| r.split.mean_decision() * 1e6,
                "µs",
                Some(10.0),
            );
            t.medians(
                "decisions' share of reconcile time, %",
                &rust.rounds,
                &run.rounds,
                &|r| r.split.decision_share() * 100.0,
                "",
                None,
            );
            t.medians(
                "operator CPU per PodSet",
                &rust.rounds,
                &run.rounds,
                &|r| r.controller_cpu * 1e3,
                "ms CPU",
                None,
            );
            t.ratio("module size", rust.module_bytes / 1e6, run.module_bytes / 1e6, "MB", None);
            t.ratio("operator RSS, idle, the policy loaded", rust.idle_rss, run.idle_rss, "MiB", None);
            t.ratio("operator RSS, converged (peak of the rounds)", rust.busy_rss, run.busy_rss, "MiB", None);
            (t, "Rust")
        })
        .collect()
}

/// The operator with a shadow of the same module, against it without.
fn with_a_shadow(s: &Sizes, ours: &[Round], shadowed: &[Round]) -> Table {
    let secs = |d: Duration| d.as_secs_f64();
    let mut ts = Table::new(&format!(
        "Shadow: {} × {}, a shadow of the same module beside every decision vs none, {} alternating rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    ts.medians(
        "time until every PodSet reports all replicas available",
        ours,
        shadowed,
        &|r| secs(r.converge),
        "s",
        Some(1.1),
    );
    ts.medians("per object, p99", ours, shadowed, &|r| secs(percentile(&r.per_object, 0.99)), "s", None);
    ts.medians(
        "API writes per object (pods, PodSets, their status, Events)",
        ours,
        shadowed,
        &|r| r.writes_per_object,
        "",
        Some(1.0),
    );
    ts.alone(
        "ReconcilePolicy status writes per round (the throttled tally)",
        median(shadowed, &|r| r.shadow.status_writes),
        "",
        None,
    );
    ts.alone("shadow decisions per round", median(shadowed, &|r| r.shadow.decisions), "", None);
    ts.alone(
        "… of which agreed, %",
        median(shadowed, &|r| 100.0 * r.shadow.agreed / r.shadow.decisions.max(1.0)),
        "",
        None,
    );
    ts.alone("… dropped (queue full)", median(shadowed, &|r| r.shadow.dropped), "", None);
    // The shadow's cost per decision against the live decision's, in the same rounds.
    ts.ratio(
        "one decision in the same rounds: live vs shadow (means)",
        median(shadowed, &|r| r.split.mean_decision() * 1e6),
        median(shadowed, &|r| r.shadow.mean() * 1e6),
        "µs",
        None,
    );

    ts
}

/// The operator at the rounds' size: the hot swap, its decision against the module
/// alone, its memory.
async fn operator_at_size(s: &Sizes, c: &Contenders, rounds: &Rounds, idle_rss: f64) -> Table {
    let (good, busy_rss) = (&c.good, rounds.busy_rss);
    let secs = |d: Duration| d.as_secs_f64();
    let mut t2 = Table::new(&format!("The operator at {} PodSets", s.objects));
    if let Some(swap) = rounds.swap {
        t2.alone(
            &format!("hot swap: policy file replaced → all {} report the new digest", s.objects),
            secs(swap),
            "ms",
            Some(1.0),
        );
    }
    // The decision inside the busy operator against the same module alone, same pod
    // count: its rounds' decisions (it is started afresh for each of its rounds).
    let decisions = rounds.by[&Who::Wasm].iter().fold(Decisions::default(), |all, r| all.plus(&r.few_pods));
    let alone = isolated_decisions(good, s.replicas as usize);
    t2.decisions(
        &format!(
            "policy decision, 1-{} pods: alone (p50 at {0}, as `policy bench`) vs inside the operator (mean)",
            s.replicas
        ),
        &alone,
        &decisions,
        Some(1.5),
    );
    // A large PodSet's decision alone, the module's own cost at 100 pods.
    let hundred = isolated_decisions(good, 100).hot;
    t2.alone(
        "policy decision alone, 100 pods converged, p50 (as `policy bench`)",
        hundred.as_secs_f64() * 1e6,
        "µs",
        Some(30.0),
    );
    t2.alone("operator RSS, idle", idle_rss, "MiB", None);
    t2.alone(
        &format!("operator RSS, {} × {} converged (peak of the rounds)", s.objects, s.replicas),
        busy_rss,
        "MiB",
        None,
    );
    t2
}

/// The tables as Markdown, printed, and written to bench/results/latest.md by a full run.
async fn report(client: &Client, run: Run, tables: &[(Table, &str)]) {
    let mut md = format!(
        "# Benchmarks\n\n`make bench`{} on {}, {}. Embedded control plane (Kubernetes {}), simulated node (pods ready 1 s after they start), operator `{}`.\n\n",
        run.note(),
        machine(),
        date(),
        client.apiserver_version().await.map(|v| v.git_version).unwrap_or_else(|e| format!("of unknown version: {e}")),
        // Relative to the repository: results name no machine's paths.
        relative(&common::operator_binary()).display()
    );
    let parts: Vec<String> = tables.iter().map(|(t, against)| t.markdown(against)).collect();
    md += &parts.join("\n");
    println!("\n{md}");
    if run == Run::Full {
        let path = common::workspace().join("bench/results/latest.md");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("bench/results");
        std::fs::write(&path, &md).expect("write bench/results/latest.md");
        eprintln!("written to {}", relative(&path).display());
    }
}

/// Time until all `n` PodSets report the canary's digest after the policy file is
/// replaced (as a build or a ConfigMap volume replaces it: write aside, rename).
async fn hot_swap(
    client: &Client,
    ns: &str,
    file: &std::path::Path,
    good: &[u8],
    canary: &[u8],
    n: usize,
    replicas: i32,
) -> Duration {
    let podsets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &Peer::PodSet.resource());
    // Decided by `digest`, and still settled at `replicas` (the swap must not cost a pod).
    let decided = |digest: String| {
        move |o: &DynamicObject| common::decided_by(o, &digest) && Peer::PodSet.settled(o, i64::from(replicas))
    };
    until_all(
        &podsets,
        n,
        Instant::now(),
        "every PodSet decided by the first policy",
        decided(Digest::of(good).to_string()),
    )
    .await;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, canary).expect("write");
    let started = Instant::now();
    std::fs::rename(&tmp, file).expect("rename");
    until_all(&podsets, n, started, "every PodSet re-decided", decided(Digest::of(canary).to_string())).await;
    let took = started.elapsed();
    // Back to the first policy for what follows.
    std::fs::write(&tmp, good).expect("write");
    std::fs::rename(&tmp, file).expect("rename");
    took
}

/// Many PodSets with three policies loaded: time to converge, memory, a resync with
/// nothing to do (writes and CPU), and the memory an extra loaded policy costs.
async fn scale(client: &Client, s: &Sizes, label: &str) -> Table {
    let policies: Vec<std::path::PathBuf> =
        ["podset.wasm", "memcached.wasm", "netperf.wasm"].iter().map(|p| common::policy_dir().join(p)).collect();
    let all: Vec<&std::path::Path> = policies.iter().map(|p| p.as_path()).collect();
    let resync = format!("{}s", s.resync.as_secs());

    // Idle, with one policy and with three: what an extra loaded policy costs.
    let mut idle = Vec::new();
    for loaded in [&all[..1], &all[..]] {
        let op = common::Operator::spawn_shard("bench-idle", label, loaded, &common::kubeconfig_path(), &[]);
        op.ready().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        idle.push(rss(op.pid()));
    }
    let per_policy = (idle[1] - idle[0]) / 2.0;

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

    // A resync with nothing to do: every PodSet reconciled again, no write.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes_before = common::cluster_writes(&op.metrics().await);
    let reconciles_before = op.sum("podset_reconciles_total", "").await;
    let decisions_before = Decisions::of(&op.metrics().await);
    let cpu_before = cpu_seconds(op.pid());
    tokio::time::sleep(s.resync + Duration::from_secs(5)).await;
    let writes = common::cluster_writes(&op.metrics().await) - writes_before;
    let reconciled = op.sum("podset_reconciles_total", "").await - reconciles_before;
    let cpu = cpu_seconds(op.pid()) - cpu_before;
    // The same decisions as in the rounds (a few pods), with the control plane idle.
    let resync_decisions = Decisions::of(&op.metrics().await).minus(&decisions_before);
    let alone = isolated_decisions(&common::read_policy("podset.wasm"), s.replicas as usize);

    // A shadow of the same module on every PodSet: loading it re-queues them all, so
    // each is decided again, live and shadow. Memory and writes, apart from the
    // shadow's own throttled status.
    // The writes a decision can cause: pods, and PodSets (metadata and status).
    let decided_writes = |m: &str| {
        ["pods\"", "podsets\"", "podsets/status\""]
            .iter()
            .map(|r| common::sum_metric(m, "podset_api_writes_total", &format!("resource=\"{r}")))
            .sum::<f64>()
    };
    let m = op.metrics().await;
    let (writes_before, events_before) =
        (decided_writes(&m), common::sum_metric(&m, "podset_api_writes_total", r#"resource="events""#));
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
    let status_writes = op.sum("podset_api_writes_total", r#"resource="reconcilepolicies"#).await - status_before;
    let m = op.metrics().await;
    let shadow_writes = decided_writes(&m) - writes_before;
    let events = common::sum_metric(&m, "podset_api_writes_total", r#"resource="events""#) - events_before;
    drop(op);
    let (indexed, scanned) = children_lookup(client, &ns, &api).await;
    drop_namespace(client, &ns).await;

    let mut t = Table::new(&format!("Scale: {} PodSets × {} replicas, 3 policies loaded", s.scale_objects, s.replicas));
    t.alone("time until every PodSet reports all replicas available", converge.as_secs_f64(), "s", None);
    t.alone("operator RSS, converged", busy, "MiB", Some(60.0));
    t.alone("RSS per extra loaded policy (idle, 3 policies vs 1)", per_policy, "MiB", Some(2.0));
    t.alone(&format!("writes during a resync with nothing to do ({reconciled} reconciles)"), writes, "", Some(0.0));
    t.alone("CPU of that resync", cpu, "s", None);
    // Beside the busy rounds' figure: how much of the gap to the module alone is the
    // operator's, and how much a machine whose cores the control plane fills.
    t.decisions(
        "a decision of that resync, the machine otherwise quiet: alone (p50) vs inside the operator (mean)",
        &alone,
        &resync_decisions,
        None,
    );
    t.alone(
        &format!("operator RSS after a shadow of the same module decided for every PodSet ({shadowed} decisions)"),
        shadow_rss,
        "MiB",
        Some(60.0),
    );
    t.alone(
        &format!(
            "writes to pods and PodSets those decisions caused (the ReconcilePolicy's: {status_writes} to its status, \
             {events} Events)"
        ),
        shadow_writes,
        "",
        Some(0.0),
    );
    t.ratio(
        &format!(
            "a parent's children out of {} cached pods: by owner-UID index vs a scan of the namespace (peer column)",
            s.scale_objects * s.replicas as usize
        ),
        scanned.as_secs_f64() * 1e6,
        indexed.as_secs_f64() * 1e6,
        "µs",
        None,
    );
    t
}

/// How cost grows with work: at each size of the curve, PodSets with a fresh operator
/// (one policy) and ReplicaSets with the controller manager, one after the other.
async fn curve(client: &Client, s: &Sizes, label: &str) -> Table {
    let mut t = Table::new(&format!(
        "Scale curve: {} objects × {CURVE_REPLICAS} pods, one round each (RSS: the operator vs the whole controller \
         manager)",
        s.curve.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
    ));
    let policy = common::policy_dir().join("podset.wasm");
    // The peer at the rate the rounds give it (`BENCH_SCALE_ONLY` runs no rounds first).
    kcm_rate(1000, 1000);
    for &n in s.curve {
        let op = common::Operator::spawn_shard("bench-curve", label, &[&policy], &common::kubeconfig_path(), &[]);
        op.ready().await;
        let ours = curve_point(client, Peer::PodSet, label, n).await;
        let ours_rss = rss(op.pid());
        drop(op);
        let peer = curve_point(client, Peer::ReplicaSet, label, n).await;
        let kcm_rss = rss(component_pid("kube-controller-manager"));
        eprintln!("curve {n}: ReplicaSet {peer:?}, PodSet {ours:?}; RSS {kcm_rss:.1} vs {ours_rss:.1} MiB");
        let at = |what: &str| format!("{n} objects: {what}");
        t.ratio(&at("time until every object reports all replicas available"), peer.0, ours.0, "s", None);
        t.ratio(&at("API writes per object"), peer.1, ours.1, "", None);
        t.ratio(&at("API server CPU per object"), peer.2 * 1e3, ours.2 * 1e3, "ms CPU", None);
        t.ratio(&at("RSS"), kcm_rss, ours_rss, "MiB", None);
    }
    t
}

/// `n` objects of `peer` × [`CURVE_REPLICAS`] in a fresh namespace, created 200 at a
/// time: (seconds to converge, writes per object, API server CPU seconds per object).
async fn curve_point(client: &Client, peer: Peer, label: &str, n: usize) -> (f64, f64, f64) {
    let ns = bench_namespace(client, "bench-curve", label).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &peer.resource());
    let names: Vec<String> = (0..n).map(|i| format!("c-{i:05}")).collect();
    let before = apiserver_writes(client).await;
    let apiserver_before = component_cpu("kube-apiserver");
    let started = Instant::now();
    for chunk in names.chunks(200) {
        create_all(&api, peer, chunk, CURVE_REPLICAS, started).await;
    }
    settle(peer, &api, n, i64::from(CURVE_REPLICAS), started).await;
    let converge = started.elapsed().as_secs_f64();
    // Writes that trail the last status count too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes: f64 = controller_writes(peer, &before, &apiserver_writes(client).await).iter().sum();
    let apiserver_cpu = component_cpu("kube-apiserver") - apiserver_before;
    drop_namespace(client, &ns).await;
    (converge, writes / n as f64, apiserver_cpu / n as f64)
}

/// The effect of the owner-UID index: the operator's own child store, filled with
/// the pods of `ns` as the API server lists them, asked for every PodSet's pods by
/// index and by a scan of the namespace. Mean per lookup, `(indexed, scanned)`.
async fn children_lookup(client: &Client, ns: &str, podsets: &Api<DynamicObject>) -> (Duration, Duration) {
    use podset_host::kubernetes::object::Object;
    use podset_host::kubernetes::store::{ObjectStore, controller_uid};
    let pods: Api<Object> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod")));
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

/// The module alone at `pods`, converged, p50: decisions back to back (`hot`), and each
/// after the CPU caches were emptied (`cold`).
struct Alone {
    hot: Duration,
    cold: Duration,
}

/// A converged PodSet's decision with `pods` pods, the module alone in this process
/// (what `podset-host policy bench` measures).
fn isolated_decisions(module: &[u8], pods: usize) -> Alone {
    use podset_host::author::bench;
    let engine = podset_host::sandbox::PolicyEngine::new(podset_host::sandbox::Limits::default()).expect("engine");
    let policy = engine.load(module).expect("the policy loads");
    let rows = bench::run(&policy, &[pods], Duration::from_millis(500)).expect("policy bench");
    let p50 = |workload: &str| rows.iter().find(|r| r.workload == workload).map(|r| r.p50).unwrap_or_default();
    Alone { hot: p50("converged"), cold: p50(bench::COLD) }
}

fn date() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// `path` relative to the repository, when it is inside it.
fn relative(path: &std::path::Path) -> std::path::PathBuf {
    let root = common::workspace().canonicalize().unwrap_or_else(|_| common::workspace());
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).map_or(path.clone(), std::path::Path::to_path_buf)
}
