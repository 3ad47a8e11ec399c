//! What a round's objects share with the rest of the cluster, read from the API
//! server's audit log (`hack/cluster.sh` logs every write to pods): how long the API
//! server took to answer the scheduler's bindings, the simulated node's pod status
//! writes and the controller's pod creates in the round's namespace, how many of those
//! pod writes waited for an answer at once and how many it answered per second, and the
//! pod creates it refused while the namespace was deleted.
//!
//! The measured reason beside a miss: at 100 objects the operator's own step (the last
//! pod's status written → the parent's) took 0.24–0.88 s against the ReplicaSet
//! controller's 0.77–1.33 s, while in its rounds the API server answered the scheduler's
//! bindings in 31–93 ms against 12–21 ms (the full `make bench` of 2026-11-30, its audit
//! log read afterwards). These rows print that for every round.
//!
//! Why the answers are slower, measured on 2026-12-01 (200 × 5 by hand on a private
//! control plane, six rounds of each, the API server's and etcd's own metrics; the
//! scripts polled the objects with LISTs): not etcd, which applied a write in 0.09 ms and
//! synced its log in 0.7–0.9 ms in both, while the API server's calls to it took 51–134 ms
//! in ours against 21–36 ms. The API server answered as many pod writes per second
//! (231–302 against 195–286) with more of them waiting at once (22.5–30.5 against
//! 8.9–10.2), its goroutines waiting longer to run (Go's scheduler latency 0.91–1.09 ms
//! against 0.36 ms) with its CPU alike (10.7–14.6 s against 10.8–16.1 s a round). What
//! makes more of them wait is not known yet. Not it: the operator's JSON pod watch (fed
//! every ReplicaSet pod, the peer's round kept 0.38 ms and 10.1 waiting), its 21 new
//! connections a round, the kernel's autogroups (off, the same). The two last rows say
//! it for every round.

use podset_test_support::audit::{AuditLog, Entry, Mark};

use crate::stats::{percentile, secs, sorted};

/// Medians of the API server's answer times in one round's namespace, in seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shared {
    /// The scheduler's bindings (`create pods/binding`).
    pub bindings: f64,
    /// The simulated node's pod status writes (`pods/status`).
    pub node_writes: f64,
    /// The controller's pod creates.
    pub pod_creates: f64,
    /// Those pod writes (creates, bindings, status writes) waiting for an answer at once,
    /// on average from the first's arrival to the last's answer …
    pub waiting: f64,
    /// … and answered per second over that span.
    pub answered: f64,
}

/// The three kinds of pod write the rows follow.
#[derive(Clone, Copy, Debug)]
enum PodWrite {
    /// The scheduler's `create pods/binding`.
    Binding,
    /// The simulated node's `patch` or `update` of `pods/status`.
    NodeStatus,
    /// The controller's `create pods`.
    Create,
}

impl PodWrite {
    const ALL: [PodWrite; 3] = [PodWrite::Binding, PodWrite::NodeStatus, PodWrite::Create];

    /// Whether `e` is a write of this kind (successful or not).
    fn is(self, e: &Entry) -> bool {
        let (subresource, verbs): (Option<&str>, &[&str]) = match self {
            PodWrite::Binding => (Some("binding"), &["create"]),
            PodWrite::NodeStatus => (Some("status"), &["patch", "update"]),
            PodWrite::Create => (None, &["create"]),
        };
        e.object_ref.resource == "pods"
            && e.object_ref.subresource.as_deref() == subresource
            && verbs.contains(&e.verb.as_str())
    }
}

impl Shared {
    /// Read from `entries` about namespace `ns`.
    pub fn of(entries: &[Entry], ns: &str) -> Shared {
        let of_kind = |kind: PodWrite| {
            entries.iter().filter(move |e| e.succeeded() && e.object_ref.namespace.as_deref() == Some(ns) && kind.is(e))
        };
        let median = |kind| secs(percentile(&sorted(of_kind(kind).filter_map(Entry::latency)), 0.5));
        let (waiting, answered) = queue(PodWrite::ALL.into_iter().flat_map(of_kind));
        Shared {
            bindings: median(PodWrite::Binding),
            node_writes: median(PodWrite::NodeStatus),
            pod_creates: median(PodWrite::Create),
            waiting,
            answered,
        }
    }
}

/// The requests `writes` waiting for an answer at once on average, and answered per
/// second, from the first's arrival to the last's answer; zeros for none.
fn queue<'a>(writes: impl Iterator<Item = &'a Entry>) -> (f64, f64) {
    let spans: Vec<_> = writes.filter_map(Entry::arrived_and_answered).collect();
    let (Some(first), Some(last)) = (spans.iter().map(|s| s.0).min(), spans.iter().map(|s| s.1).max()) else {
        return (0.0, 0.0);
    };
    let span = last.duration_since(first).unwrap_or_default().as_secs_f64();
    if span == 0.0 {
        return (0.0, 0.0);
    }
    let waited: f64 = spans.iter().map(|(a, b)| b.duration_since(*a).unwrap_or_default().as_secs_f64()).sum();
    (waited / span, spans.len() as f64 / span)
}

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the API server answered the scheduler's bindings in {:.0} ms, the node's status writes in {:.0} ms, \
             the controller's pod creates in {:.0} ms (medians); {:.1} of those pod writes waited at once, \
             {:.0} answered per second",
            self.bindings * 1e3,
            self.node_writes * 1e3,
            self.pod_creates * 1e3,
            self.waiting,
            self.answered
        )
    }
}

/// Pod creates in `ns` that the API server refused as forbidden (a namespace being
/// deleted refuses them with 403).
pub fn refused_creates(entries: &[Entry], ns: &str) -> usize {
    entries
        .iter()
        .filter(|e| e.verb == "create" && e.response_status.code == 403)
        .filter(|e| e.object_ref.resource == "pods" && e.object_ref.subresource.is_none())
        .filter(|e| e.object_ref.namespace.as_deref() == Some(ns))
        .count()
}

/// The bench cluster's audit log from a moment on.
pub struct Since {
    log: AuditLog,
    mark: Mark,
}

impl Since {
    pub fn now() -> Since {
        let log = AuditLog::open();
        let mark = log.mark();
        Since { log, mark }
    }

    /// What was logged since then.
    pub fn entries(&self) -> Vec<Entry> {
        self.log.since(&self.mark)
    }
}
