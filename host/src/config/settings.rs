//! The settings the operator is built from (`operator::build`): what the command line
//! said, with the files it names read and its defaults resolved
//! ([`super::RunArgs::settings`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::kubernetes::leader::Settings as LeaderSettings;
use crate::oci;
use crate::reconcile::record;
use crate::sandbox::Limits;
use crate::signature::Trust;
use crate::sources::Reaches;

/// What `podset-host run` needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The default policy modules, one per parent kind; watched for changes.
    pub policies: Vec<PathBuf>,
    /// Shadow modules, one per parent kind: each decides beside the live policy of
    /// its kind, everywhere, and never acts. Watched for changes.
    pub shadows: Vec<PathBuf>,
    /// What the administrator granted file policies beyond their parents' namespaces.
    pub reaches: Reaches,
    /// The namespace whose ReconcilePolicies may carry `spec.reach`.
    pub reach_namespace: Option<String>,
    /// The service account a ReconcilePolicy that names none acts as, in its namespace.
    pub default_service_account: Option<String>,
    /// Only this namespace, or all when `None`.
    pub namespace: Option<String>,
    /// The operator's own namespace (its pod's), where the teardown ledger is; the
    /// kubeconfig's when `None`.
    pub own_namespace: Option<String>,
    /// As one shard: only the namespaces whose labels match this selector.
    pub namespace_selector: Option<String>,
    /// As that shard, also serve the parents of cluster-scoped kinds.
    pub cluster_scoped_parents: bool,
    /// This replica's name: in the Lease, and in the User-Agent of its requests, so
    /// that audit logs tell replicas and shards apart.
    pub identity: String,
    pub concurrency: u16,
    pub debounce: Duration,
    pub resync: Duration,
    /// How long a deleted parent waits for its policy's finalizer.
    pub finalizer_timeout: Duration,
    pub metrics_addr: SocketAddr,
    pub limits: Limits,
    /// Leader election, or `None` for a single replica.
    pub leader: Option<LeaderSettings>,
    /// Record every decision as a scenario file, or `None`.
    pub record: Option<record::Settings>,
    /// How registries are reached.
    pub registry: oci::Settings,
    /// Where pulled modules are cached, and the modules of recent revisions kept.
    pub policy_cache_dir: PathBuf,
    /// Revisions listed per ReconcilePolicy (`status.revisions`), their modules kept.
    pub revision_history: usize,
    /// How often registry tags are resolved again.
    pub registry_poll: Duration,
    /// Signature verification.
    pub trust: Trust,
    /// Compile modules in a child process running this program (the `podset-host`
    /// binary), not in the operator: see [`crate::sandbox::compile`]. `None` compiles
    /// in process.
    pub compiler: Option<PathBuf>,
    /// Where compiled modules are kept across restarts (`None`: compiled at every start).
    pub compiled_cache: Option<PathBuf>,
    /// Benchmark builds only: guest-podset decides natively (`sandbox::native`).
    #[cfg(feature = "native-podset")]
    pub native_podset: bool,
    /// Fault-suite builds only: where the client injects its faults.
    #[cfg(feature = "fault-suite")]
    pub faults: crate::kubernetes::faults::Faults,
}
