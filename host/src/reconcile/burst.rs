//! Reconciles in flight, and the heap given back once a burst of them has drained.
//!
//! Every parent due waits for its turn at once (see [`KindContext::new`]), so a burst
//! of creates leaves as many reconciles started: kube-runtime's task, its runner's map
//! entry and our waiting future for each. When they are done the allocator keeps most
//! of that memory: freed between objects the burst cached, it is rarely at the top of
//! a heap.
//!
//! [`KindContext::new`]: super::kind::KindContext::new

use std::sync::atomic::{AtomicUsize, Ordering};

/// Reconciles in flight at once, at least, for their end to count as a burst's.
/// `--concurrency` is 8 by default: a parent due while the turns are taken and the
/// next few are ordinary work.
pub const BURST: usize = 64;

/// Reconciles started and not yet finished (waiting for a turn, or in one), and the
/// most since they last all finished.
#[derive(Debug, Default)]
pub struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl InFlight {
    /// One more reconcile in flight, until the guard is dropped.
    pub fn start(&self) -> Started<'_> {
        self.enter();
        Started(self)
    }

    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// One fewer in flight; whether it was the last of a burst.
    fn leave(&self) -> bool {
        if self.now.fetch_sub(1, Ordering::Relaxed) != 1 {
            return false;
        }
        // A reconcile started meanwhile only makes the next peak one lower.
        self.peak.swap(0, Ordering::Relaxed) >= BURST
    }
}

/// A reconcile in flight. Dropped, and the last of a burst, it gives the heap back
/// on a blocking thread: `malloc_trim` walks every arena.
pub struct Started<'a>(&'a InFlight);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        if self.0.leave()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(crate::heap::release_freed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Enters `n`, then leaves them: whether each leave ended a burst.
    fn wave(flight: &InFlight, n: usize) -> Vec<bool> {
        (0..n).for_each(|_| flight.enter());
        (0..n).map(|_| flight.leave()).collect()
    }

    #[test]
    fn the_last_of_a_burst_ends_it_and_ordinary_work_does_not() {
        let flight = InFlight::default();
        let ended = wave(&flight, BURST);
        assert_eq!(ended.iter().filter(|e| **e).count(), 1, "one end for one burst");
        assert_eq!(ended.last(), Some(&true), "the last of {BURST} in flight ends it");
        // The peak starts again from nothing: fewer at once are ordinary work.
        assert!(!wave(&flight, BURST - 1).contains(&true), "{} at once are not a burst", BURST - 1);
        assert!(!wave(&flight, 1).contains(&true));
    }

    #[test]
    fn a_burst_that_drains_while_others_start_ends_once_they_are_done() {
        let flight = InFlight::default();
        (0..BURST).for_each(|_| flight.enter());
        (0..BURST - 1).for_each(|_| assert!(!flight.leave()));
        flight.enter();
        assert!(!flight.leave(), "one is still in flight");
        assert!(flight.leave(), "the burst's peak was kept until none was in flight");
    }
}
