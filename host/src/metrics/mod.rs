//! Prometheus metrics (`/metrics`), shared by the controller, the policy sources and
//! the Kubernetes client's write counter.

pub mod spent;

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets, linear_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};

use spent::Spent;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub verb: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChildrenLabels {
    /// How many children the decision was told about, bucketed: `0`, `1-9`, `10-99`, …
    pub children: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The shadow: `namespace/name` of its ReconcilePolicy, or its `--shadow` file.
    pub policy: String,
    /// `agree`, `differ`, `failed` or `dropped`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    /// `namespace/name` of the ReconcilePolicy.
    pub policy: String,
    /// `completed` or `aborted`.
    pub result: String,
    /// The gate that aborted it (`failedDecisions`, `reconcileFailures`,
    /// `shadowAgreement`, `readiness`, `Manual`); empty when it completed.
    pub gate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// What the cache holds: `pods`, `podsets.podset.dev`, `namespaces`, …
    pub cache: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The parent kind: `podsets.podset.dev`, `tenants.podset.dev`, …
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    pub kind: String,
    /// `changed` (new, edited or being deleted: its spec not yet decided) or `routine`.
    pub urgency: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadLabels {
    pub source: String,
    pub result: String,
}

/// Why a reconcile stopped short, to run again soon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deferred {
    /// The parents' cache had not yet seen this replica's last status write.
    Behind,
    /// The parent changed under the decision.
    Conflict,
    /// The parent's policy was still loading.
    Loading,
    /// The parent's namespace is being deleted: its creates are held.
    Terminating,
}

impl Deferred {
    pub fn as_str(self) -> &'static str {
        match self {
            Deferred::Behind => "behind",
            Deferred::Conflict => "conflict",
            Deferred::Loading => "loading",
            Deferred::Terminating => "terminating",
        }
    }
}

pub struct Metrics {
    pub registry: Registry,
    /// What was registered, as registered: the metrics reference is generated from it
    /// (the registry's own text leaves out families with no sample yet).
    pub described: Vec<Described>,
    reconciles: Counter,
    reconcile_failures: Family<ReasonLabels, Counter>,
    reconciles_deferred: Family<ReasonLabels, Counter>,
    reconcile_duration: Histogram,
    decision_duration: Family<ChildrenLabels, Histogram, fn() -> Histogram>,
    decision_cpu: Family<ChildrenLabels, Histogram, fn() -> Histogram>,
    decision_calls: Histogram,
    policy_failures: Family<ReasonLabels, Counter>,
    pub api_writes: Family<WriteLabels, Counter>,
    pub writes_fenced: Counter,
    policy_loads: Family<LoadLabels, Counter>,
    events_dropped: Family<ReasonLabels, Counter>,
    decisions_recorded: Family<ResultLabels, Counter>,
    shadow_decisions: Family<ShadowLabels, Counter>,
    shadow_duration: Family<PolicyLabels, Histogram, fn() -> Histogram>,
    policies_refused: Family<ReasonLabels, Counter>,
    leader: Gauge,
    shard_namespaces: Gauge,
    rollout_step: Family<PolicyLabels, Gauge>,
    rollout_percent: Family<PolicyLabels, Gauge>,
    rollouts: Family<RolloutLabels, Counter>,
    rollbacks: Family<PolicyLabels, Counter>,
    file_revisions: Family<PolicyLabels, Gauge>,
    watches: Gauge,
    cached_objects: Family<CacheLabels, Gauge>,
    registry_fetches: Family<ResultLabels, Counter>,
    parents_failing: Gauge,
    queue_depth: Family<KindLabels, Gauge>,
    queue_wait: Family<WaitLabels, Histogram, fn() -> Histogram>,
    resident: Gauge,
}

/// What one parent kind's work queue reports: how many parents wait, and how long each
/// waited for its reconcile, new work and routine apart. Unregistered by default (tests).
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    pub depth: Gauge,
    pub waited_changed: Histogram,
    pub waited_routine: Histogram,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        QueueMetrics { depth: Gauge::default(), waited_changed: wait_buckets(), waited_routine: wait_buckets() }
    }
}

/// One registered metric, as `/metrics` names it.
#[derive(Clone, Debug)]
pub struct Described {
    pub name: String,
    /// `counter`, `gauge`, `histogram`.
    pub kind: String,
    pub help: String,
}

/// Registers each metric and keeps its description.
struct Registrar {
    registry: Registry,
    described: Vec<Described>,
}

impl Registrar {
    fn add<M: Metric + TypedMetric>(&mut self, name: &str, help: &str, unit: Option<Unit>, metric: M) {
        let kind = format!("{:?}", M::TYPE).to_lowercase();
        let mut exposed = format!("podset_{name}");
        if let Some(u) = &unit {
            exposed = format!("{exposed}_{}", u.as_str());
        }
        if kind == "counter" {
            exposed.push_str("_total");
        }
        self.described.push(Described { name: exposed, kind, help: help.to_string() });
        match unit {
            Some(u) => self.registry.register_with_unit(name, help, u, metric),
            None => self.registry.register(name, help, metric),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registrar { registry: Registry::with_prefix("podset"), described: Vec::new() };
        let m = Metrics {
            reconciles: Counter::default(),
            reconcile_failures: Family::default(),
            reconciles_deferred: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            decision_duration: Family::new_with_constructor(decision_buckets),
            decision_cpu: Family::new_with_constructor(decision_buckets),
            // 1 to MAX_CALLS (5): the host stops calling after 5 (`LookupsUnstable`).
            decision_calls: Histogram::new(linear_buckets(1.0, 1.0, 5)),
            policy_failures: Family::default(),
            api_writes: Family::default(),
            writes_fenced: Counter::default(),
            policy_loads: Family::default(),
            events_dropped: Family::default(),
            decisions_recorded: Family::default(),
            shadow_decisions: Family::default(),
            shadow_duration: Family::new_with_constructor(decision_buckets),
            policies_refused: Family::default(),
            leader: Gauge::default(),
            shard_namespaces: Gauge::default(),
            rollout_step: Family::default(),
            rollout_percent: Family::default(),
            rollouts: Family::default(),
            rollbacks: Family::default(),
            file_revisions: Family::default(),
            watches: Gauge::default(),
            cached_objects: Family::default(),
            registry_fetches: Family::default(),
            parents_failing: Gauge::default(),
            queue_depth: Family::default(),
            queue_wait: Family::new_with_constructor(wait_buckets),
            resident: Gauge::default(),
            registry: Registry::default(),
            described: Vec::new(),
        };
        registry.add("reconciles", "Reconciles run", None, m.reconciles.clone());
        registry.add("reconcile_failures", "Reconciles failed, by error", None, m.reconcile_failures.clone());
        registry.add(
            "reconciles_deferred",
            "Reconciles cut short to run again soon, by reason: behind (the cache had not yet seen this \
             replica's last status write: nothing decided; again in 50 ms), conflict (the parent changed under the \
             decision: its status write was refused, or a re-decision about to write found another version on the \
             API server; again in 200 ms), loading (the parent's policy was still loading; again in 1 s), \
             terminating (the parent's namespace is being deleted: nothing created in it for 1 s after a refusal; \
             again when that second ends)",
            None,
            m.reconciles_deferred.clone(),
        );
        registry.add("reconcile_duration", "Reconcile duration", Some(Unit::Seconds), m.reconcile_duration.clone());
        registry.add(
            "policy_decision_duration",
            "Policy decision duration (fresh instance + call), by the number of children decided about",
            Some(Unit::Seconds),
            m.decision_duration.clone(),
        );
        registry.add(
            "policy_decision_cpu",
            "CPU time of the thread deciding, by the number of children decided about: \
             less than the duration by the time the decision waited for a core",
            Some(Unit::Seconds),
            m.decision_cpu.clone(),
        );
        registry.add(
            "policy_decision_calls",
            "Policy calls one reconcile's decision took: one, plus one per round of lookups the host \
             answered first (contract 0.4)",
            None,
            m.decision_calls.clone(),
        );
        registry.add(
            "policy_failures",
            "Decisions a policy could not make, by reason",
            None,
            m.policy_failures.clone(),
        );
        registry.add("api_writes", "Write requests sent to the Kubernetes API", None, m.api_writes.clone());
        registry.add(
            "writes_fenced",
            "Write requests not sent, or abandoned unanswered, because this replica's lease deadline had passed (or it did not lead)",
            None,
            m.writes_fenced.clone(),
        );
        registry.add(
            "watches",
            "Watch streams this replica holds open, each feeding a cache shared by every policy that reads its \
             kind: ReconcilePolicies, parents, children, related and looked-up kinds, namespaces",
            None,
            m.watches.clone(),
        );
        registry.add(
            "cached_objects",
            "Objects each cache holds now, by cache (one per watch stream, and the parents' and ReconcilePolicies' \
             own; `pods` holds the children, `pods (unmanaged)` the others a policy relates to); the operator's \
             memory grows with them",
            None,
            m.cached_objects.clone(),
        );
        registry.add(
            "leader",
            "1 while this replica acts (holds the Lease, or runs without leader election), 0 on standby",
            None,
            m.leader.clone(),
        );
        registry.add(
            "shard_namespaces",
            "The namespaces this shard serves (its --namespace-selector matches); 0 when unsharded",
            None,
            m.shard_namespaces.clone(),
        );
        registry.add("policy_loads", "Policy module loads, by source and result", None, m.policy_loads.clone());
        registry.add(
            "policies_refused",
            "Policies refused at admission (kind not served, forbidden by RBAC, …), by reason",
            None,
            m.policies_refused.clone(),
        );
        registry.add(
            "events_dropped",
            "Events not published, by reason: a policy's over its per-object rate limit, or any when the queue is full",
            None,
            m.events_dropped.clone(),
        );
        registry.add(
            "decisions_recorded",
            "Decisions given to --record-dir, by result: written, dropped (the writer was behind) or failed",
            None,
            m.decisions_recorded.clone(),
        );
        registry.add(
            "shadow_decisions",
            "Shadow decisions, by shadow and outcome: agree, differ, failed (trap, deadline, memory, \
             refused by the checks) or dropped (the shadow queue was full)",
            None,
            m.shadow_decisions.clone(),
        );
        registry.add(
            "shadow_decision_duration",
            "Shadow decision duration (fresh instance + call), by shadow",
            Some(Unit::Seconds),
            m.shadow_duration.clone(),
        );
        registry.add(
            "rollout_step",
            "The step a ReconcilePolicy's rollout is at, from 1; 0 when none runs",
            None,
            m.rollout_step.clone(),
        );
        registry.add(
            "rollout_percent",
            "The share of a ReconcilePolicy's parents its rollout's new module decides for, in percent \
             (0 in a shadow step and when none runs)",
            None,
            m.rollout_percent.clone(),
        );
        registry.add(
            "rollouts",
            "Rollouts that ended, by ReconcilePolicy, result (completed, aborted) and the gate that aborted them",
            None,
            m.rollouts.clone(),
        );
        registry.add(
            "policy_rollbacks",
            "Revisions of a ReconcilePolicy brought back (a spec pinning a revision that once served every parent)",
            None,
            m.rollbacks.clone(),
        );
        registry.add(
            "policy_file_revision",
            "The revision a --policy or --shadow file serves: 1 for its first module, one more for each module of \
             another digest since the operator started (the log's `policy serving` line names its digest)",
            None,
            m.file_revisions.clone(),
        );
        registry.add(
            "registry_fetches",
            "Fetches of policy modules from OCI registries, by result: fetched, cached (the registry did not \
             answer and the module cache served), unreachable (and nothing cached) or failed",
            None,
            m.registry_fetches.clone(),
        );
        registry.add(
            "parents_failing",
            "Parents whose last reconcile failed (their policy, a refused write, the API server), retried with backoff",
            None,
            m.parents_failing.clone(),
        );
        registry.add(
            "queue_depth",
            "Parents of each kind waiting in its work queue for a reconcile (not counting those being reconciled)",
            None,
            m.queue_depth.clone(),
        );
        registry.add(
            "queue_wait",
            "Time a parent waited in its kind's work queue before its reconcile started, by kind and urgency: \
             changed (new, edited or being deleted) goes ahead of routine (resyncs, its children's changes)",
            Some(Unit::Seconds),
            m.queue_wait.clone(),
        );
        registry.add(
            "resident_memory",
            "Resident set of the operator's process (VmRSS), read at each scrape",
            Some(Unit::Bytes),
            m.resident.clone(),
        );
        Metrics { registry: registry.registry, described: registry.described, ..m }
    }
}

impl Metrics {
    pub fn reconciled(&self, took: Duration) {
        self.reconciles.inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    pub fn reconcile_failed(&self, reason: &str) {
        self.reconcile_failures.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    /// A reconcile stopped short, to run again soon (see `reconciles_deferred`).
    pub fn deferred(&self, reason: Deferred) {
        self.reconciles_deferred.get_or_create(&ReasonLabels { reason: reason.as_str().into() }).inc();
    }

    /// A decision made in `spent.len()` calls, each `spent`, about `children` children.
    pub fn decided(&self, spent: &[Spent], children: usize) {
        let bucket = match children {
            0 => "0",
            1..=9 => "1-9",
            10..=99 => "10-99",
            100..=999 => "100-999",
            _ => "1000+",
        };
        let labels = ChildrenLabels { children: bucket.into() };
        for call in spent {
            self.decision_duration.get_or_create(&labels).observe(call.wall.as_secs_f64());
            self.decision_cpu.get_or_create(&labels).observe(call.cpu.as_secs_f64());
        }
        self.decision_calls.observe(spent.len() as f64);
    }

    pub fn policy_refused(&self, reason: &str) {
        self.policies_refused.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    pub fn shard_serves(&self, namespaces: usize) {
        self.shard_namespaces.set(i64::try_from(namespaces).unwrap_or(i64::MAX));
    }

    pub fn leading(&self, acting: bool) {
        self.leader.set(i64::from(acting));
    }

    pub fn event_dropped(&self, reason: &str) {
        self.events_dropped.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    pub fn decision_recorded(&self, result: &str) {
        self.decisions_recorded.get_or_create(&ResultLabels { result: result.into() }).inc();
    }

    pub fn shadow_decided(&self, policy: &str, outcome: &str, took: Option<Duration>) {
        self.shadow_decisions.get_or_create(&ShadowLabels { policy: policy.into(), outcome: outcome.into() }).inc();
        if let Some(took) = took {
            self.shadow_duration.get_or_create(&PolicyLabels { policy: policy.into() }).observe(took.as_secs_f64());
        }
    }

    pub fn policy_failure(&self, reason: &str) {
        self.policy_failures.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    pub fn policy_loaded(&self, source: &str, ok: bool) {
        let result = if ok { "ok" } else { "rejected" };
        self.policy_loads.get_or_create(&LoadLabels { source: source.into(), result: result.into() }).inc();
    }

    /// A rollout of `policy` is at step `step` (from 1), its module deciding for
    /// `percent` of the parents.
    pub fn rollout_step(&self, policy: &str, step: i64, percent: i64) {
        let labels = PolicyLabels { policy: policy.into() };
        self.rollout_step.get_or_create(&labels).set(step);
        self.rollout_percent.get_or_create(&labels).set(percent);
    }

    /// A rollout of `policy` ended: `completed`, or `aborted` by `gate`.
    pub fn rollout_ended(&self, policy: &str, result: &str, gate: Option<&str>) {
        let labels =
            RolloutLabels { policy: policy.into(), result: result.into(), gate: gate.unwrap_or_default().into() };
        self.rollouts.get_or_create(&labels).inc();
        self.rollout_step(policy, 0, 0);
    }

    pub fn file_revision(&self, file: &str, revision: u64) {
        let labels = PolicyLabels { policy: file.into() };
        self.file_revisions.get_or_create(&labels).set(i64::try_from(revision).unwrap_or(i64::MAX));
    }

    /// `n` watch streams are open (read when `/metrics` is scraped).
    pub fn watches(&self, n: usize) {
        self.watches.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The objects each cache holds (read when `/metrics` is scraped). A cache that is
    /// gone (its last policy unloaded) leaves no series behind.
    pub fn cached<'a>(&self, caches: impl IntoIterator<Item = (&'a str, usize)>) {
        self.cached_objects.clear();
        for (cache, objects) in caches {
            self.cached_objects
                .get_or_create(&CacheLabels { cache: cache.into() })
                .set(i64::try_from(objects).unwrap_or(i64::MAX));
        }
    }

    pub fn rolled_back(&self, policy: &str) {
        self.rollbacks.get_or_create(&PolicyLabels { policy: policy.into() }).inc();
    }

    /// A fetch of a policy module from a registry ended with `result` (see `registry_fetches`).
    pub fn registry_fetched(&self, result: &str) {
        self.registry_fetches.get_or_create(&ResultLabels { result: result.into() }).inc();
    }

    pub fn parents_failing(&self, n: usize) {
        self.parents_failing.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The series of `kind`'s work queue. A controller started again for the kind (its
    /// policies declared other kinds) reports in the same series.
    pub fn queue(&self, kind: &str) -> QueueMetrics {
        let waited = |urgency: &str| {
            self.queue_wait.get_or_create(&WaitLabels { kind: kind.into(), urgency: urgency.into() }).clone()
        };
        QueueMetrics {
            depth: self.queue_depth.get_or_create(&KindLabels { kind: kind.into() }).clone(),
            waited_changed: waited("changed"),
            waited_routine: waited("routine"),
        }
    }

    /// The process's resident set, in bytes, as read for a scrape.
    pub fn resident(&self, bytes: u64) {
        self.resident.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            out = format!("# encoding failed: {e}\n");
        }
        out
    }
}

/// 1 ms to ~2 min: new work waits milliseconds; a resync of 20 000 parents, a minute or more.
fn wait_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 18))
}

/// 5 µs to ~0.7 s: a decision is tens of microseconds; the policy deadline is 100 ms.
fn decision_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_005, 2.0, 18))
}
