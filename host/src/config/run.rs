//! `podset-host run`'s flags, and the [`Settings`] they make: [`RunArgs::settings`]
//! reads the files the flags name (`--reach` grants, registry credentials and CAs) and
//! resolves what the flags leave to the environment: the operator's own namespace, this
//! replica's identity, the cache directories, a shard's Lease.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::settings::{LeaderSettings, Settings};
use super::shared::{RegistryArgs, SandboxArgs, TrustArgs};
use crate::crd;
use crate::kubernetes::shard;
use crate::reconcile::record;
use crate::sources::{Reaches, history};

/// The operator's settings. The cluster comes from KUBECONFIG or the in-cluster config.
#[derive(Args)]
pub struct RunArgs {
    /// A default policy module (a component), for the kind it declares: a file, or
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`) from a registry. Repeat it (or
    /// separate them with commas in the variable) to serve several kinds. Changes to
    /// the files are picked up live; tags are resolved again every --registry-poll.
    #[arg(long = "policy", env = "POLICY_FILE", value_name = "FILE", value_delimiter = ',', required = true)]
    pub policies: Vec<PathBuf>,
    /// A shadow module: it decides beside the default policy of the kind it declares,
    /// on the same input, and never acts; /metrics and the log say how the two
    /// compare. One per kind; changes are picked up live.
    #[arg(long = "shadow", env = "SHADOW_FILE", value_name = "FILE", value_delimiter = ',')]
    pub shadows: Vec<PathBuf>,
    /// A YAML file granting one file policy more than its parent's namespace, or less
    /// than the restricted profile: `policy: NAME` (the name its module declares) and
    /// `reach:` with `clusterKinds` (cluster-scoped kinds it may own), `namespaces`
    /// (`names`, `selector`, `owned`) and `podSecurity` (`Restricted`, the default, or
    /// `Baseline`); docs/reference/enforced.md says what each allows.
    #[arg(long = "reach", env = "REACH_FILE", value_name = "FILE", value_delimiter = ',')]
    pub reaches: Vec<PathBuf>,
    /// The namespace whose ReconcilePolicies may carry `spec.reach` (the same grant as
    /// --reach): one only the operator's administrator may write to, such as the
    /// operator's own. A ReconcilePolicy elsewhere that sets it is refused.
    #[arg(long, env = "REACH_NAMESPACE")]
    pub reach_namespace: Option<String>,
    /// The service account every ReconcilePolicy that names none
    /// (`spec.serviceAccountName`) acts as, in its own namespace: its children are
    /// written impersonating it, so a tenant's policy may do what the tenant's account
    /// may, not what the operator may. Without it, such a policy acts as the operator.
    #[arg(long, env = "DEFAULT_SERVICE_ACCOUNT", value_name = "NAME")]
    pub default_service_account: Option<String>,
    /// Watch only this namespace; empty watches all.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    pub namespace: String,
    /// Serve only the namespaces whose labels match this selector (e.g. `shard=a`):
    /// one shard of several operator Deployments, each with its own Lease.
    #[arg(long, env = "NAMESPACE_SELECTOR", conflicts_with = "namespace")]
    pub namespace_selector: Option<String>,
    /// As a shard (--namespace-selector), also serve the parents of cluster-scoped
    /// kinds (a Tenant): give it to exactly one shard of the set. An unsharded
    /// operator serves them anyway.
    #[arg(long, env = "CLUSTER_SCOPED_PARENTS", requires = "namespace_selector")]
    pub cluster_scoped_parents: bool,
    /// Objects of one kind reconciled at once. New work goes first: an object that is
    /// new, whose spec changed or that is being deleted is reconciled before the
    /// re-decisions of the others (resyncs, a restart's sweep, a policy swapped in).
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 8)]
    pub concurrency: u16,
    /// How long a change to an object's children (its pods becoming ready one by one)
    /// waits for more before the object is reconciled, so that a burst is decided, and
    /// its status written, once. Each new change restarts the wait. Changes to the
    /// object itself are reconciled at once; 0 reconciles at once on every change.
    // 50 ms: the pods of a burst change a few ms apart. At 300 ms the last status of a
    // scale up came 0.31 s after its last pod was ready (the ReplicaSet controller's
    // 0.02 s) in `make bench`, 1.03x the peer's time.
    #[arg(long, env = "RECONCILE_DEBOUNCE", default_value = "50ms", value_parser = humantime::parse_duration)]
    pub debounce: Duration,
    /// Reconcile every object at least this often.
    #[arg(long, env = "RESYNC_PERIOD", default_value = "5m", value_parser = humantime::parse_duration)]
    pub resync: Duration,
    /// How long a deleted object waits for its policy's finalizer. Past it (the policy
    /// traps, times out or never returns finalize-done) the operator removes the
    /// finalizer itself, says so (Event, PolicyFailed condition, metric), and the garbage
    /// collector removes the children.
    #[arg(long, env = "FINALIZER_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration)]
    pub finalizer_timeout: Duration,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "LOG_JSON")]
    pub log_json: bool,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub leader: LeaderArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Where modules pulled from registries are kept, by digest: they serve when the
    /// registry is down, and after a restart [default: $XDG_CACHE_HOME/podset-host/policies,
    /// else ~/.cache/podset-host/policies].
    #[arg(long, env = "POLICY_CACHE_DIR")]
    pub policy_cache_dir: Option<PathBuf>,
    /// Revisions listed per ReconcilePolicy (`status.revisions`); their modules are kept
    /// under --policy-cache-dir (`revisions/`), so that `policy rollback` brings one back
    /// without its source.
    #[arg(long, env = "REVISION_HISTORY", default_value_t = history::DEFAULT_KEPT, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub revision_history: u64,
    /// How often a `--policy oci://` tag is resolved again (a new digest is pulled,
    /// verified and swapped in), and a ReconcilePolicy's `spec.image` tag checked for
    /// having moved (reported, never loaded: `spec.sha256` pins the module).
    #[arg(long, env = "REGISTRY_POLL", default_value = "5m", value_parser = humantime::parse_duration)]
    pub registry_poll: Duration,
    /// Benchmark builds only: guest-podset decides with its natively linked code
    /// instead of its .wasm, to measure what the sandbox costs.
    #[cfg(feature = "native-podset")]
    #[arg(long, hide = true)]
    pub native_podset: bool,
    /// Fault-suite builds only: die right after the response of this write (1-based,
    /// counted from the start) arrived.
    #[cfg(feature = "fault-suite")]
    #[arg(long, hide = true)]
    pub fault_crash_after_write: Option<u64>,
    /// Fault-suite builds only: lose the response of this write (the server applied it).
    #[cfg(feature = "fault-suite")]
    #[arg(long, hide = true)]
    pub fault_lose_response_of_write: Option<u64>,
}

impl RunArgs {
    /// The operator's settings from these flags. Fails on a file they name that cannot
    /// be read or is not what it should be, and when this program cannot find itself
    /// (it compiles the policies in a child running it).
    pub fn settings(self) -> anyhow::Result<Settings> {
        let policy_cache_dir = self.policy_cache_dir.unwrap_or_else(default_cache_dir);
        Ok(Settings {
            policies: self.policies,
            shadows: self.shadows,
            reaches: reaches(&self.reaches)?,
            reach_namespace: self.reach_namespace,
            default_service_account: self.default_service_account,
            namespace: Some(self.namespace).filter(|n| !n.is_empty()),
            own_namespace: self.leader.own_namespace(),
            leader: self.leader.settings(self.namespace_selector.as_deref()),
            identity: self.leader.identity(),
            record: self.record.settings(),
            registry: self.registry.settings()?,
            compiled_cache: Some(
                self.sandbox.compiled_cache.clone().unwrap_or_else(|| policy_cache_dir.join("compiled")),
            ),
            policy_cache_dir,
            revision_history: self.revision_history as usize,
            registry_poll: self.registry_poll,
            trust: self.trust.trust(),
            namespace_selector: self.namespace_selector,
            cluster_scoped_parents: self.cluster_scoped_parents,
            concurrency: self.concurrency,
            debounce: self.debounce,
            resync: self.resync,
            finalizer_timeout: self.finalizer_timeout,
            metrics_addr: self.metrics_addr,
            limits: self.sandbox.limits(),
            compiler: Some(std::env::current_exe().context("finding this binary, which compiles the policies")?),
            #[cfg(feature = "native-podset")]
            native_podset: self.native_podset,
            #[cfg(feature = "fault-suite")]
            faults: crate::kubernetes::faults::Faults {
                crash_after_write: self.fault_crash_after_write,
                lose_response_of_write: self.fault_lose_response_of_write,
            },
        })
    }
}

/// The `--reach` files, by the policy each is for.
fn reaches(files: &[PathBuf]) -> anyhow::Result<Reaches> {
    let mut out = Reaches::new();
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading --reach {}", file.display()))?;
        let grant: crd::ReachGrant =
            serde_yaml::from_str(&text).with_context(|| format!("--reach {}: not a reach grant", file.display()))?;
        if out.insert(grant.policy.clone(), grant.reach).is_some() {
            anyhow::bail!("--reach {}: a second grant for policy {:?}", file.display(), grant.policy);
        }
    }
    Ok(out)
}

/// Recording real decisions for `policy test` and `policy replay`.
#[derive(Args)]
pub struct RecordArgs {
    /// Write each decision of the serving policies as a scenario file under
    /// DIR/<Kind.group>/<namespace>/<name>/ (Secrets' data and kubectl's
    /// last-applied-configuration are redacted).
    // Written for `--help` (and docs/reference/cli.md), where the placeholders are text, not HTML tags.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, env = "RECORD_DIR")]
    pub record_dir: Option<PathBuf>,
    /// Recorded files kept per object; the oldest go first.
    #[arg(long, env = "RECORD_PER_OBJECT", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub record_per_object: u32,
    /// MiB of recorded files kept in all; the oldest go first.
    #[arg(long, env = "RECORD_MAX_MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub record_max_mib: u64,
}

impl RecordArgs {
    fn settings(&self) -> Option<record::Settings> {
        self.record_dir.clone().map(|dir| record::Settings {
            dir,
            per_object: self.record_per_object as usize,
            max_bytes: self.record_max_mib << 20,
        })
    }
}

/// `$XDG_CACHE_HOME/podset-host/policies`, else `~/.cache/…`, else the temporary directory's.
fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").filter(|h| !h.is_empty() && h != "/").map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("podset-host/policies")
}

/// Leader election: several replicas run, the Lease holder acts, the others keep
/// their caches warm and take over when it goes.
#[derive(Args)]
pub struct LeaderArgs {
    /// Take part in leader election (off for a single process, on in the Deployment).
    #[arg(long, env = "LEADER_ELECT")]
    pub leader_elect: bool,
    /// The Lease's name [default: `podset-host`; for a shard, `podset-host-` with the
    /// selector and a hash of it, so that each shard elects its own leader].
    #[arg(long, env = "LEASE_NAME")]
    pub lease_name: Option<String>,
    /// The operator's own namespace, where its Lease and its teardown ledger (the
    /// ConfigMap `podset-host-teardown`) are [default: the pod's namespace (POD_NAMESPACE,
    /// or the service account's), else `default` for the Lease and the kubeconfig's
    /// namespace for the ledger].
    #[arg(long, env = "LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long the Lease holds after its last renewal.
    #[arg(long, env = "LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader may go without renewing before it stops acting; less than
    /// the lease duration.
    #[arg(long, env = "LEASE_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub lease_renew_deadline: Duration,
    /// This replica's identity in the Lease and in its requests' User-Agent
    /// [default: POD_NAME, else host name and pid].
    #[arg(long, env = "LEASE_IDENTITY")]
    pub lease_identity: Option<String>,
}

impl LeaderArgs {
    /// The operator's own namespace: `--lease-namespace`, else the pod's (POD_NAMESPACE,
    /// or the service account's). The Lease and the teardown ledger are there.
    fn own_namespace(&self) -> Option<String> {
        self.lease_namespace.clone().or_else(|| std::env::var("POD_NAMESPACE").ok()).or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .map(|s| s.trim().to_string())
        })
    }

    fn identity(&self) -> String {
        self.lease_identity.clone().or_else(|| std::env::var("POD_NAME").ok()).unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
    }

    fn settings(&self, selector: Option<&str>) -> Option<LeaderSettings> {
        if !self.leader_elect {
            return None;
        }
        let lease = match (&self.lease_name, selector) {
            (Some(name), _) => name.clone(),
            (None, Some(selector)) => shard::lease_name(DEFAULT_LEASE, selector),
            (None, None) => DEFAULT_LEASE.to_string(),
        };
        Some(LeaderSettings {
            lease,
            namespace: self.own_namespace().unwrap_or_else(|| "default".into()),
            identity: self.identity(),
            duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
        })
    }
}

const DEFAULT_LEASE: &str = "podset-host";

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    /// `run`'s flags alone, as `podset-host run` takes them.
    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    fn parse(flags: &[&str]) -> Result<RunArgs, clap::Error> {
        Run::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).map(|r| r.args)
    }

    /// The grant the repository ships for the Tenant policy.
    fn tenant_grant() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/reach/tenant.yaml")
    }

    #[test]
    fn durations_take_the_units_the_flags_document() {
        let args = parse(&["--policy", "p.wasm", "--policy-deadline", "250ms", "--resync", "2m"]).expect("flags parse");
        assert_eq!(args.sandbox.policy_deadline, Duration::from_millis(250));
        assert_eq!(args.resync, Duration::from_secs(120));
        let two = parse(&["--policy", "a.wasm", "--policy", "b.wasm"]).expect("flags parse");
        assert_eq!(two.policies, [PathBuf::from("a.wasm"), PathBuf::from("b.wasm")]);
        assert!(parse(&["--policy", "p", "--resync", "soon"]).is_err());
    }

    // Not asserted: the compiled-module cache, whose flag `make test` sets through its
    // variable (PODSET_COMPILED_CACHE).
    #[test]
    fn a_grant_is_found_under_its_policys_name_and_a_second_one_for_it_refused() {
        let tenant = tenant_grant();
        let file = tenant.to_str().expect("a UTF-8 path");
        let settings = parse(&["--policy", "tenant.wasm", "--reach", file]).expect("flags parse").settings();
        let settings = settings.expect("the shipped grant reads");
        let reach = settings.reaches.get("guest-tenant").expect("the grant is the Tenant policy's");
        assert!(reach.namespaces.owned, "{reach:?}");
        assert_eq!(reach.cluster_kinds.len(), 1, "{reach:?}");

        let dir = tempfile::tempdir().expect("a temporary directory");
        let again = dir.path().join("again.yaml");
        std::fs::copy(&tenant, &again).expect("a copy of the grant");
        let e = reaches(&[tenant, again.clone()]).expect_err("two grants for one policy");
        let message = format!("{e:#}");
        assert!(message.contains(&again.display().to_string()), "names the second file: {message}");
        assert!(message.contains("guest-tenant"), "names the policy: {message}");
    }

    #[test]
    fn a_shard_elects_on_a_lease_of_its_own() {
        let leader = |flags: &[&str]| {
            let args = parse(&[&["--policy", "p.wasm", "--leader-elect"][..], flags].concat()).expect("flags parse");
            args.settings().expect("settings").leader.expect("leader election is on")
        };
        assert_eq!(leader(&[]).lease, DEFAULT_LEASE);
        let (a, b) = (leader(&["--namespace-selector", "shard=a"]), leader(&["--namespace-selector", "shard=b"]));
        assert!(a.lease.starts_with("podset-host-shard-a-"), "{}", a.lease);
        assert_ne!(a.lease, b.lease);
        let named = leader(&["--namespace-selector", "shard=a", "--lease-name", "mine"]);
        assert_eq!(named.lease, "mine");
        assert!(parse(&["--policy", "p.wasm"]).expect("flags parse").settings().expect("settings").leader.is_none());
    }
}
