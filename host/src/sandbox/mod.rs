//! The sandbox: loads reconcile policies (Wasm components implementing one of the
//! worlds of `wit/policy.wit`) and runs each decision in a fresh, bounded instance.
//!
//! Pipeline, as in wasmtime's examples: one [`Engine`] (epoch interruption on) →
//! [`load`] checks and compiles a module once per sha256 digest → an `InstancePre`
//! with only the `log` import linked → every call gets a new `Store` (memory cap,
//! epoch deadline), a new instance, one typed call, and its output checked against
//! [`Limits`]. Nothing survives between calls.

pub mod bench;
pub mod compare;
pub mod componentize;
mod digest;
mod error;
mod heap;
pub mod inspect;
mod instance;
mod load;
#[cfg(feature = "native-podset")]
pub mod native;
mod output;
pub mod replay;
pub mod scenario;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

pub use digest::Digest;
pub use error::Error;

use crate::contract::bindings::{
    Declarations, PodsetPolicy, PodsetPolicyPre, PolicyInfo, ReconcilePolicyPre, podset, reconciler,
};
use instance::{EpochClock, EpochTicker, Sandbox};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Instances alive at once: the calls the engine runs concurrently, loads, and direct
/// callers (the CLI, tests). Running out makes instantiation fail, not wait.
const POOL_INSTANCES: u32 = 256;

/// Bytes of each pooled memory and table kept resident between instances (reset in
/// place instead of decommitted): a decision's stack, data and heap usually fit, so a
/// fresh instance costs no page faults. Measured with `make bench`: at 100 pods this
/// halves p50 and p99 against decommitting. Policies link a small stack and 1 MiB of
/// initial memory (.cargo/config.toml), so that their heap fits.
const KEEP_RESIDENT: usize = 1 << 20;

/// The bounds every policy runs within.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock CPU budget of one call (instantiation included).
    pub deadline: Duration,
    /// Linear memory one instance may grow to.
    pub memory_bytes: usize,
    /// Largest module accepted.
    pub module_bytes: usize,
    /// Most functions (over all its core modules) a module may hold: compiling costs
    /// time and memory in proportion.
    pub max_functions: u64,
    /// Most bytes of data segments a module may hold.
    pub max_data_bytes: u64,
    /// Most actions one decision may return.
    pub max_actions: usize,
    /// Longest string anywhere in a decision's output, but JSON objects.
    pub max_string_bytes: usize,
    /// Longest JSON object (a child or a status) in a decision's output.
    pub max_object_bytes: usize,
    /// Policy calls running at once (each on a blocking thread).
    pub concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_millis(100),
            memory_bytes: 16 << 20,
            module_bytes: 8 << 20,
            max_functions: 20_000,
            max_data_bytes: 4 << 20,
            max_actions: 1_000,
            max_string_bytes: 16 << 10,
            max_object_bytes: 256 << 10,
            concurrency: 4,
        }
    }
}

/// Holds the wasmtime engine, the compiled policies and the limits. Cheap to share
/// (`Arc`); one per process.
pub struct PolicyEngine {
    engine: Engine,
    linker: Linker<Sandbox>,
    limits: Limits,
    /// Compiled modules by digest, held weakly: a module lives as long as something
    /// serves it, and loading the same bytes again while it does costs nothing.
    compiled: Mutex<HashMap<Digest, Weak<Policy>>>,
    calls: Semaphore,
    ticker: EpochTicker,
    /// Benchmark builds only: decide for guest-podset with its natively linked code.
    #[cfg(feature = "native-podset")]
    native_podset: bool,
}

/// A loaded, checked policy: ready to instantiate.
pub struct Policy {
    digest: Digest,
    info: PolicyInfo,
    /// What the component imports (all within the allowlist, or it would not load).
    imports: Vec<String>,
    pre: World,
    limits: Limits,
    /// Kept going while this policy's calls run.
    clock: Arc<EpochClock>,
    /// `name@version (sha256:…)`, for logs.
    label: Arc<str>,
}

/// The world a component targets, ready to instantiate.
enum World {
    PodSet(PodsetPolicyPre<Sandbox>),
    Reconcile(ReconcilePolicyPre<Sandbox>),
}

/// What a policy decides from, in its world's types.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub enum Input {
    PodSet(podset::Input),
    Reconcile(reconciler::Input),
}

/// What a policy decided, in its world's types.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub enum Actions {
    PodSet(Vec<podset::Action>),
    Reconcile(Vec<reconciler::Action>),
}

impl Actions {
    pub fn len(&self) -> usize {
        match self {
            Actions::PodSet(a) => a.len(),
            Actions::Reconcile(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One decision and what it cost.
#[derive(Debug)]
pub struct Decision {
    pub actions: Actions,
    pub spent: Spent,
}

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

impl PolicyEngine {
    pub fn new(limits: Limits) -> Result<Self> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        // Deadlines by epoch: a check on loop back-edges and function entries, far
        // cheaper than fuel metering, and interrupts any loop.
        config.epoch_interruption(true);
        // A fresh instance per decision is affordable when instances come from a
        // pool: slots are mapped once and reset between uses instead of mmap'ed,
        // faulted in and unmapped every time.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 4)
            .total_memories(POOL_INSTANCES)
            .total_tables(POOL_INSTANCES * 2)
            .max_memory_size(limits.memory_bytes)
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT)
            // Linux ≥ 6.7: reset only the pages a decision dirtied, not all of the
            // kept-resident megabyte. A decision at 5 pods: 14.0 µs without, 11.1 µs
            // with (a scratch probe, 10 000 decisions in a loop).
            .pagemap_scan(wasmtime::Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| Error::Engine(error::chain(&e)))?;
        let mut linker = Linker::new(&engine);
        // The only capability a policy gets: `log`, which both worlds import under the
        // same name, so one linker serves both.
        PodsetPolicy::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s)
            .map_err(|e| Error::Engine(error::chain(&e)))?;
        let ticker = EpochTicker::start(engine.clone()).map_err(|e| Error::Engine(format!("epoch thread: {e}")))?;
        Ok(PolicyEngine {
            engine,
            linker,
            calls: Semaphore::new(limits.concurrency.max(1)),
            limits,
            compiled: Mutex::new(HashMap::new()),
            ticker,
            #[cfg(feature = "native-podset")]
            native_podset: false,
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Benchmark builds only: decide for guest-podset natively from now on (see
    /// [`native`]).
    #[cfg(feature = "native-podset")]
    pub fn decide_natively(&mut self, on: bool) {
        self.native_podset = on;
    }

    /// Checks and compiles a module, or returns the already compiled one with the same
    /// digest. Blocking (compilation takes milliseconds to seconds): call it off the
    /// async executor, e.g. via [`PolicyEngine::load_async`].
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<Policy>> {
        let digest = Digest::of(bytes);
        if let Some(p) = self.cached(&digest) {
            return Ok(p);
        }
        let loaded = load::load(self, bytes, digest);
        // Loaded or refused, the compiler's scratch memory is free now.
        heap::release_freed();
        let policy = Arc::new(loaded?);
        let mut compiled = self.compiled.lock().map_err(|_| Error::Engine("policy cache lock poisoned".into()))?;
        compiled.retain(|_, p| p.strong_count() > 0);
        // Two loads of the same bytes may race; the first one in wins.
        if let Some(existing) = compiled.get(&digest).and_then(Weak::upgrade) {
            return Ok(existing);
        }
        compiled.insert(digest, Arc::downgrade(&policy));
        Ok(policy)
    }

    /// [`PolicyEngine::load`] on a blocking thread.
    pub async fn load_async(self: &Arc<Self>, bytes: Vec<u8>) -> Result<Arc<Policy>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.load(&bytes))
            .await
            .map_err(|e| Error::Engine(format!("load task: {e}")))?
    }

    fn cached(&self, digest: &Digest) -> Option<Arc<Policy>> {
        self.compiled.lock().ok()?.get(digest).and_then(Weak::upgrade)
    }

    /// How many compiled modules are alive (served by someone).
    pub fn compiled_modules(&self) -> usize {
        self.compiled.lock().map_or(0, |c| c.values().filter(|p| p.strong_count() > 0).count())
    }

    /// Runs one decision on a blocking thread, at most `concurrency` at once, so slow
    /// policies never occupy the async executor.
    pub async fn decide(&self, policy: Arc<Policy>, input: Input) -> Result<Decision> {
        #[cfg(feature = "native-podset")]
        if self.native_podset
            && policy.info().name == native::POLICY
            && let Input::PodSet(input) = &input
        {
            let decision = native::decide(input)?;
            output::check(&decision.actions, &self.limits)?;
            return Ok(decision);
        }
        let _permit = self.calls.acquire().await.map_err(|_| Error::Engine("engine shut down".into()))?;
        tokio::task::spawn_blocking(move || policy.decide(&input))
            .await
            .map_err(|e| Error::Engine(format!("policy task: {e}")))?
    }
}

impl Policy {
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// What the policy reconciles, from its `info`.
    pub fn declarations(&self) -> &Declarations {
        &self.info.declares
    }

    /// Whether this is a PodSet fast-path policy (else the any-kind world).
    pub fn is_podset_world(&self) -> bool {
        matches!(self.pre, World::PodSet(_))
    }

    /// One decision in a fresh instance. Blocking; bounded by the limits.
    pub fn decide(&self, input: &Input) -> Result<Decision> {
        let timer = Spent::start();
        let engine = match &self.pre {
            World::PodSet(pre) => pre.engine(),
            World::Reconcile(pre) => pre.engine(),
        };
        let mut store = new_store(engine, &self.limits, &self.clock, self.label.clone());
        let result = match (&self.pre, input) {
            (World::PodSet(pre), Input::PodSet(input)) => pre
                .instantiate(&mut store)
                .and_then(|i| i.podset_policy_podset().call_decide(&mut store, input))
                .map(|r| r.map(Actions::PodSet)),
            (World::Reconcile(pre), Input::Reconcile(input)) => pre
                .instantiate(&mut store)
                .and_then(|i| i.podset_policy_reconciler().call_decide(&mut store, input))
                .map(|r| r.map(Actions::Reconcile)),
            _ => return Err(Error::Engine(format!("{} was called with the input of another world", self.label))),
        };
        let spent = timer.stop();
        let actions = match result {
            Ok(Ok(actions)) => actions,
            Ok(Err(refused)) => {
                return Err(Error::Refused { reason: refused.reason, message: refused.message });
            }
            Err(e) => return Err(classify(&e, &store, &self.limits)),
        };
        output::check(&actions, &self.limits)?;
        Ok(Decision { actions, spent })
    }

    /// Calls the policy's `info` export in a fresh instance.
    fn call_info(pre: &World, limits: &Limits, clock: &Arc<EpochClock>, label: &str) -> Result<PolicyInfo> {
        match pre {
            World::PodSet(pre) => {
                let mut store = new_store(pre.engine(), limits, clock, label.into());
                let r = pre.instantiate(&mut store).and_then(|i| i.podset_policy_identity().call_info(&mut store));
                r.map_err(|e| classify(&e, &store, limits))
            }
            World::Reconcile(pre) => {
                let mut store = new_store(pre.engine(), limits, clock, label.into());
                let r = pre.instantiate(&mut store).and_then(|i| i.podset_policy_identity().call_info(&mut store));
                r.map_err(|e| classify(&e, &store, limits))
            }
        }
    }
}

fn new_store(engine: &Engine, limits: &Limits, clock: &Arc<EpochClock>, label: Arc<str>) -> Store<Sandbox> {
    let mut store = Store::new(engine, Sandbox::new(limits.memory_bytes, label, clock));
    store.limiter(|s| &mut s.memory);
    store.epoch_deadline_trap();
    store.set_epoch_deadline(instance::deadline_ticks(limits.deadline));
    store
}

/// Turns a failed call into the error a user can act on.
fn classify(e: &wasmtime::Error, store: &Store<Sandbox>, limits: &Limits) -> Error {
    let state = store.data();
    if let Some(requested) = state.memory.denied {
        return Error::OutOfMemory { requested, limit: limits.memory_bytes };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Error::DeadlineExceeded(limits.deadline),
        Some(trap) => Error::Trap(match state.last_error() {
            Some(logged) => format!("{trap} (the policy's last error log: {logged})"),
            None => trap.to_string(),
        }),
        None => Error::Trap(error::chain(e)),
    }
}
