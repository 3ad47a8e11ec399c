//! The host side of the contract in `wit/policy.wit`: the generated bindings, what a
//! policy declares, and the translation between what the host observes and each
//! world's typed input, and between each world's actions and the host's [`Plan`].
//!
//! [`Plan`]: crate::reconcile::plan::Plan

pub mod bindings;
pub mod declarations;
pub mod podset;
pub mod reconciler;

pub use bindings::{contract_version, interface_name};
