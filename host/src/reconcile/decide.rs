//! One decision: the observed state in the policy's world, the call in the sandbox,
//! and the world's actions as a [`Plan`].

use super::check::Rejection;
use super::observe::Observed;
use super::plan::Plan;
use crate::contract::{podset, reconciler};
use crate::registry::Admitted;
use crate::sandbox::{Actions, Input, PolicyEngine, Spent};

/// Why there is no plan.
pub enum Failed {
    /// The policy could not decide (trap, deadline, memory, refusal, bad output).
    Policy(crate::sandbox::Error),
    /// The policy decided something its world's own rules refuse.
    Rejected(Rejection),
}

/// Asks `admitted`'s policy what to do about `observed`. Returns the plan and what
/// the decision took.
pub async fn decide(engine: &PolicyEngine, admitted: &Admitted, observed: &Observed) -> Result<(Plan, Spent), Failed> {
    let policy = admitted.policy.clone();
    let input = if policy.is_podset_world() {
        Input::PodSet(podset::input(observed).map_err(Failed::Rejected)?)
    } else {
        Input::Reconcile(reconciler::input(observed))
    };
    let decision = engine.decide(policy, input).await.map_err(Failed::Policy)?;
    let plan = match decision.actions {
        Actions::PodSet(actions) => podset::plan(actions, observed),
        Actions::Reconcile(actions) => reconciler::plan(actions),
    }
    .map_err(Failed::Rejected)?;
    Ok((plan, decision.spent))
}
