//! A decision's input and actions, in the types of the policy's world.

use crate::contract::bindings::{podset, reconciler};
use crate::metrics::spent::Spent;

/// What a policy decides from, in its world's types.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub enum Input {
    PodSet(podset::Input),
    Reconcile(reconciler::Input),
}

impl Input {
    /// The namespace of the object decided for: "" when it is cluster-scoped.
    pub fn parent_namespace(&self) -> &str {
        match self {
            Input::PodSet(i) => &i.podset.namespace,
            Input::Reconcile(i) => &i.parent.meta.namespace,
        }
    }
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
