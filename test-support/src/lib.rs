//! What the integration tests of every crate share: the test control plane
//! ([`cluster`]), bounded polling ([`poll`]), the operator as a process ([`operator`]),
//! PodSets and a test's world ([`podsets`]), the compiled policies ([`policies`]), the
//! API server's audit log ([`audit`]), a TCP proxy to cut ([`proxy`]), registries
//! ([`registry`]), health as GitOps tools read it ([`kstatus`]), the seeds' own Go
//! operators ([`peers`]) and, for tests without a cluster, objects built in memory
//! ([`objects`]).
//!
//! Tests never skip: without a test cluster (`PODSET_TEST_KUBECONFIG`, set by
//! `make test`) or compiled policies they fail with what to run.

pub mod audit;
pub mod cluster;
pub mod go_tools;
pub mod kstatus;
pub mod memcached;
pub mod nodes;
pub mod objects;
pub mod operator;
pub mod peers;
pub mod podsets;
pub mod policies;
pub mod poll;
pub mod proxy;
pub mod registry;
pub mod watch_proxy;

pub use cluster::*;
pub use memcached::*;
pub use nodes::*;
pub use operator::*;
pub use podsets::*;
pub use policies::*;
pub use poll::*;
