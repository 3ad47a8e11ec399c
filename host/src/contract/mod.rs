//! The host side of the contract in `wit/policy.wit`: the generated bindings and what
//! a policy declares. The translation between observed objects and each world's input
//! and actions belongs to the reconciler ([`crate::reconcile::translate`]).

pub mod bindings;
pub mod declarations;

pub use bindings::{contract_version, interface_name};
