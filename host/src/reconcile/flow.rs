//! The flow of one reconcile of one parent: wait until this replica may act and every
//! cache it reads is current, then observe → decide → check → execute → status; a
//! failure is reported on the parent and retried with per-object backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::ApiResource;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{Instrument, info_span, warn};

use super::context::Context;
use super::decide::{self, Failed};
use super::error::{Error, Result};
use super::keys::ParentRef;
use super::kind::KindContext;
use super::observe::{self, Marks, Observed};
use super::queue::Again;
use super::urgency::Urgency;
use super::{check, execute, status, terminating, waves};
use crate::conditions::{POLICY_FAILED, RECONCILE_FAILED};
use crate::kubernetes::events::{Origin, event};
use crate::kubernetes::object::Object;
use crate::kubernetes::scope::api_for;
use crate::metrics::Deferred;
use crate::registry::{Admitted, Registry, Selection};

/// Backoff after a failed reconcile: doubles from `BACKOFF_BASE` up to `BACKOFF_MAX`,
/// reset by a success.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How soon a parent whose named policy is still loading is looked at again.
const LOADING_RETRY: Duration = Duration::from_secs(1);
/// How soon to look again at a parent whose cached copy predates this operator's own
/// last status write (the watch brings the write within milliseconds).
const BEHIND_RETRY: Duration = Duration::from_millis(50);

/// One reconcile of the parent `key` names, as the kind's work queue hands it out.
pub async fn reconcile(key: &ParentRef, kc: &KindContext) -> Result<Again> {
    let span = info_span!("reconcile", kind = %kc.kind.resource.kind, object = %format!("{}/{}", key.namespace.as_deref().unwrap_or_default(), key.name));
    async move {
        let started = Instant::now();
        let result = reconcile_inner(key, kc).await;
        kc.ctx.metrics.reconciled(started.elapsed());
        if result.is_ok() {
            forget_failures(kc, key);
        }
        result
    }
    .instrument(span)
    .await
}

async fn reconcile_inner(key: &ParentRef, kc: &KindContext) -> Result<Again> {
    let (ctx, kind) = (&kc.ctx, &kc.kind);
    // A standby keeps its caches warm and its reconciles queued; only the leader acts.
    if !until(ctx, ctx.leadership.acting()).await {
        return Ok(Again::OnChange);
    }
    // Another shard's parent: its replicas act on it.
    if !until(ctx, ctx.shard.synced()).await || !ctx.shard.serves(key.namespace.as_deref()) {
        return Ok(Again::OnChange);
    }
    let Some(parent) = kind.parents.get(key) else { return Ok(Again::OnChange) };
    // A parent that names a ReconcilePolicy waits for the first list of them, so a
    // restart does not flag its policy as missing.
    if Registry::named_by(&parent).is_some() && !until(ctx, ctx.policy_cache.synced()).await {
        return Ok(Again::OnChange);
    }
    let selection = ctx.registry.select(&parent, &kind.gvk);
    // Children in waves or marked, the parent deleted: the host deletes them, highest wave first,
    // without the policy, which has its say first only if it is there and declared a
    // finalizer still on the parent. The kinds are the controller's own, so this works
    // with the policy trapping, refused or withdrawn.
    let tearing_down = parent.metadata.deletion_timestamp.is_some()
        && parent.finalizers().iter().any(|f| f == waves::TEARDOWN_FINALIZER);
    // A kind of the teardown ledger that no policy serves: the rest is not ours to judge.
    if kind.teardown_only && !tearing_down {
        return Ok(Again::OnChange);
    }
    if tearing_down {
        let policy_first = matches!(&selection, Selection::Ready(a)
            if a.resolved.finalizer.as_ref().is_some_and(|f| parent.finalizers().contains(f)));
        if matches!(selection, Selection::Loading) {
            // A policy loading (the operator just started) may have a finalizer to go first.
            ctx.metrics.deferred(Deferred::Loading);
            return Ok(Again::After(LOADING_RETRY));
        }
        if !policy_first {
            if !until(ctx, kind.caches_for(&kind.teardown.children, &[]).synced()).await {
                return Ok(Again::OnChange);
            }
            let Some(parent) = kind.parents.get(key) else { return Ok(Again::OnChange) };
            let (resolved, caches) = (&kind.teardown, kind.as_ref());
            let observed =
                observe::gather(parent, &kind.resource, resolved, caches, &ctx.expectations, None, Marks::Any);
            execute::teardown(ctx, &observed, waves::TEARDOWN_MANAGER).await?;
            return Ok(Again::OnChange);
        }
    }
    let admitted = match selection {
        Selection::Ready(a) => a,
        Selection::Loading => {
            ctx.metrics.deferred(Deferred::Loading);
            return Ok(Again::After(LOADING_RETRY));
        }
        Selection::Unavailable(why) => {
            // Looked at: its retries are re-decisions, behind new work.
            kind.decided.record(&parent);
            if parent.metadata.deletion_timestamp.is_none() {
                report_failure(ctx, &kind.resource, &parent, POLICY_FAILED, "PolicyUnavailable", &why).await;
            }
            return Err(Error::NoPolicy(why));
        }
    };
    let resolved = &admitted.resolved;
    // Deciding from a cache that has not listed (a restart) or is stale (a broken
    // watch) would count children that are not there: wait until every cache this
    // reconcile reads is current. kube-runtime only waits for the parents' cache.
    let related: Vec<_> = resolved
        .related
        .iter()
        .map(|(r, _)| r.clone())
        .chain(resolved.lookups.iter().map(|(r, _)| r.clone()))
        .collect();
    if !until(ctx, kind.caches_for(&resolved.children, &related).synced()).await {
        return Ok(Again::OnChange);
    }
    // The parent as it is now: the wait may have outlived the one this reconcile was for.
    let Some(parent) = kind.parents.get(key) else { return Ok(Again::OnChange) };
    // Nor from a parent older than this operator's own last status write: a policy
    // keeps its state there, and would redo a step from the state before it.
    if ctx.written.is_behind(key, parent.metadata.resource_version.as_deref().unwrap_or_default()) {
        tracing::debug!("the cache has not seen the last status write yet; deciding again shortly");
        ctx.metrics.deferred(Deferred::Behind);
        return Ok(Again::After(BEHIND_RETRY));
    }

    let deleting = parent.metadata.deletion_timestamp.is_some();
    let finalizing = deleting && resolved.finalizer.as_ref().is_some_and(|f| parent.finalizers().contains(f));
    if deleting && !finalizing {
        // The garbage collector removes the children through their owner references.
        ctx.expectations.forget(key);
        return Ok(Again::OnChange);
    }
    // The policy had its say for as long as the administrator allows (it trapped, timed
    // out, or never said it was done): deletion must not depend on it.
    if let Some(finalizer) = resolved.finalizer.as_deref()
        && finalizing
        && finalizer_wait_left(&parent, ctx.finalizer_timeout).is_some_and(|left| left.is_zero())
    {
        let message = format!(
            "the policy did not finish its cleanup within {} of the deletion: the operator removed finalizer {finalizer}; \
             the garbage collector removes the children",
            humantime::format_duration(ctx.finalizer_timeout)
        );
        report_failure(ctx, &kind.resource, &parent, POLICY_FAILED, "FinalizerTimedOut", &message).await;
        // As the API server has it now: the condition's write changed its resourceVersion,
        // on which the removal is conditional.
        let api = api_for(&ctx.client, &kind.resource, parent.namespace().as_deref());
        if let Some(now) = api.get_opt(&parent.name_any()).await? {
            execute::remove_finalizer(&api, &now, finalizer).await?;
        }
        ctx.expectations.forget(key);
        return Ok(Again::OnChange);
    }

    let redecision = kind.decided.urgency(&parent) == Urgency::Routine;
    // Decided at this generation from now on, whatever the policy says: a failing one's
    // retries wait behind new work.
    kind.decided.record(&parent);
    let memory = Some(kind.lookups.clone());
    let mut observed = observe::gather(
        parent.clone(),
        &kind.resource,
        resolved,
        kind.as_ref(),
        &ctx.expectations,
        memory,
        Marks::Granted,
    );
    observed.redecision = redecision;
    act(ctx, &admitted, observed).await.map(Again::After)
}

/// Decides for `observed` with `admitted`, checks the decision and performs it.
/// Returns when to look again. The part of a reconcile that talks to the API server,
/// separate from the caches so it can be driven in-process.
pub async fn act(ctx: &Context, admitted: &Admitted, mut observed: Observed) -> Result<Duration> {
    let resolved = &admitted.resolved;
    let label = admitted.policy.label().to_string();
    let shadows = ctx.registry.shadows_for(&observed.parent, &admitted.parent_kind());
    let witnesses = decide::Witnesses {
        recorder: ctx.recorder.as_ref(),
        shadows: (!shadows.is_empty()).then_some((&ctx.shadows, shadows)),
    };
    let decided = decide::decide(&ctx.engine, admitted, &mut observed, witnesses).await;
    let observed = &observed;
    let (parent, resource) = (&observed.parent, &observed.parent_resource);
    let object = || format!("{} {}/{}", resource.kind, parent.namespace().unwrap_or_default(), parent.name_any());
    let plan = match decided {
        Ok(decided) => {
            ctx.metrics.decided(&decided.spent, observed.children.len());
            decided.plan
        }
        Err(Failed::Policy(source)) => {
            admitted.outcomes.failed(&object(), source.reason());
            report_failure(ctx, resource, parent, POLICY_FAILED, source.reason(), &source.to_string()).await;
            return Err(Error::Policy { policy: label, source });
        }
        Err(Failed::Rejected(rejection)) => {
            admitted.outcomes.failed(&object(), rejection.metric_label());
            report_failure(ctx, resource, parent, POLICY_FAILED, rejection.reason(), &rejection.to_string()).await;
            return Err(Error::Rejected { policy: label, rejection });
        }
    };
    let mut checked = match check::check(plan, observed, resolved) {
        Ok(c) => c,
        Err(rejection) => {
            admitted.outcomes.failed(&object(), rejection.metric_label());
            report_failure(ctx, resource, parent, POLICY_FAILED, rejection.reason(), &rejection.to_string()).await;
            return Err(Error::Rejected { policy: label, rejection });
        }
    };
    admitted.outcomes.decided();
    checked.waiting = waves::gate(&mut checked, observed);
    let requeue = checked.requeue.unwrap_or(ctx.resync);
    tracing::debug!(
        policy = %label,
        children = observed.children.len(),
        in_flight = observed.in_flight.creations.len() + observed.in_flight.deletions.len(),
        creates = checked.creates.len(),
        applies = checked.applies.len(),
        deletes = checked.deletes.len(),
        status = checked.status.is_some(),
        "decided"
    );
    match execute::execute(ctx, observed, admitted, checked, requeue).await {
        // Nothing it decided can be created, and the parent goes with its namespace: no
        // condition, no Event, no backoff, as the ReplicaSet controller does. A namespace
        // deleted with 200 PodSets in it cost, before, 1 200 to 1 600 refused creates, each
        // reported with two refused Events and a status write (`make bench`, 2026-11-29).
        // Its creates are held a moment (`terminating`), then decided again: were the
        // namespace made again meanwhile, its parent would not wait for the resync.
        Err(Error::NamespaceTerminating(namespace)) => {
            tracing::debug!(%namespace, "the parent's namespace is being deleted: nothing created");
            ctx.metrics.deferred(Deferred::Terminating);
            Ok(ctx.terminating.held(&namespace).unwrap_or(terminating::HOLD))
        }
        // The API server refused a child: say so on the parent (conflicts and throttling
        // are passing, and retried without alarm). A name already taken is not: the
        // host creates a child it has not seen rather than take over someone's object.
        Err(Error::Child { action, key, source: kube::Error::Api(s) })
            if !matches!(s.code, 409 | 429) || s.reason == "AlreadyExists" =>
        {
            let taken = if s.reason == "AlreadyExists" {
                " and is not this parent's: the host takes over no object it did not make"
            } else {
                ""
            };
            let message = format!("{} {key}: {}{taken}", action.verb(), s.message);
            admitted.outcomes.refused(&object(), &format!("{}: {message}", action.failed()));
            report_failure(ctx, resource, parent, RECONCILE_FAILED, action.failed(), &message).await;
            Err(Error::Child { action, key, source: kube::Error::Api(s) })
        }
        other => other,
    }
}

/// How much longer `parent`, being deleted, waits for its policy's finalizer: `None`
/// when it is not being deleted, zero once the timeout has passed.
fn finalizer_wait_left(parent: &Object, timeout: Duration) -> Option<Duration> {
    let since = parent.metadata.deletion_timestamp.as_ref()?.0;
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(since);
    // A deletion time ahead of this machine's clock counts as just now.
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    Some(timeout.saturating_sub(elapsed))
}

/// Waits for `ready`, unless the operator shuts down first; returns whether it is ready.
async fn until(ctx: &Context, ready: impl std::future::Future<Output = ()>) -> bool {
    tokio::select! {
        _ = ready => true,
        _ = ctx.shutdown.cancelled() => false,
    }
}

/// Reports a parent whose reconcile failed — its policy could not decide
/// (`PolicyFailed`), or the API server refused what it decided (`ReconcileFailed`):
/// Warning Event, condition, metric. Nothing else about it changes.
async fn report_failure(
    ctx: &Context,
    resource: &Arc<ApiResource>,
    parent: &Object,
    condition: &'static str,
    reason: &str,
    message: &str,
) {
    if condition == POLICY_FAILED {
        ctx.metrics.policy_failure(reason);
    }
    let reference = observe::reference_of(parent, resource);
    let ev = event(EventType::Warning, condition, "Reconcile", format!("{reason}: {message}"), None);
    ctx.events.publish(&reference, ev, Origin::Host);
    let next = status::next(parent, status::Ended::Failed(status::Failure { condition, reason, message }));
    let key = ObjectRef::from_obj_with(parent, resource.clone());
    if let Err(e) = status::write(&ctx.client, &ctx.written, &key, parent, next).await {
        warn!(object = %parent.name_any(), "cannot write the PolicyFailed condition: {e}");
    }
}

/// `key` is not failing any more (it succeeded, or it is gone): its backoff starts afresh.
fn forget_failures(kc: &KindContext, key: &ParentRef) {
    let mut failures = kc.ctx.failures.lock();
    if failures.remove(key).is_some() {
        kc.ctx.metrics.parents_failing(failures.len());
    }
}

/// Per-object exponential backoff; other parents are unaffected. A parent gone from the
/// cache by the time its reconcile failed (the removal of its last finalizer applied,
/// and its answer lost) is reported and not retried: nothing is left to act on.
pub fn error_policy(key: &ParentRef, parent: Option<&Object>, error: &Error, kc: &KindContext) -> Again {
    kc.ctx.metrics.reconcile_failed(error.metric_label());
    let object = format!("{}/{}", key.namespace.as_deref().unwrap_or_default(), key.name);
    let Some(parent) = parent else {
        forget_failures(kc, key);
        warn!(kind = %kc.kind.resource.kind, object = %object, "reconcile failed, and the object is gone since: {error}");
        return Again::OnChange;
    };
    let attempts = {
        let mut failures = kc.ctx.failures.lock();
        let n = *failures.entry(key.clone()).and_modify(|n| *n = n.saturating_add(1)).or_insert(1);
        kc.ctx.metrics.parents_failing(failures.len());
        n
    };
    let mut delay = BACKOFF_BASE.saturating_mul(1u32 << attempts.saturating_sub(1).min(16)).min(BACKOFF_MAX);
    // A parent being deleted is looked at again when its finalizer's time is up, if
    // that comes first.
    if let Some(left) = finalizer_wait_left(parent, kc.ctx.finalizer_timeout) {
        delay = delay.min(left.max(BACKOFF_BASE));
    }
    warn!(kind = %kc.kind.resource.kind, object = %object, attempts, retry_in = ?delay, "reconcile failed: {error}");
    Again::After(delay)
}
