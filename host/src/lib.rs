//! podset-host: a Kubernetes operator whose reconcile decisions, for any custom
//! resource, are made by sandboxed WebAssembly policies.
//!
//! The modules stand on floors and import only from the floors below (a test,
//! `tests/in_process/layers.rs`, holds them to it):
//!
//! - [`operator`]: builds and runs everything; [`author`]: the `policy` subcommand;
//!   [`reference`](mod@reference): the reference pages generated from the CLI and the metrics
//! - [`config`]: what `podset-host run` is told, its flags and the settings they make
//! - [`sources`]: where policies come from (files, registries, ReconcilePolicy objects)
//! - [`reconcile`]: observe → decide → check → execute → status, one controller per kind
//! - [`registry`]: which policy decides which object; [`scenario`]: decisions written down
//! - [`kubernetes`]: client, caches, watches, access checks, Events; [`sandbox`]: loads
//!   policy components and runs decisions within limits; [`oci`]: registries
//! - [`contract`]: the bindings of `wit/` and what a policy declares; [`signature`]
//! - [`crd`], [`metrics`], [`conditions`]: the operator's resources and what it reports;
//!   [`heap`]: gives memory freed in bulk back to the system

pub mod author;
pub mod conditions;
pub mod config;
pub mod contract;
pub mod crd;
pub mod heap;
pub mod kubernetes;
pub mod metrics;
pub mod oci;
pub mod operator;
pub mod reconcile;
pub mod reference;
pub mod registry;
pub mod sandbox;
pub mod scenario;
pub mod signature;
pub mod sources;
