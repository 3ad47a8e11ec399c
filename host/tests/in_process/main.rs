//! Tests that need no cluster: the import layers, the docs' links, the sandbox on compiled policies,
//! the reconciler against an in-process API seam, and the policy's properties.

mod docs;
mod layers;
#[cfg(feature = "native-podset")]
mod policy_properties;
mod policy_sandbox;
mod reconcile_calls;
