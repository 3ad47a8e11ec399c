//! Turns to reconcile, new work first: a parent that is new, whose spec changed or that
//! is being deleted is decided before the re-decisions of parents whose spec the
//! operator has decided already (a resync, a restart's sweep, a policy swapped in, a
//! child that changed), first come first served within each.
//!
//! Without it a PodSet created while a restarted operator re-decided 5 000 converged
//! ones waited for all of them (`make bench`, the curve's last row). controller-runtime
//! does the same since v0.23 (its priority queue: an object's own events before
//! resyncs).
//!
//! Two tokio semaphores, fair each: a routine reconcile first takes the routine gate
//! (one holder at a time) and then a turn; a new one takes a turn at once. So a new
//! parent waits behind the reconciles in their turns and at most one routine one,
//! whatever the number of routine ones waiting; and as only a new parent jumps the
//! queue, routine work still runs whenever no new work waits.

use std::collections::HashMap;

use kube::ResourceExt;
use parking_lot::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::kubernetes::object::Object;

/// Why a parent is reconciled, as far as its queue is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// New to this operator, its spec changed since the last decision, or being deleted.
    Changed,
    /// Decided before at this generation: a re-decision.
    Routine,
}

/// The turns of one parent kind (`--concurrency` of them at once).
pub struct Turns {
    turns: Semaphore,
    routine: Semaphore,
}

impl Turns {
    pub fn new(turns: usize) -> Self {
        Turns { turns: Semaphore::new(turns), routine: Semaphore::new(1) }
    }

    /// Waits for a turn; held until the permit is dropped.
    pub async fn take(&self, urgency: Urgency) -> SemaphorePermit<'_> {
        // Neither semaphore is ever closed.
        let never_closed = "the turns are never closed";
        match urgency {
            Urgency::Changed => self.turns.acquire().await.expect(never_closed),
            Urgency::Routine => {
                let _gate = self.routine.acquire().await.expect(never_closed);
                self.turns.acquire().await.expect(never_closed)
            }
        }
    }
}

/// The generation each parent of a kind was last decided at, by a hash of its UID (16
/// bytes an entry: 20 000 parents take about 0.4 MiB).
#[derive(Default)]
pub struct Decided(Mutex<HashMap<u64, i64>>);

impl Decided {
    /// `parent` is about to be decided at its current generation.
    pub fn record(&self, parent: &Object) {
        if let Some(generation) = parent.metadata.generation {
            self.0.lock().insert(uid_hash(parent), generation);
        }
    }

    pub fn forget(&self, parent: &Object) {
        self.0.lock().remove(&uid_hash(parent));
    }

    /// How urgent a reconcile of `parent` is. A parent this operator has not decided
    /// yet (a restart) counts as decided when its status says its controller observed
    /// its generation (`status.observedGeneration`), as a converged PodSet's does.
    pub fn urgency(&self, parent: &Object) -> Urgency {
        if parent.metadata.deletion_timestamp.is_some() {
            return Urgency::Changed;
        }
        let Some(generation) = parent.metadata.generation else { return Urgency::Routine };
        let decided = self.0.lock().get(&uid_hash(parent)).copied();
        let observed = || parent.parse::<Observed>("status").ok().flatten().and_then(|s| s.observed_generation);
        if decided.or_else(observed) == Some(generation) { Urgency::Routine } else { Urgency::Changed }
    }
}

/// What [`Decided::urgency`] reads of a parent's status.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Observed {
    observed_generation: Option<i64>,
}

fn uid_hash(parent: &Object) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(parent.uid().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use kube::api::{ApiResource, DynamicObject};
    use serde_json::json;

    use super::*;

    fn parent(uid: &str, generation: i64, observed: Option<i64>) -> Object {
        let resource =
            ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodSet"));
        let mut p = DynamicObject::new(uid, &resource).within("ns");
        p.metadata.uid = Some(uid.into());
        p.metadata.generation = Some(generation);
        p.data = match observed {
            Some(g) => json!({ "spec": {}, "status": { "observedGeneration": g } }),
            None => json!({ "spec": {} }),
        };
        p.into()
    }

    #[test]
    fn new_changed_and_deleted_parents_are_urgent_and_decided_ones_routine() {
        let decided = Decided::default();
        let a = parent("a", 1, None);
        assert_eq!(decided.urgency(&a), Urgency::Changed, "never decided");
        decided.record(&a);
        assert_eq!(decided.urgency(&a), Urgency::Routine, "decided at this generation");
        assert_eq!(decided.urgency(&parent("a", 2, None)), Urgency::Changed, "its spec changed");
        let mut deleted = a.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(decided.urgency(&deleted), Urgency::Changed, "being deleted");
        // After a restart: the status says which generation was decided.
        assert_eq!(decided.urgency(&parent("b", 3, Some(3))), Urgency::Routine);
        assert_eq!(decided.urgency(&parent("b", 4, Some(3))), Urgency::Changed);
        // What this operator decided wins over a status not yet written.
        decided.record(&parent("b", 4, Some(3)));
        assert_eq!(decided.urgency(&parent("b", 4, Some(3))), Urgency::Routine);
        decided.forget(&a);
        assert_eq!(decided.urgency(&a), Urgency::Changed, "forgotten with the parent");
    }

    /// Takes a turn as `name`, records when it got it, holds it for `hold`.
    async fn worker(turns: Arc<Turns>, order: Arc<Mutex<Vec<String>>>, name: String, urgency: Urgency, hold: Duration) {
        let _turn = turns.take(urgency).await;
        order.lock().push(name);
        tokio::time::sleep(hold).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_parent_overtakes_every_routine_one_waiting_but_one() {
        let turns = Arc::new(Turns::new(2));
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |name: &str, urgency| {
            tokio::spawn(worker(turns.clone(), order.clone(), name.into(), urgency, Duration::from_millis(10)))
        };
        // A sweep of 100 re-decisions, queued first; then a new parent, then another.
        let mut tasks: Vec<_> = (0..100).map(|i| spawn(&format!("r{i}"), Urgency::Routine)).collect();
        tokio::task::yield_now().await;
        tasks.push(spawn("new-1", Urgency::Changed));
        tokio::task::yield_now().await;
        tasks.push(spawn("new-2", Urgency::Changed));
        for t in tasks {
            t.await.expect("worker");
        }
        let order = order.lock().clone();
        let at = |name: &str| order.iter().position(|n| n == name).expect("ran");
        // Two in their turns and one at the gate were ahead of them: nothing more.
        assert!(at("new-1") <= 3 && at("new-2") == at("new-1") + 1, "{order:?}");
        // Routine work keeps its own order, and all of it ran.
        let routine: Vec<&String> = order.iter().filter(|n| n.starts_with('r')).collect();
        let expected: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
        assert_eq!(routine, expected.iter().collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn routine_work_runs_whenever_no_new_work_waits() {
        let turns = Arc::new(Turns::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let hold = Duration::from_millis(10);
        let first = tokio::spawn(worker(turns.clone(), order.clone(), "new".into(), Urgency::Changed, hold));
        tokio::task::yield_now().await;
        let routine = tokio::spawn(worker(turns.clone(), order.clone(), "routine".into(), Urgency::Routine, hold));
        first.await.expect("worker");
        routine.await.expect("worker");
        assert_eq!(*order.lock(), ["new", "routine"]);
    }
}
