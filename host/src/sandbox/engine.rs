//! The engine and a loaded policy: one wasmtime [`Engine`] with pooled instances and
//! epoch deadlines, and per decision a new `Store`, a new instance, one typed call,
//! and its output checked against the [`Limits`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store, Trap};

use super::artifacts::ArtifactCache;
use super::compile::Compiler;
use super::config::config;
use super::decision::{Actions, Decision, Input};
use super::digest::Digest;
use super::error::{self, Error, Result};
use super::instance::{self, EpochClock, EpochTicker, Sandbox};
use super::limits::Limits;
#[cfg(feature = "native-podset")]
use super::native;
use super::output;
use crate::contract::bindings::{Declarations, PodsetPolicy, PodsetPolicyPre, PolicyInfo, ReconcilePolicyPre};
use crate::metrics::spent::Spent;

/// Holds the wasmtime engine, the compiled policies and the limits. Cheap to share
/// (`Arc`); one per process.
pub struct PolicyEngine {
    pub(super) engine: Engine,
    pub(super) linker: Linker<Sandbox>,
    pub(super) limits: Limits,
    /// Compiled modules by digest, held weakly: a module lives as long as something
    /// serves it, and loading the same bytes again while it does costs nothing.
    pub(super) compiled: Mutex<HashMap<Digest, Weak<Policy>>>,
    pub(super) calls: Semaphore,
    pub(super) ticker: EpochTicker,
    /// Where modules are compiled: in process, or in a child (`run`).
    pub(super) compiler: Compiler,
    /// Where compiled modules are kept across restarts, if anywhere.
    pub(super) artifacts: Option<ArtifactCache>,
    /// Benchmark builds only: decide for guest-podset with its natively linked code.
    #[cfg(feature = "native-podset")]
    native_podset: bool,
}

/// A loaded, checked policy: ready to instantiate.
pub struct Policy {
    pub(super) digest: Digest,
    pub(super) info: PolicyInfo,
    /// What the component imports (all within the allowlist, or it would not load).
    pub(super) imports: Vec<String>,
    pub(super) pre: World,
    pub(super) limits: Limits,
    /// Kept going while this policy's calls run.
    pub(super) clock: Arc<EpochClock>,
    /// `name@version (sha256:…)`, for logs.
    pub(super) label: Arc<str>,
}

/// The world a component targets, ready to instantiate.
pub(super) enum World {
    PodSet(PodsetPolicyPre<Sandbox>),
    Reconcile(ReconcilePolicyPre<Sandbox>),
}

impl PolicyEngine {
    pub fn new(limits: Limits) -> Result<Self> {
        let engine = Engine::new(&config(&limits)).map_err(|e| Error::Engine(error::chain(&e)))?;
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
            compiler: Compiler::InProcess,
            artifacts: None,
            #[cfg(feature = "native-podset")]
            native_podset: false,
        })
    }

    /// Compiles modules in a child process running `program` (this binary) from now
    /// on: see [`compile`](super::compile).
    pub fn compile_in_child(&mut self, program: PathBuf) {
        self.compiler = Compiler::Child(program);
    }

    /// Keeps compiled modules in `cache` from now on, and loads them from it.
    pub fn keep_compiled_in(&mut self, cache: ArtifactCache) {
        self.artifacts = Some(cache);
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
    pub(super) fn call_info(pre: &World, limits: &Limits, clock: &Arc<EpochClock>, label: &str) -> Result<PolicyInfo> {
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
