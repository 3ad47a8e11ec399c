//! What every part of a running operator shares: built once by
//! [`operator::build`](crate::operator::build), handed to the reconcilers, the policy
//! sources and the HTTP endpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::kubernetes::cache::{CacheHealth, Caches};
use crate::kubernetes::events::Events;
use crate::kubernetes::watches::Watches;
use crate::metrics::Metrics;
use crate::reconcile::controller::Kinds;
use crate::reconcile::expectations::Expectations;
use crate::reconcile::observe::ParentRef;
use crate::reconcile::status::Written;
use crate::registry::Registry;
use crate::sandbox::PolicyEngine;

pub struct Context {
    pub client: Client,
    /// Only this namespace, or all when `None`.
    pub namespace: Option<String>,
    pub engine: Arc<PolicyEngine>,
    pub registry: Registry,
    pub kinds: Kinds,
    pub watches: Arc<Watches>,
    pub expectations: Arc<Expectations>,
    pub written: Written,
    pub events: Events,
    pub metrics: Arc<Metrics>,
    /// The ReconcilePolicy cache: parents that name a policy wait for it.
    pub policy_cache: CacheHealth,
    /// Reconcile every parent at least this often, as a safety net for missed events.
    pub resync: Duration,
    /// Parents of one kind reconciled at once.
    pub concurrency: u16,
    /// Consecutive failures per parent, for the backoff.
    pub failures: Mutex<HashMap<ParentRef, u32>>,
    /// Cancelled when the operator shuts down.
    pub shutdown: CancellationToken,
}

impl Context {
    /// Every cache the operator holds now (they come and go with policies).
    pub fn caches(&self) -> Caches {
        let mut all = vec![self.policy_cache.clone()];
        all.extend(self.kinds.health());
        all.extend(self.watches.health());
        Caches::new(all)
    }
}
