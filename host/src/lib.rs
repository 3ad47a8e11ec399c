//! podset-host: a Kubernetes operator whose reconcile decisions, for any custom
//! resource, are made by sandboxed WebAssembly policies.
//!
//! The flow of one reconcile, and where each part lives:
//! - [`contract`]: the host side of `wit/` — bindings, declarations, and the
//!   translation between observed objects, each world's input and actions, and plans
//! - [`sandbox`]: loads policy components and runs decisions within limits
//! - [`reconcile`]: observe → decide → check → execute → status, one controller per kind
//! - [`registry`] and [`sources`]: which policy decides which object; hot swaps
//! - [`kubernetes`]: the client, caches, watches, access checks and Events
//! - [`oci`] and [`signature`]: policies from registries, and their signatures
//! - [`context`], [`operator`], [`metrics`]: shared state and wiring
//! - [`crd`]: the operator's own resources (the CRD YAML is generated from them)
//! - [`scaffold`]: `policy new`, a policy crate for the user's own CRD

pub mod conditions;
pub mod context;
pub mod contract;
pub mod crd;
pub mod error;
pub mod kubernetes;
pub mod metrics;
pub mod oci;
pub mod operator;
pub mod reconcile;
pub mod registry;
pub mod sandbox;
pub mod scaffold;
pub mod signature;
pub mod sources;

pub use error::{Error, Result};
