//! The `podset-host` command: the operator and the policy author's tools.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use podset_host::author::cli::{PolicyCommand, RegistryArgs, SandboxArgs, TrustArgs};
use podset_host::{author, crd, operator, reference};

#[derive(Parser)]
#[command(name = "podset-host", version, about = "Kubernetes operator whose reconcile logic is WebAssembly policies")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions (YAML).
    Crd,
    /// Build, check and benchmark policy modules without a cluster.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Print a reference page (Markdown) generated from this binary: every command and
    /// flag, or every metric. `schemas` writes the built-in kinds' schemas that `policy
    /// test` checks against, from the cluster of KUBECONFIG, into --dir.
    Reference {
        #[arg(value_enum)]
        page: Page,
        /// Where `schemas` writes its files.
        #[arg(long, default_value = "host/src/scenario/builtin")]
        dir: PathBuf,
    },
    /// Compile a module read from stdin for `run`'s engine and write the artifact to
    /// stdout: `run` starts itself as this, so that the compiler never runs in the
    /// operator's process.
    #[command(name = podset_host::sandbox::compile::COMMAND, hide = true)]
    CompilePolicy {
        #[command(flatten)]
        sandbox: SandboxArgs,
        /// The compiler's heap, in MiB: past it, the child aborts.
        #[arg(long, default_value_t = podset_host::sandbox::compile::HEAP_LIMIT >> 20)]
        heap_mib: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Page {
    Cli,
    Metrics,
    Schemas,
}

/// The operator's settings. The cluster comes from KUBECONFIG or the in-cluster config.
#[derive(Args)]
struct RunArgs {
    /// A default policy module (a component), for the kind it declares: a file, or
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`) from a registry. Repeat it (or
    /// separate them with commas in the variable) to serve several kinds. Changes to
    /// the files are picked up live; tags are resolved again every --registry-poll.
    #[arg(long = "policy", env = "POLICY_FILE", value_name = "FILE", value_delimiter = ',', required = true)]
    policies: Vec<PathBuf>,
    /// A shadow module: it decides beside the default policy of the kind it declares,
    /// on the same input, and never acts; /metrics and the log say how the two
    /// compare. One per kind; changes are picked up live.
    #[arg(long = "shadow", env = "SHADOW_FILE", value_name = "FILE", value_delimiter = ',')]
    shadows: Vec<PathBuf>,
    /// A YAML file granting one file policy more than its parent's namespace, or less
    /// than the restricted profile: `policy: NAME` (the name its module declares) and
    /// `reach:` with `clusterKinds` (cluster-scoped kinds it may own), `namespaces`
    /// (`names`, `selector`, `owned`) and `podSecurity` (`Restricted`, the default, or
    /// `Baseline`); docs/reference/enforced.md says what each allows.
    #[arg(long = "reach", env = "REACH_FILE", value_name = "FILE", value_delimiter = ',')]
    reaches: Vec<PathBuf>,
    /// The namespace whose ReconcilePolicies may carry `spec.reach` (the same grant as
    /// --reach): one only the operator's administrator may write to, such as the
    /// operator's own. A ReconcilePolicy elsewhere that sets it is refused.
    #[arg(long, env = "REACH_NAMESPACE")]
    reach_namespace: Option<String>,
    /// The service account every ReconcilePolicy that names none
    /// (`spec.serviceAccountName`) acts as, in its own namespace: its children are
    /// written impersonating it, so a tenant's policy may do what the tenant's account
    /// may, not what the operator may. Without it, such a policy acts as the operator.
    #[arg(long, env = "DEFAULT_SERVICE_ACCOUNT", value_name = "NAME")]
    default_service_account: Option<String>,
    /// Watch only this namespace; empty watches all.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    namespace: String,
    /// Serve only the namespaces whose labels match this selector (e.g. `shard=a`):
    /// one shard of several operator Deployments, each with its own Lease.
    #[arg(long, env = "NAMESPACE_SELECTOR", conflicts_with = "namespace")]
    namespace_selector: Option<String>,
    /// As a shard (--namespace-selector), also serve the parents of cluster-scoped
    /// kinds (a Tenant): give it to exactly one shard of the set. An unsharded
    /// operator serves them anyway.
    #[arg(long, env = "CLUSTER_SCOPED_PARENTS", requires = "namespace_selector")]
    cluster_scoped_parents: bool,
    /// Objects of one kind reconciled at once.
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// How long a change to an object's children (its pods becoming ready one by one)
    /// waits for more before the object is reconciled, so that a burst is decided, and
    /// its status written, once. Each new change restarts the wait. Changes to the
    /// object itself are reconciled at once; 0 reconciles at once on every change.
    // 50 ms: the pods of a burst change a few ms apart. At 300 ms the last status of a
    // scale up came 0.31 s after its last pod was ready (the ReplicaSet controller's
    // 0.02 s) in `make bench`, 1.03x the peer's time.
    #[arg(long, env = "RECONCILE_DEBOUNCE", default_value = "50ms", value_parser = humantime::parse_duration)]
    debounce: Duration,
    /// Reconcile every object at least this often.
    #[arg(long, env = "RESYNC_PERIOD", default_value = "5m", value_parser = humantime::parse_duration)]
    resync: Duration,
    /// How long a deleted object waits for its policy's finalizer. Past it (the policy
    /// traps, times out or never returns finalize-done) the operator removes the
    /// finalizer itself, says so (Event, PolicyFailed condition, metric), and the garbage
    /// collector removes the children.
    #[arg(long, env = "FINALIZER_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration)]
    finalizer_timeout: Duration,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "LOG_JSON")]
    log_json: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    leader: LeaderArgs,
    #[command(flatten)]
    record: RecordArgs,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    trust: TrustArgs,
    /// Where modules pulled from registries are kept, by digest: they serve when the
    /// registry is down, and after a restart [default: $XDG_CACHE_HOME/podset-host/policies,
    /// else ~/.cache/podset-host/policies].
    #[arg(long, env = "POLICY_CACHE_DIR")]
    policy_cache_dir: Option<PathBuf>,
    /// Revisions listed per ReconcilePolicy (`status.revisions`); their modules are kept
    /// under --policy-cache-dir (`revisions/`), so that `policy rollback` brings one back
    /// without its source.
    #[arg(long, env = "REVISION_HISTORY", default_value_t = podset_host::sources::history::DEFAULT_KEPT, value_parser = clap::value_parser!(u64).range(1..=100))]
    revision_history: u64,
    /// How often a `--policy oci://` tag is resolved again (a new digest is pulled,
    /// verified and swapped in), and a ReconcilePolicy's `spec.image` tag checked for
    /// having moved (reported, never loaded: `spec.sha256` pins the module).
    #[arg(long, env = "REGISTRY_POLL", default_value = "5m", value_parser = humantime::parse_duration)]
    registry_poll: Duration,
    /// Benchmark builds only: guest-podset decides with its natively linked code
    /// instead of its .wasm, to measure what the sandbox costs.
    #[cfg(feature = "native-podset")]
    #[arg(long, hide = true)]
    native_podset: bool,
    /// Fault-suite builds only: die right after the response of this write (1-based,
    /// counted from the start) arrived.
    #[cfg(feature = "fault-suite")]
    #[arg(long, hide = true)]
    fault_crash_after_write: Option<u64>,
    /// Fault-suite builds only: lose the response of this write (the server applied it).
    #[cfg(feature = "fault-suite")]
    #[arg(long, hide = true)]
    fault_lose_response_of_write: Option<u64>,
}

/// Recording real decisions for `policy test` and `policy replay`.
#[derive(Args)]
struct RecordArgs {
    /// Write each decision of the serving policies as a scenario file under
    /// DIR/<Kind.group>/<namespace>/<name>/ (Secrets' data and kubectl's
    /// last-applied-configuration are redacted).
    #[arg(long, env = "RECORD_DIR")]
    record_dir: Option<PathBuf>,
    /// Recorded files kept per object; the oldest go first.
    #[arg(long, env = "RECORD_PER_OBJECT", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    record_per_object: u32,
    /// MiB of recorded files kept in all; the oldest go first.
    #[arg(long, env = "RECORD_MAX_MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    record_max_mib: u64,
}

impl RecordArgs {
    fn settings(&self) -> Option<podset_host::reconcile::record::Settings> {
        self.record_dir.clone().map(|dir| podset_host::reconcile::record::Settings {
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
struct LeaderArgs {
    /// Take part in leader election (off for a single process, on in the Deployment).
    #[arg(long, env = "LEADER_ELECT")]
    leader_elect: bool,
    /// The Lease's name [default: `podset-host`; for a shard, `podset-host-` with the
    /// selector and a hash of it, so that each shard elects its own leader].
    #[arg(long, env = "LEASE_NAME")]
    lease_name: Option<String>,
    /// The operator's own namespace, where its Lease and its teardown ledger (the
    /// ConfigMap `podset-host-teardown`) are [default: the pod's namespace (POD_NAMESPACE,
    /// or the service account's), else `default` for the Lease and the kubeconfig's
    /// namespace for the ledger].
    #[arg(long, env = "LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// How long the Lease holds after its last renewal.
    #[arg(long, env = "LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// How long the leader may go without renewing before it stops acting; less than
    /// the lease duration.
    #[arg(long, env = "LEASE_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration)]
    lease_renew_deadline: Duration,
    /// This replica's identity in the Lease and in its requests' User-Agent
    /// [default: POD_NAME, else host name and pid].
    #[arg(long, env = "LEASE_IDENTITY")]
    lease_identity: Option<String>,
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

    fn settings(&self, selector: Option<&str>) -> Option<operator::LeaderSettings> {
        if !self.leader_elect {
            return None;
        }
        let lease = match (&self.lease_name, selector) {
            (Some(name), _) => name.clone(),
            (None, Some(selector)) => podset_host::kubernetes::shard::lease_name(DEFAULT_LEASE, selector),
            (None, None) => DEFAULT_LEASE.to_string(),
        };
        Some(operator::LeaderSettings {
            lease,
            namespace: self.own_namespace().unwrap_or_else(|| "default".into()),
            identity: self.identity(),
            duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
        })
    }
}

const DEFAULT_LEASE: &str = "podset-host";

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The platform verifier logs every refused certificate at ERROR; the error we return says it.
    // kube-runtime's controller opens an INFO span for every reconcile it starts, and a
    // reconcile waiting for its turn holds it: 726 bytes while open and 343 kept by the
    // subscriber once closed (a scratch count of 1000 such spans). Our own span, opened
    // once the turn is taken, names the object; `RUST_LOG=info` brings kube-runtime's
    // back, with the reason each reconcile was started.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_runtime::controller=warn,rustls_platform_verifier=off".into());
    let json = matches!(&cli.command, Command::Run(a) if a.log_json);
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The `--reach` files, by the policy each is for.
fn reaches(files: &[PathBuf]) -> anyhow::Result<podset_host::sources::Reaches> {
    let mut out = podset_host::sources::Reaches::new();
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let policy_cache_dir = args.policy_cache_dir.unwrap_or_else(default_cache_dir);
            let settings = operator::Settings {
                policies: args.policies,
                shadows: args.shadows,
                reaches: reaches(&args.reaches)?,
                reach_namespace: args.reach_namespace,
                default_service_account: args.default_service_account,
                namespace: Some(args.namespace).filter(|n| !n.is_empty()),
                own_namespace: args.leader.own_namespace(),
                leader: args.leader.settings(args.namespace_selector.as_deref()),
                identity: args.leader.identity(),
                record: args.record.settings(),
                registry: args.registry.settings()?,
                compiled_cache: Some(
                    args.sandbox.compiled_cache.clone().unwrap_or_else(|| policy_cache_dir.join("compiled")),
                ),
                policy_cache_dir,
                revision_history: args.revision_history as usize,
                registry_poll: args.registry_poll,
                trust: args.trust.trust(),
                namespace_selector: args.namespace_selector,
                cluster_scoped_parents: args.cluster_scoped_parents,
                concurrency: args.concurrency,
                debounce: args.debounce,
                resync: args.resync,
                finalizer_timeout: args.finalizer_timeout,
                metrics_addr: args.metrics_addr,
                limits: args.sandbox.limits(),
                compiler: Some(std::env::current_exe().context("finding this binary, which compiles the policies")?),
                #[cfg(feature = "native-podset")]
                native_podset: args.native_podset,
                #[cfg(feature = "fault-suite")]
                faults: podset_host::kubernetes::faults::Faults {
                    crash_after_write: args.fault_crash_after_write,
                    lose_response_of_write: args.fault_lose_response_of_write,
                },
            };
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(async {
                let shutdown = tokio_util::sync::CancellationToken::new();
                tokio::spawn(operator::cancel_on_signal(shutdown.clone()));
                operator::build(settings, shutdown).await?.run().await
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Crd => {
            print!("{}", crd::crds_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy(cmd) => author::command::run(cmd),
        Command::Reference { page, dir } => {
            match page {
                Page::Cli => print!("{}", reference::cli(&Cli::command())),
                Page::Metrics => print!("{}", reference::metrics()),
                Page::Schemas => {
                    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
                    let documents = runtime.block_on(async {
                        let client =
                            kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
                        author::schemas::builtin_from_cluster(&client).await
                    })?;
                    for (path, text) in documents {
                        let file = dir.join(author::schemas::builtin_file(&path));
                        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
                        println!("{}", file.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::CompilePolicy { sandbox, heap_mib } => {
            Ok(ExitCode::from(podset_host::sandbox::compile::serve(&sandbox.limits(), heap_mib << 20)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The committed reference pages are what this binary prints (`make docs` writes them).
    #[test]
    fn the_reference_pages_match_the_binary() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference");
        for (file, generated) in [("cli.md", reference::cli(&Cli::command())), ("metrics.md", reference::metrics())] {
            let committed = std::fs::read_to_string(docs.join(file)).unwrap_or_default();
            assert!(
                committed == generated,
                "docs/reference/{file} is stale: run `make docs` and commit it.\n{}",
                similar::TextDiff::from_lines(&committed, &generated).unified_diff().header("committed", "generated")
            );
        }
    }

    #[test]
    fn durations_take_the_units_the_flags_document() {
        let run = Cli::try_parse_from([
            "podset-host",
            "run",
            "--policy",
            "p.wasm",
            "--policy-deadline",
            "250ms",
            "--resync",
            "2m",
        ])
        .expect("flags parse");
        let Command::Run(args) = run.command else { panic!("run") };
        assert_eq!(args.sandbox.policy_deadline, Duration::from_millis(250));
        assert_eq!(args.resync, Duration::from_secs(120));
        let two = Cli::try_parse_from(["podset-host", "run", "--policy", "a.wasm", "--policy", "b.wasm"])
            .expect("flags parse");
        let Command::Run(args) = two.command else { panic!("run") };
        assert_eq!(args.policies, [PathBuf::from("a.wasm"), PathBuf::from("b.wasm")]);
        assert!(Cli::try_parse_from(["podset-host", "run", "--policy", "p", "--resync", "soon"]).is_err());
    }
}
