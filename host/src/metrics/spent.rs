//! What one policy decision cost, in wall and CPU time: measured by the sandbox,
//! observed by the metrics.

use std::time::{Duration, Instant};

/// The time one decision took: instantiation plus the call.
#[derive(Clone, Copy, Debug)]
pub struct Spent {
    /// From start to end.
    pub wall: Duration,
    /// The deciding thread's own CPU time. Less than `wall` by the time the thread
    /// waited for a core: on a busy machine the two tell a slow policy from a busy one.
    pub cpu: Duration,
}

impl Spent {
    /// Starts timing on the current thread; [`Timer::stop`] on the same thread.
    pub fn start() -> Timer {
        Timer { wall: Instant::now(), cpu: thread_cpu() }
    }
}

pub struct Timer {
    wall: Instant,
    cpu: Duration,
}

impl Timer {
    pub fn stop(self) -> Spent {
        Spent { wall: self.wall.elapsed(), cpu: thread_cpu().saturating_sub(self.cpu) }
    }
}

/// CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}
