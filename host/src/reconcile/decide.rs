//! One decision: the observed state in the policy's world, the call in the sandbox,
//! and the world's actions as a [`Plan`].

use super::check::Rejection;
use super::lookups;
use super::observe::Observed;
use super::plan::Plan;
use super::record::{Recorder, Subject};
use super::shadow::Shadows;
use super::translate::{input_for, plan_for};
use crate::registry::{Admitted, Shadow};
use crate::sandbox::{PolicyEngine, Spent};

/// Why there is no plan.
pub enum Failed {
    /// The policy could not decide (trap, deadline, memory, refusal, bad output).
    Policy(crate::sandbox::Error),
    /// The policy decided something its world's own rules refuse.
    Rejected(Rejection),
}

/// Who else is told about a decision.
#[derive(Default)]
pub struct Witnesses<'a> {
    /// Writes it as a scenario file (`--record-dir`).
    pub recorder: Option<&'a Recorder>,
    /// Decide beside it, and compare.
    pub shadows: Option<(&'a Shadows, Vec<Shadow>)>,
}

/// A decision made, and what it took.
pub struct Decided {
    pub plan: Plan,
    /// One per call into the policy: more than one when it named lookups the host had
    /// not answered yet.
    pub spent: Vec<Spent>,
}

/// Asks `admitted`'s policy what to do about `observed`, and tells the `witnesses`.
///
/// A call that names a lookup without an answer in its input is not acted on: the
/// host answers it into `observed.looked_up` and calls again, at most
/// [`lookups::MAX_CALLS`] times. Every call is recorded (each is an exact input and
/// output); shadows decide from the final observation, with its answers.
pub async fn decide(
    engine: &PolicyEngine,
    admitted: &Admitted,
    observed: &mut Observed,
    witnesses: Witnesses<'_>,
) -> Result<Decided, Failed> {
    let policy = admitted.policy.clone();
    let mut spent = Vec::new();
    let decision = loop {
        let input = input_for(&policy, observed).map_err(Failed::Rejected)?;
        let kept = witnesses.recorder.map(|_| input.clone());
        let decision = engine.decide(policy.clone(), input).await;
        if let (Some(recorder), Some(input)) = (witnesses.recorder, kept) {
            let outcome = decision.as_ref().map(|d| d.actions.clone()).map_err(|e| e.reason());
            recorder.record(subject(observed), &policy, input, outcome);
        }
        let Ok(d) = &decision else { break decision };
        spent.push(d.spent);
        let missing = observed.unanswered(&d.actions);
        if missing.is_empty() {
            observed.answerer.remember(&lookups::named_lookups(&d.actions), &observed.looked_up);
            break decision;
        }
        if spent.len() >= lookups::MAX_CALLS {
            return Err(Failed::Rejected(Rejection::lookups_unstable(spent.len(), &missing)));
        }
        observed.answer(&missing).map_err(|e| Failed::Rejected(e.into()))?;
    };
    if let Some((shadows, which)) = witnesses.shadows {
        let live = decision.as_ref().map(|d| d.actions.clone()).map_err(|e| e.reason().to_string());
        shadows.offer(which, observed, live);
    }
    let decision = decision.map_err(Failed::Policy)?;
    let plan = plan_for(decision.actions, observed).map_err(Failed::Rejected)?;
    Ok(Decided { plan, spent })
}

/// The parent a decision is for, as a recording names it.
fn subject(observed: &Observed) -> Subject {
    let r = &observed.parent_resource;
    let kind = if r.group.is_empty() { r.kind.clone() } else { format!("{}.{}", r.kind, r.group) };
    let m = &observed.parent.metadata;
    Subject { kind, namespace: m.namespace.clone().unwrap_or_default(), name: m.name.clone().unwrap_or_default() }
}
