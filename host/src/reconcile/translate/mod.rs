//! Between what the host observes and each world of `wit/`: the observed parent,
//! children and related objects as a world's typed input, and a world's actions as
//! the host's [`Plan`]. The bindings themselves live in [`crate::contract`].

pub mod podset;
pub mod reconciler;

use super::check::Rejection;
use super::observe::Observed;
use super::plan::Plan;
use crate::sandbox::{Actions, Input, Policy};

/// `policy`'s input for `observed`, in its world.
pub fn input_for(policy: &Policy, observed: &Observed) -> Result<Input, Rejection> {
    Ok(if policy.is_podset_world() {
        Input::PodSet(podset::input(observed)?)
    } else {
        Input::Reconcile(reconciler::input(observed))
    })
}

/// What `actions` ask of the host for `observed`, as a plan the checks read.
pub fn plan_for(actions: Actions, observed: &Observed) -> Result<Plan, Rejection> {
    match actions {
        Actions::PodSet(actions) => podset::plan(actions, observed),
        Actions::Reconcile(actions) => reconciler::plan(actions),
    }
}
