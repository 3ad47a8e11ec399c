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

use crate::heap;

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

    /// One fewer in flight; if it was the last of a burst, the most that were in flight.
    fn leave(&self) -> Option<usize> {
        if self.now.fetch_sub(1, Ordering::Relaxed) != 1 {
            return None;
        }
        // A reconcile started meanwhile only makes the next peak one lower.
        Some(self.peak.swap(0, Ordering::Relaxed)).filter(|peak| *peak >= BURST)
    }
}

/// A reconcile in flight. Dropped, and the last of a burst, it gives the heap back
/// on a blocking thread: `mi_collect` walks every heap.
pub struct Started<'a>(&'a InFlight);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        if let Some(peak) = self.0.leave()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || {
                let before = heap::resident_bytes(None);
                heap::release_freed();
                let after = heap::resident_bytes(None);
                let mib = |b: Option<u64>| b.map_or(f64::NAN, |b| b as f64 / (1 << 20) as f64);
                tracing::debug!(
                    peak,
                    "heap given back after a burst: resident {:.1} → {:.1} MiB",
                    mib(before),
                    mib(after)
                );
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Enters `n`, then leaves them: the bursts the leaves ended, by their peak.
    fn wave(flight: &InFlight, n: usize) -> Vec<usize> {
        (0..n).for_each(|_| flight.enter());
        (0..n).filter_map(|_| flight.leave()).collect()
    }

    #[test]
    fn the_last_of_a_burst_ends_it_and_ordinary_work_does_not() {
        let flight = InFlight::default();
        assert_eq!(wave(&flight, BURST + 3), [BURST + 3], "one end for one burst, with its peak");
        // The peak starts again from nothing: fewer at once are ordinary work.
        assert!(wave(&flight, BURST - 1).is_empty(), "{} at once are not a burst", BURST - 1);
        assert!(wave(&flight, 1).is_empty());
    }

    #[test]
    fn a_burst_that_drains_while_others_start_ends_once_they_are_done() {
        let flight = InFlight::default();
        (0..BURST).for_each(|_| flight.enter());
        (0..BURST - 1).for_each(|_| assert_eq!(flight.leave(), None));
        flight.enter();
        assert_eq!(flight.leave(), None, "one is still in flight");
        assert_eq!(flight.leave(), Some(BURST), "the burst's peak was kept until none was in flight");
    }
}
