//! A ReconcilePolicy's status after a load: which module serves and for which kind,
//! its `Ready` and `Failed` conditions, and what its image resolved to. Built apart
//! from the reconcile that acts, as `reconcile/status.rs` is for parents.

use std::sync::Arc;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::conditions;
use crate::contract::declarations::kind_name;
use crate::crd::{ImageStatus, PolicyMode, ReconcilePolicy, ReconcilePolicyStatus};
use crate::registry::{Admitted, PolicyRef};

/// What loading a ReconcilePolicy's module came to.
pub enum Outcome {
    /// The module the spec pins serves every parent the policy selects; what was
    /// swapped in, if anything was, and whether that brought back an earlier revision.
    Loaded {
        swapped: Option<Arc<Admitted>>,
        rolled_back: bool,
        /// Its source no longer holds it: it came from the operator's revision store.
        from_store: bool,
    },
    /// The module the spec pins is being rolled out beside the serving revision
    /// (`spec.rollout`); the rollout started now, if it did.
    RollingOut {
        started: Option<Arc<Admitted>>,
    },
    /// The rollout of the module the spec pins was aborted: the serving revision
    /// serves on, until the spec changes or the rollout is retried.
    Aborted,
    Refused {
        reason: String,
        message: String,
        retryable: bool,
    },
}

/// A refusal, before anything was loaded.
pub struct Refusal {
    pub reason: String,
    pub message: String,
    pub retryable: bool,
}

impl Refusal {
    pub fn new(reason: &str, message: String) -> Self {
        Refusal { reason: reason.into(), message, retryable: false }
    }

    pub fn retry(reason: &str, message: String) -> Self {
        Refusal { reason: reason.into(), message, retryable: true }
    }
}

impl From<Refusal> for Outcome {
    fn from(r: Refusal) -> Self {
        Outcome::Refused { reason: r.reason, message: r.message, retryable: r.retryable }
    }
}

/// The status `rp` has once `outcome` is known: `serving` is what the registry serves
/// for it now, `image` what its spec.image resolved to.
pub fn next(
    rp: &ReconcilePolicy,
    serving: Option<&Admitted>,
    outcome: &Outcome,
    image: Option<ImageStatus>,
) -> ReconcilePolicyStatus {
    let generation = rp.metadata.generation;
    let current = rp.status.clone().unwrap_or_default();
    let mut next = ReconcilePolicyStatus { observed_generation: generation, ..current.clone() };
    next.loaded_digest = serving.map(|a| a.policy.digest().to_string());
    next.kind = serving.map(|a| kind_name(&a.parent_kind()));
    if rp.spec.image.is_some() {
        next.image = image;
    }
    let serving_label = serving.map(|a| a.policy.label().to_string()).unwrap_or_else(|| "nothing".into());
    match outcome {
        Outcome::Loaded { from_store, .. } => {
            let mut doing = match rp.spec.mode {
                PolicyMode::Enforce => format!("serving {serving_label}"),
                PolicyMode::Shadow => {
                    format!("shadowing with {serving_label}: it decides beside the live policy, never acts")
                }
            };
            if let Some(why) = next.image.as_ref().and_then(|i| i.unreachable.as_ref()) {
                doing.push_str(&format!(", from the operator's cache: {why}"));
            } else if *from_store {
                doing.push_str(", from the operator's revision store: its source no longer holds it");
            }
            let ready = conditions::new("Ready", "True", "Loaded", &doing, generation);
            conditions::set(&mut next.conditions, &current.conditions, ready);
            next.conditions.retain(|c| c.type_ != "Failed");
        }
        Outcome::RollingOut { .. } => {
            let doing = format!("serving {serving_label}, and rolling out spec.sha256's module (status.rollout)");
            let ready = conditions::new("Ready", "True", "RollingOut", &doing, generation);
            conditions::set(&mut next.conditions, &current.conditions, ready);
            next.conditions.retain(|c| c.type_ != "Failed");
        }
        Outcome::Aborted => {
            let why = "the rollout of spec.sha256's module was aborted (status.rollout); change the spec, or retry it \
                       (annotation podset.dev/rollout-command=retry)";
            let failed = conditions::new("Failed", "True", "RolloutAborted", why, generation);
            conditions::set(&mut next.conditions, &current.conditions, failed);
            let ready = match serving {
                Some(_) => conditions::new(
                    "Ready",
                    "True",
                    "LastGoodServing",
                    &format!("still serving {serving_label}"),
                    generation,
                ),
                None => conditions::new("Ready", "False", "RolloutAborted", "no revision serves", generation),
            };
            conditions::set(&mut next.conditions, &current.conditions, ready);
        }
        Outcome::Refused { reason, message, .. } => {
            let failed = conditions::new("Failed", "True", reason, message, generation);
            conditions::set(&mut next.conditions, &current.conditions, failed);
            let ready = match serving {
                Some(p) => conditions::new(
                    "Ready",
                    "True",
                    "LastGoodServing",
                    &format!("still serving {}", p.policy.label()),
                    generation,
                ),
                None => conditions::new("Ready", "False", reason, "no module has loaded", generation),
            };
            conditions::set(&mut next.conditions, &current.conditions, ready);
        }
    }
    next
}

/// Writes `next` as the status of the ReconcilePolicy `key` (its lifecycle, the
/// revisions and the rollout, included as `next` has them).
pub async fn write(client: &Client, key: &PolicyRef, next: &ReconcilePolicyStatus) -> Result<(), kube::Error> {
    let api: Api<ReconcilePolicy> = Api::namespaced(client.clone(), key.namespace.as_deref().unwrap_or_default());
    let patch = serde_json::json!({ "status": {
        "loadedDigest": next.loaded_digest,
        "kind": next.kind,
        "observedGeneration": next.observed_generation,
        "conditions": next.conditions,
        // Every field, null when unset: a merge patch keeps what it does not name.
        "image": next.image.as_ref().map(|i| serde_json::json!({
            "reference": i.reference,
            "resolvedDigest": i.resolved_digest,
            "tagDigest": i.tag_digest,
            "signedBy": i.signed_by,
            "unreachable": i.unreachable,
        })),
        "revision": next.revision,
        "revisions": next.revisions,
        "rollout": next.rollout,
    }});
    api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop)
}
