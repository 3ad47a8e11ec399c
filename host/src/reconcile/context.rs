//! What every part of a running operator shares: built once by
//! [`operator::build`](crate::operator::build), handed to the reconcilers, the policy
//! sources and the HTTP endpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::crd::ReconcilePolicy;
use crate::kubernetes::cache::{CacheHealth, Caches};
use crate::kubernetes::events::Events;
use crate::kubernetes::leader::Leadership;
use crate::kubernetes::shard::Shard;
use crate::kubernetes::watches::Watches;
use crate::metrics::Metrics;
use crate::oci;
use crate::reconcile::controller::Kinds;
use crate::reconcile::expectations::Expectations;
use crate::reconcile::observe::ParentRef;
use crate::reconcile::record::Recorder;
use crate::reconcile::shadow::Shadows;
use crate::reconcile::status::Written;
use crate::registry::Registry;
use crate::sandbox::PolicyEngine;
use crate::signature::Trust;

/// The knobs a [`Context`] is made with.
pub struct ContextSettings {
    pub namespace: Option<String>,
    pub resync: Duration,
    pub concurrency: u16,
    pub debounce: Duration,
    /// Shared with the client's write counter.
    pub metrics: Arc<Metrics>,
    /// Whether this replica may write (leader election).
    pub leadership: Leadership,
    /// The namespaces served.
    pub shard: Shard,
    /// Records each decision as a scenario file (`--record-dir`).
    pub recorder: Option<Recorder>,
    /// Registries: credentials, CAs, plain-HTTP hosts.
    pub registry: oci::Settings,
    /// Modules pulled from registries, by digest; `None` runs without (it could not
    /// be made).
    pub module_cache: Option<oci::cache::Cache>,
    /// The public keys modules are verified with, and whether they must be.
    pub trust: Trust,
    /// How often registry tags are resolved again.
    pub registry_poll: Duration,
}

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
    /// How long changes to a parent's children wait for more before it is reconciled.
    pub debounce: Duration,
    /// Consecutive failures per parent, for the backoff.
    pub failures: Mutex<HashMap<ParentRef, u32>>,
    /// Cancelled when the operator shuts down.
    pub shutdown: CancellationToken,
    /// Only the leader writes: every reconcile waits for this first.
    pub leadership: Leadership,
    /// A sharded operator reconciles only the namespaces its selector matches.
    pub shard: Shard,
    pub recorder: Option<Recorder>,
    /// Shadow policies' queue and tallies.
    pub shadows: Shadows,
    pub oci: oci::Registry,
    pub module_cache: Option<oci::cache::Cache>,
    pub trust: Trust,
    pub registry_poll: Duration,
    /// The `--policy oci://` references served from the cache because their registry
    /// is unreachable: said once when it goes, once when it is back.
    pub registry_down: Mutex<std::collections::HashSet<String>>,
}

impl Context {
    /// A context for `client`, with no policy loaded yet.
    pub fn new(
        client: Client,
        engine: Arc<PolicyEngine>,
        settings: ContextSettings,
        shutdown: CancellationToken,
    ) -> std::io::Result<Arc<Self>> {
        let metrics = settings.metrics;
        let shadows = Shadows::start(metrics.clone())?;
        let events = Events::start(client.clone(), metrics.clone());
        Ok(Arc::new(Context {
            watches: Watches::new(client.clone(), settings.namespace.clone(), shutdown.clone()),
            client,
            namespace: settings.namespace,
            engine,
            registry: Registry::default(),
            kinds: Kinds::default(),
            expectations: Arc::new(Expectations::default()),
            written: Written::default(),
            events,
            metrics,
            policy_cache: CacheHealth::of::<ReconcilePolicy>(),
            resync: settings.resync,
            concurrency: settings.concurrency,
            debounce: settings.debounce,
            failures: Mutex::default(),
            shutdown,
            leadership: settings.leadership,
            shard: settings.shard,
            recorder: settings.recorder,
            shadows,
            oci: oci::Registry::new(settings.registry),
            module_cache: settings.module_cache,
            trust: settings.trust,
            registry_poll: settings.registry_poll,
            registry_down: Mutex::default(),
        }))
    }

    /// Every cache the operator holds now (they come and go with policies).
    pub fn caches(&self) -> Caches {
        let mut all = vec![self.policy_cache.clone()];
        all.extend(self.kinds.health());
        all.extend(self.watches.health());
        all.extend(self.shard.health());
        Caches::new(all)
    }
}
