//! Parents in flight (queued or being reconciled), and the heap given back once a burst
//! of them has drained.
//!
//! A burst of creates queues as many parents, and what their reconciles allocate is
//! freed between objects the burst cached: rarely at the top of a heap, so the
//! allocator keeps most of it until it is told to look.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::heap;

/// Parents in flight at once, at least, for their end to count as a burst's.
/// `--concurrency` is 8 by default: a parent queued while the workers are busy and the
/// next few are ordinary work.
pub const BURST: usize = 64;

/// Parents queued or being reconciled, and the most since none was.
#[derive(Debug, Default)]
pub struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl InFlight {
    /// One more parent in flight.
    pub fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// One fewer in flight. The last of a burst gives the heap back, on a blocking
    /// thread: `mi_collect` walks every heap.
    pub fn leave(&self) {
        if let Some(peak) = self.ended()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || give_back(peak));
        }
    }

    /// In flight now.
    pub fn now(&self) -> usize {
        self.now.load(Ordering::Relaxed)
    }

    /// One fewer in flight; if it was the last of a burst, the most that were in flight.
    fn ended(&self) -> Option<usize> {
        if self.now.fetch_sub(1, Ordering::Relaxed) != 1 {
            return None;
        }
        // A parent queued meanwhile only makes the next peak one lower.
        Some(self.peak.swap(0, Ordering::Relaxed)).filter(|peak| *peak >= BURST)
    }
}

fn give_back(peak: usize) {
    let before = heap::resident_bytes(None);
    heap::release_freed();
    let after = heap::resident_bytes(None);
    let mib = |b: Option<u64>| b.map_or(f64::NAN, |b| b as f64 / (1 << 20) as f64);
    tracing::debug!(peak, "heap given back after a burst: resident {:.1} → {:.1} MiB", mib(before), mib(after));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Enters `n`, then leaves them: the bursts the leaves ended, by their peak.
    fn wave(flight: &InFlight, n: usize) -> Vec<usize> {
        (0..n).for_each(|_| flight.enter());
        (0..n).filter_map(|_| flight.ended()).collect()
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
        (0..BURST - 1).for_each(|_| assert_eq!(flight.ended(), None));
        flight.enter();
        assert_eq!(flight.ended(), None, "one is still in flight");
        assert_eq!(flight.ended(), Some(BURST), "the burst's peak was kept until none was in flight");
    }
}
