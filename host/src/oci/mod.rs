//! Policies as OCI artifacts: pushed to and pulled from any registry that speaks the
//! OCI distribution API, in the CNCF Wasm artifact layout ([`artifact`]), with
//! credentials from Docker config files and `kubernetes.io/dockerconfigjson` Secrets
//! ([`auth`]), a cache on disk by digest ([`cache`]) and cosign signatures
//! ([`cosign`]).
//!
//! The HTTP side is `oci-client` on the rustls and ring stack the Kubernetes client
//! already uses. A fresh client per operation: its token cache would otherwise keep a
//! rotated Secret's old credentials.

pub mod artifact;
pub mod auth;
pub mod cache;
mod client;
pub mod cosign;
mod error;
mod pulled;
mod settings;

pub use client::{Registry, Session};
pub use error::{Error, parse_reference};
pub use oci_client::Reference;
pub use pulled::Pulled;
pub use settings::Settings;
