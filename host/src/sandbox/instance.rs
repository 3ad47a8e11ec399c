//! What one policy call runs inside: a fresh Store with a memory cap, a CPU deadline
//! and a bounded log, and nothing else.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

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
}

impl Sandbox {
    pub(crate) fn new(memory_limit: usize, policy: Arc<str>) -> Self {
        Sandbox {
            memory: MemoryCap { limit: memory_limit, denied: None },
            log: CallLog { policy, lines: 0, last_error: None },
        }
    }

    /// The last error the policy logged (e.g. its panic message), to explain a trap.
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.log.last_error.as_deref()
    }
}

/// Caps linear memory. Records the denied request so a trap that follows it (Rust's
/// allocator aborts when memory.grow fails) is reported as out-of-memory, not as an
/// anonymous `unreachable`.
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

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own, so a
/// deadline fires even when every executor thread is busy. Stops when dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: Engine) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("policy-epoch".into()).spawn(move || {
            // Ticks follow the wall clock, not the number of sleeps: on a loaded machine
            // a sleep oversleeps, and counting sleeps would stretch every deadline.
            let started = std::time::Instant::now();
            let mut ticks: u128 = 0;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                let due = started.elapsed().as_nanos() / EPOCH_TICK.as_nanos().max(1);
                while ticks < due {
                    engine.increment_epoch();
                    ticks += 1;
                }
            }
        })?;
        Ok(EpochTicker { stop, thread: Some(thread) })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
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
