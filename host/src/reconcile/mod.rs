//! The reconciler, the same for every parent kind:
//!
//! [`observe`] (parent, children, related objects, work in flight) →
//! [`decide`] (the policy, in its world, through the contract; called again while it
//! names [`lookups`] not yet answered) →
//! [`check`] (the plan against the parent; [`restrict`]s pods) → [`waves`] (holds back
//! what waits for an earlier wave to be [`readiness`]-ready) →
//! [`execute`] (children, Events, finalizer) → [`status`] (written only when changed, with
//! the [`progress`] GitOps tools read).
//!
//! [`shadow`] policies decide beside the live one and are compared, never performed;
//! [`record`] writes decisions as scenario files.
//!
//! [`controller`] runs a controller per parent kind served: kube-runtime's watches and
//! caches, and a [`queue`] that hands out its parents, [`urgency`] first;
//! [`expectations`] remember what was asked of the API server and not yet seen, and
//! [`terminating`] the namespaces that refused a create because they are going.

pub mod burst;
pub mod caches;
pub mod check;
pub mod context;
pub mod controller;
pub mod decide;
pub mod error;
pub mod execute;
pub mod expectations;
pub mod flow;
pub mod keys;
pub mod kind;
pub mod lookups;
pub mod observe;
pub mod plan;
pub mod progress;
pub mod queue;
pub mod readiness;
pub mod record;
pub mod restrict;
pub mod shadow;
pub mod slots;
pub mod snapshot;
pub mod status;
pub mod syntax;
pub mod terminating;
pub mod translate;
pub mod urgency;
pub mod waves;

pub use context::{Context, ContextSettings};
pub use error::{ChildAction, Error, Result};
pub use flow::{act, error_policy, reconcile};
