//! Status conditions as the Kubernetes API conventions want them: one per type, and
//! `lastTransitionTime` moves only when the status does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition the operator sets on a parent whose policy cannot decide.
pub const POLICY_FAILED: &str = "PolicyFailed";

/// The condition the operator sets on a parent when the API server refuses what its
/// policy decided (a child that fails validation, a quota, an admission webhook).
pub const RECONCILE_FAILED: &str = "ReconcileFailed";

/// The condition the operator sets on a parent while a wave of its children waits for
/// an earlier one to be ready (`podset.dev/wave`), saying which waits for what.
pub const WAITING_FOR_WAVE: &str = "WaitingForWave";

/// The condition GitOps tools read (kstatus, `sigs.k8s.io/cli-utils`) as "converging":
/// set True while a parent's children are being written or are not ready yet, removed
/// once they all are.
pub const RECONCILING: &str = "Reconciling";

/// The condition kstatus reads as "failed": set True beside `PolicyFailed` or
/// `ReconcileFailed`. A policy is a pure function of its input, so the failure recurs
/// until that input changes: what kstatus means by a controller that cannot progress.
pub const STALLED: &str = "Stalled";

/// Conditions the operator itself owns; a policy may not set them. Each reconcile
/// leaves at most one of the first three, describing how that reconcile ended, and
/// at most one of `Reconciling` and `Stalled`, saying the same to kstatus.
pub const HOST_CONDITIONS: &[&str] = &[POLICY_FAILED, RECONCILE_FAILED, WAITING_FOR_WAVE, RECONCILING, STALLED];

/// Puts `new` in `conditions` in place of any condition of its type. Its
/// `lastTransitionTime` is kept from `previous` when the status there was the same.
/// The list stays sorted by type, so equal sets compare equal.
pub fn set(conditions: &mut Vec<Condition>, previous: &[Condition], mut new: Condition) {
    if let Some(old) = previous.iter().find(|c| c.type_ == new.type_ && c.status == new.status) {
        new.last_transition_time = old.last_transition_time.clone();
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

/// A condition observed now, for [`set`].
pub fn new(type_: &str, status: &str, reason: &str, message: &str, generation: Option<i64>) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: now(),
    }
}

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}
