//! Which policy decides for which PodSet, and swapping them while the operator runs.

use std::sync::{Arc, RwLock};

use crate::crd::PodSet;
use crate::policy::Policy;

/// The policies the operator currently serves. Reads take a read lock just long enough
/// to clone an `Arc`: a swap is atomic, and a reconcile already running finishes with
/// the policy it started with.
#[derive(Default)]
pub struct Policies {
    default: RwLock<Option<Arc<Policy>>>,
}

impl Policies {
    pub fn with_default(policy: Arc<Policy>) -> Self {
        Policies { default: RwLock::new(Some(policy)) }
    }

    /// Replaces the default policy; returns the one it replaced.
    pub fn set_default(&self, policy: Arc<Policy>) -> Option<Arc<Policy>> {
        let mut slot = self.default.write().unwrap_or_else(|e| e.into_inner());
        slot.replace(policy)
    }

    pub fn default_policy(&self) -> Option<Arc<Policy>> {
        self.default.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The policy that decides for `podset`, or why there is none.
    pub fn select(&self, podset: &PodSet) -> Result<Arc<Policy>, String> {
        if let Some(r) = &podset.spec.policy_ref {
            return Err(format!("ReconcilePolicy {:?} is not loaded", r.name));
        }
        self.default_policy().ok_or_else(|| "the operator has no default policy loaded".to_string())
    }
}
