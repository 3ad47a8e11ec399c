//! The sandbox: loads reconcile policies (Wasm components implementing one of the
//! worlds of `wit/policy.wit`) and runs each decision in a fresh, bounded instance.
//!
//! Pipeline, as in wasmtime's examples: one `Engine` (epoch interruption on) →
//! `load` checks and compiles a module once per sha256 digest (for `run`, in a child
//! process: [`compile`]; kept on disk when asked: [`ArtifactCache`]) → an
//! `InstancePre` with only the `log` import linked → every call gets a new `Store`
//! (memory cap, epoch deadline), a new instance, one typed call, and its output
//! checked against [`Limits`]. Nothing survives between calls.

mod artifacts;
pub mod compile;
mod config;
mod decision;
mod digest;
mod engine;
mod error;
pub mod inspect;
mod instance;
mod limits;
mod load;
#[cfg(feature = "native-podset")]
pub mod native;
mod output;

pub use crate::metrics::spent::Spent;
pub use artifacts::ArtifactCache;
pub use decision::{Actions, Decision, Input};
pub use digest::Digest;
pub use engine::{Policy, PolicyEngine};
pub use error::{Error, Result};
pub use limits::Limits;
