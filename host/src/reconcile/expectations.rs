//! ReplicaSet-style expectations: what this operator has asked the API server to do
//! and not yet seen in its caches. Without them, a burst of reconciles reading a stale
//! cache would create (or delete) the same children again.
//!
//! Unlike the ReplicaSet controller's counters, entries are child names: every child the
//! host creates has its name before it is sent (a policy's prefix is named by the host,
//! [`super::slots`]), and a name lets the child watch settle exactly the right entry. A
//! create whose answer never came (a timeout, a cut connection) is in flight too: the
//! server may have made it. Each entry is settled by the cache showing the child, or by
//! a list of its kind that started after it (every write the API server had made by then
//! is in it; seen: a create cut by an API server restart waited the whole [`TTL`] for a
//! child that never was, in the fault suite, 2026-11-27). Were a create asked again too
//! early, it would meet its twin by name.

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
    /// already shows. `read` reads the parent's children from the cache, each with what
    /// it shows of it, while the expectations are held (see `observe::gather`).
    /// `listed` tells when the cache of a child's kind last listed: a create is settled
    /// by a list that started after it.
    pub fn in_flight(
        &self,
        parent: &ParentRef,
        read: impl FnOnce() -> Vec<(ChildKey, Seen)>,
        listed: impl Fn(&ChildKey) -> Option<Instant>,
    ) -> InFlight {
        let mut entries = self.entries.lock();
        let shown: HashMap<ChildKey, Seen> = read().into_iter().collect();
        let Some(p) = entries.get_mut(parent) else { return InFlight::default() };
        let seen = |child: &ChildKey| shown.get(child).copied().unwrap_or(Seen::Absent);
        p.expire(Instant::now());
        p.creations.retain(|child, at| seen(child) == Seen::Absent && listed(child).is_none_or(|l| l <= *at));
        p.deletions.retain(|child, _| seen(child) == Seen::Present);
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
        ObjectRef::new_with(name, std::sync::Arc::new(ApiResource::erase::<crate::crd::PodSet>(&()))).within("ns")
    }

    fn pod(name: &str) -> ChildKey {
        ChildKey::of("v1", "Pod", "ns", name)
    }

    /// A cache that has not listed since.
    fn never(_: &ChildKey) -> Option<Instant> {
        None
    }

    /// A cache showing these pods.
    fn shows(pods: &[(&str, Seen)]) -> impl FnOnce() -> Vec<(ChildKey, Seen)> {
        let pods: Vec<(ChildKey, Seen)> = pods.iter().map(|(name, seen)| (pod(name), *seen)).collect();
        move || pods
    }

    #[test]
    fn creations_stay_in_flight_until_the_cache_shows_them() {
        let e = Expectations::default();
        e.expect_creation(&parent("web"), pod("web-a"));
        e.expect_creation(&parent("web"), pod("web-b"));
        let f = e.in_flight(&parent("web"), shows(&[("web-a", Seen::Present)]), never);
        assert_eq!(f.creations, vec![pod("web-b")]);
        e.observe(&parent("web"), &pod("web-b"), Seen::Present);
        assert_eq!(e.in_flight(&parent("web"), shows(&[]), never), InFlight::default());
        assert_eq!(e.pending(&parent("web")), 0);
    }

    #[test]
    fn deletions_settle_when_the_child_terminates_or_vanishes() {
        let e = Expectations::default();
        e.expect_deletion(&parent("web"), pod("web-a"));
        e.expect_deletion(&parent("web"), pod("web-b"));
        let f = e.in_flight(&parent("web"), shows(&[("web-a", Seen::Present), ("web-b", Seen::Terminating)]), never);
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
        assert!(e.in_flight(&parent("api"), shows(&[]), never).creations.is_empty());
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
        let f = e.in_flight(&parent("web"), shows(&[]), never);
        assert_eq!(f.creations, vec![pod("web-a")], "still in flight: a second creation must not happen");
    }

    #[test]
    fn a_watch_event_waits_while_the_cache_is_read() {
        let e = std::sync::Arc::new(Expectations::default());
        e.expect_creation(&parent("web"), pod("web-a"));
        let (reading, read) = std::sync::mpsc::channel();
        let watch = std::thread::spawn({
            let e = e.clone();
            move || {
                read.recv().expect("the read started");
                // The store holds web-a now; its event settles the entry.
                e.observe(&parent("web"), &pod("web-a"), Seen::Present);
            }
        });
        let read = || {
            reading.send(()).expect("the watch thread");
            std::thread::sleep(Duration::from_millis(50));
            Vec::new()
        };
        let f = e.in_flight(&parent("web"), read, never);
        watch.join().expect("the watch thread");
        assert_eq!(f.creations, vec![pod("web-a")], "the read did not show web-a: it is in flight for it");
        assert_eq!(e.pending(&parent("web")), 0, "settled once the read was done");
    }

    #[test]
    fn a_create_is_settled_by_a_list_that_started_after_it() {
        let e = Expectations::default();
        let before = Instant::now();
        e.expect_creation(&parent("web"), pod("web-a"));
        let listed_before = |_: &ChildKey| Some(before);
        assert_eq!(e.in_flight(&parent("web"), shows(&[]), listed_before).creations, vec![pod("web-a")]);
        let listed_after = |_: &ChildKey| Some(Instant::now());
        assert_eq!(e.in_flight(&parent("web"), shows(&[]), listed_after), InFlight::default());
    }
}
