//! ReplicaSet-style expectations: what this operator has asked the API server to do
//! and not yet seen in its caches. Without them, a burst of reconciles reading a stale
//! cache would create (or delete) the same children again.
//!
//! Unlike the ReplicaSet controller's counters, entries are child names: the API
//! server returns the generated name on create, and a name lets the child watch
//! settle exactly the right entry.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::keys::{ChildKey, ParentRef};
use crate::kubernetes::object::Object;

/// Work issued to the API server and not yet seen in the caches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InFlight {
    pub creations: Vec<ChildKey>,
    pub deletions: Vec<ChildKey>,
}

/// After this long an unobserved entry is dropped, so a lost watch event delays a
/// parent instead of wedging it. (The ReplicaSet controller uses 5 minutes.)
pub const TTL: Duration = Duration::from_secs(60);

/// `parking_lot`'s mutex has no poisoning: a panic elsewhere can never make this
/// report "nothing in flight" and let a stale cache create children twice.
#[derive(Default)]
pub struct Expectations {
    entries: Mutex<HashMap<ParentRef, Pending>>,
}

#[derive(Default)]
struct Pending {
    creations: HashMap<ChildKey, Instant>,
    deletions: HashMap<ChildKey, Instant>,
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

/// What a cache shows about one child.
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
    /// What the cache shows, given the object it holds under a name (if any).
    pub fn of(obj: Option<&Object>) -> Seen {
        match obj {
            Some(o) if o.metadata.deletion_timestamp.is_some() => Seen::Terminating,
            Some(_) => Seen::Present,
            None => Seen::Absent,
        }
    }
}

impl Expectations {
    pub fn expect_creation(&self, parent: &ParentRef, child: ChildKey) {
        self.entries.lock().entry(parent.clone()).or_default().creations.insert(child, Instant::now());
    }

    pub fn expect_deletion(&self, parent: &ParentRef, child: ChildKey) {
        self.entries.lock().entry(parent.clone()).or_default().deletions.insert(child, Instant::now());
    }

    /// A watch event for `child` of `parent`: any event settles its creation; a
    /// deletion is settled once the child terminates or is gone.
    pub fn observe(&self, parent: &ParentRef, child: &ChildKey, seen: Seen) {
        let mut entries = self.entries.lock();
        let Some(p) = entries.get_mut(parent) else { return };
        p.creations.remove(child);
        if seen != Seen::Present {
            p.deletions.remove(child);
        }
        if p.is_empty() {
            entries.remove(parent);
        }
    }

    /// What is still in flight for `parent`, after settling every entry the cache
    /// already shows (`lookup` tells what the cache holds for a child).
    pub fn in_flight(&self, parent: &ParentRef, lookup: impl Fn(&ChildKey) -> Seen) -> InFlight {
        let mut entries = self.entries.lock();
        let Some(p) = entries.get_mut(parent) else { return InFlight::default() };
        p.expire(Instant::now());
        p.creations.retain(|child, _| lookup(child) == Seen::Absent);
        p.deletions.retain(|child, _| lookup(child) == Seen::Present);
        let mut creations: Vec<ChildKey> = p.creations.keys().cloned().collect();
        let mut deletions: Vec<ChildKey> = p.deletions.keys().cloned().collect();
        creations.sort();
        deletions.sort();
        if p.is_empty() {
            entries.remove(parent);
        }
        InFlight { creations, deletions }
    }

    /// How many entries are pending for `parent` (for tests and diagnostics).
    pub fn pending(&self, parent: &ParentRef) -> usize {
        self.entries.lock().get(parent).map_or(0, |p| p.creations.len() + p.deletions.len())
    }

    /// Forget everything about a parent that is gone.
    pub fn forget(&self, parent: &ParentRef) {
        self.entries.lock().remove(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use kube::runtime::reflector::ObjectRef;

    fn parent(name: &str) -> ParentRef {
        ObjectRef::new_with(name, ApiResource::erase::<crate::crd::PodSet>(&())).within("ns")
    }

    fn pod(name: &str) -> ChildKey {
        ChildKey::of("v1", "Pod", "ns", name)
    }

    #[test]
    fn creations_stay_in_flight_until_the_cache_shows_them() {
        let e = Expectations::default();
        e.expect_creation(&parent("web"), pod("web-a"));
        e.expect_creation(&parent("web"), pod("web-b"));
        let f = e.in_flight(&parent("web"), |c| if c.name == "web-a" { Seen::Present } else { Seen::Absent });
        assert_eq!(f.creations, vec![pod("web-b")]);
        e.observe(&parent("web"), &pod("web-b"), Seen::Present);
        assert_eq!(e.in_flight(&parent("web"), |_| Seen::Absent), InFlight::default());
        assert_eq!(e.pending(&parent("web")), 0);
    }

    #[test]
    fn deletions_settle_when_the_child_terminates_or_vanishes() {
        let e = Expectations::default();
        e.expect_deletion(&parent("web"), pod("web-a"));
        e.expect_deletion(&parent("web"), pod("web-b"));
        let f = e.in_flight(&parent("web"), |c| if c.name == "web-a" { Seen::Present } else { Seen::Terminating });
        assert_eq!(f.deletions, vec![pod("web-a")]);
        e.observe(&parent("web"), &pod("web-a"), Seen::Present);
        assert_eq!(e.pending(&parent("web")), 1, "an update that still shows the child settles nothing");
        e.observe(&parent("web"), &pod("web-a"), Seen::Absent);
        assert_eq!(e.pending(&parent("web")), 0);
    }

    #[test]
    fn parents_are_independent() {
        let e = Expectations::default();
        e.expect_creation(&parent("web"), pod("web-a"));
        assert!(e.in_flight(&parent("api"), |_| Seen::Absent).creations.is_empty());
        e.forget(&parent("web"));
        assert_eq!(e.pending(&parent("web")), 0);
    }

    #[test]
    fn a_panic_while_holding_the_lock_does_not_empty_what_is_in_flight() {
        let e = std::sync::Arc::new(Expectations::default());
        e.expect_creation(&parent("web"), pod("web-a"));
        let held = e.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.entries.lock();
            panic!("a reconcile panics while holding the expectations");
        })
        .join();
        let f = e.in_flight(&parent("web"), |_| Seen::Absent);
        assert_eq!(f.creations, vec![pod("web-a")], "still in flight: a second creation must not happen");
    }
}
