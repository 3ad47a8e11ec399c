//! What became of a policy's decisions while it served: how many it made, which
//! failed, which the API server refused. A rollout's gates read them for the module
//! being rolled out; every admitted policy counts them (a few atomics), so that a
//! policy's counts do not depend on when someone started to look.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The objects kept per count, newest last: a status names the last few, not all.
pub const OBJECTS_KEPT: usize = 5;

/// One policy's outcomes since it was admitted.
#[derive(Default)]
pub struct Outcomes {
    decisions: AtomicU64,
    failed: Noted,
    refused: Noted,
}

/// Counts from a moment on: [`Outcomes::since`] of an earlier [`Outcomes::mark`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Decisions made and performed (or handed on to be).
    pub decisions: u64,
    /// Decisions that failed: a trap, the deadline or the memory cap, or what the
    /// checks refused.
    pub failed: u64,
    /// Decisions whose writes the API server refused.
    pub refused: u64,
    /// `Kind namespace/name: why`, newest last, for the failed and refused ones.
    pub objects: Vec<String>,
}

/// Where the counts stood, to count from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    decisions: u64,
    failed: u64,
    refused: u64,
}

#[derive(Default)]
struct Noted {
    count: AtomicU64,
    /// (count when it happened, `object: why`).
    last: Mutex<VecDeque<(u64, String)>>,
}

impl Noted {
    fn note(&self, object: &str, why: &str) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last.lock();
        if last.len() == OBJECTS_KEPT {
            last.pop_front();
        }
        last.push_back((n, format!("{object}: {why}")));
    }

    fn since(&self, from: u64) -> (u64, Vec<String>) {
        let n = self.count.load(Ordering::Relaxed);
        let objects = self.last.lock().iter().filter(|(at, _)| *at > from).map(|(_, o)| o.clone()).collect();
        (n.saturating_sub(from), objects)
    }
}

impl Outcomes {
    pub fn decided(&self) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
    }

    /// A decision about `object` failed, for `why`.
    pub fn failed(&self, object: &str, why: &str) {
        self.failed.note(object, why);
    }

    /// The API server refused what a decision about `object` asked, for `why`.
    pub fn refused(&self, object: &str, why: &str) {
        self.refused.note(object, why);
    }

    /// Where the counts stand now.
    pub fn mark(&self) -> Mark {
        Mark {
            decisions: self.decisions.load(Ordering::Relaxed),
            failed: self.failed.count.load(Ordering::Relaxed),
            refused: self.refused.count.load(Ordering::Relaxed),
        }
    }

    /// The counts since `mark`.
    pub fn since(&self, mark: Mark) -> Counts {
        let (failed, mut objects) = self.failed.since(mark.failed);
        let (refused, more) = self.refused.since(mark.refused);
        objects.extend(more);
        // A parent retried after a failure fails again for the same reason: named once.
        let mut seen = std::collections::HashSet::new();
        objects.reverse();
        objects.retain(|o| seen.insert(o.clone()));
        objects.reverse();
        let keep = objects.len().saturating_sub(OBJECTS_KEPT);
        objects.drain(..keep);
        Counts {
            decisions: self.decisions.load(Ordering::Relaxed).saturating_sub(mark.decisions),
            failed,
            refused,
            objects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_start_again_from_a_mark_and_keep_the_last_objects() {
        let o = Outcomes::default();
        o.decided();
        o.failed("PodSet a/x", "PolicyTrapped");
        let mark = o.mark();
        assert_eq!(o.since(mark), Counts::default());
        for i in 0..7 {
            o.decided();
            o.failed(&format!("PodSet a/p{i}"), "DeadlineExceeded");
        }
        o.refused("PodSet a/q", "Forbidden");
        o.refused("PodSet a/q", "Forbidden");
        let c = o.since(mark);
        assert_eq!((c.decisions, c.failed, c.refused), (7, 7, 2));
        assert_eq!(c.objects.len(), OBJECTS_KEPT);
        assert_eq!(c.objects.last().map(String::as_str), Some("PodSet a/q: Forbidden"));
        assert!(c.objects.iter().all(|o| !o.contains("a/x")), "nothing from before the mark: {:?}", c.objects);
    }
}
