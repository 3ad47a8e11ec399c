//! What one policy call runs inside: a fresh Store with a memory cap, a CPU deadline
//! and a bounded log, and nothing else.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use wasmtime::{Engine, ResourceLimiter};

use crate::contract::bindings::Level;
use crate::contract::bindings::podset_world::podset::policy as wit;

/// How often the engine's epoch advances. Deadlines are whole ticks, so this is their
/// resolution; 1 ms keeps a 100 ms deadline within ~1 % at negligible cost (one atomic
/// increment per tick).
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Log lines one call may emit, and bytes per line: a hostile policy cannot flood the
/// operator's log.
const MAX_LOG_LINES: usize = 64;
const MAX_LOG_LINE: usize = 2048;

/// The state a Store carries for one call.
pub(crate) struct Sandbox {
    pub(crate) memory: MemoryCap,
    log: CallLog,
    /// Keeps the epoch advancing for as long as the Store lives, so that no call runs
    /// without its deadline counting.
    _ticking: Running,
}

impl Sandbox {
    pub(crate) fn new(memory_limit: usize, policy: Arc<str>, clock: &Arc<EpochClock>) -> Self {
        Sandbox {
            memory: MemoryCap { limit: memory_limit, denied: None },
            log: CallLog { policy, lines: 0, last_error: None },
            _ticking: clock.running(),
        }
    }

    /// The last error the policy logged (e.g. its panic message), to explain a trap.
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.log.last_error.as_deref()
    }
}

/// Caps linear memory. Records the denied request so a trap that follows it (Rust's
/// allocator aborts when memory.grow fails) is reported as out-of-memory, not as an
/// anonymous `unreachable`. A grant clears it: policy-sdk's allocator asks to double
/// memory first and, refused, for what it needs, which may fit.
pub(crate) struct MemoryCap {
    limit: usize,
    pub(crate) denied: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.denied = Some(desired);
            return Ok(false);
        }
        self.denied = None;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Tables hold function references; a policy needs a few hundred at most.
        Ok(desired <= 100_000)
    }
}

struct CallLog {
    policy: Arc<str>,
    lines: usize,
    last_error: Option<String>,
}

impl wit::log::Host for Sandbox {
    fn log(&mut self, level: Level, message: String) {
        let log = &mut self.log;
        log.lines += 1;
        if log.lines > MAX_LOG_LINES {
            if log.lines == MAX_LOG_LINES + 1 {
                tracing::warn!(policy = %log.policy, "policy log limit of {MAX_LOG_LINES} lines per call reached; dropping the rest");
            }
            return;
        }
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut end = MAX_LOG_LINE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        let policy = &*log.policy;
        match level {
            Level::Trace => tracing::trace!(target: "policy", policy, "{message}"),
            Level::Debug => tracing::debug!(target: "policy", policy, "{message}"),
            Level::Info => tracing::info!(target: "policy", policy, "{message}"),
            Level::Warn => tracing::warn!(target: "policy", policy, "{message}"),
            Level::Error => tracing::error!(target: "policy", policy, "{message}"),
        }
        if level == Level::Error {
            log.last_error = Some(message);
        }
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own while a
/// policy call runs, so a deadline fires even when every executor thread is busy, and
/// parks that thread while none does: ticking forever cost ~1 % of a core at rest
/// (1 000 wake-ups a second) and 13 % of the operator's CPU samples in a busy run.
/// Stops when dropped.
pub(crate) struct EpochTicker {
    clock: Arc<EpochClock>,
    thread: Option<JoinHandle<()>>,
}

/// What calls share with the ticker: how many are running, and how to wake it.
pub(crate) struct EpochClock {
    running: AtomicUsize,
    stop: AtomicBool,
    /// The ticker's thread; set by that thread before it first looks at `running`, so
    /// a call that finds it unset is seen by that first look instead.
    thread: OnceLock<Thread>,
    ticks: AtomicU64,
}

impl EpochTicker {
    pub(crate) fn start(engine: Engine) -> std::io::Result<Self> {
        let clock = Arc::new(EpochClock {
            running: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            thread: OnceLock::new(),
            ticks: AtomicU64::new(0),
        });
        let shared = clock.clone();
        let thread = std::thread::Builder::new().name("policy-epoch".into()).spawn(move || shared.tick(&engine))?;
        Ok(EpochTicker { clock, thread: Some(thread) })
    }

    /// The handle calls hold to keep the clock going.
    pub(crate) fn clock(&self) -> Arc<EpochClock> {
        self.clock.clone()
    }
}

impl EpochClock {
    fn tick(&self, engine: &Engine) {
        let _ = self.thread.set(std::thread::current());
        while !self.stop.load(Ordering::SeqCst) {
            if self.running.load(Ordering::SeqCst) == 0 {
                // An `unpark` that came first makes this return at once.
                std::thread::park();
                continue;
            }
            // Ticks follow the wall clock from the wake-up, not the number of sleeps:
            // on a loaded machine a sleep oversleeps, and counting sleeps would stretch
            // every deadline; the time spent parked is not owed to anyone, because no
            // deadline was counting then (a call's deadline is relative to the epoch it
            // starts at, and the epoch stood still).
            let started = Instant::now();
            let mut ticks: u128 = 0;
            while self.running.load(Ordering::SeqCst) > 0 && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(EPOCH_TICK);
                let due = started.elapsed().as_nanos() / EPOCH_TICK.as_nanos().max(1);
                while ticks < due {
                    engine.increment_epoch();
                    self.ticks.fetch_add(1, Ordering::Relaxed);
                    ticks += 1;
                }
            }
        }
    }

    /// Keeps the epoch advancing until the returned guard drops. Taken with each
    /// Store ([`Sandbox::new`]), before the call's deadline is set.
    fn running(self: &Arc<Self>) -> Running {
        if self.running.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
        Running(self.clone())
    }

    /// Epoch ticks so far.
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }
}

/// One call in progress; see [`EpochClock::running`].
struct Running(Arc<EpochClock>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.clock.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Deadline in epoch ticks, rounded up, at least one.
pub(crate) fn deadline_ticks(deadline: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos().max(1);
    (deadline.as_nanos().div_ceil(tick)).max(1) as u64
}

/// The `types` interface has no functions; the trait is only a marker.
impl wit::types::Host for Sandbox {}

#[cfg(test)]
mod tests {
    use super::*;

    fn settle() {
        std::thread::sleep(Duration::from_millis(100));
    }

    #[test]
    fn the_epoch_advances_only_while_a_call_runs() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("engine");
        let ticker = EpochTicker::start(engine).expect("ticker");
        let clock = ticker.clock();
        settle();
        assert_eq!(clock.ticks(), 0, "no call has run: the ticker must be parked");

        let call = clock.running();
        settle();
        let during = clock.ticks();
        assert!(during > 0, "a call is running: the epoch must advance");
        drop(call);

        // The ticker notices within a tick; a late wake-up catches up at once, within
        // the first window, so the second one is quiet.
        settle();
        let after = clock.ticks();
        settle();
        assert_eq!(clock.ticks(), after, "no call runs any more: the ticker must park again");

        // And it wakes again for the next call.
        let _call = clock.running();
        settle();
        assert!(clock.ticks() > after);
    }
}
