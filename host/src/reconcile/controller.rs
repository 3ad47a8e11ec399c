//! A controller per parent kind that some policy serves, started and stopped as
//! policies come and go, without a restart: kube-runtime's watch and cache of its
//! parents, its [work queue](super::queue), and `--concurrency` reconciles at once.
//!
//! A kind's controller watches its parents and, through shared [`Watches`], the child
//! and related kinds its policies declare; a change to a child or a related object
//! re-queues the parent it concerns. When the kinds a parent kind's policies declare
//! change, its controller is stopped (in-flight reconciles finish) and a new one
//! started: two controllers never act on the same kind at once.
//!
//! [`Watches`]: crate::kubernetes::watches::Watches

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, unbounded};
use kube::ResourceExt;
use kube::api::{Api, ApiResource};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::context::Context;
use super::expectations::Seen;
use super::flow::{error_policy, reconcile};
use super::keys::{ChildKey, ParentRef};
use super::kind::{KindContext, KindState};
use super::lookups::LookupIndex;
use super::queue::{Again, WorkQueue};
use super::urgency::Urgency;
use super::waves;
use crate::contract::bindings::RelatedKind;
use crate::contract::declarations::kind_name;
use crate::kubernetes::access::Resolved;
use crate::kubernetes::cache::{CacheHealth, reflected};
use crate::kubernetes::ledger::Entry;
use crate::kubernetes::object::Object;
use crate::kubernetes::scope::{ClusterScoped, api_for};
use crate::kubernetes::watches::{ChildSeen, Route, Scope, Via};

/// How long a stopping controller's reconciles in flight get to finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What a parent kind's controller watches besides its parents: the union of what
/// the policies serving that kind declare.
#[derive(Clone, Debug, PartialEq)]
struct Shape {
    parent: ApiResource,
    children: BTreeMap<String, ApiResource>,
    related: BTreeMap<String, (ApiResource, Vec<RelatedKind>)>,
    /// Kinds looked up (contract 0.4).
    lookups: BTreeMap<String, ApiResource>,
    /// Which of these kinds are cluster-scoped (one answer per kind: discovery's).
    cluster_scoped: ClusterScoped,
    /// No policy serves the kind: its controller only tears down the parents that hold
    /// the host's teardown finalizer (a kind of the teardown ledger).
    teardown_only: bool,
}

struct Running {
    state: Arc<KindState>,
    shape: Shape,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// The running parent kinds.
#[derive(Default)]
pub struct Kinds {
    running: Mutex<HashMap<GroupVersionKind, Arc<KindState>>>,
    /// Held across a whole [`Kinds::sync`]: syncs triggered by two policy sources at
    /// once must not both start a controller for the same kind.
    controllers: tokio::sync::Mutex<HashMap<GroupVersionKind, Running>>,
    /// The kinds of the teardown ledger read at start: each runs a teardown-only
    /// controller while no policy serves it.
    remembered: Mutex<HashMap<GroupVersionKind, Shape>>,
}

impl Kinds {
    /// Starts, restarts and stops parent-kind controllers so that exactly the kinds
    /// the registry's policies serve run, each watching what they declare.
    pub async fn sync(&self, ctx: &Arc<Context>) {
        let mut desired = desired(ctx);
        for (gvk, shape) in self.remembered.lock().iter() {
            desired.entry(gvk.clone()).or_insert_with(|| shape.clone());
        }
        let mut controllers = self.controllers.lock().await;
        // A kind no policy serves any more keeps its controller while a parent of it
        // waits for the host's teardown (its children in waves, or marked): deletion must not need
        // the policy.
        let tearing_down = |r: &Running| {
            r.state.parents.state().iter().any(|p| p.finalizers().iter().any(|f| f == waves::TEARDOWN_FINALIZER))
        };
        // Nor does it lose a child kind a parent being torn down may still have: the
        // kinds of a changed shape are widened by the old ones meanwhile.
        for (gvk, r) in controllers.iter() {
            if let Some(shape) = desired.get_mut(gvk)
                && *shape != r.shape
                && tearing_down(r)
            {
                for (k, child) in &r.shape.children {
                    shape.children.entry(k.clone()).or_insert_with(|| child.clone());
                    if r.shape.cluster_scoped.contains(child) {
                        shape.cluster_scoped.insert(child);
                    }
                }
            }
        }
        let stale: Vec<GroupVersionKind> = controllers
            .iter()
            .filter(|(gvk, r)| match desired.get(*gvk) {
                Some(shape) => *shape != r.shape,
                None => !tearing_down(r),
            })
            .map(|(gvk, _)| gvk.clone())
            .collect();
        for gvk in stale {
            if let Some(r) = controllers.remove(&gvk) {
                self.running.lock().remove(&gvk);
                stop(&gvk, r).await;
            }
        }
        for (gvk, shape) in desired {
            if controllers.contains_key(&gvk) {
                continue;
            }
            let running = start(ctx, &gvk, shape);
            self.running.lock().insert(gvk.clone(), running.state.clone());
            controllers.insert(gvk, running);
        }
    }

    /// Remembers the parent kinds of the teardown ledger (before the first
    /// [`Kinds::sync`]), each with the child kinds it was written with.
    pub fn remember(&self, entries: &[Entry]) {
        let mut remembered = self.remembered.lock();
        for e in entries {
            let parent = e.parent.resource();
            let shape = remembered.entry(e.parent.gvk()).or_insert_with(|| Shape {
                parent: parent.clone(),
                children: BTreeMap::new(),
                related: BTreeMap::new(),
                lookups: BTreeMap::new(),
                cluster_scoped: ClusterScoped::default(),
                teardown_only: true,
            });
            if e.parent.cluster_scoped {
                shape.cluster_scoped.insert(&parent);
            }
            let child = e.child.resource();
            if e.child.cluster_scoped {
                shape.cluster_scoped.insert(&child);
            }
            shape.children.insert(format!("{}/{}", child.api_version, child.plural), child);
        }
    }

    /// Stops every controller (shutdown), letting in-flight reconciles finish.
    pub async fn stop_all(&self) {
        let mut controllers = self.controllers.lock().await;
        self.running.lock().clear();
        let all: Vec<(GroupVersionKind, Running)> = controllers.drain().collect();
        futures::future::join_all(all.into_iter().map(|(gvk, r)| async move { stop(&gvk, r).await })).await;
    }

    pub fn get(&self, gvk: &GroupVersionKind) -> Option<Arc<KindState>> {
        self.running.lock().get(gvk).cloned()
    }

    /// Re-queues every parent of `gvk` that `which` selects; returns how many.
    pub fn requeue(&self, gvk: &GroupVersionKind, which: impl Fn(&Object) -> bool) -> usize {
        let Some(kind) = self.get(gvk) else { return 0 };
        let mut n = 0;
        for parent in kind.parents.state() {
            if which(&parent) {
                kind.requeue(&parent);
                n += 1;
            }
        }
        n
    }

    /// Re-queues every parent in `namespace`, of every kind; returns how many.
    pub fn requeue_namespace(&self, namespace: &str) -> usize {
        let kinds: Vec<GroupVersionKind> = self.running.lock().keys().cloned().collect();
        kinds.iter().map(|gvk| self.requeue(gvk, |p| p.metadata.namespace.as_deref() == Some(namespace))).sum()
    }

    /// The parent caches' health, for `/readyz`.
    pub fn health(&self) -> Vec<CacheHealth> {
        self.running.lock().values().map(|k| k.health.clone()).collect()
    }
}

fn desired(ctx: &Context) -> HashMap<GroupVersionKind, Shape> {
    let mut out: HashMap<GroupVersionKind, Shape> = HashMap::new();
    for admitted in ctx.registry.enforcing() {
        let r = &admitted.resolved;
        let shape = out.entry(admitted.parent_kind()).or_insert_with(|| Shape {
            parent: r.parent.clone(),
            children: BTreeMap::new(),
            related: BTreeMap::new(),
            lookups: BTreeMap::new(),
            cluster_scoped: ClusterScoped::default(),
            teardown_only: false,
        });
        if r.parent_is_cluster_scoped() {
            shape.cluster_scoped.insert(&r.parent);
        }
        for c in &r.children {
            shape.children.insert(format!("{}/{}", c.api_version, c.plural), c.clone());
            if r.is_cluster_scoped(c) {
                shape.cluster_scoped.insert(c);
            }
        }
        for (res, kind) in &r.related {
            if r.is_cluster_scoped(res) {
                shape.cluster_scoped.insert(res);
            }
            let entry = shape
                .related
                .entry(format!("{}/{}", res.api_version, res.plural))
                .or_insert_with(|| (res.clone(), Vec::new()));
            if !entry.1.contains(kind) {
                entry.1.push(kind.clone());
            }
        }
        for (res, _) in &r.lookups {
            if r.is_cluster_scoped(res) {
                shape.cluster_scoped.insert(res);
            }
            shape.lookups.insert(format!("{}/{}", res.api_version, res.plural), res.clone());
        }
    }
    out
}

fn start(ctx: &Arc<Context>, gvk: &GroupVersionKind, shape: Shape) -> Running {
    // One copy of the kind for every parent's key (see `Object`'s `DynamicType`).
    let parent = Arc::new(shape.parent.clone());
    let writer = reflector::store::Writer::new(parent.clone());
    let writer_reader = writer.as_reader();
    let (requeue_tx, requeue_rx) = unbounded();
    let (changed_tx, changed_rx) = unbounded();
    let health = CacheHealth::for_resource(&shape.parent.plural, &shape.parent.group);
    let mut guards = Vec::new();
    let mut routes = Vec::new();
    let parent_namespaced = !shape.cluster_scoped.contains(&shape.parent);
    for child in shape.children.values() {
        let guard = ctx.watches.acquire(child, Scope::Children, shape.cluster_scoped.contains(child));
        let route = Arc::new(Route {
            parent: parent.clone(),
            parent_namespaced,
            notify: changed_tx.clone(),
            at_once: requeue_tx.clone(),
            via: Via::Controller { on_child: child_seen(ctx) },
        });
        guard.watched.add_route(route.clone());
        routes.push((guard.watched.clone(), route));
        guards.push(guard);
    }
    // Related objects are those the host manages (in the children watch of their kind,
    // shared with any parent kind that owns them) and the rest.
    for (res, selectors) in shape.related.values() {
        for scope in [Scope::Children, Scope::Unmanaged] {
            let guard = ctx.watches.acquire(res, scope, shape.cluster_scoped.contains(res));
            let route = Arc::new(Route {
                parent: parent.clone(),
                parent_namespaced,
                notify: changed_tx.clone(),
                at_once: requeue_tx.clone(),
                via: Via::Related { parents: writer_reader.clone(), selectors: selectors.clone() },
            });
            guard.watched.add_route(route.clone());
            routes.push((guard.watched.clone(), route));
            guards.push(guard);
        }
    }
    // Looked-up objects, too, are the host's own and the rest; a change to one re-queues
    // the parents whose last decision named it (reconcile::lookups).
    let lookups = Arc::new(LookupIndex::default());
    for res in shape.lookups.values() {
        for scope in [Scope::Children, Scope::Unmanaged] {
            let guard = ctx.watches.acquire(res, scope, shape.cluster_scoped.contains(res));
            let index = lookups.clone();
            let route = Arc::new(Route {
                parent: parent.clone(),
                parent_namespaced,
                notify: changed_tx.clone(),
                at_once: requeue_tx.clone(),
                via: Via::Lookup { parents: Arc::new(move |resource, obj| index.parents_of(resource, obj)) },
            });
            guard.watched.add_route(route.clone());
            routes.push((guard.watched.clone(), route));
            guards.push(guard);
        }
    }
    let state = Arc::new(KindState {
        resource: parent.clone(),
        gvk: gvk.clone(),
        parents: writer_reader,
        health,
        requeue: requeue_tx,
        guards,
        routes,
        lookups,
        decided: Arc::default(),
        teardown: Resolved {
            parent: shape.parent.clone(),
            children: shape.children.values().cloned().collect(),
            related: Vec::new(),
            lookups: Vec::new(),
            finalizer: None,
            cluster_scoped: shape.cluster_scoped.clone(),
            reach: Default::default(),
            namespace_labels: None,
        },
        teardown_only: shape.teardown_only,
    });
    let stop = ctx.shutdown.child_token();
    let triggers = Triggers { requeue: requeue_rx, changed: changed_rx };
    let task = tokio::spawn(run(ctx.clone(), state.clone(), writer, triggers, stop.clone()));
    if shape.teardown_only {
        info!(kind = %kind_name(gvk), children = shape.children.len(), "controller started, teardown only (the teardown ledger's; no policy serves it)");
    } else {
        info!(
            kind = %kind_name(gvk),
            children = shape.children.len(),
            related = shape.related.len(),
            lookups = shape.lookups.len(),
            "controller started"
        );
    }
    Running { state, shape, stop, task }
}

/// Settles expectations as child events arrive (a child created and deleted before a
/// reconcile looked would otherwise stay "in flight" until its TTL).
fn child_seen(ctx: &Arc<Context>) -> ChildSeen {
    let expectations = ctx.expectations.clone();
    Box::new(move |parent_ref, child, resource, gone| {
        let seen = if gone { Seen::Absent } else { Seen::of(Some(child)) };
        let key = ChildKey::new(resource, &child.namespace().unwrap_or_default(), &child.name_any());
        expectations.observe(parent_ref, &key, seen);
    })
}

async fn stop(gvk: &GroupVersionKind, r: Running) {
    r.stop.cancel();
    let mut task = r.task;
    if tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_secs(1), &mut task).await.is_err() {
        warn!(kind = %kind_name(gvk), "controller did not stop within {SHUTDOWN_GRACE:?}; aborting it");
        task.abort();
    }
    info!(kind = %kind_name(gvk), "controller stopped");
}

/// What re-queues a parent besides a change to the parent itself.
struct Triggers {
    /// Asked for by the operator (a policy swapped in or withdrawn) or a child
    /// terminating: at once.
    requeue: UnboundedReceiver<ObjectRef<Object>>,
    /// A child or related object changed: after the debounce.
    changed: UnboundedReceiver<ObjectRef<Object>>,
}

impl Triggers {
    /// Children change in bursts: five pods made at once are bound, start and become
    /// ready a few milliseconds apart, and a reconcile for each change writes a status
    /// for each. Held for `debounce` after the last change to a parent's children, they
    /// are decided once. A change to the parent itself (its spec), a swap and a child
    /// terminating are not held: a user's edit is acted on at once, and a scale-down
    /// waited 300 ms for nothing (5 → 1 took 1.41× the ReplicaSet controller's time).
    fn stream(self, debounce: Duration) -> impl futures::Stream<Item = ObjectRef<Object>> + Send {
        let changed = debounced_scheduler(
            self.changed.map(|parent| ScheduleRequest { message: parent, run_at: tokio::time::Instant::now() }),
            debounce,
        );
        futures::stream::select(self.requeue, changed)
    }
}

async fn run(
    ctx: Arc<Context>,
    kind: Arc<KindState>,
    writer: reflector::store::Writer<Object>,
    triggers: Triggers,
    stop: CancellationToken,
) {
    // A cluster-scoped parent kind is admitted only when the operator watches every
    // namespace (kubernetes::access::scopes).
    let api: Api<Object> = api_for(&ctx.client, &kind.resource, ctx.namespace.as_deref());
    let forget = ctx.clone();
    let forgotten = kind.lookups.clone();
    let undecided = kind.decided.clone();
    let resource = kind.resource.clone();
    let parents = reflected(api, watcher::Config::default(), writer, kind.health.clone())
        // A deleted parent is never reconciled again: drop what was kept about it here.
        .inspect(move |ev| {
            if let Ok(watcher::Event::Delete(p)) = ev {
                let key = ObjectRef::from_obj_with(p, resource.clone());
                forget.expectations.forget(&key);
                forget.written.forget(&key);
                forgotten.forget(&key);
                undecided.forget(p);
            }
        })
        .applied_objects()
        // Status writes (ours included) and metadata-only changes do not trigger a
        // reconcile; what a decision depends on does.
        .predicate_filter(decision_inputs, Default::default());
    let queue = Arc::new(WorkQueue::new(ctx.metrics.queue(kind.health.name())));
    let own_changes = parents.for_each({
        let (queue, kind) = (queue.clone(), kind.clone());
        move |parent| {
            match parent {
                Ok(p) => queue.add(ObjectRef::from_obj_with(&p, kind.resource.clone()), kind.decided.urgency(&p)),
                Err(e) => tracing::debug!("parents' watch: {e}"),
            }
            futures::future::ready(())
        }
    });
    let asked = triggers.stream(ctx.debounce).for_each({
        let (queue, kind) = (queue.clone(), kind.clone());
        move |key| {
            let urgency = kind.urgency(&key);
            queue.add(key, urgency);
            futures::future::ready(())
        }
    });
    let kc = Arc::new(KindContext { ctx: ctx.clone(), kind: kind.clone() });
    // Ends once stopped and the reconciles in flight are done, or after their grace.
    let deadline = async {
        stop.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = dispatch(kc, queue, stop.clone()) => {},
        () = own_changes => {},
        () = asked => {},
        () = deadline => {},
    }
}

/// Hands the queue's parents to reconciles, `--concurrency` at once (0: no limit), once
/// the parents are listed, until `stop`; then waits for the reconciles in flight.
async fn dispatch(kc: Arc<KindContext>, queue: Arc<WorkQueue>, stop: CancellationToken) {
    tokio::select! {
        listed = kc.kind.parents.wait_until_ready() => if listed.is_err() { return },
        () = stop.cancelled() => return,
    }
    let limit = match kc.ctx.concurrency {
        0 => usize::MAX,
        n => usize::from(n),
    };
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            Some(ended) = running.join_next(), if !running.is_empty() => {
                if let Err(e) = ended {
                    warn!(kind = %kc.kind.resource.kind, "a reconcile ended abnormally: {e}");
                }
            }
            key = queue.next(), if running.len() < limit => {
                running.spawn(reconcile_one(kc.clone(), queue.clone(), key));
            }
        }
    }
    while running.join_next().await.is_some() {}
}

/// One reconcile of `key`; then the queue may hand it out again, and it is asked for
/// again when the reconcile (or, failed, the error policy) said.
async fn reconcile_one(kc: Arc<KindContext>, queue: Arc<WorkQueue>, key: ParentRef) {
    // Done even if the reconcile panics: its parent must not stay taken.
    let mut taken = Taken { queue: &queue, key: &key, again: Again::OnChange, urgency: Urgency::Routine };
    taken.again = match reconcile(&key, &kc).await {
        Ok(again) => again,
        Err(e) => error_policy(&key, kc.kind.parents.get(&key).as_deref(), &e, &kc),
    };
    // A spec the reconcile did not get to decide stays new work when looked at again.
    taken.urgency = kc.kind.urgency(&key);
}

/// A parent handed out by the queue, given back when dropped.
struct Taken<'a> {
    queue: &'a WorkQueue,
    key: &'a ParentRef,
    again: Again,
    urgency: Urgency,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.queue.done(self.key, self.again, self.urgency);
    }
}

/// What a reconcile decides from, of the parent itself: its generation (the spec),
/// whether it is being deleted, and its labels (they select canary policies and
/// related objects).
fn decision_inputs(p: &Object) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    p.metadata.generation.hash(&mut h);
    p.metadata.deletion_timestamp.is_some().hash(&mut h);
    p.labels().hash(&mut h);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn pod_set(name: &str) -> ObjectRef<Object> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodSet"));
        ObjectRef::new_with(name, Arc::new(resource)).within("ns")
    }

    /// Advances the paused clock by `ms` and returns what the stream emitted meanwhile.
    async fn after(ms: u64, out: &mut (impl futures::Stream<Item = ObjectRef<Object>> + Unpin)) -> Vec<String> {
        tokio::time::advance(Duration::from_millis(ms)).await;
        let mut names = Vec::new();
        while let Some(Some(r)) = out.next().now_or_never() {
            names.push(r.name);
        }
        names
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_child_changes_is_one_reconcile_after_the_last_and_a_requeue_is_not_held() {
        let (requeue, requeue_rx) = unbounded();
        let (changed, changed_rx) = unbounded();
        let mut out =
            Box::pin(Triggers { requeue: requeue_rx, changed: changed_rx }.stream(Duration::from_millis(100)));

        // Five pods of `a` change 40 ms apart: each restarts the wait.
        for _ in 0..5 {
            changed.unbounded_send(pod_set("a")).expect("send");
            // The controller polls all the time; here, a poll takes the change in now.
            assert_eq!(after(0, &mut out).await, Vec::<String>::new());
            assert_eq!(after(40, &mut out).await, Vec::<String>::new());
        }
        // A policy swap re-queues `b` while `a` is held: at once.
        requeue.unbounded_send(pod_set("b")).expect("send");
        assert_eq!(after(0, &mut out).await, ["b"]);
        assert_eq!(after(59, &mut out).await, Vec::<String>::new());
        assert_eq!(after(2, &mut out).await, ["a"], "100 ms after the last change, once");
        assert_eq!(after(500, &mut out).await, Vec::<String>::new());
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_debounce_every_change_is_passed_on_at_once() {
        let (_requeue, requeue_rx) = unbounded();
        let (changed, changed_rx) = unbounded();
        let mut out = Box::pin(Triggers { requeue: requeue_rx, changed: changed_rx }.stream(Duration::ZERO));
        changed.unbounded_send(pod_set("a")).expect("send");
        assert_eq!(after(0, &mut out).await, ["a"]);
        changed.unbounded_send(pod_set("a")).expect("send");
        assert_eq!(after(0, &mut out).await, ["a"]);
    }
}
