//! What the reconcilers share, with the policy sources and the HTTP endpoint above
//! them: built once by the operator.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::expectations::Expectations;
use super::keys::ParentRef;
use super::record::Recorder;
use super::shadow::Shadows;
use super::status::Written;
use super::terminating::Terminating;
use crate::crd::ReconcilePolicy;
use crate::kubernetes::cache::CacheHealth;
use crate::kubernetes::events::Events;
use crate::kubernetes::identity::Identities;
use crate::kubernetes::leader::Leadership;
use crate::kubernetes::ledger::Ledger;
use crate::kubernetes::namespaces::SharedNamespaceLabels;
use crate::kubernetes::shard::Shard;
use crate::kubernetes::watches::Watches;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::sandbox::PolicyEngine;

/// The knobs a [`Context`] is made with.
pub struct ContextSettings {
    pub namespace: Option<String>,
    pub resync: Duration,
    pub finalizer_timeout: Duration,
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
    /// Where the parent kinds the host tears down are written; `None` writes nowhere.
    pub ledger: Option<Ledger>,
    /// The clients acting as the service accounts policies act as.
    pub identities: Identities,
}

pub struct Context {
    pub client: Client,
    /// Only this namespace, or all when `None`.
    pub namespace: Option<String>,
    pub engine: Arc<PolicyEngine>,
    pub registry: Registry,
    pub watches: Arc<Watches>,
    pub expectations: Arc<Expectations>,
    /// Namespaces being deleted: their creates held for a moment after a refusal.
    pub terminating: Terminating,
    pub written: Written,
    pub events: Events,
    pub metrics: Arc<Metrics>,
    /// The ReconcilePolicy cache: parents that name a policy wait for it.
    pub policy_cache: CacheHealth,
    /// Reconcile every parent at least this often, as a safety net for missed events.
    pub resync: Duration,
    /// How long a parent being deleted waits for its policy's finalizer; then the host
    /// removes it.
    pub finalizer_timeout: Duration,
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
    /// The namespaces' labels, watched once a policy is granted namespaces by selector.
    pub namespace_labels: SharedNamespaceLabels,
    /// The parent kinds the host tears down ([`Ledger`]).
    pub ledger: Option<Ledger>,
    /// The clients acting as the service accounts policies act as.
    pub identities: Identities,
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
            expectations: Arc::new(Expectations::default()),
            terminating: Terminating::default(),
            written: Written::default(),
            events,
            metrics,
            policy_cache: CacheHealth::of::<ReconcilePolicy>(),
            resync: settings.resync,
            finalizer_timeout: settings.finalizer_timeout,
            concurrency: settings.concurrency,
            debounce: settings.debounce,
            failures: Mutex::default(),
            shutdown,
            leadership: settings.leadership,
            shard: settings.shard,
            recorder: settings.recorder,
            shadows,
            namespace_labels: SharedNamespaceLabels::default(),
            ledger: settings.ledger,
            identities: settings.identities,
        }))
    }
}
