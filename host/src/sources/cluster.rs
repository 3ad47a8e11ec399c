//! Policies published in the cluster: a `ReconcilePolicy` names a ConfigMap key or a
//! registry artifact holding the module and pins its digest, and optionally selects the
//! parents it decides (a canary). A controller loads each one, admits it, swaps it in,
//! re-queues the parents it concerns, and reports on the ReconcilePolicy.
//!
//! ConfigMaps are watched as metadata only (cheap, and no policy bytes are held in a
//! cache); the module is fetched when one that a ReconcilePolicy names changes. An
//! image is pulled when the spec changes, and checked again every `--registry-poll`
//! (a moved tag, a registry back up); its pull Secrets are read at every pull.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::history::{Source, Stop};
use super::image::{self, Request};
use super::policy_status::{self, Outcome, Refusal};
use super::revisions::{CosignEvidence, Evidence};
use super::rollout::{self, RolloutState};
use super::{Sources, admit, decides, namespaced_source, reconcile_policy_account, reconcile_policy_reach};
use crate::crd::{ImageStatus, PolicyMode, Reach, ReconcilePolicy, RolloutPhase};
use crate::kubernetes::cache::reflected;
use crate::kubernetes::events::{Origin, event};
use crate::kubernetes::identity::ServiceAccount;
use crate::registry::{Admitted, PolicyRef, ShadowSource};
use crate::sandbox::Digest;

/// Why a ReconcilePolicy's reconcile failed (only API errors: a bad module is a
/// reported outcome, not a failure to retry).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

fn key_of(rp: &ReconcilePolicy) -> PolicyRef {
    ObjectRef::from_obj(rp)
}

/// The ReconcilePolicy watch, reflected into `writer`. Seeing one declares it (its
/// parents wait for the module instead of failing); a deletion withdraws it at once,
/// and a relist withdraws those deleted while the watch was down.
pub fn events(
    src: Arc<Sources>,
    api: Api<ReconcilePolicy>,
    writer: reflector::store::Writer<ReconcilePolicy>,
) -> impl futures::Stream<Item = Result<ReconcilePolicy, watcher::Error>> + Send {
    let store = writer.as_reader();
    reflected(api, watcher::Config::default(), writer, src.ctx.policy_cache.clone())
        .inspect_ok(move |ev| match ev {
            watcher::Event::Apply(rp) | watcher::Event::InitApply(rp) => declare(&src, rp),
            watcher::Event::Delete(rp) => withdraw(&src, &key_of(rp)),
            watcher::Event::InitDone => {
                let present: std::collections::HashSet<PolicyRef> = store.state().iter().map(|rp| key_of(rp)).collect();
                let gone: Vec<PolicyRef> =
                    src.ctx.registry.named_keys().into_iter().filter(|k| !present.contains(k)).collect();
                for key in gone {
                    withdraw(&src, &key);
                }
            }
            _ => {}
        })
        .applied_objects()
}

/// Declares `rp`, so the parents naming it wait for its module. An invalid selector
/// is reported by its reconcile; until then it is declared without one. A new
/// selector or mode re-queues the parents of its namespace, of the kind it serves: a
/// parent it now selects or no longer selects, or whose shadow it became, is decided
/// again at once rather than at its next change.
fn declare(src: &Sources, rp: &ReconcilePolicy) {
    let key = key_of(rp);
    let changed = match src.ctx.registry.declare(&key, rp.spec.selector.as_ref(), rp.spec.mode) {
        Ok(changed) => changed,
        Err(_) => src.ctx.registry.declare(&key, None, rp.spec.mode).unwrap_or(false),
    };
    if changed && let Some(serving) = src.ctx.registry.serving(&key) {
        let n = src.kinds.requeue(&serving.parent_kind(), |p| p.namespace() == key.namespace);
        info!(rp = %key, mode = ?rp.spec.mode, requeued = n, "ReconcilePolicy selector or mode changed");
    }
}

/// Stops serving the ReconcilePolicy `key`; its parents fall back to other policies
/// (or report that none can decide) at once.
fn withdraw(src: &Arc<Sources>, key: &PolicyRef) {
    let served = src.ctx.registry.serving(key).or_else(|| src.ctx.registry.candidate(key).map(|c| c.admitted));
    let concerned: Option<(kube::core::GroupVersionKind, Vec<Arc<crate::kubernetes::object::Object>>)> =
        served.map(|a| {
            let kind = a.parent_kind();
            let parents = src.kinds.get(&kind).map(|k| k.parents.state()).unwrap_or_default();
            let concerned = parents.into_iter().filter(|p| src.ctx.registry.concerns(key, p)).collect();
            (kind, concerned)
        });
    src.ctx.registry.remove(key);
    src.ctx.shadows.forget(&ShadowSource::Named(key.clone()));
    if src.lifecycles.get(key, |t| t.rollout.as_ref().is_some_and(RolloutState::running)).unwrap_or(false) {
        src.ctx.metrics.rollout_step(&rollout::key_label(key), 0, 0);
    }
    src.lifecycles.forget(key);
    let src = src.clone();
    let key = key.clone();
    tokio::spawn(async move {
        src.kinds.sync(&src.ctx).await;
        if let Some((kind, parents)) = concerned {
            if let Some(k) = src.kinds.get(&kind) {
                parents.iter().for_each(|p| k.requeue(p));
            }
            info!(policy = %key, requeued = parents.len(), "ReconcilePolicy withdrawn");
        }
    });
}

/// Runs the ReconcilePolicy controller until `shutdown`.
pub async fn run(
    src: Arc<Sources>,
    stream: impl futures::Stream<Item = Result<ReconcilePolicy, watcher::Error>> + Send + 'static,
    store: Store<ReconcilePolicy>,
    configmaps: Api<PartialObjectMeta<ConfigMap>>,
    requeue: impl futures::Stream<Item = ObjectRef<ReconcilePolicy>> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let policies = store.clone();
    let cm_changes = watcher(configmaps, watcher::Config::default()).default_backoff().touched_objects();
    // Only a new spec (or its ConfigMap changing, below) is worth a load: the status this
    // controller writes would otherwise bring each policy back once more, and a refused
    // module would be compiled and refused a second time.
    let specs = stream.predicate_filter(predicates::generation, Default::default());
    Controller::for_stream(specs, store)
        .watches_stream(cm_changes, move |cm| {
            // The ReconcilePolicies that name this ConfigMap.
            let (ns, name) = (cm.namespace(), cm.name_any());
            policies
                .state()
                .into_iter()
                .filter(|rp| rp.namespace() == ns && rp.spec.config_map_ref.as_ref().is_some_and(|r| r.name == name))
                .map(|rp| ObjectRef::from_obj(rp.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_on(requeue)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, src)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!("ReconcilePolicy controller: {e}");
            }
        })
        .await;
}

async fn reconcile(rp: Arc<ReconcilePolicy>, src: Arc<Sources>) -> Result<Action, Error> {
    let key = key_of(&rp);
    let started = Instant::now();
    // Another shard's policy: its replicas load it and report on it.
    tokio::select! {
        _ = src.ctx.shard.synced() => {}
        _ = src.ctx.shutdown.cancelled() => return Ok(Action::await_change()),
    }
    if !src.ctx.shard.serves(rp.metadata.namespace.as_deref()) {
        return Ok(Action::await_change());
    }
    // A standby loads modules too, ready to take over; the Events and the status
    // written below are the leader's to write.
    let (outcome, image) = load(&rp, &src).await?;
    tokio::select! {
        _ = src.ctx.leadership.acting() => {}
        _ = src.ctx.shutdown.cancelled() => return Ok(Action::await_change()),
    }
    let serving = src.ctx.registry.serving(&key);
    // A shadow's decisions wait for the schemas of its kinds: asked for whenever it
    // serves as one, a module swapped in or a mode changed to Shadow (a no-op once read).
    if rp.spec.mode == PolicyMode::Shadow
        && let Some(admitted) = &serving
    {
        check_shadows_with_schemas(&src, admitted);
    }
    let current = rp.status.clone().unwrap_or_default();
    if rp.spec.image.is_some() {
        report_image(&src, &rp, current.image.as_ref(), image.as_ref());
    }
    let mut next = policy_status::next(&rp, serving.as_deref(), &outcome, image);
    let source = if rp.spec.image.is_some() { "registry" } else { "configmap" };
    let label = rollout::key_label(&key);
    match &outcome {
        Outcome::Loaded { swapped: Some(admitted), rolled_back, .. } => {
            let policy = admitted.policy.label().to_string();
            src.ctx.metrics.policy_loaded(source, true);
            let n = super::swapped(&src, &admitted.parent_kind(), |p| {
                decides(&src.ctx, admitted, p) || src.ctx.registry.concerns(&key, p)
            })
            .await;
            info!(policy = %policy, rp = %key, requeued = n, rolled_back, took = ?started.elapsed(), "ReconcilePolicy module swapped in");
            if *rolled_back {
                src.ctx.metrics.rolled_back(&label);
                let revision = src.lifecycles.get(&key, |t| t.history.serving).flatten().unwrap_or_default();
                let note = format!("Rolled back to revision {revision} ({policy}); {n} objects re-queued");
                publish(&src, &rp, EventType::Normal, "RolledBack", note);
            } else {
                let note = format!("Serving {policy}; {n} objects re-queued");
                publish(&src, &rp, EventType::Normal, "PolicyLoaded", note);
            }
        }
        Outcome::Loaded { swapped: None, .. } | Outcome::RollingOut { started: None } | Outcome::Aborted => {}
        Outcome::RollingOut { started: Some(admitted) } => {
            src.ctx.metrics.policy_loaded(source, true);
            check_shadows_with_schemas(&src, admitted);
            let step = src.ctx.registry.candidate(&key).map(|c| c.step);
            let n = super::swapped(&src, &admitted.parent_kind(), |p| src.ctx.registry.concerns(&key, p)).await;
            let progress = src
                .lifecycles
                .get(&key, |t| t.rollout.as_ref().map(|r| (i64::from(r.status.step), r.status.steps)))
                .flatten();
            if let (Some(step), Some((at, steps))) = (step, progress) {
                src.ctx.metrics.rollout_step(&label, at, rollout::share(step));
                info!(policy = %admitted.policy.label(), rp = %key, ?step, requeued = n, "rollout started");
                let note = format!("Rolling out {} in {steps} steps; step {at}: {step}", admitted.policy.label());
                publish(&src, &rp, EventType::Normal, "RolloutStarted", note);
            }
        }
        Outcome::Refused { reason, message, .. } => {
            src.ctx.metrics.policy_loaded(source, false);
            src.ctx.registry.refuse(&key, format!("{reason}: {message}"));
            warn!(rp = %key, reason, still_serving = serving.as_ref().map(|a| a.policy.label()).unwrap_or("nothing"), "ReconcilePolicy module refused: {message}");
            if next.conditions != current.conditions {
                publish(&src, &rp, EventType::Warning, "PolicyRejected", format!("{reason}: {message}"));
            }
            if serving.is_none() {
                // Its parents must learn there is nothing to decide for them.
                let kinds: HashSet<_> = src.ctx.registry.enforcing().iter().map(|a| a.parent_kind()).collect();
                for kind in kinds {
                    src.kinds.requeue(&kind, |p| src.ctx.registry.concerns(&key, p));
                }
            }
        }
    }
    let lock = src.lifecycles.write_lock(&key);
    let _held = lock.lock().await;
    if let Some((revision, revisions, rollout)) = src.lifecycles.status(&key) {
        next.revision = revision;
        next.revisions = revisions;
        next.rollout = rollout;
    }
    if next != current {
        policy_status::write(&src.ctx.client, &key, &next).await?;
    }
    // A ConfigMap change or a spec change brings us back; only a CRD yet to be
    // installed, a retryable refusal, or a registry (a moved tag, a registry back up:
    // noticed by asking again) is worth polling for.
    let retry = match &outcome {
        Outcome::Refused { retryable: true, .. } => Some(RETRY),
        _ if rp.spec.image.is_some() => Some(src.registry_poll),
        _ => None,
    };
    Ok(retry.map_or_else(Action::await_change, Action::requeue))
}

/// Shadow decisions are checked against the schemas of the kinds `admitted` writes
/// too, from now on (fetched in the background).
fn check_shadows_with_schemas(src: &Arc<Sources>, admitted: &Arc<Admitted>) {
    let (src, admitted) = (src.clone(), admitted.clone());
    tokio::spawn(async move { super::shadow_schemas(&src, &admitted).await });
}

/// How often a ReconcilePolicy whose kinds are not served yet is tried again.
const RETRY: Duration = Duration::from_secs(10);

fn error_policy(rp: Arc<ReconcilePolicy>, error: &Error, _src: Arc<Sources>) -> Action {
    warn!(rp = %rp.name_any(), "ReconcilePolicy reconcile failed: {error}");
    Action::requeue(Duration::from_secs(5))
}

/// Fetches, verifies, loads and admits the module `rp` points at, and lets it take
/// over: at once, or as a rollout when `spec.rollout` plans one (a rollback to a
/// revision that once served every parent is at once); with `spec.image`, also what the
/// image resolved to.
async fn load(rp: &ReconcilePolicy, src: &Sources) -> Result<(Outcome, Option<ImageStatus>), Error> {
    let key = key_of(rp);
    if let Err(e) = src.ctx.registry.declare(&key, rp.spec.selector.as_ref(), rp.spec.mode) {
        return Ok((Refusal::new("InvalidSelector", e).into(), None));
    }
    // Its writer is a tenant of its namespace unless that namespace is the administrator's.
    let namespace = rp.metadata.namespace.clone().unwrap_or_default();
    let reach = match reconcile_policy_reach(src, &namespace, rp.spec.reach.as_ref()) {
        Ok(reach) => reach,
        Err(e) => {
            src.ctx.metrics.policy_refused(e.reason());
            return Ok((Refusal::new(e.reason(), e.to_string()).into(), None));
        }
    };
    let acting_as = reconcile_policy_account(src, &namespace, rp.spec.service_account_name.as_deref());
    let Some(pin) = Digest::parse(&rp.spec.sha256) else {
        let message = format!("spec.sha256 {:?} is not sha256:<64 hex>", rp.spec.sha256);
        return Ok((Refusal::new("InvalidDigest", message).into(), None));
    };
    // The revisions, from the status the first time after a start.
    let known = src.lifecycles.with(&key, rp, src.revision_history, |t| t.history.get(&pin).is_some());
    let source = Source { config_map_ref: rp.spec.config_map_ref.clone(), image: rp.spec.image.clone() };
    let (module, image) = match fetch(rp, src, &source, pin, known).await? {
        (Ok(module), image) => (module, image),
        (Err(refusal), image) => return Ok((refusal.into(), image)),
    };
    let same =
        |a: &Admitted| *a.policy.digest() == pin && a.resolved.reach == reach && a.account() == acting_as.as_ref();
    let now = super::history::now();
    // The module the spec pins serves already. A rollout under way stops: the spec is
    // back on the serving revision.
    if src.ctx.registry.serving(&key).is_some_and(|a| same(&a)) {
        if let Some(c) = src.ctx.registry.drop_candidate(&key) {
            src.lifecycles.get(&key, |t| {
                t.history.stopped(c.policy.digest(), Stop::Superseded, &now);
                t.rollout = None;
            });
            src.kinds.sync(&src.ctx).await;
            src.kinds.requeue(&c.parent_kind(), |p| src.ctx.registry.concerns(&key, p));
        }
        return Ok((Outcome::Loaded { swapped: None, rolled_back: false, from_store: module.from_store }, image));
    }
    // It is being rolled out: the plan may have changed.
    if src.ctx.registry.candidate(&key).is_some_and(|c| same(&c.admitted)) {
        if let Some(plan) = &rp.spec.rollout {
            src.lifecycles.get(&key, |t| t.rollout.iter_mut().for_each(|r| r.plan = plan.clone()));
        }
        return Ok((Outcome::RollingOut { started: None }, image));
    }
    // After a restart: the revision that served, before the module rolled out beside it.
    if src.ctx.registry.serving(&key).is_none() {
        restore(rp, src, &key, pin, &reach, acting_as.as_ref()).await?;
    }
    let policy = match src.ctx.engine.load_async(module.bytes.clone()).await {
        Ok(policy) => policy,
        Err(e) => return Ok((Refusal::new(e.reason(), e.to_string()).into(), image)),
    };
    let admitted = match admit(&src.ctx, policy, &reach, acting_as.as_ref()).await.and_then(namespaced_source) {
        Ok(admitted) => Arc::new(admitted),
        Err(e) => {
            src.ctx.metrics.policy_refused(e.reason());
            let refused =
                Outcome::Refused { reason: e.reason().into(), message: e.to_string(), retryable: e.is_retryable() };
            return Ok((refused, image));
        }
    };
    if let (Some(reference), Some(fetched)) = (&rp.spec.image, &module.fetched) {
        image::remember(src, reference, fetched);
    }
    if let Some(store) = src.revisions.as_ref().filter(|_| !module.from_store)
        && let Err(e) = store.put(&module.bytes, &module.evidence)
    {
        warn!(rp = %key, "cannot keep the module for rollbacks: {e}");
    }
    Ok((take_over(rp, src, &key, admitted, &module, &now), image))
}

/// How `admitted`, just loaded for the module the spec pins, takes over.
fn take_over(
    rp: &ReconcilePolicy,
    src: &Sources,
    key: &PolicyRef,
    admitted: Arc<Admitted>,
    module: &Module,
    now: &str,
) -> Outcome {
    let pin = *admitted.policy.digest();
    let source = Source { config_map_ref: rp.spec.config_map_ref.clone(), image: rp.spec.image.clone() };
    let serving = src.ctx.registry.serving(key);
    let written = rp.status.as_ref().and_then(|s| s.rollout.clone()).filter(|r| r.digest == pin.to_string());
    src.lifecycles.with(key, rp, src.revision_history, |t| {
        let serving_digest = t.history.serving().map(|r| r.digest.clone());
        // The revision that served before a restart, or its reach changed: no takeover.
        let restart = serving_digest.as_deref() == Some(pin.to_string().as_str());
        let rollback = !restart && t.history.is_complete(&pin);
        let same_kind = serving.as_ref().is_none_or(|s| s.parent_kind() == admitted.parent_kind());
        let plan = rp.spec.rollout.as_ref().filter(|_| !restart && !rollback && same_kind);
        let superseded = src.ctx.registry.candidate(key).filter(|c| *c.admitted.policy.digest() != pin);
        if let Some(c) = &superseded {
            t.history.stopped(c.admitted.policy.digest(), Stop::Superseded, now);
        }
        let Some(plan) = plan else {
            if rollback && let Some(old) = serving.as_ref().map(|s| *s.policy.digest()) {
                t.history.stopped(&old, Stop::RolledBack, now);
            }
            if !restart || t.history.get(&pin).is_none() {
                t.history.started(&pin, &source, module.signed_by.clone(), true, now);
            }
            t.rollout = None;
            src.ctx.registry.serve(key, admitted.clone());
            return Outcome::Loaded { swapped: Some(admitted), rolled_back: rollback, from_store: module.from_store };
        };
        // What this operator knows of the module's rollout comes before what the status said.
        let pinned = pin.to_string();
        let written = t.rollout.as_ref().filter(|r| r.status.digest == pinned).map(|r| r.status.clone()).or(written);
        if written.as_ref().is_some_and(|w| w.phase == RolloutPhase::Aborted) {
            // Aborted already (before this operator started, or before the module was
            // loaded again): it stays so, until the spec changes or a retry.
            if t.history.get(&pin).is_none() {
                t.history.started(&pin, &source, module.signed_by.clone(), false, now);
                t.history.stopped(&pin, Stop::RolloutAborted, now);
            }
            let revision = t.history.get(&pin).map_or(0, |r| r.revision);
            t.rollout = Some(RolloutState::begin(admitted.clone(), plan, revision, written.as_ref()).0);
            src.ctx.registry.drop_candidate(key);
            return Outcome::Aborted;
        }
        let revision = t.history.started(&pin, &source, module.signed_by.clone(), false, now);
        let (state, step) = RolloutState::begin(admitted.clone(), plan, revision, written.as_ref());
        t.rollout = Some(state);
        src.ctx.registry.roll_out(key, admitted.clone(), step);
        Outcome::RollingOut { started: Some(admitted) }
    })
}

/// After a restart, the revision that served (`status.revision`) while the spec's
/// module rolled out beside it, or was aborted: loaded from the revision store, or its
/// source, and served again. Nothing to do when the spec's module is that revision.
async fn restore(
    rp: &ReconcilePolicy,
    src: &Sources,
    key: &PolicyRef,
    pin: Digest,
    reach: &Reach,
    acting_as: Option<&ServiceAccount>,
) -> Result<(), Error> {
    let serving = src.lifecycles.with(key, rp, src.revision_history, |t| t.history.serving().cloned());
    let Some(revision) = serving.filter(|r| r.digest != pin.to_string()) else { return Ok(()) };
    let Some(digest) = Digest::parse(&revision.digest) else { return Ok(()) };
    let (module, _) = fetch(rp, src, &Source::of(&revision), digest, true).await?;
    let module = match module {
        Ok(m) => m,
        Err(refusal) => {
            warn!(rp = %key, revision = revision.revision, "cannot bring back the serving revision: {}", refusal.message);
            return Ok(());
        }
    };
    let admitted = match src.ctx.engine.load_async(module.bytes).await {
        Ok(policy) => admit(&src.ctx, policy, reach, acting_as).await.and_then(namespaced_source),
        Err(e) => {
            warn!(rp = %key, revision = revision.revision, "cannot load the serving revision: {e}");
            return Ok(());
        }
    };
    match admitted {
        Ok(a) => {
            info!(rp = %key, revision = revision.revision, "serving revision brought back after a restart");
            src.ctx.registry.serve(key, Arc::new(a));
        }
        Err(e) => warn!(rp = %key, revision = revision.revision, "cannot admit the serving revision: {e}"),
    }
    Ok(())
}

/// A module fetched and verified, ready to load.
struct Module {
    bytes: Vec<u8>,
    /// It came from the revision store, not its source.
    from_store: bool,
    /// How it was verified, for the revision store.
    evidence: Evidence,
    signed_by: Option<String>,
    /// What a registry gave with it.
    fetched: Option<image::Fetched>,
}

/// The module `pin` from `source`; when the source cannot give it and it is one of the
/// policy's revisions (`known`), from the revision store.
async fn fetch(
    rp: &ReconcilePolicy,
    src: &Sources,
    source: &Source,
    pin: Digest,
    known: bool,
) -> Result<(Result<Module, Refusal>, Option<ImageStatus>), Error> {
    let (fetched, image) = match (&source.config_map_ref, &source.image) {
        (Some(r), None) => (from_configmap(rp, src, r, pin).await?, None),
        (None, Some(reference)) => {
            let (result, status) = from_registry(rp, src, reference, pin).await?;
            (result, Some(status))
        }
        // The schema allows exactly one (a CEL rule); a CRD of an older version might not.
        _ => {
            let message = "give exactly one of spec.configMapRef and spec.image".to_string();
            return Ok((Err(Refusal::new("InvalidSpec", message)), None));
        }
    };
    let refusal = match fetched {
        Ok(module) => return Ok((Ok(module), image)),
        Err(refusal) => refusal,
    };
    // Only a source that no longer has the module (gone, holding another one, out of
    // reach) is stood in for; one that has it and fails verification is reported.
    let gone = matches!(
        refusal.reason.as_str(),
        "ConfigMapNotFound" | "KeyNotFound" | "DigestMismatch" | "ImageNotFound" | "RegistryUnreachable"
    );
    let stored = match (&src.revisions, known && gone) {
        (Some(store), true) => store.get(&pin, &src.trust),
        _ => return Ok((Err(refusal), image)),
    };
    match stored {
        Ok(Some(stored)) => {
            info!(rp = %key_of(rp), %pin, "module from the revision store: {}", refusal.message);
            let module = Module {
                bytes: stored.module,
                from_store: true,
                evidence: Evidence::default(),
                signed_by: stored.signed_by,
                fetched: None,
            };
            Ok((Ok(module), image))
        }
        Ok(None) => Ok((Err(refusal), image)),
        Err(e) => Ok((Err(Refusal::new("RevisionStore", format!("{}; and {e}", refusal.message))), image)),
    }
}

/// The module of a ConfigMap key, checked against the pin (and its detached signature
/// `KEY.sig`, when signatures are required).
async fn from_configmap(
    rp: &ReconcilePolicy,
    src: &Sources,
    r: &crate::crd::ConfigMapKeyRef,
    pin: Digest,
) -> Result<Result<Module, Refusal>, Error> {
    let cms: Api<ConfigMap> =
        Api::namespaced(src.ctx.client.clone(), rp.metadata.namespace.as_deref().unwrap_or_default());
    let Some(cm) = cms.get_opt(&r.name).await? else {
        return Ok(Err(Refusal::new("ConfigMapNotFound", format!("ConfigMap {:?} not found", r.name))));
    };
    let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(&r.key)).map(|b| b.0.clone()) else {
        let hint = if cm.data.as_ref().is_some_and(|d| d.contains_key(&r.key)) {
            " (it is under data; a Wasm module must be under binaryData)"
        } else {
            ""
        };
        let message = format!("ConfigMap {:?} has no binaryData key {:?}{hint}", r.name, r.key);
        return Ok(Err(Refusal::new("KeyNotFound", message)));
    };
    let digest = Digest::of(&bytes);
    if digest != pin {
        let message = format!("ConfigMap {:?} key {:?} holds {digest}, but spec.sha256 pins {pin}", r.name, r.key);
        return Ok(Err(Refusal::new("DigestMismatch", message)));
    }
    let mut module = Module { bytes, from_store: false, evidence: Evidence::default(), signed_by: None, fetched: None };
    if src.trust.required {
        let sig_key = format!("{}.sig", r.key);
        let sig = (cm.data.as_ref().and_then(|d| d.get(&sig_key)).map(|s| s.as_bytes().to_vec()))
            .or_else(|| cm.binary_data.as_ref().and_then(|d| d.get(&sig_key)).map(|b| b.0.clone()));
        let beside = format!("(key {sig_key:?} of ConfigMap {:?})", r.name);
        match src.trust.verify_blob(&module.bytes, sig.as_deref(), &beside) {
            Ok(v) => module.signed_by = Some(v.key),
            Err(e) => return Ok(Err(Refusal::new(e.reason(), e.to_string()))),
        }
        module.evidence.detached = sig.map(|s| String::from_utf8_lossy(&s).trim().to_string());
    }
    Ok(Ok(module))
}

/// The module of `spec.image`: pulled by the digest its tag resolved to (resolved
/// again only when spec.image or spec.sha256 changed), with the policy's pull Secrets
/// and CA, verified, checked against the pin; and what the image resolved to.
async fn from_registry(
    rp: &ReconcilePolicy,
    src: &Sources,
    reference: &str,
    pin: Digest,
) -> Result<(Result<Module, Refusal>, ImageStatus), Error> {
    let previous = rp.status.as_ref().and_then(|s| {
        let same = s.image.as_ref().is_some_and(|i| i.reference == reference)
            && s.loaded_digest.as_deref() == Some(rp.spec.sha256.as_str());
        same.then(|| s.image.clone()).flatten()
    });
    let mut status = ImageStatus {
        reference: reference.to_string(),
        resolved_digest: previous.as_ref().and_then(|p| p.resolved_digest.clone()),
        ..Default::default()
    };
    let namespace = rp.metadata.namespace.as_deref().unwrap_or_default();
    let (credentials, ca) = match secrets(src, namespace, rp).await? {
        Ok(found) => found,
        Err(refusal) => return Ok((Err(refusal), status)),
    };
    let request =
        Request { reference, resolved: status.resolved_digest.as_deref(), credentials: &credentials, ca: &ca };
    let fetched = match image::fetch(src, &request).await {
        Ok(f) => f,
        Err(e) => {
            if e.is_unreachable() {
                status.unreachable = Some(e.to_string());
            }
            let refusal = Refusal { reason: e.reason().into(), message: e.to_string(), retryable: e.is_retryable() };
            return Ok((Err(refusal), status));
        }
    };
    status.unreachable = fetched.from_cache.as_ref().map(|e| e.to_string());
    status.signed_by = fetched.signed_by.clone();
    let digest = Digest::of(&fetched.pulled.module);
    if digest != pin {
        let message = format!(
            "{} (manifest {}) holds module {digest}, but spec.sha256 pins {pin}",
            reference, fetched.pulled.manifest_digest
        );
        return Ok((Err(Refusal::new("DigestMismatch", message)), status));
    }
    status.resolved_digest = Some(fetched.pulled.manifest_digest.clone());
    // A tag that moved since it was resolved: reported, never loaded.
    status.tag_digest = fetched.tag_now.clone().filter(|now| Some(now) != status.resolved_digest.as_ref());
    let evidence = Evidence {
        detached: None,
        cosign: src.trust.required.then(|| CosignEvidence {
            manifest: String::from_utf8_lossy(&fetched.pulled.manifest).into_owned(),
            signatures: fetched
                .signatures
                .iter()
                .map(|s| {
                    (String::from_utf8_lossy(&s.payload).into_owned(), crate::signature::encode_signature(&s.signature))
                })
                .collect(),
        }),
    };
    let module = Module {
        bytes: fetched.pulled.module.clone(),
        from_store: false,
        evidence,
        signed_by: fetched.signed_by.clone(),
        fetched: Some(fetched),
    };
    Ok((Ok(module), status))
}

/// The credentials of the policy's pull Secrets and the CA of its registryCA Secret,
/// read now (a rotated Secret counts from its next pull).
#[allow(clippy::type_complexity)]
async fn secrets(
    src: &Sources,
    namespace: &str,
    rp: &ReconcilePolicy,
) -> Result<Result<(crate::oci::auth::Credentials, Vec<Vec<u8>>), Refusal>, Error> {
    use k8s_openapi::api::core::v1::Secret;
    let api: Api<Secret> = Api::namespaced(src.ctx.client.clone(), namespace);
    let mut credentials = crate::oci::auth::Credentials::default();
    for s in &rp.spec.image_pull_secrets {
        let Some(secret) = api.get_opt(&s.name).await? else {
            return Ok(Err(Refusal::retry("SecretNotFound", format!("imagePullSecret {:?} not found", s.name))));
        };
        let json = secret.data.as_ref().and_then(|d| d.get(".dockerconfigjson")).map(|b| b.0.clone());
        let Some(json) = json else {
            let message = format!(
                "Secret {:?} is not a kubernetes.io/dockerconfigjson Secret (no .dockerconfigjson key)",
                s.name
            );
            return Ok(Err(Refusal::retry("InvalidPullSecret", message)));
        };
        if let Err(e) = credentials.add(&json, &format!("Secret {:?}", s.name)) {
            return Ok(Err(Refusal::retry("InvalidPullSecret", e)));
        }
    }
    let mut ca = Vec::new();
    if let Some(r) = &rp.spec.registry_ca {
        let Some(secret) = api.get_opt(&r.name).await? else {
            return Ok(Err(Refusal::retry("SecretNotFound", format!("registryCA Secret {:?} not found", r.name))));
        };
        let Some(pem) = secret.data.as_ref().and_then(|d| d.get(&r.key)).map(|b| b.0.clone()) else {
            return Ok(Err(Refusal::retry("SecretNotFound", format!("Secret {:?} has no key {:?}", r.name, r.key))));
        };
        ca.push(pem);
    }
    Ok(Ok((credentials, ca)))
}

/// Events for what changed about the image: a moved tag, a registry gone or back.
fn report_image(src: &Sources, rp: &ReconcilePolicy, before: Option<&ImageStatus>, now: Option<&ImageStatus>) {
    let Some(now) = now else { return };
    if now.tag_digest.is_some() && now.tag_digest != before.and_then(|b| b.tag_digest.clone()) {
        let note = format!(
            "{} now points to {}, not to {} which was resolved and serves; change spec.image or spec.sha256 to take it",
            now.reference,
            now.tag_digest.as_deref().unwrap_or_default(),
            now.resolved_digest.as_deref().unwrap_or("nothing")
        );
        publish(src, rp, EventType::Warning, "TagMoved", note);
    }
    if now.unreachable.is_some() && before.is_none_or(|b| b.unreachable.is_none()) {
        let note = now.unreachable.clone().unwrap_or_default();
        publish(src, rp, EventType::Warning, "RegistryUnreachable", note);
    }
}

fn publish(src: &Sources, rp: &ReconcilePolicy, type_: EventType, reason: &str, note: String) {
    let ev = event(type_, reason, "Load", note, None);
    src.ctx.events.publish(&rp.object_ref(&()), ev, Origin::Host);
}

/// How often the shadows' tallies are written to their ReconcilePolicies' status: a
/// shadow deciding hundreds of times a second costs one status write per policy per
/// period.
pub const SHADOW_REPORT: Duration = Duration::from_secs(5);
/// A ShadowDiffers Event is published at most this often per ReconcilePolicy.
pub const SHADOW_EVENT_EVERY: Duration = Duration::from_secs(60);

/// Until shutdown, writes each Shadow ReconcilePolicy's tally into its
/// `status.shadow` every [`SHADOW_REPORT`] when it changed, and publishes a
/// `ShadowDiffers` Event when it differed again, at most every [`SHADOW_EVENT_EVERY`].
pub async fn report_shadows(src: Arc<Sources>, policies: Store<ReconcilePolicy>) {
    // Per policy: when the last Event went out, and the differences it counted.
    let mut told: std::collections::HashMap<PolicyRef, (Instant, i64)> = Default::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SHADOW_REPORT) => {}
            _ = src.ctx.shutdown.cancelled() => return,
        }
        if !src.ctx.leadership.is_acting() {
            continue;
        }
        for (key, shadow) in src.ctx.shadows.changed() {
            let Some(rp) = policies.get(&key) else { continue };
            let api: Api<ReconcilePolicy> =
                Api::namespaced(src.ctx.client.clone(), key.namespace.as_deref().unwrap_or_default());
            let patch = serde_json::json!({ "status": { "shadow": &shadow } });
            if let Err(e) = api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                warn!(rp = %key, "cannot write status.shadow: {e}");
                continue;
            }
            let counted = told.get(&key).map_or(0, |t| t.1);
            let due = told.get(&key).is_none_or(|t| t.0.elapsed() >= SHADOW_EVENT_EVERY);
            if shadow.differed > counted && due {
                let latest = shadow.last_differences.last().map(|d| d.object.as_str()).unwrap_or("an object");
                let note = format!(
                    "{} decisions differed from the live policy's ({} in all, of {}); the latest on {latest}. \
                     See status.shadow.lastDifferences",
                    shadow.differed - counted,
                    shadow.differed,
                    shadow.decisions
                );
                publish(&src, &rp, EventType::Normal, "ShadowDiffers", note);
                told.insert(key, (Instant::now(), shadow.differed));
            }
        }
        told.retain(|key, _| policies.get(key).is_some());
    }
}
