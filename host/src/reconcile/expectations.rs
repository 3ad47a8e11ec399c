//! ReplicaSet-style expectations: what this operator has asked the API server to do
//! and not yet seen in its caches. Without them, a burst of reconciles reading a stale
//! cache would create (or delete) the same children again.
//!
//! Unlike the ReplicaSet controller's counters, entries are child names: the API
//! server returns the generated name on create, and a name lets the child watch
//! settle exactly the right entry. A create whose answer never came (a timeout, a cut
//! connection) is the exception: the server may have made the child under a generated
//! name the operator never learnt. As the ReplicaSet controller does for a timeout, it
//! stays in flight, under its `generateName` prefix, until a child with that prefix and
//! a name the parent did not have appears (or [`TTL`]). Seen in the fault suite with its
//! tests side by side (2026-11-27): without it, a reconcile woken by a sibling's watch
//! event 14 ms after the lost answer, before the cache showed that child, created it
//! again (6 pods for 5).

use std::collections::{HashMap, HashSet};
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
    unanswered: Vec<Unanswered>,
}

/// A create of a child named by a `generateName` prefix whose answer never came.
struct Unanswered {
    /// The key asked for: its name is the prefix.
    asked: ChildKey,
    /// Every child the parent had, or had asked for, when the answer was lost: none of
    /// them is the one it may have made.
    known: HashSet<ChildKey>,
    at: Instant,
}

impl Unanswered {
    /// Whether `key` may be the child this create made: its kind and namespace, a
    /// name with the prefix, not one the parent had.
    fn may_be(&self, key: &ChildKey) -> bool {
        key.api_version == self.asked.api_version
            && key.kind == self.asked.kind
            && key.namespace == self.asked.namespace
            && key.name.starts_with(&self.asked.name)
            && !self.known.contains(key)
    }
}

impl Pending {
    fn expire(&mut self, now: Instant) {
        self.creations.retain(|_, at| now.duration_since(*at) < TTL);
        self.deletions.retain(|_, at| now.duration_since(*at) < TTL);
        self.unanswered.retain(|u| now.duration_since(u.at) < TTL);
    }

    fn is_empty(&self) -> bool {
        self.creations.is_empty() && self.deletions.is_empty() && self.unanswered.is_empty()
    }

    /// Settles each unanswered create against the children `shown`: a child that may
    /// be its own settles it, and is known to the others from then on (a later call must
    /// not count it again).
    fn settle_unanswered<'a>(&mut self, shown: impl Iterator<Item = &'a ChildKey> + Clone) {
        let mut claimed: Vec<&ChildKey> = Vec::new();
        self.unanswered.retain(|u| match shown.clone().find(|k| u.may_be(k) && !claimed.contains(k)) {
            Some(made) => {
                claimed.push(made);
                false
            }
            None => true,
        });
        for u in &mut self.unanswered {
            u.known.extend(claimed.iter().map(|k| (*k).clone()));
        }
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

    /// A create of a child named by the prefix `asked.name` (`generateName`) whose
    /// answer never came: in flight until a child with that prefix appears that is none
    /// of the `known` ones (every child the parent has or has asked for).
    pub fn expect_unanswered_creation(&self, parent: &ParentRef, asked: ChildKey, known: HashSet<ChildKey>) {
        let unanswered = Unanswered { asked, known, at: Instant::now() };
        self.entries.lock().entry(parent.clone()).or_default().unanswered.push(unanswered);
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
    /// it shows of it, while the expectations are held (see `observe::gather`). An
    /// unanswered create is in `creations` under the key it asked for, its name the
    /// `generateName` prefix.
    ///
    /// `listed` tells when the cache of a child's kind last listed: an unanswered create
    /// is settled by a list that started after it (every write the API server had made
    /// by then is in it; seen: a create cut by an API server restart waited the whole
    /// TTL for a child that never was, in the fault suite, 2026-11-27).
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
        p.creations.retain(|child, _| seen(child) == Seen::Absent);
        p.deletions.retain(|child, _| seen(child) == Seen::Present);
        p.settle_unanswered(shown.keys());
        p.unanswered.retain(|u| listed(&u.asked).is_none_or(|at| at <= u.at));
        let mut creations: Vec<ChildKey> =
            p.creations.keys().chain(p.unanswered.iter().map(|u| &u.asked)).cloned().collect();
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
        self.entries.lock().get(parent).map_or(0, |p| p.creations.len() + p.deletions.len() + p.unanswered.len())
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

    /// A cache that has not listed since.
    fn never(_: &ChildKey) -> Option<Instant> {
        None
    }

    /// A cache showing these pods.
    fn shows(pods: &[(&str, Seen)]) -> impl FnOnce() -> Vec<(ChildKey, Seen)> {
        let pods: Vec<(ChildKey, Seen)> = pods.iter().map(|(name, seen)| (pod(name), *seen)).collect();
        move || pods
    }

    /// A cache showing these children, none terminating.
    fn showing(keys: &[ChildKey]) -> impl FnOnce() -> Vec<(ChildKey, Seen)> {
        let keys: Vec<(ChildKey, Seen)> = keys.iter().map(|k| (k.clone(), Seen::Present)).collect();
        move || keys
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
    fn an_unanswered_create_stays_in_flight_until_a_new_child_with_its_prefix_appears() {
        let e = Expectations::default();
        let had: HashSet<ChildKey> = [pod("web-a"), pod("web-b")].into();
        e.expect_unanswered_creation(&parent("web"), pod("web-"), had.clone());
        e.expect_unanswered_creation(&parent("web"), pod("web-"), had);
        // The children it had, and one of another prefix, settle nothing.
        let shown = [pod("web-a"), pod("web-b"), pod("api-x")];
        assert_eq!(e.in_flight(&parent("web"), showing(&shown), never).creations, vec![pod("web-"), pod("web-")]);
        // One new child settles one of the two, and is not counted again by the other.
        let shown = [pod("web-a"), pod("web-b"), pod("web-c")];
        assert_eq!(e.in_flight(&parent("web"), showing(&shown), never).creations, vec![pod("web-")]);
        assert_eq!(e.in_flight(&parent("web"), showing(&shown), never).creations, vec![pod("web-")]);
        let shown = [pod("web-a"), pod("web-b"), pod("web-c"), pod("web-d")];
        assert_eq!(e.in_flight(&parent("web"), showing(&shown), never), InFlight::default());
        assert_eq!(e.pending(&parent("web")), 0);
    }

    #[test]
    fn an_unanswered_create_of_another_kind_or_namespace_is_not_settled() {
        let e = Expectations::default();
        e.expect_unanswered_creation(&parent("web"), pod("web-"), HashSet::new());
        let shown = [ChildKey::of("v1", "ConfigMap", "ns", "web-c"), ChildKey::of("v1", "Pod", "other", "web-c")];
        assert_eq!(e.in_flight(&parent("web"), showing(&shown), never).creations, vec![pod("web-")]);
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
    fn an_unanswered_create_is_settled_by_a_list_that_started_after_it() {
        let e = Expectations::default();
        let before = Instant::now();
        e.expect_unanswered_creation(&parent("web"), pod("web-"), HashSet::new());
        let listed_before = |_: &ChildKey| Some(before);
        assert_eq!(e.in_flight(&parent("web"), shows(&[]), listed_before).creations, vec![pod("web-")]);
        let listed_after = |_: &ChildKey| Some(Instant::now());
        assert_eq!(e.in_flight(&parent("web"), shows(&[]), listed_after), InFlight::default());
    }
}
