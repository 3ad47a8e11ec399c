//! Kubernetes plumbing: the client (with its write counter) and the caches every
//! reconcile reads from, with the health that gates reconciles and `/readyz`.

pub mod cache;
pub mod client;
