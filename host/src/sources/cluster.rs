//! Policies published in the cluster: a `ReconcilePolicy` names a ConfigMap key
//! holding the module and pins its digest. A controller loads each one, swaps it in,
//! re-queues the PodSets that reference it, and reports on the ReconcilePolicy.
//!
//! ConfigMaps are watched as metadata only (cheap, and no policy bytes are held in a
//! cache); the module is fetched when one that a ReconcilePolicy names changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::requeue_matching;
use crate::conditions;
use crate::crd::{PodSet, ReconcilePolicy, ReconcilePolicyStatus};
use crate::kubernetes::cache::reflected;
use crate::policy::Digest;
use crate::reconcile::Context;
use crate::registry::{PolicyKey, references};

/// Why a ReconcilePolicy's reconcile failed (only API errors: a bad module is a
/// reported outcome, not a failure to retry).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// The operator's shared context (client, engine, policies, metrics, recorder,
/// PodSet cache) and the channel that re-queues the PodSets a swap concerns.
pub struct PolicyController {
    pub ctx: Arc<Context>,
    pub requeue: UnboundedSender<ObjectRef<PodSet>>,
}

fn key_of(rp: &ReconcilePolicy) -> PolicyKey {
    (rp.namespace().unwrap_or_default(), rp.name_any())
}

/// The ReconcilePolicy watch, reflected into `writer`. Seeing one declares it (its
/// PodSets wait for the module instead of failing); a deletion withdraws it at once.
pub fn events(
    api: Api<ReconcilePolicy>,
    writer: reflector::store::Writer<ReconcilePolicy>,
    ctl: Arc<PolicyController>,
) -> impl futures::Stream<Item = Result<ReconcilePolicy, watcher::Error>> + Send {
    reflected(api, watcher::Config::default(), writer, ctl.ctx.policy_cache.clone())
        .inspect_ok(move |ev| match ev {
            watcher::Event::Apply(rp) | watcher::Event::InitApply(rp) => ctl.ctx.policies.declare(&key_of(rp)),
            watcher::Event::Delete(rp) => {
                let key = key_of(rp);
                ctl.ctx.policies.remove(&key);
                let n = requeue_matching(&ctl.ctx, &ctl.requeue, |ps| references(ps, &key));
                info!(policy = %format!("{}/{}", key.0, key.1), podsets = n, "ReconcilePolicy deleted");
            }
            _ => {}
        })
        .applied_objects()
}

/// Runs the ReconcilePolicy controller until `shutdown`.
pub async fn run(
    ctl: Arc<PolicyController>,
    stream: impl futures::Stream<Item = Result<ReconcilePolicy, watcher::Error>> + Send + 'static,
    store: Store<ReconcilePolicy>,
    configmaps: Api<PartialObjectMeta<ConfigMap>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let policies = store.clone();
    let cm_changes = watcher(configmaps, watcher::Config::default()).default_backoff().touched_objects();
    Controller::for_stream(stream, store)
        .watches_stream(cm_changes, move |cm| {
            // The ReconcilePolicies that name this ConfigMap.
            let (ns, name) = (cm.namespace(), cm.name_any());
            policies
                .state()
                .into_iter()
                .filter(|rp| rp.namespace() == ns && rp.spec.config_map_ref.name == name)
                .map(|rp| ObjectRef::from_obj(rp.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctl)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!("ReconcilePolicy controller: {e}");
            }
        })
        .await;
}

async fn reconcile(rp: Arc<ReconcilePolicy>, ctl: Arc<PolicyController>) -> Result<Action, Error> {
    let key = key_of(&rp);
    let started = Instant::now();
    let outcome = load(&rp, &ctl).await?;
    let serving = ctl.ctx.policies.serving(&key);
    let generation = rp.metadata.generation;
    let current = rp.status.clone().unwrap_or_default();
    let mut next = ReconcilePolicyStatus { observed_generation: generation, ..current.clone() };
    next.loaded_digest = serving.as_ref().map(|p| p.digest().to_string());
    match &outcome {
        Outcome::Loaded { swapped } => {
            let policy = serving.as_ref().map(|p| p.label().to_string()).unwrap_or_default();
            let ready = conditions::new("Ready", "True", "Loaded", &format!("serving {policy}"), generation);
            conditions::set(&mut next.conditions, &current.conditions, ready);
            next.conditions.retain(|c| c.type_ != "Failed");
            if *swapped {
                ctl.ctx.metrics.policy_loaded("configmap", true);
                let n = requeue_matching(&ctl.ctx, &ctl.requeue, |ps| references(ps, &key));
                info!(policy = %policy, rp = %format!("{}/{}", key.0, key.1), podsets = n, took = ?started.elapsed(), "ReconcilePolicy module swapped in");
                publish(
                    &ctl,
                    &rp,
                    EventType::Normal,
                    "PolicyLoaded",
                    format!("Serving {policy}; {n} PodSets re-queued"),
                )
                .await;
            }
        }
        Outcome::Refused { reason, message } => {
            ctl.ctx.metrics.policy_loaded("configmap", false);
            ctl.ctx.policies.refuse(&key, format!("{reason}: {message}"));
            let failed = conditions::new("Failed", "True", reason, message, generation);
            conditions::set(&mut next.conditions, &current.conditions, failed);
            let ready = match &serving {
                Some(p) => conditions::new(
                    "Ready",
                    "True",
                    "LastGoodServing",
                    &format!("still serving {}", p.label()),
                    generation,
                ),
                None => conditions::new("Ready", "False", reason, "no module has loaded", generation),
            };
            conditions::set(&mut next.conditions, &current.conditions, ready);
            warn!(rp = %format!("{}/{}", key.0, key.1), reason, still_serving = serving.as_ref().map(|p| p.label()).unwrap_or("nothing"), "ReconcilePolicy module refused: {message}");
            if next.conditions != current.conditions {
                publish(&ctl, &rp, EventType::Warning, "PolicyRejected", format!("{reason}: {message}")).await;
            }
            if serving.is_none() {
                // Its PodSets must learn there is nothing to decide for them.
                requeue_matching(&ctl.ctx, &ctl.requeue, |ps| references(ps, &key));
            }
        }
    }
    if next != current {
        let api: Api<ReconcilePolicy> = Api::namespaced(ctl.ctx.client.clone(), &key.0);
        let patch = serde_json::json!({ "status": {
            "loadedDigest": next.loaded_digest,
            "observedGeneration": next.observed_generation,
            "conditions": next.conditions,
        }});
        api.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    // A ConfigMap change or a spec change brings us back; nothing to poll.
    Ok(Action::await_change())
}

fn error_policy(rp: Arc<ReconcilePolicy>, error: &Error, _ctl: Arc<PolicyController>) -> Action {
    warn!(rp = %rp.name_any(), "ReconcilePolicy reconcile failed: {error}");
    Action::requeue(Duration::from_secs(5))
}

enum Outcome {
    Loaded { swapped: bool },
    Refused { reason: String, message: String },
}

/// Fetches, verifies and loads the module `rp` points at.
async fn load(rp: &ReconcilePolicy, ctl: &PolicyController) -> Result<Outcome, Error> {
    let key = key_of(rp);
    let refuse = |reason: &str, message: String| Ok(Outcome::Refused { reason: reason.into(), message });
    let Some(pin) = Digest::parse(&rp.spec.sha256) else {
        return refuse("InvalidDigest", format!("spec.sha256 {:?} is not sha256:<64 hex>", rp.spec.sha256));
    };
    let r = &rp.spec.config_map_ref;
    let cms: Api<ConfigMap> = Api::namespaced(ctl.ctx.client.clone(), &key.0);
    let Some(cm) = cms.get_opt(&r.name).await? else {
        return refuse("ConfigMapNotFound", format!("ConfigMap {:?} not found", r.name));
    };
    let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(&r.key)).map(|b| b.0.clone()) else {
        let hint = if cm.data.as_ref().is_some_and(|d| d.contains_key(&r.key)) {
            " (it is under data; a Wasm module must be under binaryData)"
        } else {
            ""
        };
        return refuse("KeyNotFound", format!("ConfigMap {:?} has no binaryData key {:?}{hint}", r.name, r.key));
    };
    let digest = Digest::of(&bytes);
    if digest != pin {
        return refuse(
            "DigestMismatch",
            format!("ConfigMap {:?} key {:?} holds {digest}, but spec.sha256 pins {pin}", r.name, r.key),
        );
    }
    if ctl.ctx.policies.serving(&key).is_some_and(|p| *p.digest() == digest) {
        return Ok(Outcome::Loaded { swapped: false });
    }
    match ctl.ctx.engine.load_async(bytes).await {
        Ok(policy) => {
            ctl.ctx.policies.serve(&key, policy);
            Ok(Outcome::Loaded { swapped: true })
        }
        Err(e) => refuse(e.reason(), e.to_string()),
    }
}

async fn publish(ctl: &PolicyController, rp: &ReconcilePolicy, type_: EventType, reason: &str, note: String) {
    let ev = Event { type_, reason: reason.into(), note: Some(note), action: "Load".into(), secondary: None };
    if let Err(e) = ctl.ctx.recorder.publish(&ev, &rp.object_ref(&())).await {
        warn!(rp = %rp.name_any(), "cannot publish event {reason}: {e}");
    }
}
