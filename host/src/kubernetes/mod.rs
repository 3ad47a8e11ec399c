//! Kubernetes plumbing: the client (with its write counter and write fence, each a hook on
//! its writes: [`request`]), the caches every reconcile reads from (with the health that
//! gates reconciles and `/readyz`) and the compact objects they hold, the shared watches of
//! children and related kinds, the access checks made when a policy loads, leader
//! election, the teardown ledger, the namespaces a shard serves, and the API server's
//! version against the range this build supports.

pub mod access;
pub mod cache;
pub mod client;
pub mod events;
#[cfg(feature = "fault-suite")]
pub mod faults;
pub mod fence;
pub mod identity;
pub mod leader;
pub mod ledger;
pub mod mark;
pub mod namespaces;
pub mod object;
pub mod openapi;
pub mod request;
pub mod scope;
pub mod shard;
pub mod store;
pub mod version;
pub mod watches;
