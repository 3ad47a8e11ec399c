//! ReplicaSet-style expectations: what this operator has asked the API server to do
//! and not yet seen in its pod cache. Without them, a burst of reconciles reading a
//! stale cache would create (or delete) the same pods again.
//!
//! Unlike the ReplicaSet controller's counters, entries are pod names: the API server
//! returns the generated name on create, and a name lets the pod watch settle exactly
//! the right entry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::policy::InFlight;

/// After this long an unobserved entry is dropped, so a lost watch event delays a
/// PodSet instead of wedging it. (The ReplicaSet controller uses 5 minutes.)
pub const TTL: Duration = Duration::from_secs(60);

/// Identifies the owning PodSet.
pub type OwnerKey = (String, String); // (namespace, name)

#[derive(Default)]
pub struct Expectations {
    entries: Mutex<HashMap<OwnerKey, Pending>>,
}

#[derive(Default)]
struct Pending {
    creations: HashMap<String, Instant>,
    deletions: HashMap<String, Instant>,
}

impl Pending {
    fn expire(&mut self, now: Instant) {
        self.creations.retain(|_, at| now.duration_since(*at) < TTL);
        self.deletions.retain(|_, at| now.duration_since(*at) < TTL);
    }

    fn is_empty(&self) -> bool {
        self.creations.is_empty() && self.deletions.is_empty()
    }
}

/// What the pod cache shows about one pod name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// In the cache, not terminating.
    Present,
    /// In the cache with a deletionTimestamp.
    Terminating,
    /// Not in the cache (deleted, or never seen).
    Absent,
}

impl Seen {
    /// What the cache shows, given the pod it holds under a name (if any).
    pub fn of(pod: Option<&k8s_openapi::api::core::v1::Pod>) -> Seen {
        match pod {
            Some(p) if p.metadata.deletion_timestamp.is_some() => Seen::Terminating,
            Some(_) => Seen::Present,
            None => Seen::Absent,
        }
    }
}

impl Expectations {
    pub fn expect_creation(&self, owner: &OwnerKey, pod: &str) {
        self.with(owner, |p| {
            p.creations.insert(pod.to_string(), Instant::now());
        });
    }

    pub fn expect_deletion(&self, owner: &OwnerKey, pod: &str) {
        self.with(owner, |p| {
            p.deletions.insert(pod.to_string(), Instant::now());
        });
    }

    /// A pod watch event for `pod` of `owner`: any event settles its creation; a
    /// deletion is settled once the pod terminates or is gone.
    pub fn observe(&self, owner: &OwnerKey, pod: &str, seen: Seen) {
        self.with(owner, |p| {
            p.creations.remove(pod);
            if seen != Seen::Present {
                p.deletions.remove(pod);
            }
        });
    }

    /// What is still in flight for `owner`, after settling every entry the cache
    /// already shows (`lookup` tells what the cache holds for a pod name).
    pub fn in_flight(&self, owner: &OwnerKey, lookup: impl Fn(&str) -> Seen) -> InFlight {
        let Ok(mut entries) = self.entries.lock() else {
            return InFlight { creations: 0, deletions: Vec::new() };
        };
        let Some(p) = entries.get_mut(owner) else {
            return InFlight { creations: 0, deletions: Vec::new() };
        };
        p.expire(Instant::now());
        p.creations.retain(|name, _| lookup(name) == Seen::Absent);
        p.deletions.retain(|name, _| lookup(name) == Seen::Present);
        let mut deletions: Vec<String> = p.deletions.keys().cloned().collect();
        deletions.sort();
        let creations = u32::try_from(p.creations.len()).unwrap_or(u32::MAX);
        if p.is_empty() {
            entries.remove(owner);
        }
        InFlight { creations, deletions }
    }

    /// Whether anything is in flight for `owner` (for tests and diagnostics).
    pub fn pending(&self, owner: &OwnerKey) -> usize {
        self.entries.lock().ok().and_then(|e| e.get(owner).map(|p| p.creations.len() + p.deletions.len())).unwrap_or(0)
    }

    /// Forget everything about a PodSet that is gone.
    pub fn forget(&self, owner: &OwnerKey) {
        if let Ok(mut e) = self.entries.lock() {
            e.remove(owner);
        }
    }

    fn with(&self, owner: &OwnerKey, f: impl FnOnce(&mut Pending)) {
        // A poisoned lock means a panic elsewhere; expectations are an optimisation
        // over the cache, so carrying on with the data is safe.
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        f(entries.entry(owner.clone()).or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> OwnerKey {
        ("ns".into(), "web".into())
    }

    #[test]
    fn creations_stay_in_flight_until_the_cache_shows_them() {
        let e = Expectations::default();
        e.expect_creation(&key(), "web-a");
        e.expect_creation(&key(), "web-b");
        let f = e.in_flight(&key(), |n| if n == "web-a" { Seen::Present } else { Seen::Absent });
        assert_eq!(f.creations, 1);
        e.observe(&key(), "web-b", Seen::Present);
        assert_eq!(e.in_flight(&key(), |_| Seen::Absent).creations, 0);
        assert_eq!(e.pending(&key()), 0);
    }

    #[test]
    fn deletions_settle_when_the_pod_terminates_or_vanishes() {
        let e = Expectations::default();
        e.expect_deletion(&key(), "web-a");
        e.expect_deletion(&key(), "web-b");
        let f = e.in_flight(&key(), |n| if n == "web-a" { Seen::Present } else { Seen::Terminating });
        assert_eq!(f.deletions, vec!["web-a".to_string()]);
        e.observe(&key(), "web-a", Seen::Present);
        assert_eq!(e.pending(&key()), 1, "an update that still shows the pod settles nothing");
        e.observe(&key(), "web-a", Seen::Absent);
        assert_eq!(e.pending(&key()), 0);
    }

    #[test]
    fn owners_are_independent() {
        let e = Expectations::default();
        e.expect_creation(&key(), "web-a");
        let other = ("ns".to_string(), "api".to_string());
        assert_eq!(e.in_flight(&other, |_| Seen::Absent).creations, 0);
        e.forget(&key());
        assert_eq!(e.pending(&key()), 0);
    }
}
