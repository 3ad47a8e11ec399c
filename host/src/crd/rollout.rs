//! A ReconcilePolicy's rollout plan (`spec.rollout`) and what the operator reports of
//! it (`status.rollout`): how a new module takes over from the one serving, one step at
//! a time, each moving on only while its gates hold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a new module (a new `spec.sha256`) takes over from the revision serving: a
/// shadow step, then growing shares of the parents, each step moving on only when its
/// gates held for its whole window; a gate that fails aborts the rollout and every
/// parent goes back to the revision that served before. Without a plan, a new module
/// replaces the serving one at once. Going back to a revision that once served every
/// parent (`status.revisions[].complete`) is a rollback: it swaps in at once.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rollout {
    /// The steps, in order. After the last one the new module serves every parent the
    /// policy selects, and becomes the revision that serves.
    #[schemars(length(min = 1, max = 16))]
    pub steps: Vec<RolloutStep>,
    /// What must hold during every step; the first that fails aborts the rollout.
    #[serde(default)]
    pub gates: RolloutGates,
    /// Holds the rollout at its current step: no step moves on (gates still abort)
    /// until it is false again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// One step: the new module shadows the serving one, or decides for a share of the
/// parents (chosen by a hash of their UIDs, so a parent never flips back and forth).
/// It lasts at least `duration` and at least `decisions` decisions of the new module,
/// whichever comes last.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.shadow ? !has(self.percent) : has(self.percent)",
    "message": "a step is either `shadow: true` or a `percent` of the parents"
}, {
    "rule": "has(self.duration) || has(self.decisions)",
    "message": "a step needs a `duration`, a number of `decisions`, or both"
}]))]
pub struct RolloutStep {
    /// The new module decides beside the serving one for every parent, on the same
    /// input, and never acts; its decisions are compared (`status.shadow`).
    #[serde(default)]
    pub shadow: bool,
    /// The share of the parents the new module decides for, 1 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub percent: Option<i32>,
    /// The least time spent in the step, e.g. `30s`, `5m`, `1h30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 32))]
    pub duration: Option<String>,
    /// The least number of decisions of the new module in the step (shadow decisions
    /// in a shadow step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub decisions: Option<i64>,
}

/// The gates every step holds. Counts are per step: each step starts them again.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutGates {
    /// Decisions of the new module that failed (it trapped, ran out of time or memory,
    /// or decided what the host's checks or the kinds' schemas refuse) allowed in a
    /// step: shadow decisions in a shadow step, its decisions for its share after.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_failed_decisions: i64,
    /// Writes the API server refused (`ReconcileFailed` on a parent) allowed in a step,
    /// for the parents the new module decides.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_reconcile_failures: i64,
    /// In a shadow step: the least share, in percent, of the shadow decisions that
    /// agree with the serving revision's. Unset: agreement is reported, not gated (a
    /// change that means to decide otherwise differs on purpose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub min_shadow_agreement: Option<i32>,
    /// A parent the new module decides for that was Ready (a `Ready` or `Available`
    /// condition True) when the module took it over, and has not been for this long, is
    /// a readiness regression: it fails the gate.
    #[serde(default = "default_readiness_grace")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 32))]
    pub readiness_grace: String,
}

impl Default for RolloutGates {
    fn default() -> Self {
        RolloutGates {
            max_failed_decisions: 0,
            max_reconcile_failures: 0,
            min_shadow_agreement: None,
            readiness_grace: default_readiness_grace(),
        }
    }
}

fn default_readiness_grace() -> String {
    "2m".into()
}

/// Where a rollout is.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutPhase {
    /// A step is running; it moves on when its window has passed with its gates held.
    #[default]
    Progressing,
    /// Held at its step (`spec.rollout.paused`); gates still abort.
    Paused,
    /// The new module serves every parent: it is the revision that serves.
    Completed,
    /// A gate failed, or someone aborted it: every parent is back on the revision that
    /// served before, and the new module decides nothing until the spec changes (or
    /// the rollout is retried).
    Aborted,
}

/// The rollout of the module `spec.sha256` pins, written by the operator; it stays
/// after the rollout ended, saying how.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The revision being rolled out (its number in `status.revisions`).
    pub revision: i64,
    /// Its module's digest.
    pub digest: String,
    pub phase: RolloutPhase,
    /// The step running, 1 to `steps` (the last one reached once the rollout ended).
    pub step: i32,
    pub steps: i32,
    /// The step and its progress in a few words, e.g. `2/3 10% of the parents, 40s of 1m`.
    #[serde(default)]
    pub progress: String,
    /// When the step began (RFC 3339); its window counts from here, across restarts.
    // Written as null when unset (here and below): the status is written as a merge
    // patch, which keeps a field it does not name.
    #[serde(default)]
    pub step_started: Option<String>,
    /// The new module's decisions in this step (shadow decisions in a shadow step).
    #[serde(default)]
    pub decisions: i64,
    /// Each gate's value in this step against its limit.
    #[serde(default)]
    pub gates: Vec<GateStatus>,
    /// Why it aborted: the gate, and the objects it failed on.
    #[serde(default)]
    pub aborted: Option<RolloutAbort>,
    /// What it is doing, or how it ended, in a sentence.
    #[serde(default)]
    pub message: String,
}

/// One gate's value in the current step.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateStatus {
    /// `failedDecisions`, `reconcileFailures`, `shadowAgreement` or `readiness`.
    pub name: String,
    /// Its value now, e.g. `0`, `97%`.
    pub value: String,
    /// What it must stay within, e.g. `≤ 0`, `≥ 95%`.
    pub limit: String,
    /// Whether it holds.
    pub holds: bool,
}

/// A rollout that stopped before the end.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAbort {
    /// The gate that failed (`failedDecisions`, `reconcileFailures`, `shadowAgreement`,
    /// `readiness`), or `Manual` when someone aborted it.
    pub gate: String,
    /// In which step, 1 to `steps`.
    pub step: i32,
    /// When (RFC 3339).
    pub time: String,
    /// The objects it failed on (`Kind namespace/name: why`), the last few.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
}
