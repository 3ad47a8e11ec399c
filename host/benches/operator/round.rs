//! One round: create every object at once, wait until they converge, scale to 1 and
//! back up; what it took and cost. And the namespaces rounds run in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use podset_test_support as common;

use crate::machine::{Machine, component_cpu, component_pid, cpu_seconds};
use crate::metrics::{Decisions, ShadowSplit, Split};
use crate::peer::{Heap, Peer, apiserver_metrics, controller_writes, writes_in};
use crate::shared::{Shared, Since};
use crate::sizes::Sizes;
use crate::stats::sorted;
use crate::watch::{StatusChanges, T, pods_gone, pods_ready, settle, until_all};

/// One round: create, converge, scale to 1, back up.
pub struct Round {
    pub converge: Duration,
    pub per_object: Vec<Duration>,
    /// The same from each object's own create returning.
    pub after_create: Vec<Duration>,
    /// When the last create returned.
    pub last_created: Duration,
    pub writes_per_object: f64,
    /// The same by resource, in the order of [`Peer::writes`].
    pub writes_by_resource: [f64; 4],
    /// Changes of the objects' status seen by a watch while they converged, per object,
    /// and those that moved only the list of pods it keeps (for kinds whose status keeps
    /// one, [`Peer::listed_pods`]).
    pub status_changes: f64,
    pub status_changes_listing_only: f64,
    /// CPU seconds the API server and etcd spent while it converged, per object.
    pub apiserver_cpu: f64,
    /// What the API server allocated and spent collecting meanwhile, per object.
    pub apiserver_heap: Heap,
    pub etcd_cpu: f64,
    /// CPU seconds the controller spent meanwhile, per object: the operator, or the
    /// whole controller manager for the ReplicaSet controller.
    pub controller_cpu: f64,
    /// The rest of the cluster meanwhile, per object: the controller manager beside the
    /// operator (zero for the peer, whose controller it is), the scheduler and the
    /// simulated node.
    pub kcm_beside_cpu: f64,
    pub scheduler_cpu: f64,
    pub node_cpu: f64,
    /// The whole machine's busy CPU per object (/proc/stat), and the share of its cores
    /// left idle until the last object converged: with the cores saturated, time follows
    /// the work; with idle cores, something waits.
    pub machine_cpu: f64,
    pub idle: f64,
    pub down: Duration,
    /// From the scale down's start until the pods it removed were gone from the API
    /// server (the node's work after the deletions), when the scale up starts.
    pub down_pods_gone: Duration,
    pub up: Duration,
    /// During the scale up: when the last new pod was ready (the API server, scheduler
    /// and node's work, before any status could say so), and the API server's CPU per
    /// object.
    pub up_pods_ready: Duration,
    pub up_apiserver_cpu: f64,
    /// The operator's decision and reconcile time during the round.
    pub split: Split,
    /// Its decisions of 1-9 pods during the round.
    pub few_pods: Decisions,
    /// What the shadow did during the round, when there was one.
    pub shadow: ShadowSplit,
    /// How fast the API server answered the steps the objects share with the scheduler
    /// and the node while they converged.
    pub shared: Shared,
    /// Pod creates the API server refused while the round's namespace was deleted, per
    /// object (set by the caller, who deletes it).
    pub refused_on_delete: f64,
}

/// Creates every object at once; when each create returned, from `since`, by name.
pub async fn create_all(
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

/// Sets every object's replicas to `replicas`.
async fn scale_all(api: &Api<DynamicObject>, peer: Peer, names: &[String], replicas: i32) {
    let patch = peer.scale_patch(replicas);
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

/// One round of `peer` in `ns`, reconciled by the process `controller` (whose CPU is
/// counted); with `scale`, the scale to 1 and back too.
pub async fn round(client: &Client, peer: Peer, controller: u32, ns: &str, s: &Sizes, scale: bool) -> Round {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &peer.resource());
    let settling: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &peer.settles_on());
    let names = names(s);
    // Read before the API server's CPU: the read costs it some.
    let metrics_before = apiserver_metrics(client).await;
    let (before, heap_before) = (writes_in(&metrics_before), Heap::of(&metrics_before));
    let (apiserver_before, etcd_before) = (component_cpu("kube-apiserver"), component_cpu("etcd"));
    let controller_before = cpu_seconds(controller);
    let kcm = component_pid("kube-controller-manager");
    let others = || [cpu_seconds(kcm), component_cpu("kube-scheduler"), component_cpu("node-sim")];
    let others_before = others();
    let machine_before = Machine::now();
    let audit = Since::now();
    let status_changes = peer.listed_pods().map(|field| StatusChanges::watch(api.clone(), field));
    let started = Instant::now();
    let (created, settled) = create_and_converge(client, peer, ns, s, started).await;
    let per_object = sorted(settled.values().copied());
    // From each object's own create: what the controller took, whatever the API server
    // took to accept the creates before it.
    let last_created = created.values().max().copied().unwrap_or_default();
    let after_create = sorted(settled.iter().map(|(name, at)| at.saturating_sub(created[name])));
    let converge = started.elapsed();
    let idle = Machine::now().idle_since(&machine_before);
    // Writes that trail the last status (a late condition, an Event) count too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics_after = apiserver_metrics(client).await;
    let writes_by_resource = controller_writes(peer, &before, &writes_in(&metrics_after)).map(|w| w / s.objects as f64);
    let (status_changes, status_changes_listing_only) = status_changes.map_or((0.0, 0.0), |c| c.stop(s.objects));
    let apiserver_heap = Heap::of(&metrics_after).per_object_since(&heap_before, s.objects);
    let apiserver_cpu = (component_cpu("kube-apiserver") - apiserver_before) / s.objects as f64;
    let etcd_cpu = (component_cpu("etcd") - etcd_before) / s.objects as f64;
    let controller_cpu = (cpu_seconds(controller) - controller_before) / s.objects as f64;
    let machine_cpu = Machine::now().busy_since(&machine_before) / s.objects as f64;
    let others_after = others();
    let spent = |i: usize| (others_after[i] - others_before[i]) / s.objects as f64;
    let kcm_beside_cpu = if controller == kcm { 0.0 } else { spent(0) };
    let (scheduler_cpu, node_cpu) = (spent(1), spent(2));
    let shared = Shared::of(&audit.entries(), ns);

    let (mut down, mut down_pods_gone, mut up, mut up_pods_ready, mut up_apiserver_cpu) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO, 0.0);
    if scale {
        let t = Instant::now();
        scale_all(&api, peer, &names, 1).await;
        settle(peer, &settling, s.objects, 1, t).await;
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
                scale_all(&api, peer, &names, s.replicas).await;
                settle(peer, &settling, s.objects, i64::from(s.replicas), t).await
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
        status_changes,
        status_changes_listing_only,
        apiserver_cpu,
        apiserver_heap,
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
        shared,
        refused_on_delete: 0.0,
    }
}

/// A round's objects' names.
fn names(s: &Sizes) -> Vec<String> {
    (0..s.objects).map(|i| format!("b-{i:04}")).collect()
}

/// Creates a round's objects of `peer` in `ns` at once and waits until they have
/// converged; when each create returned, and when each object converged, from `since`.
pub async fn create_and_converge(
    client: &Client,
    peer: Peer,
    ns: &str,
    s: &Sizes,
    since: Instant,
) -> (HashMap<String, Duration>, HashMap<String, Duration>) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &peer.resource());
    let settling: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &peer.settles_on());
    let created = create_all(&api, peer, &names(s), s.replicas, since).await;
    (created, converged(client, peer, (&api, &settling), ns, s, since).await)
}

/// When each object converged, from `since`: its status (or its Deployment's) settled
/// at the round's size; for a peer whose status counts pods not ready yet, its last pod
/// ready; for a Memcached, its own status `Available=True` as well.
async fn converged(
    client: &Client,
    peer: Peer,
    (objects, api): (&Api<DynamicObject>, &Api<DynamicObject>),
    ns: &str,
    s: &Sizes,
    since: Instant,
) -> HashMap<String, Duration> {
    let replicas = i64::from(s.replicas);
    if peer.says_available() {
        let what = format!("{peer:?}: every object Available");
        let (mut settled, available) = tokio::join!(
            settle(peer, api, s.objects, replicas, since),
            until_all(objects, s.objects, since, &what, Peer::available),
        );
        for (name, at) in available {
            if let Some(t) = settled.get_mut(&name) {
                *t = (*t).max(at);
            }
        }
        return settled;
    }
    if !peer.counts_pending() {
        return settle(peer, api, s.objects, replicas, since).await;
    }
    let all_pods = s.objects * usize::try_from(s.replicas).unwrap_or_default();
    let (mut settled, ready) =
        tokio::join!(settle(peer, api, s.objects, replicas, since), pods_ready(client, ns, all_pods, since));
    for (pod, at) in ready {
        if let Some(t) = peer.owner_of(&pod).and_then(|object| settled.get_mut(object)) {
            *t = (*t).max(at);
        }
    }
    settled
}

/// A fresh namespace of this benchmark (the operator serves namespaces labelled so).
pub async fn bench_namespace(client: &Client, prefix: &str, label: &str) -> String {
    let ns = common::namespace(client, prefix).await;
    let (ok, out) = common::kubectl(&["label", "namespace", &ns, label]);
    assert!(ok, "{out}");
    ns
}

/// Deletes `ns` and waits until it is gone, so the next round starts on a quiet cluster.
pub async fn drop_namespace(client: &Client, ns: &str) {
    common::delete_namespace(client, ns).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    // Three times as long as anything else: a namespace of the curve's 20 000 PodSets
    // goes with their 40 000 pods, each removed by the simulated node.
    common::eventually(&format!("namespace {ns} to be gone"), 3 * T, || async {
        namespaces.get_opt(ns).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// Restarts the controller manager with this client rate (queries per second, burst).
pub fn kcm_rate(qps: u32, burst: u32) {
    let out = std::process::Command::new(common::workspace().join("hack/cluster.sh"))
        .args(["restart", "kube-controller-manager", "TERM"])
        .arg(format!("--kube-api-qps={qps}"))
        .arg(format!("--kube-api-burst={burst}"))
        .env("CLUSTER_DIR", common::cluster_dir())
        .output()
        .expect("hack/cluster.sh runs");
    assert!(out.status.success(), "restarting the controller manager: {}", String::from_utf8_lossy(&out.stderr));
}
