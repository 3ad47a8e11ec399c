//! podset-host: a Kubernetes operator whose PodSet reconcile decisions are made by a
//! sandboxed WebAssembly policy.
//!
//! - [`crd`]: the custom resources (the CRD YAML is generated from them)
//! - [`policy`]: the sandbox — loads policy components, runs decisions within limits
//! - [`reconcile`]: the controller — gather, decide, check, act
//! - [`registry`] and [`sources`]: which policy decides for which PodSet; hot swaps
//! - [`kubernetes`]: the client and the caches (with the health that gates reconciles)
//! - [`metrics`], [`operator`]: wiring

pub mod conditions;
pub mod crd;
pub mod error;
pub mod kubernetes;
pub mod metrics;
pub mod operator;
pub mod policy;
pub mod reconcile;
pub mod registry;
pub mod sources;

pub use error::{Error, Result};
