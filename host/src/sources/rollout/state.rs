//! What the operator keeps of each ReconcilePolicy's lifecycle while it runs: its
//! revisions ([`History`]) and the rollout of its spec's module ([`RolloutState`]),
//! written into its status by the controller and the rollout driver alike.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use super::gates;
use crate::crd::{ReconcilePolicy, Revision, Rollout, RolloutPhase, RolloutStatus};
use crate::registry::outcomes::Mark;
use crate::registry::{Admitted, PolicyRef, Step};
use crate::sources::history::History;

/// What the operator keeps of one ReconcilePolicy's lifecycle.
pub struct Tracked {
    pub history: History,
    /// The rollout of the spec's module: running, or how the last one ended.
    pub rollout: Option<RolloutState>,
}

/// One rollout.
pub struct RolloutState {
    pub status: RolloutStatus,
    /// The module rolled out; kept after an abort, so that a retry needs no new load.
    pub candidate: Arc<Admitted>,
    pub plan: Rollout,
    pub(super) index: usize,
    pub(super) step_started: Timestamp,
    pub(super) mark: Mark,
    /// The shadow tally (decisions, agreed, failed) when the step began.
    pub(super) shadow_mark: (i64, i64, i64),
    /// Decisions counted in this step before the operator restarted.
    pub(super) decisions_before: i64,
    /// Parents the candidate decides for, by UID: whether each was ready when it took
    /// it over, and since when it has not been.
    pub(super) watched: HashMap<String, Watch>,
    pub(super) written: Option<Instant>,
}

#[derive(Clone, Copy)]
pub(super) struct Watch {
    pub(super) was_ready: bool,
    pub(super) unready_since: Option<Instant>,
}

impl RolloutState {
    /// A rollout of `candidate` (revision `revision`) by `plan`, from its first step, or
    /// from where `restored` (the status a previous leader wrote for the same module)
    /// left it. Returns it and the step to serve the candidate in.
    pub fn begin(
        candidate: Arc<Admitted>,
        plan: &Rollout,
        revision: i64,
        restored: Option<&RolloutStatus>,
    ) -> (RolloutState, Step) {
        let digest = candidate.policy.digest().to_string();
        let restored = restored.filter(|r| r.digest == digest);
        let index = restored.map_or(0, |r| (r.step.max(1) as usize - 1).min(plan.steps.len().saturating_sub(1)));
        let step_started = restored
            .and_then(|r| r.step_started.as_deref())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(Timestamp::now);
        let status = RolloutStatus {
            revision,
            digest,
            step: index as i32 + 1,
            steps: plan.steps.len() as i32,
            step_started: Some(step_started.to_string()),
            ..restored.cloned().unwrap_or_default()
        };
        let state = RolloutState {
            mark: candidate.outcomes.mark(),
            decisions_before: status.decisions,
            status,
            candidate,
            plan: plan.clone(),
            index,
            step_started,
            shadow_mark: (0, 0, 0),
            watched: HashMap::new(),
            written: None,
        };
        let step = gates::step(plan, index);
        (state, step)
    }

    /// Whether it is still running (not completed, not aborted).
    pub fn running(&self) -> bool {
        matches!(self.status.phase, RolloutPhase::Progressing | RolloutPhase::Paused)
    }

    pub(super) fn step(&self) -> Step {
        gates::step(&self.plan, self.index)
    }

    pub(super) fn elapsed(&self) -> Duration {
        Duration::try_from(Timestamp::now().duration_since(self.step_started)).unwrap_or_default()
    }

    /// The next step begins: its window and counts start again.
    pub(super) fn next_step(&mut self, shadow: (i64, i64, i64)) {
        self.index += 1;
        self.step_started = Timestamp::now();
        self.mark = self.candidate.outcomes.mark();
        self.shadow_mark = shadow;
        self.decisions_before = 0;
        self.status.step = self.index as i32 + 1;
        self.status.step_started = Some(self.step_started.to_string());
        self.status.decisions = 0;
    }
}

/// Every ReconcilePolicy's [`Tracked`], and one lock per policy for its status writes
/// (the controller's and the driver's must not interleave a stale list of revisions).
#[derive(Default)]
pub struct Lifecycles {
    tracked: Mutex<HashMap<PolicyRef, Tracked>>,
    writes: Mutex<HashMap<PolicyRef, Arc<tokio::sync::Mutex<()>>>>,
}

impl Lifecycles {
    /// Runs `f` on `key`'s state, made from `rp`'s status the first time (after a
    /// restart, the status is where the revisions are).
    pub fn with<T>(&self, key: &PolicyRef, rp: &ReconcilePolicy, kept: usize, f: impl FnOnce(&mut Tracked) -> T) -> T {
        let mut map = self.tracked.lock();
        let tracked = map.entry(key.clone()).or_insert_with(|| {
            let status = rp.status.clone().unwrap_or_default();
            Tracked { history: History::from_status(&status.revisions, status.revision, kept), rollout: None }
        });
        f(tracked)
    }

    /// Runs `f` on `key`'s state, if there is one.
    pub fn get<T>(&self, key: &PolicyRef, f: impl FnOnce(&mut Tracked) -> T) -> Option<T> {
        self.tracked.lock().get_mut(key).map(f)
    }

    pub fn forget(&self, key: &PolicyRef) {
        self.tracked.lock().remove(key);
        self.writes.lock().remove(key);
    }

    /// Every policy tracked.
    pub(super) fn keys(&self) -> Vec<PolicyRef> {
        self.tracked.lock().keys().cloned().collect()
    }

    /// Whether `key` has a rollout running.
    pub(super) fn rolling(&self, key: &PolicyRef) -> bool {
        self.tracked.lock().get(key).is_some_and(|t| t.rollout.as_ref().is_some_and(RolloutState::running))
    }

    /// The lock `key`'s status writes take.
    pub fn write_lock(&self, key: &PolicyRef) -> Arc<tokio::sync::Mutex<()>> {
        self.writes.lock().entry(key.clone()).or_default().clone()
    }

    /// What the status says of `key`'s lifecycle now.
    pub fn status(&self, key: &PolicyRef) -> Option<(Option<i64>, Vec<Revision>, Option<RolloutStatus>)> {
        self.get(key, |t| {
            (t.history.serving, t.history.revisions.clone(), t.rollout.as_ref().map(|r| r.status.clone()))
        })
    }

    /// Every digest some policy lists as a revision.
    pub fn digests(&self) -> std::collections::HashSet<crate::sandbox::Digest> {
        self.tracked.lock().values().flat_map(|t| t.history.digests().collect::<Vec<_>>()).collect()
    }
}
