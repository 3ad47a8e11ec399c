//! Shadow decisions: a candidate policy decides beside the live one, on the same
//! input, and only how the two compare is kept.
//!
//! The reconcile hands the live decision and what it was made from to a bounded queue
//! ([`Shadows::offer`]: a few `Arc`s and the live actions, cloned) and goes on; it never
//! waits for a shadow. A thread of its own takes each job and, for each shadow:
//! - builds the shadow's input from the same observation, so the same clock and the
//!   same work in flight;
//! - runs the shadow in a fresh instance under the same limits, outside the live
//!   decisions' concurrency limit, so a shadow that loops to its deadline never holds a
//!   live decision up;
//! - puts its actions through the same checks as the live ones, and their bodies
//!   through the schemas of their kinds ([`Shadows::set_schemas`]) once a shadow has
//!   loaded them: a decision the API server would refuse fails;
//! - compares the two decisions in their normal forms ([`crate::scenario::compare`]).
//!
//! Nothing a shadow decides is performed. When the queue is full the job is dropped
//! and counted, for each of its shadows.
//!
//! What is kept stays bounded however many objects there are: per shadow, its counts,
//! the last [`DIFFERENCES_KEPT`] differences and failures (each at most [`DIFF_MAX`] bytes), and
//! the objects it currently differs on, as hashes, at most [`DIVERGED_MAX`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use parking_lot::{Condvar, Mutex};
use tracing::{debug, info, warn};

use super::check;
use super::check::Rejection;
use super::lookups;
use super::observe::Observed;
use super::translate::{input_for, plan_for};
use crate::crd::{ShadowDifference, ShadowFailure, ShadowStatus};
use crate::metrics::Metrics;
use crate::registry::{PolicyRef, Shadow, ShadowSource};
use crate::sandbox::{Actions, Digest};
use crate::scenario::compare::{Normal, Outcome, Side, compare};
use crate::scenario::schemas::Schemas;
use crate::scenario::validate;

/// Jobs waiting for the shadow thread. A job is a cloned observation (`Arc`s) and the
/// live actions: a few KiB for a parent of 5 pods, so a full queue holds a few MiB.
pub const QUEUE: usize = 512;
/// Differences kept per shadow for `status.shadow.lastDifferences`.
pub const DIFFERENCES_KEPT: usize = 3;
/// A difference's diff is cut at this many bytes: a status stays small.
pub const DIFF_MAX: usize = 4096;
/// Objects remembered per shadow as currently diverged (to tell a first divergence
/// from a persistent one); past this, the oldest are forgotten.
pub const DIVERGED_MAX: usize = 4096;
/// A `--shadow` file's differences are logged at most this often (a ReconcilePolicy's
/// go to its status).
const LOG_EVERY: Duration = Duration::from_secs(10);

/// How one shadow decision compared with the live one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agree,
    /// A unified diff, live `-`, shadow `+`.
    Differ(String),
    /// The shadow could not decide, or decided what the checks refuse.
    Failed(String),
}

impl Verdict {
    pub fn outcome(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Differ(_) => "differ",
            Verdict::Failed(_) => "failed",
        }
    }
}

/// The shadows' queue and tallies. Cheap to keep when no shadow is loaded: an idle
/// thread and an empty map.
pub struct Shadows {
    jobs: SyncSender<Job>,
    shared: Arc<Shared>,
}

struct Shared {
    tallies: Mutex<HashMap<ShadowSource, Tally>>,
    metrics: Arc<Metrics>,
    /// The schemas shadow decisions are checked against (the kinds the shadows declare,
    /// from the API server or shipped), once a shadow has loaded; `arrived` wakes the
    /// shadow thread waiting for them.
    schemas: Mutex<Option<Known>>,
    arrived: Condvar,
}

/// Schemas, and the API paths (`api/v1`, `apis/apps/v1`) whose kinds they were made for.
struct Known {
    schemas: Arc<Schemas>,
    paths: HashSet<String>,
}

/// How long the shadow thread waits for the schemas of a shadow's kinds before judging
/// its decision without them. They are fetched when the shadow loads, and arrive within
/// a second or two (the API server's `api/v1` document is 1.45 MB); a first decision
/// judged before then went unchecked and counted a decision the server would refuse as
/// a difference (`shadow::a_shadow_decision_the_servers_schema_refuses_fails_and_never_acts`,
/// 2026-11-30). Only a fetch that never ends waits this long, and only shadows wait.
const SCHEMAS_WAIT: Duration = Duration::from_secs(10);

struct Job {
    shadows: Vec<Shadow>,
    observed: Observed,
    /// What the live policy decided, or why it could not.
    live: Result<Actions, String>,
}

impl Shadows {
    /// Starts the shadow thread.
    pub fn start(metrics: Arc<Metrics>) -> std::io::Result<Shadows> {
        let (jobs, rx) = sync_channel(QUEUE);
        let shared =
            Arc::new(Shared { tallies: Mutex::default(), metrics, schemas: Mutex::default(), arrived: Condvar::new() });
        let worker = shared.clone();
        std::thread::Builder::new().name("shadows".into()).spawn(move || work(&rx, &worker))?;
        Ok(Shadows { jobs, shared })
    }

    /// Queues `shadows` to decide on `observed`, beside the live decision `live`.
    /// Never blocks: a full queue drops the job, counted for each shadow.
    pub fn offer(&self, shadows: Vec<Shadow>, observed: &Observed, live: Result<Actions, String>) {
        let job = Job { shadows, observed: observed.clone(), live };
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                let mut tallies = self.shared.tallies.lock();
                for shadow in &job.shadows {
                    let source = shadow.source.to_string();
                    tallies.entry(shadow.source.clone()).or_default().dropped(shadow.admitted.policy.digest());
                    self.shared.metrics.shadow_decided(&source, "dropped", None);
                }
            }
        }
    }

    /// The ReconcilePolicy shadows whose tally changed since the last call, with their
    /// status; marks them reported.
    pub fn changed(&self) -> Vec<(PolicyRef, ShadowStatus)> {
        let mut tallies = self.shared.tallies.lock();
        tallies
            .iter_mut()
            .filter(|(_, t)| t.changed)
            .filter_map(|(source, t)| {
                t.changed = false;
                match source {
                    ShadowSource::Named(key) => Some((key.clone(), t.status.clone())),
                    ShadowSource::File(_) => None,
                }
            })
            .collect()
    }

    /// Whether shadow decisions are checked against schemas.
    pub fn has_schemas(&self) -> bool {
        self.shared.schemas.lock().is_some()
    }

    /// The schemas shadow decisions are checked against from now on, made for the kinds
    /// of `paths` (those of [`crate::kubernetes::openapi::paths_of`]).
    pub fn set_schemas(&self, schemas: Arc<Schemas>, paths: impl IntoIterator<Item = String>) {
        *self.shared.schemas.lock() = Some(Known { schemas, paths: paths.into_iter().collect() });
        self.shared.arrived.notify_all();
    }

    /// The tally of `source`, if it decided or dropped anything.
    pub fn status(&self, source: &ShadowSource) -> Option<ShadowStatus> {
        self.shared.tallies.lock().get(source).map(|t| t.status.clone())
    }

    /// A shadow was withdrawn: its tally goes with it.
    pub fn forget(&self, source: &ShadowSource) {
        self.shared.tallies.lock().remove(source);
    }

    /// How many objects each shadow remembers as diverged (for tests of the bound).
    pub fn diverged(&self, source: &ShadowSource) -> usize {
        self.shared.tallies.lock().get(source).map_or(0, |t| t.diverged.len())
    }
}

impl Shared {
    /// The schemas made for every kind `shadow` declares, waiting up to [`SCHEMAS_WAIT`]
    /// for them; after that, whatever is there, and a warning.
    fn schemas_for(&self, shadow: &Shadow) -> Option<Arc<Schemas>> {
        let wanted = crate::kubernetes::openapi::paths_of(shadow.admitted.policy.declarations());
        let covers = |known: &Option<Known>| known.as_ref().is_some_and(|k| wanted.iter().all(|p| k.paths.contains(p)));
        let mut known = self.schemas.lock();
        let deadline = Instant::now() + SCHEMAS_WAIT;
        while !covers(&known) {
            if self.arrived.wait_until(&mut known, deadline).timed_out() {
                if !covers(&known) {
                    warn!(shadow = %shadow.source, "the schemas of the shadow's kinds are not loaded: its decision is judged without them");
                }
                break;
            }
        }
        known.as_ref().map(|k| k.schemas.clone())
    }
}

fn work(jobs: &Receiver<Job>, shared: &Shared) {
    while let Ok(job) = jobs.recv() {
        let live: Side = match &job.live {
            Ok(actions) => Ok(Normal::of_actions(actions, &job.observed.namespace())),
            Err(reason) => Err(reason.clone()),
        };
        let object = object_name(&job.observed);
        let hash = object_hash(&job.observed);
        let at = Timestamp::from_millisecond(job.observed.now).unwrap_or_else(|_| Timestamp::now()).to_string();
        for shadow in &job.shadows {
            // The wait for the schemas is not the decision's.
            let schemas = shared.schemas_for(shadow);
            let started = Instant::now();
            let verdict = judge(shadow, &job.observed, &live, schemas.as_deref());
            let took = started.elapsed();
            let source = shadow.source.to_string();
            shared.metrics.shadow_decided(&source, verdict.outcome(), Some(took));
            debug!(shadow = %source, object = %object, outcome = verdict.outcome(), ?took, "shadow decided");
            let mut tallies = shared.tallies.lock();
            let tally = tallies.entry(shadow.source.clone()).or_default();
            tally.count(shadow.admitted.policy.digest(), hash, &object, &at, &verdict);
            if matches!(shadow.source, ShadowSource::File(_))
                && !matches!(verdict, Verdict::Agree)
                && tally.last_logged.is_none_or(|t| t.elapsed() >= LOG_EVERY)
            {
                tally.last_logged = Some(Instant::now());
                let s = &tally.status;
                match &verdict {
                    Verdict::Differ(diff) => info!(
                        shadow = %source, object = %object, agreed = s.agreed, differed = s.differed,
                        "shadow differs from the live policy (live -, shadow +):\n{diff}"
                    ),
                    Verdict::Failed(why) => {
                        warn!(shadow = %source, object = %object, failed = s.failed, "shadow failed: {why}")
                    }
                    Verdict::Agree => {}
                }
            }
        }
    }
}

/// The shadow's decision on `observed`, compared with the live one; a decision that
/// the host's checks or the kinds' `schemas` refuse fails.
pub fn judge(shadow: &Shadow, observed: &Observed, live: &Side, schemas: Option<&Schemas>) -> Verdict {
    let policy = &shadow.admitted.policy;
    // The live decision's answers first; lookups only the shadow names are answered
    // from the same caches, as a live reconcile would answer them.
    let mut observed = std::borrow::Cow::Borrowed(observed);
    let mut calls = 0;
    let decision = loop {
        let input = match input_for(policy, &observed) {
            Ok(input) => input,
            Err(r) => return Verdict::Failed(format!("{}: {r}", r.reason())),
        };
        let decision = match policy.decide(&input) {
            Ok(d) => d,
            Err(e) => return Verdict::Failed(format!("{}: {e}", e.reason())),
        };
        calls += 1;
        let missing = observed.unanswered(&decision.actions);
        if missing.is_empty() {
            break decision;
        }
        if calls >= lookups::MAX_CALLS {
            let r = Rejection::lookups_unstable(calls, &missing);
            return Verdict::Failed(format!("{}: {r}", r.metric_label()));
        }
        if let Err(e) = observed.to_mut().answer(&missing) {
            let r = Rejection::from(e);
            return Verdict::Failed(format!("{}: {r}", r.metric_label()));
        }
    };
    let observed = observed.as_ref();
    let normal = Normal::of_actions(&decision.actions, &observed.namespace());
    if let Some(schemas) = schemas
        && let Ok(input) = input_for(policy, observed)
    {
        let refused = validate::check(schemas, &input, &decision.actions).refused;
        if !refused.is_empty() {
            let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
            return Verdict::Failed(format!("SchemaViolation: {}", lines.join("; ")));
        }
    }
    // The same checks as the live actions: a shadow that decides what would be refused
    // is not one to promote.
    let plan = plan_for(decision.actions, observed);
    if let Err(r) = plan.and_then(|plan| check::check(plan, observed, &shadow.admitted.resolved)) {
        return Verdict::Failed(format!("{}: {r}", r.metric_label()));
    }
    match compare(live, &Ok(normal), ("live", "shadow")) {
        Outcome::Agree => Verdict::Agree,
        Outcome::Differ { diff } => Verdict::Differ(diff),
    }
}

/// `Kind namespace/name`, as a difference names its object.
fn object_name(observed: &Observed) -> String {
    let m = &observed.parent.metadata;
    format!(
        "{} {}/{}",
        observed.parent_resource.kind,
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default()
    )
}

/// A parent as the diverged set remembers it: its kind, name and uid (a parent
/// recreated under the same name starts afresh), in 8 bytes.
fn object_hash(observed: &Observed) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let m = &observed.parent.metadata;
    (&observed.parent_resource.group, &observed.parent_resource.kind, &m.namespace, &m.name, &m.uid).hash(&mut h);
    h.finish()
}

/// One shadow's counts since its module loaded.
#[derive(Default)]
struct Tally {
    status: ShadowStatus,
    /// The objects on which the shadow's last decision differed.
    diverged: HashSet<u64>,
    /// `diverged` in the order the objects joined it, to forget the oldest first. May
    /// hold objects that left `diverged` since; compacted when twice its size.
    order: VecDeque<u64>,
    /// Since [`Shadows::changed`] last reported it.
    changed: bool,
    last_logged: Option<Instant>,
}

impl Tally {
    /// Counts for `digest`: another module starts the counts again.
    fn module(&mut self, digest: &Digest) {
        let digest = digest.to_string();
        if self.status.digest != digest {
            *self = Tally { status: ShadowStatus { digest, ..ShadowStatus::default() }, ..Tally::default() };
        }
        self.changed = true;
    }

    fn dropped(&mut self, digest: &Digest) {
        self.module(digest);
        self.status.dropped += 1;
    }

    fn count(&mut self, digest: &Digest, object: u64, name: &str, at: &str, verdict: &Verdict) {
        self.module(digest);
        self.status.decisions += 1;
        match verdict {
            Verdict::Agree => {
                self.status.agreed += 1;
                self.diverged.remove(&object);
            }
            Verdict::Failed(why) => {
                self.status.failed += 1;
                let kept = &mut self.status.last_failures;
                if kept.len() == DIFFERENCES_KEPT {
                    kept.remove(0);
                }
                kept.push(ShadowFailure { object: name.into(), time: at.into(), reason: cut(why) });
            }
            Verdict::Differ(diff) => {
                self.status.differed += 1;
                if self.diverged.contains(&object) {
                    self.status.persistent_divergences += 1;
                } else {
                    self.status.first_divergences += 1;
                    self.remember(object);
                }
                let kept = &mut self.status.last_differences;
                if kept.len() == DIFFERENCES_KEPT {
                    kept.remove(0);
                }
                kept.push(ShadowDifference { object: name.into(), time: at.into(), diff: cut(diff) });
            }
        }
    }

    fn remember(&mut self, object: u64) {
        self.diverged.insert(object);
        self.order.push_back(object);
        while self.diverged.len() > DIVERGED_MAX {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.diverged.remove(&oldest);
                }
                None => break,
            }
        }
        if self.order.len() > 2 * DIVERGED_MAX {
            let diverged = &self.diverged;
            let mut seen = HashSet::with_capacity(diverged.len());
            self.order.retain(|o| diverged.contains(o) && seen.insert(*o));
        }
    }
}

/// `diff` cut at [`DIFF_MAX`] bytes, on a line boundary where there is one.
fn cut(diff: &str) -> String {
    if diff.len() <= DIFF_MAX {
        return diff.to_string();
    }
    let mut end = DIFF_MAX;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let end = diff[..end].rfind('\n').map_or(end, |n| n + 1);
    format!("{}… ({} more bytes)\n", &diff[..end], diff.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(b: &[u8]) -> Digest {
        Digest::of(b)
    }

    #[test]
    fn first_and_persistent_divergences_are_told_apart() {
        let mut t = Tally::default();
        let d = digest(b"m");
        let differ = Verdict::Differ("-a\n+b\n".into());
        t.count(&d, 1, "PodSet a/one", "t0", &differ);
        t.count(&d, 1, "PodSet a/one", "t1", &differ);
        t.count(&d, 2, "PodSet a/two", "t2", &Verdict::Agree);
        t.count(&d, 1, "PodSet a/one", "t3", &Verdict::Agree);
        t.count(&d, 1, "PodSet a/one", "t4", &differ);
        t.count(&d, 3, "PodSet a/three", "t5", &Verdict::Failed("Trap: boom".into()));
        let s = &t.status;
        assert_eq!((s.decisions, s.agreed, s.differed, s.failed), (6, 2, 3, 1));
        assert_eq!(s.last_failures.len(), 1);
        assert_eq!(
            (s.last_failures[0].object.as_str(), s.last_failures[0].reason.as_str()),
            ("PodSet a/three", "Trap: boom")
        );
        assert_eq!((s.first_divergences, s.persistent_divergences), (2, 1));
        assert_eq!(s.last_differences.iter().map(|d| d.time.as_str()).collect::<Vec<_>>(), ["t0", "t1", "t4"]);
        // Another module starts the counts again.
        t.count(&digest(b"n"), 1, "PodSet a/one", "t6", &Verdict::Agree);
        assert_eq!((t.status.decisions, t.status.agreed, t.status.differed), (1, 1, 0));
        assert_eq!(t.status.digest, digest(b"n").to_string());
    }

    #[test]
    fn memory_stays_bounded_over_many_diverging_objects() {
        let mut t = Tally::default();
        let d = digest(b"m");
        let big = format!("{}\n", "-x".repeat(10_000));
        for round in 0..3u64 {
            for object in 0..20_000u64 {
                let verdict = if (object + round) % 3 == 0 { Verdict::Agree } else { Verdict::Differ(big.clone()) };
                t.count(&d, object, "PodSet a/x", "t", &verdict);
            }
        }
        assert_eq!(t.status.decisions, 60_000);
        assert!(t.diverged.len() <= DIVERGED_MAX, "{}", t.diverged.len());
        assert!(t.order.len() <= 2 * DIVERGED_MAX + 1, "{}", t.order.len());
        assert_eq!(t.status.last_differences.len(), DIFFERENCES_KEPT);
        assert!(t.status.last_differences.iter().all(|d| d.diff.len() <= DIFF_MAX + 40), "diffs are cut");
        assert!(t.status.last_differences[0].diff.ends_with("more bytes)\n"));
    }

    #[test]
    fn a_cut_diff_ends_on_a_line() {
        let diff = "é".repeat(DIFF_MAX) + "\n";
        let cut = cut(&diff);
        assert!(cut.len() < DIFF_MAX + 40 && cut.ends_with("more bytes)\n"), "{}", cut.len());
        let lines = format!("{}\n", "-line\n".repeat(1000));
        let cut = super::cut(&lines);
        assert!(cut.starts_with("-line\n") && cut.contains("-line\n… ("), "{}", &cut[cut.len() - 40..]);
    }
}
