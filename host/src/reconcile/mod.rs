//! The PodSet controller: gather → decide (policy) → check → act.
//!
//! - [`input`]: PodSet + controlled pods from the cache + in-flight work → policy input
//! - [`validate`]: the decision checked against the PodSet (all or nothing)
//! - [`execute`]: pods created/deleted, status written when changed
//! - [`expectations`]: what was asked of the API server and not yet observed
//! - [`pods`]: how pods are built from the template and read back

pub mod execute;
pub mod expectations;
pub mod input;
pub mod pods;
pub mod validate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};

use crate::kubernetes::cache::{CacheHealth, Caches, reflected};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{Instrument, info_span, warn};

use crate::crd::PodSet;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::policy::PolicyEngine;
use crate::registry::{Policies, Selection};
use expectations::{Expectations, Seen};

/// Backoff after a failed reconcile: doubles from `BACKOFF_BASE` up to `BACKOFF_MAX`,
/// reset by a success.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    /// Pods carrying the selector label, kept by a reflector.
    pub pods: Store<Pod>,
    /// Every PodSet in scope, kept by the controller's reflector.
    pub podsets: Store<PodSet>,
    pub expectations: Arc<Expectations>,
    pub engine: Arc<PolicyEngine>,
    pub policies: Arc<Policies>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Reconcile every PodSet at least this often, as a safety net for missed events.
    pub resync: Duration,
    /// Consecutive failures per PodSet, for the backoff.
    pub failures: Mutex<HashMap<ObjectRef<PodSet>, u32>>,
    /// The caches every reconcile reads (PodSets and pods): none acts before all are synced.
    pub caches: Caches,
    /// The ReconcilePolicy cache: PodSets that name a policy wait for it too.
    pub policy_cache: CacheHealth,
}

impl Context {
    /// Publishes an Event on `podset`, about `related` when given (the pod acted on:
    /// it makes each pod's Event its own series instead of being folded into the
    /// first one's). A failure to publish is logged, never fatal.
    pub async fn event(
        &self,
        podset: &PodSet,
        related: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let ev = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: related };
        if let Err(e) = self.recorder.publish(&ev, &podset.object_ref(&())).await {
            warn!(podset = %podset.name_any(), "cannot publish event {reason}: {e}");
        }
    }

    /// The pods `podset` controls (controller owner reference with its UID).
    fn owned_pods(&self, podset: &PodSet) -> Vec<Arc<Pod>> {
        let uid = podset.uid().unwrap_or_default();
        let ns = podset.namespace();
        self.pods.state().into_iter().filter(|p| p.namespace() == ns && pods::controlled_by(p, &uid)).collect()
    }

    /// Reports a PodSet its policy could not decide for: Warning Event, PolicyFailed
    /// condition, metric. Its pods are left exactly as they are.
    async fn report_failure(&self, podset: &PodSet, reason: &str, message: &str) {
        self.metrics.policy_failure(reason);
        self.event(podset, None, EventType::Warning, "PolicyFailed", "Reconcile", format!("{reason}: {message}")).await;
        let next = execute::next_status(podset, None, Some((reason, message)), None);
        if let Err(e) = execute::write_status(self, podset, next).await {
            warn!(podset = %podset.name_any(), "cannot write PolicyFailed condition: {e}");
        }
    }
}

/// One reconcile of one PodSet.
pub async fn reconcile(podset: Arc<PodSet>, ctx: Arc<Context>) -> Result<Action> {
    let span =
        info_span!("reconcile", podset = %format!("{}/{}", podset.namespace().unwrap_or_default(), podset.name_any()));
    async move {
        // Deciding from a cache that has not listed (a restart) or is stale (a broken
        // watch) would count pods that are not there: wait until every cache this
        // reconcile reads is current. kube-runtime only waits for the PodSet cache.
        ctx.caches.synced().await;
        if podset.spec.policy_ref.is_some() {
            ctx.policy_cache.synced().await;
        }
        let started = Instant::now();
        let result = reconcile_inner(&podset, &ctx).await;
        ctx.metrics.reconciled(started.elapsed());
        if result.is_ok()
            && let Ok(mut f) = ctx.failures.lock()
        {
            f.remove(&ObjectRef::from_obj(podset.as_ref()));
        }
        result
    }
    .instrument(span)
    .await
}

async fn reconcile_inner(podset: &PodSet, ctx: &Context) -> Result<Action> {
    let key = execute::owner_key(podset);
    if podset.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the pods through their owner references.
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let policy = match ctx.policies.select(podset) {
        Selection::Ready(p) => p,
        Selection::Loading => return Ok(Action::requeue(Duration::from_secs(1))),
        Selection::Unavailable(why) => {
            ctx.report_failure(podset, "PolicyUnavailable", &why).await;
            return Err(Error::NoPolicy(why));
        }
    };

    let owned = ctx.owned_pods(podset);
    let owned: Vec<&Pod> = owned.iter().map(Arc::as_ref).collect();
    let in_flight = ctx
        .expectations
        .in_flight(&key, |name| Seen::of(owned.iter().copied().find(|p| p.metadata.name.as_deref() == Some(name))));
    let input = input::build(podset, &owned, in_flight.clone());

    let decision = match ctx.engine.decide(policy.clone(), input).await {
        Ok(d) => d,
        Err(source) => {
            ctx.report_failure(podset, source.reason(), &source.to_string()).await;
            return Err(Error::Policy { policy: policy.label().to_string(), source });
        }
    };
    ctx.metrics.decided(decision.elapsed);
    let checked = match validate::check(decision.actions, podset, &owned, &in_flight) {
        Ok(c) => c,
        Err(reason) => {
            ctx.report_failure(podset, "InvalidDecision", &reason).await;
            return Err(Error::Rejected { policy: policy.label().to_string(), reason });
        }
    };

    execute::create_pods(ctx, podset, &checked.creates).await?;
    execute::delete_pods(ctx, podset, &checked.deletes).await?;
    let next = execute::next_status(podset, checked.status.as_ref(), None, Some(policy.digest().to_string()));
    execute::write_status(ctx, podset, next).await?;
    Ok(Action::requeue(checked.requeue.unwrap_or(ctx.resync)))
}

/// Per-object exponential backoff; other PodSets are unaffected.
pub fn error_policy(podset: Arc<PodSet>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(error.metric_label());
    let attempts = ctx.failures.lock().map_or(1, |mut f| {
        let n = f.entry(ObjectRef::from_obj(podset.as_ref())).or_insert(0);
        *n = n.saturating_add(1);
        *n
    });
    let delay = BACKOFF_BASE.saturating_mul(1u32 << attempts.saturating_sub(1).min(16)).min(BACKOFF_MAX);
    warn!(podset = %format!("{}/{}", podset.namespace().unwrap_or_default(), podset.name_any()), attempts, retry_in = ?delay, "reconcile failed: {error}");
    Action::requeue(delay)
}

/// The pod watch, reflected into `writer`, settling expectations as events arrive.
pub fn pod_events(
    api: Api<Pod>,
    writer: reflector::store::Writer<Pod>,
    expectations: Arc<Expectations>,
    health: CacheHealth,
) -> impl Stream<Item = Result<Pod, watcher::Error>> + Send {
    let config = watcher::Config::default().labels(pods::SELECTOR_LABEL);
    reflected(api, config, writer, health)
        .inspect_ok(move |ev| match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => observe(&expectations, p, Seen::of(Some(p))),
            watcher::Event::Delete(p) => observe(&expectations, p, Seen::Absent),
            _ => {}
        })
        .touched_objects()
}

/// Settles the expectation for `pod` if its controller is a PodSet.
fn observe(expectations: &Expectations, pod: &Pod, seen: Seen) {
    let Some(owner) = pod.owner_references().iter().find(|r| r.controller == Some(true) && r.kind == "PodSet") else {
        return;
    };
    let key = (pod.namespace().unwrap_or_default(), owner.name.clone());
    expectations.observe(&key, &pod.name_any(), seen);
}

/// The PodSet watch, reflected into `writer`. Generation predicate: status writes
/// (ours included) and metadata-only changes do not trigger a reconcile; spec changes
/// and new PodSets do.
pub fn podset_events(
    api: Api<PodSet>,
    writer: reflector::store::Writer<PodSet>,
    expectations: Arc<Expectations>,
    health: CacheHealth,
) -> impl Stream<Item = Result<PodSet, watcher::Error>> + Send {
    reflected(api, watcher::Config::default(), writer, health)
        // A deleted PodSet is never reconciled again: drop what was expected of it here.
        .inspect_ok(move |ev| {
            if let watcher::Event::Delete(ps) = ev {
                expectations.forget(&execute::owner_key(ps));
            }
        })
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default())
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    podset_stream: impl Stream<Item = Result<PodSet, watcher::Error>> + Send + 'static,
    pod_stream: impl Stream<Item = Result<Pod, watcher::Error>> + Send + 'static,
    requeue: impl Stream<Item = ObjectRef<PodSet>> + Send + 'static,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let reader = ctx.podsets.clone();
    Controller::for_stream(podset_stream, reader)
        .owns_stream(pod_stream)
        .reconcile_on(requeue)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!("controller: {e}");
            }
        })
        .await;
}
