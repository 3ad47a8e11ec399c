//! What a round's objects share with the rest of the cluster, read from the API
//! server's audit log (`hack/cluster.sh` logs every write to pods): how long the API
//! server took to answer the scheduler's bindings, the simulated node's pod status
//! writes and the controller's pod creates in the round's namespace, and the pod creates
//! it refused while the namespace was deleted.
//!
//! The measured reason beside a miss: at 100 objects the operator's own step (the last
//! pod's status written → the parent's) took 0.24–0.88 s against the ReplicaSet
//! controller's 0.77–1.33 s, while in its rounds the API server answered the scheduler's
//! bindings in 31–93 ms against 12–21 ms (the full `make bench` of 2026-11-30, its audit
//! log read afterwards). These rows print that for every round.

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
}

impl Shared {
    /// Read from `entries` about namespace `ns`.
    pub fn of(entries: &[Entry], ns: &str) -> Shared {
        let median = |subresource: Option<&str>, verbs: &[&str]| {
            let answered = sorted(
                entries
                    .iter()
                    .filter(|e| e.succeeded() && e.object_ref.resource == "pods")
                    .filter(|e| e.object_ref.namespace.as_deref() == Some(ns))
                    .filter(|e| e.object_ref.subresource.as_deref() == subresource && verbs.contains(&e.verb.as_str()))
                    .filter_map(Entry::latency),
            );
            secs(percentile(&answered, 0.5))
        };
        Shared {
            bindings: median(Some("binding"), &["create"]),
            node_writes: median(Some("status"), &["patch", "update"]),
            pod_creates: median(None, &["create"]),
        }
    }
}

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the API server answered the scheduler's bindings in {:.0} ms, the node's status writes in {:.0} ms, \
             the controller's pod creates in {:.0} ms (medians)",
            self.bindings * 1e3,
            self.node_writes * 1e3,
            self.pod_creates * 1e3
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
