//! The work queue of one parent kind, as controller-runtime's: a parent is at most once
//! in the queue and at most once in a reconcile; asked for while it is reconciled, it is
//! queued again when that reconcile ends. New work first ([`Urgency`]), first come
//! first served within each.
//!
//! It replaced kube-runtime's controller for the parent kinds. That controller's
//! scheduler holds a parent asked for while it is being reconciled in a set, and scans
//! the whole set each time it is asked for the next parent
//! (`pending.iter().find(…)` in kube-runtime 5.0's `scheduler.rs`). With every parent
//! due started at once (its own limit off, for first-come order) the set held a
//! parent for every pod event of a parent still waiting for a turn: thousands in a
//! burst of creates, scanned once or more per reconcile ended. The operator's CPU per
//! PodSet grew with the burst: 2.8, 4.5, 10.6 and 18.3 ms at the curve's 100, 1 000,
//! 5 000 and 20 000 (`make bench`, 2026-11-29), 73 % of it hashing and comparing
//! parent keys at 5 000 (`perf record`). With this queue: 2.0 ms at 5 000, the same day.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::burst::InFlight;
use super::keys::ParentRef;
use super::urgency::Urgency;

/// When a reconcile wants its parent reconciled again, besides on a change to the parent
/// or to what it watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Again {
    OnChange,
    After(Duration),
}

/// The parents of one kind waiting for a reconcile, and those being reconciled.
#[derive(Default)]
pub struct WorkQueue {
    state: Mutex<State>,
    /// Wakes the one consumer ([`WorkQueue::next`]) when a parent is queued; it keeps a
    /// permit if the consumer is not waiting, and the consumer looks before it waits.
    ready: Notify,
    /// Parents queued or being reconciled: the heap is given back when a burst of them
    /// has drained.
    pub in_flight: InFlight,
}

#[derive(Default)]
struct State {
    /// Each queued parent's urgency and ticket: an entry of a line whose ticket is no
    /// longer the parent's was overtaken (moved to the urgent line) and is skipped.
    queued: HashMap<ParentRef, (Urgency, u64)>,
    urgent: VecDeque<(ParentRef, u64)>,
    routine: VecDeque<(ParentRef, u64)>,
    /// Being reconciled; `Some` when asked for again meanwhile, with the urgency of
    /// that request.
    running: HashMap<ParentRef, Option<Urgency>>,
    tickets: u64,
}

impl WorkQueue {
    /// Asks for a reconcile of `parent`. Already queued, it keeps its place, unless this
    /// request is urgent and the queued one was not: it then joins the urgent line.
    pub fn add(&self, parent: ParentRef, urgency: Urgency) {
        let mut s = self.state.lock();
        if let Some(again) = s.running.get_mut(&parent) {
            *again = Some(again.map_or(urgency, |u| u.max(urgency)));
            return;
        }
        let queued = s.queued.get(&parent).map(|(u, _)| *u);
        match queued {
            Some(u) if u >= urgency => return,
            Some(_) => {}
            None => self.in_flight.enter(),
        }
        s.line_up(parent, urgency);
        drop(s);
        if queued.is_none() {
            self.ready.notify_one();
        }
    }

    /// The next parent to reconcile, urgent ones first; it is then being reconciled
    /// until [`WorkQueue::done`]. Cancel-safe: a parent is taken only when this returns.
    pub async fn next(&self) -> ParentRef {
        loop {
            if let Some(parent) = self.try_next() {
                return parent;
            }
            self.ready.notified().await;
        }
    }

    fn try_next(&self) -> Option<ParentRef> {
        let mut s = self.state.lock();
        let parent = s.pop()?;
        s.running.insert(parent.clone(), None);
        Some(parent)
    }

    /// `parent`'s reconcile ended: if it was asked for meanwhile, it is queued again
    /// (at the end of its line).
    pub fn done(&self, parent: &ParentRef) {
        let mut s = self.state.lock();
        match s.running.remove(parent) {
            Some(Some(urgency)) => {
                s.line_up(parent.clone(), urgency);
                drop(s);
                self.ready.notify_one();
            }
            Some(None) => {
                drop(s);
                self.in_flight.leave();
            }
            None => {}
        }
    }

    /// Parents queued, not counting those being reconciled.
    pub fn len(&self) -> usize {
        self.state.lock().queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl State {
    fn line_up(&mut self, parent: ParentRef, urgency: Urgency) {
        self.tickets += 1;
        let ticket = self.tickets;
        self.queued.insert(parent.clone(), (urgency, ticket));
        match urgency {
            Urgency::Changed => self.urgent.push_back((parent, ticket)),
            Urgency::Routine => self.routine.push_back((parent, ticket)),
        }
    }

    fn pop(&mut self) -> Option<ParentRef> {
        while let Some((parent, ticket)) = self.urgent.pop_front().or_else(|| self.routine.pop_front()) {
            if self.queued.get(&parent).is_some_and(|(_, t)| *t == ticket) {
                self.queued.remove(&parent);
                return Some(parent);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};

    use super::*;
    use crate::kubernetes::object::Object;

    fn key(name: &str) -> ParentRef {
        let resource =
            ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodSet"));
        let parent: Object = DynamicObject::new(name, &resource).within("ns").into();
        ParentRef::from_obj_with(&parent, resource)
    }

    /// Takes what is queued, without waiting.
    fn drain(q: &WorkQueue) -> Vec<String> {
        std::iter::from_fn(|| q.try_next()).map(|p| p.name).collect()
    }

    #[test]
    fn new_work_goes_first_and_each_line_is_first_come_first_served() {
        let q = WorkQueue::default();
        for name in ["r1", "r2", "r3"] {
            q.add(key(name), Urgency::Routine);
        }
        q.add(key("new1"), Urgency::Changed);
        q.add(key("new2"), Urgency::Changed);
        assert_eq!(drain(&q), ["new1", "new2", "r1", "r2", "r3"]);
    }

    #[test]
    fn a_parent_is_queued_once_and_an_urgent_request_moves_it_ahead() {
        let q = WorkQueue::default();
        q.add(key("a"), Urgency::Routine);
        q.add(key("b"), Urgency::Routine);
        q.add(key("a"), Urgency::Routine);
        q.add(key("b"), Urgency::Changed);
        q.add(key("b"), Urgency::Routine);
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&q), ["b", "a"], "b's spec changed: it went ahead, once");
    }

    #[test]
    fn a_parent_asked_for_while_reconciled_is_queued_again_when_it_ends_not_before() {
        let q = WorkQueue::default();
        q.add(key("a"), Urgency::Changed);
        let a = q.try_next().expect("queued");
        q.add(key("a"), Urgency::Routine);
        q.add(key("a"), Urgency::Changed);
        assert!(q.try_next().is_none(), "never two reconciles of one parent at once");
        q.add(key("b"), Urgency::Routine);
        q.done(&a);
        assert_eq!(drain(&q), ["a", "b"], "asked for again with a changed spec: urgent");
        q.done(&key("a"));
        q.done(&key("b"));
        assert!(q.try_next().is_none(), "nothing asked for since");
    }

    #[test]
    fn a_burst_counts_in_flight_until_its_last_parent_is_done() {
        let q = WorkQueue::default();
        for i in 0..3 {
            q.add(key(&format!("p{i}")), Urgency::Routine);
        }
        q.add(key("p0"), Urgency::Routine);
        assert_eq!(q.in_flight.now(), 3);
        let taken: Vec<ParentRef> = std::iter::from_fn(|| q.try_next()).collect();
        assert_eq!(q.in_flight.now(), 3, "being reconciled still counts");
        q.add(taken[0].clone(), Urgency::Routine);
        for p in &taken {
            q.done(p);
        }
        assert_eq!(q.in_flight.now(), 1, "p0, asked for again, is queued");
        let again = q.try_next().expect("p0 again");
        q.done(&again);
        assert_eq!(q.in_flight.now(), 0);
    }

    #[tokio::test]
    async fn the_consumer_wakes_for_a_parent_added_while_it_waits() {
        let q = std::sync::Arc::new(WorkQueue::default());
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.next().await.name }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.add(key("late"), Urgency::Routine);
        let got = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("woken").expect("joined");
        assert_eq!(got, "late");
    }
}
