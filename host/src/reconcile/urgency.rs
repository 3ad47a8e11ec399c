//! How urgent a reconcile of a parent is: a parent that is new, whose spec changed or
//! that is being deleted is decided before the re-decisions of parents whose spec the
//! operator has decided already (a resync, a restart's sweep, a policy swapped in, a
//! child that changed). The kind's [work queue](super::queue) serves the urgent first.
//!
//! Without it a PodSet created while a restarted operator re-decided 5 000 converged
//! ones waited for all of them (`make bench`, the curve's last row). controller-runtime
//! does the same since v0.23 (its priority queue: an object's own events before
//! resyncs).

use std::collections::HashMap;

use kube::ResourceExt;
use parking_lot::Mutex;

use crate::kubernetes::object::Object;

/// Why a parent is reconciled, as far as its queue is concerned; the more urgent is the
/// greater.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Urgency {
    /// Decided before at this generation: a re-decision.
    Routine,
    /// New to this operator, its spec changed since the last decision, or being deleted.
    Changed,
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
}
