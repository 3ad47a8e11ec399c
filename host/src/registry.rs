//! Which policy decides for which PodSet, and swapping them while the operator runs.
//!
//! Reads take a lock just long enough to clone an `Arc`: a swap is atomic, and a
//! reconcile already running finishes with the policy it started with.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::ResourceExt;

use crate::crd::PodSet;
use crate::policy::Policy;

/// A ReconcilePolicy: (namespace, name).
pub type PolicyKey = (String, String);

/// What a ReconcilePolicy currently offers.
#[derive(Default)]
struct Named {
    /// The last module that loaded; it keeps serving when a newer one is refused.
    serving: Option<Arc<Policy>>,
    /// Why the current spec could not be loaded, if it could not.
    error: Option<String>,
}

#[derive(Default)]
pub struct Policies {
    default: RwLock<Option<Arc<Policy>>>,
    named: RwLock<HashMap<PolicyKey, Named>>,
}

/// The outcome of choosing a PodSet's policy.
pub enum Selection {
    Ready(Arc<Policy>),
    /// The ReconcilePolicy exists and its module is being loaded: try again shortly,
    /// without alarming anyone.
    Loading,
    /// Nothing can decide; the reason is for the PodSet's PolicyFailed condition.
    Unavailable(String),
}

impl Policies {
    pub fn with_default(policy: Arc<Policy>) -> Self {
        Policies { default: RwLock::new(Some(policy)), named: RwLock::default() }
    }

    /// Replaces the default policy; returns the one it replaced.
    pub fn set_default(&self, policy: Arc<Policy>) -> Option<Arc<Policy>> {
        self.default.write().unwrap_or_else(|e| e.into_inner()).replace(policy)
    }

    pub fn default_policy(&self) -> Option<Arc<Policy>> {
        self.default.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A ReconcilePolicy was seen: PodSets referencing it wait for its module instead
    /// of failing.
    pub fn declare(&self, key: &PolicyKey) {
        self.named.write().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default();
    }

    /// Serves `policy` for `key`; returns the policy it replaced.
    pub fn serve(&self, key: &PolicyKey, policy: Arc<Policy>) -> Option<Arc<Policy>> {
        let mut named = self.named.write().unwrap_or_else(|e| e.into_inner());
        let entry = named.entry(key.clone()).or_default();
        entry.error = None;
        entry.serving.replace(policy)
    }

    /// Records that `key`'s current spec could not be loaded; whatever served keeps serving.
    pub fn refuse(&self, key: &PolicyKey, error: String) {
        self.named.write().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default().error = Some(error);
    }

    /// The ReconcilePolicy is gone.
    pub fn remove(&self, key: &PolicyKey) {
        self.named.write().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    pub fn serving(&self, key: &PolicyKey) -> Option<Arc<Policy>> {
        self.named.read().unwrap_or_else(|e| e.into_inner()).get(key).and_then(|n| n.serving.clone())
    }

    /// The policy that decides for `podset`.
    pub fn select(&self, podset: &PodSet) -> Selection {
        let Some(r) = &podset.spec.policy_ref else {
            return match self.default_policy() {
                Some(p) => Selection::Ready(p),
                None => Selection::Unavailable("the operator has no default policy loaded".into()),
            };
        };
        let key = (podset.namespace().unwrap_or_default(), r.name.clone());
        let named = self.named.read().unwrap_or_else(|e| e.into_inner());
        match named.get(&key) {
            None => Selection::Unavailable(format!("ReconcilePolicy {:?} not found in namespace {:?}", key.1, key.0)),
            Some(Named { serving: Some(p), .. }) => Selection::Ready(p.clone()),
            Some(Named { serving: None, error: None }) => Selection::Loading,
            Some(Named { serving: None, error: Some(e) }) => {
                Selection::Unavailable(format!("ReconcilePolicy {:?} has no usable module: {e}", key.1))
            }
        }
    }
}

/// Whether `podset` is decided by the ReconcilePolicy `key`.
pub fn references(podset: &PodSet, key: &PolicyKey) -> bool {
    podset.spec.policy_ref.as_ref().is_some_and(|r| r.name == key.1) && podset.namespace().as_deref() == Some(&key.0)
}
