//! Namespaces the API server said are being deleted, so that their parents stop asking
//! to create in them.
//!
//! A namespace being deleted refuses every create (403, `NamespaceTerminating`), and
//! each of its pods the namespace controller removes prompts its parent to decide a
//! replacement. Before this, each of those re-decisions sent its refused create: 1 330 to
//! 1 808 per namespace of 200 PodSets deleted, against 205 to 210 from the ReplicaSet
//! controller for 200 ReplicaSets (API server audit log, `make bench`, 2026-11-30). Now
//! one refusal holds the namespace's creates for [`HOLD`]: at most one refused create
//! per namespace per hold.
//!
//! A hold, not a mark until the namespace is gone: the host does not watch namespaces
//! unless a policy is granted some by selector, and a namespace deleted and made again
//! under the same name must not leave its new parents waiting for the resync. Parents
//! held are decided again when the hold ends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long one refusal holds a namespace's creates.
pub const HOLD: Duration = Duration::from_secs(1);

/// Namespace → when a create in it was last refused because it is being deleted.
#[derive(Default)]
pub struct Terminating {
    refused: Mutex<HashMap<String, Instant>>,
}

impl Terminating {
    /// Remembers that the API server refused a create in `namespace` because it is being
    /// deleted.
    pub fn refused(&self, namespace: &str) {
        let now = Instant::now();
        let mut refused = self.refused.lock();
        // Namespaces whose hold ended are forgotten: the map holds only those deleted
        // in the last second.
        refused.retain(|_, at| now.duration_since(*at) < HOLD);
        refused.insert(namespace.to_string(), now);
    }

    /// How much longer creates in `namespace` are held; `None` when they are not.
    pub fn held(&self, namespace: &str) -> Option<Duration> {
        let at = *self.refused.lock().get(namespace)?;
        HOLD.checked_sub(at.elapsed()).filter(|left| !left.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_holds_only_its_namespace_and_only_for_the_hold() {
        let t = Terminating::default();
        assert_eq!(t.held("a"), None, "nothing refused yet");
        t.refused("a");
        let left = t.held("a").expect("held after its refusal");
        assert!(left <= HOLD, "{left:?}");
        assert_eq!(t.held("b"), None, "another namespace is not held");
        std::thread::sleep(left);
        assert_eq!(t.held("a"), None, "the hold ends");
    }

    #[test]
    fn namespaces_whose_hold_ended_are_forgotten() {
        let t = Terminating::default();
        t.refused("a");
        std::thread::sleep(HOLD);
        t.refused("b");
        assert_eq!(t.refused.lock().keys().collect::<Vec<_>>(), ["b"]);
    }
}
