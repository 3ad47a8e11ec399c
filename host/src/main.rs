//! The `podset-host` command: the operator and the policy author's tools.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

use podset_host::contract::declarations::{kind_name, to_gvk};
use podset_host::sandbox::{self, Limits, PolicyEngine};
use podset_host::{contract, crd, oci, operator, signature};

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
}

/// The operator's settings. The cluster comes from KUBECONFIG or the in-cluster config.
#[derive(Args)]
struct RunArgs {
    /// A default policy module (a component), for the kind it declares: a file, or
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`) from a registry. Repeat it (or
    /// separate them with commas in the variable) to serve several kinds. Changes to
    /// the files are picked up live; tags are resolved again every --registry-poll.
    #[arg(long = "policy", env = "POLICY_FILE", value_delimiter = ',', required = true)]
    policies: Vec<PathBuf>,
    /// A shadow module: it decides beside the default policy of the kind it declares,
    /// on the same input, and never acts; /metrics and the log say how the two
    /// compare. One per kind; changes are picked up live.
    #[arg(long = "shadow", env = "SHADOW_FILE", value_delimiter = ',')]
    shadows: Vec<PathBuf>,
    /// Watch only this namespace; empty watches all.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    namespace: String,
    /// Serve only the namespaces whose labels match this selector (e.g. `shard=a`):
    /// one shard of several operator Deployments, each with its own Lease.
    #[arg(long, env = "NAMESPACE_SELECTOR", conflicts_with = "namespace")]
    namespace_selector: Option<String>,
    /// Objects of one kind reconciled at once.
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// How long a change to an object's children (its pods becoming ready one by one)
    /// waits for more before the object is reconciled, so that a burst is decided, and
    /// its status written, once. Each new change restarts the wait. Changes to the
    /// object itself are reconciled at once; 0 reconciles at once on every change.
    #[arg(long, env = "RECONCILE_DEBOUNCE", default_value = "300ms", value_parser = humantime::parse_duration)]
    debounce: Duration,
    /// Reconcile every object at least this often.
    #[arg(long, env = "RESYNC_PERIOD", default_value = "5m", value_parser = humantime::parse_duration)]
    resync: Duration,
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
    /// registry is down, and after a restart.
    #[arg(long, env = "POLICY_CACHE_DIR", default_value_os_t = default_cache_dir())]
    policy_cache_dir: PathBuf,
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

/// How registries are reached: credentials, CAs, plain HTTP.
#[derive(Args, Clone)]
struct RegistryArgs {
    /// A Docker config file (`{"auths": {...}}`, as `docker login` writes and a
    /// kubernetes.io/dockerconfigjson Secret holds) with registry credentials;
    /// repeatable, the first to name a registry wins. No credential helpers are run.
    #[arg(long = "registry-config", env = "REGISTRY_CONFIG", value_delimiter = ',')]
    registry_configs: Vec<PathBuf>,
    /// A PEM CA certificate to trust for registries, besides the system's; repeatable.
    #[arg(long = "registry-ca", env = "REGISTRY_CA", value_delimiter = ',')]
    registry_cas: Vec<PathBuf>,
    /// A registry (`host:port`) to speak plain HTTP to; repeatable. Every other one is
    /// HTTPS only.
    #[arg(long = "insecure-registry", env = "INSECURE_REGISTRIES", value_delimiter = ',')]
    insecure_registries: Vec<String>,
}

impl RegistryArgs {
    fn settings(&self) -> anyhow::Result<oci::Settings> {
        let mut settings = oci::Settings { insecure: self.insecure_registries.clone(), ..oci::Settings::default() };
        for path in &self.registry_configs {
            let json = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            settings.credentials.add(&json, &path.display().to_string()).map_err(anyhow::Error::msg)?;
        }
        for path in &self.registry_cas {
            let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            anyhow::ensure!(
                String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----"),
                "{}: not a PEM certificate",
                path.display()
            );
            settings.ca_certificates.push(pem);
        }
        Ok(settings)
    }

    fn registry(&self) -> anyhow::Result<oci::Registry> {
        Ok(oci::Registry::new(self.settings()?))
    }
}

/// Which signatures the operator trusts.
#[derive(Args, Clone)]
struct TrustArgs {
    /// A trusted public key (PEM, ECDSA P-256: a `policy keygen` .pub or a cosign.pub),
    /// or a directory of *.pub files (a Secret mounted as a volume); repeatable. Read
    /// at each verification, so a rotated Secret is picked up.
    #[arg(long = "trusted-key", env = "TRUSTED_KEYS", value_delimiter = ',')]
    trusted_keys: Vec<PathBuf>,
    /// Load only modules signed by a trusted key: from a registry, a cosign signature
    /// on the artifact; from a file or ConfigMap, a detached signature beside it
    /// (FILE.sig, or the ConfigMap key KEY.sig), as `cosign sign-blob` writes one.
    #[arg(long, env = "REQUIRE_SIGNATURES", requires = "trusted_keys")]
    require_signatures: bool,
}

impl TrustArgs {
    fn trust(&self) -> signature::Trust {
        signature::Trust { keys: self.trusted_keys.clone(), required: self.require_signatures }
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
    /// The Lease's namespace [default: the pod's namespace (POD_NAMESPACE, or the
    /// service account's), else `default`].
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
        let namespace = self.lease_namespace.clone().or_else(|| std::env::var("POD_NAMESPACE").ok()).or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .map(|s| s.trim().to_string())
        });
        Some(operator::LeaderSettings {
            lease,
            namespace: namespace.unwrap_or_else(|| "default".into()),
            identity: self.identity(),
            duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
        })
    }
}

const DEFAULT_LEASE: &str = "podset-host";

#[derive(Subcommand)]
enum PolicyCommand {
    /// Load a module and print what it is.
    Info {
        module: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run one decision and print the actions.
    Run {
        module: PathBuf,
        /// The input: a YAML or JSON file holding the WIT `input` record.
        #[arg(long)]
        input: PathBuf,
        #[arg(long, short, value_enum, default_value = "yaml")]
        output: Format,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run scenario files against a module; exits non-zero on any mismatch.
    Test {
        module: PathBuf,
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run a module on recorded inputs (scenario files, e.g. from `run --record-dir`) and
    /// compare its decisions with the recorded ones, or with a baseline module's;
    /// exits non-zero on any difference.
    Replay {
        module: PathBuf,
        /// Scenario files, or directories searched for `*.yaml` and `*.yml`.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Compare with this module's decisions on the same inputs instead of the recorded ones.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// Print the report and exit 0 whatever it says.
        #[arg(long)]
        report_only: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Turn a live object into a scenario file: read it, its children and related
    /// objects from the cluster of KUBECONFIG as the operator observes them (no operator
    /// runs), let the module decide, and write input, decision and digest, redacted as
    /// `run --record-dir` redacts.
    Record {
        /// The object's kind as kubectl names it: `PodSet`, `podsets`, `Memcached.cache.example.com`, …
        kind: String,
        /// NAMESPACE/NAME
        object: String,
        /// The module that decides (and declares what to observe).
        #[arg(long)]
        policy: PathBuf,
        /// Where to write the scenario ('-': standard output).
        #[arg(long, short)]
        output: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Measure a PodSet policy's decision latency (fresh instance + call) at 10, 100 and 1000 pods.
    Bench {
        module: PathBuf,
        /// Time spent per row.
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        budget: Duration,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Make a policy crate for your own CRD: types, reconcile function, test, scenario.
    New {
        /// The policy's name: crate guest-NAME, component NAME.wasm, kind from the name.
        name: String,
        /// Where to make guest-NAME/ (in this repository: a workspace member).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The CRD's API group [default: NAME.example.com].
        #[arg(long)]
        group: Option<String>,
        /// The podset-host repository (for policy-sdk) [default: the one this binary was built from].
        #[arg(long)]
        repo: Option<PathBuf>,
    },
    /// Publish a module to a registry as an OCI artifact (the CNCF Wasm layout); prints
    /// the reference pinned by digest and the module's sha256 (for spec.sha256).
    Push {
        module: PathBuf,
        /// REGISTRY/REPOSITORY:TAG
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Download a module from a registry, checked as the operator checks it.
    Pull {
        reference: String,
        #[arg(long, short)]
        output: PathBuf,
        /// Also verify its signature with this public key (repeatable).
        #[arg(long = "key")]
        keys: Vec<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Show what a reference resolves to: digests, media types, size, annotations,
    /// what the component imports and exports, and its signatures. Downloads no module.
    Inspect {
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Make an ECDSA P-256 key pair: PREFIX.key (PKCS#8, mode 0600) and PREFIX.pub.
    Keygen {
        #[arg(default_value = "policy")]
        prefix: PathBuf,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// Sign what a reference names now, in cosign's format (the sha256-<hex>.sig tag).
    Sign {
        reference: String,
        /// The private key (PEM PKCS#8).
        #[arg(long)]
        key: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Verify the cosign signatures of what a reference names against public keys;
    /// exits non-zero unless one verifies. No transparency log is consulted.
    Verify {
        reference: String,
        #[arg(long = "key", required = true)]
        keys: Vec<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Sign a module file: writes the detached signature (base64, as `cosign sign-blob`).
    SignBlob {
        module: PathBuf,
        #[arg(long)]
        key: PathBuf,
        /// [default: MODULE.sig]
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Verify a module file's detached signature.
    VerifyBlob {
        module: PathBuf,
        #[arg(long = "key", required = true)]
        keys: Vec<PathBuf>,
        /// [default: MODULE.sig]
        #[arg(long)]
        signature: Option<PathBuf>,
    },
    /// Wrap a core Wasm module built with wit-bindgen into a component.
    Componentize {
        core_module: PathBuf,
        #[arg(long, short)]
        output: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// The sandbox bounds, shared by every command that runs a policy.
#[derive(Args, Clone)]
struct SandboxArgs {
    /// CPU deadline of one policy call.
    #[arg(long, env = "POLICY_DEADLINE", default_value = "100ms", value_parser = humantime::parse_duration)]
    policy_deadline: Duration,
    /// Linear-memory cap of one policy instance, in MiB.
    #[arg(long, env = "POLICY_MEMORY_MIB", default_value_t = 16)]
    policy_memory_mib: usize,
}

impl SandboxArgs {
    fn limits(&self) -> Limits {
        Limits { deadline: self.policy_deadline, memory_bytes: self.policy_memory_mib << 20, ..Limits::default() }
    }

    fn load(&self, module: &PathBuf) -> anyhow::Result<(PolicyEngine, std::sync::Arc<sandbox::Policy>)> {
        let engine = PolicyEngine::new(self.limits())?;
        let bytes = std::fs::read(module).with_context(|| format!("reading {}", module.display()))?;
        let policy = engine.load(&bytes).with_context(|| format!("loading {}", module.display()))?;
        Ok((engine, policy))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The platform verifier logs every refused certificate at ERROR; the error we return says it.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,rustls_platform_verifier=off".into());
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let settings = operator::Settings {
                policies: args.policies,
                shadows: args.shadows,
                namespace: Some(args.namespace).filter(|n| !n.is_empty()),
                leader: args.leader.settings(args.namespace_selector.as_deref()),
                identity: args.leader.identity(),
                record: args.record.settings(),
                registry: args.registry.settings()?,
                policy_cache_dir: args.policy_cache_dir,
                registry_poll: args.registry_poll,
                trust: args.trust.trust(),
                namespace_selector: args.namespace_selector,
                concurrency: args.concurrency,
                debounce: args.debounce,
                resync: args.resync,
                metrics_addr: args.metrics_addr,
                limits: args.sandbox.limits(),
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
        Command::Policy(cmd) => policy_command(cmd),
    }
}

fn policy_command(cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PolicyCommand::Info { module, sandbox } => {
            let (_engine, policy) = sandbox.load(&module)?;
            let info = policy.info();
            let d = policy.declarations();
            let world = if policy.is_podset_world() { "podset-policy" } else { "reconcile-policy" };
            println!("name:      {}", info.name);
            println!("version:   {}", info.version);
            println!("contract:  {} (host speaks {}), world {world}", info.contract, contract::contract_version());
            println!("digest:    {}", policy.digest());
            let size = sandbox::inspect::size(&std::fs::read(&module)?)?;
            let limits = sandbox.limits();
            println!(
                "size:      {} functions (limit {}), {} bytes of data (limit {})",
                size.functions, limits.max_functions, size.data_bytes, limits.max_data_bytes
            );
            println!("imports:   {}", policy.imports().join(", "));
            println!("parent:    {}", kind_name(&to_gvk(&d.parent)));
            let children: Vec<String> = d.children.iter().map(|k| kind_name(&to_gvk(k))).collect();
            println!("children:  {}", children.join(", "));
            for r in &d.related {
                let sel: Vec<String> = r.selector.iter().map(|l| format!("{}={:?}", l.key, l.value)).collect();
                println!("related:   {} where {}", kind_name(&to_gvk(&r.kind)), sel.join(", "));
            }
            println!("finalizer: {}", d.finalizer.as_deref().unwrap_or("none"));
        }
        PolicyCommand::Run { module, input, output, sandbox } => {
            let (_engine, policy) = sandbox.load(&module)?;
            let text = std::fs::read_to_string(&input).with_context(|| format!("reading {}", input.display()))?;
            let file: serde_yaml::Value =
                serde_yaml::from_str(&text).with_context(|| format!("parsing {}", input.display()))?;
            // A scenario file works as an input file too.
            let value = file.get("input").cloned().unwrap_or(file);
            let input = sandbox::scenario::input_for(&policy, value)?;
            let decision = policy.decide(&input)?;
            let actions = sandbox::scenario::readable(&decision.actions);
            match output {
                Format::Yaml => print!("{}", serde_yaml::to_string(&actions)?),
                Format::Json => println!("{}", serde_json::to_string_pretty(&actions)?),
            }
            eprintln!("decided in {:?}", decision.spent.wall);
        }
        PolicyCommand::Test { module, scenarios, sandbox } => {
            let (_engine, policy) = sandbox.load(&module)?;
            let (mut passed, mut failed) = (0, 0);
            for path in &scenarios {
                let result = sandbox::scenario::Scenario::read(path).and_then(|s| s.check(&policy).map(|()| s));
                match result {
                    Ok(s) => {
                        passed += 1;
                        println!("ok   {} {}", path.display(), s.name.as_deref().unwrap_or(""));
                    }
                    Err(failure) => {
                        failed += 1;
                        println!("FAIL {}\n{failure}", path.display());
                    }
                }
            }
            println!("{passed} passed, {failed} failed");
            if failed > 0 {
                return Ok(ExitCode::FAILURE);
            }
        }
        PolicyCommand::Replay { module, scenarios, baseline, report_only, sandbox } => {
            use sandbox::replay::{Against, Report, Summary, files, replay};
            let (engine, policy) = sandbox.load(&module)?;
            let old = match &baseline {
                Some(path) => {
                    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                    Some(engine.load(&bytes).with_context(|| format!("loading {}", path.display()))?)
                }
                None => None,
            };
            let against = old.as_deref().map_or(Against::Recorded, Against::Baseline);
            let files = files(&scenarios).context("listing the scenarios")?;
            anyhow::ensure!(!files.is_empty(), "no scenario files (*.yaml, *.yml) under the paths given");
            let rows = replay(&policy, &against, &files);
            match &old {
                Some(old) => println!("{} against baseline {}\n", policy.label(), old.label()),
                None => println!("{} against the recorded decisions\n", policy.label()),
            }
            print!("{}", Report(&rows));
            if !report_only && !Summary::of(&rows).clean() {
                return Ok(ExitCode::FAILURE);
            }
        }
        PolicyCommand::Record { kind, object, policy: module, output, sandbox } => {
            let (_engine, policy) = sandbox.load(&module)?;
            let Some((namespace, name)) = object.split_once('/') else {
                anyhow::bail!("{object:?}: name the object as NAMESPACE/NAME");
            };
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            let text = runtime.block_on(async {
                let client = kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
                podset_host::reconcile::snapshot::snapshot(&client, &policy, &kind, namespace, name)
                    .await
                    .map_err(anyhow::Error::from)
            })?;
            if output.as_os_str() == "-" {
                print!("{text}");
            } else {
                std::fs::write(&output, &text).with_context(|| format!("writing {}", output.display()))?;
                eprintln!("{kind} {object} recorded in {}", output.display());
            }
        }
        PolicyCommand::Bench { module, budget, sandbox } => {
            let started = std::time::Instant::now();
            let (_engine, policy) = sandbox.load(&module)?;
            println!("{} — loaded (compile + checks) in {:?}\n", policy.label(), started.elapsed());
            anyhow::ensure!(
                policy.is_podset_world(),
                "policy bench measures PodSet policies; {} is not one",
                policy.label()
            );
            let rows = sandbox::bench::run(&policy, &[10, 100, 1000], budget)?;
            print!("{}", sandbox::bench::Table(&rows));
        }
        PolicyCommand::New { name, dir, group, repo } => {
            let repo = repo.unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
            let repo = repo.canonicalize().with_context(|| format!("repository {}", repo.display()))?;
            let req = podset_host::scaffold::Request { name: &name, dir: &dir, group: group.as_deref(), repo: &repo };
            let made = podset_host::scaffold::new_policy(&req)?;
            println!("made {}: cargo test there, then `make policy` (in this repository) or", made.display());
            println!("`make -C {} policy-crate CRATE={}` builds the component", repo.display(), made.display());
        }
        PolicyCommand::Push { .. }
        | PolicyCommand::Pull { .. }
        | PolicyCommand::Inspect { .. }
        | PolicyCommand::Sign { .. }
        | PolicyCommand::Verify { .. } => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            return runtime.block_on(registry_command(cmd));
        }
        PolicyCommand::Keygen { prefix, force } => {
            let key = signature::PrivateKey::generate()?;
            let (private, public) = (prefix.with_extension("key"), prefix.with_extension("pub"));
            for path in [&private, &public] {
                anyhow::ensure!(force || !path.exists(), "{} exists; --force overwrites it", path.display());
            }
            write_private(&private, key.to_pem().as_bytes())?;
            std::fs::write(&public, key.public().to_pem()).with_context(|| format!("writing {}", public.display()))?;
            println!(
                "private key {} (keep it secret), public key {} (id {})",
                private.display(),
                public.display(),
                key.public().id()
            );
        }
        PolicyCommand::SignBlob { module, key, output } => {
            let key = read_private_key(&key)?;
            let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
            let output = output.unwrap_or_else(|| podset_host::sources::file::signature_path(&module));
            let sig = signature::encode_signature(&key.sign(&bytes)?);
            std::fs::write(&output, format!("{sig}\n")).with_context(|| format!("writing {}", output.display()))?;
            println!("{}: signed {} ({})", output.display(), module.display(), sandbox::Digest::of(&bytes));
        }
        PolicyCommand::VerifyBlob { module, keys, signature: sig } => {
            let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
            let sig = sig.unwrap_or_else(|| podset_host::sources::file::signature_path(&module));
            let text = std::fs::read(&sig).with_context(|| format!("reading {}", sig.display()))?;
            let trust = signature::Trust { keys, required: true };
            match trust.verify_blob(&bytes, Some(&text), &sig.display().to_string()) {
                Ok(v) => println!("{}: verified by {}", module.display(), v.key),
                Err(e) => {
                    println!("{}: NOT verified: {e}", module.display());
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        PolicyCommand::Componentize { core_module, output } => {
            let core = std::fs::read(&core_module).with_context(|| format!("reading {}", core_module.display()))?;
            let component = sandbox::componentize::componentize(&core)?;
            std::fs::write(&output, &component).with_context(|| format!("writing {}", output.display()))?;
            println!("{}: {} bytes", output.display(), component.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_private_key(path: &std::path::Path) -> anyhow::Result<signature::PrivateKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(signature::PrivateKey::from_pem(&text, &path.display().to_string())?)
}

/// Writes a private key readable by its owner only.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes).with_context(|| format!("writing {}", path.display()))
}

/// The commands that talk to a registry.
async fn registry_command(cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    let session_for = |registry: &RegistryArgs, reference: &str| -> anyhow::Result<(oci::Session, oci::Reference)> {
        let r = oci::parse_reference(reference)?;
        Ok((registry.registry()?.session(&r, &Default::default(), &[])?, r))
    };
    match cmd {
        PolicyCommand::Push { module, reference, registry, sandbox } => {
            let (engine, policy) = sandbox.load(&module)?;
            let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
            let (session, r) = session_for(&registry, &reference)?;
            anyhow::ensure!(r.digest().is_none(), "push to a tag (REGISTRY/REPOSITORY:TAG), not a digest");
            let info = policy.info();
            let world = if policy.is_podset_world() { "podset" } else { "reconciler" };
            let exports =
                vec![contract::bindings::interface_name("identity"), contract::bindings::interface_name(world)];
            let annotations = std::collections::BTreeMap::from([
                ("org.opencontainers.image.title".to_string(), info.name.clone()),
                ("org.opencontainers.image.version".to_string(), info.version.clone()),
                ("app.example.com/policy-contract".to_string(), info.contract.clone()),
                ("app.example.com/policy-kind".to_string(), kind_name(&to_gvk(&policy.declarations().parent))),
            ]);
            let built = oci::artifact::build(bytes, policy.imports(), &exports, annotations);
            let digest = session.push_artifact(&r, built).await?;
            drop(engine);
            println!("pushed {}@{digest}", r.whole());
            println!("module  {} ({}), sha256 for spec.sha256: {}", policy.label(), module.display(), policy.digest());
        }
        PolicyCommand::Pull { reference, output, keys, registry } => {
            let (session, r) = session_for(&registry, &reference)?;
            let pulled = session.pull(&r, sandbox::Limits::default().module_bytes, None).await?;
            if !keys.is_empty() {
                let sigs = oci::cosign::fetch(&session, &r, &pulled.manifest_digest).await?;
                let trust = signature::Trust { keys, required: true };
                let v = oci::cosign::verify(&trust, &pulled.manifest_digest, &sigs)?;
                println!("signature verified by {}", v.key);
            }
            std::fs::write(&output, &pulled.module).with_context(|| format!("writing {}", output.display()))?;
            println!(
                "pulled {} to {} ({} bytes, {})",
                pulled.reference.whole(),
                output.display(),
                pulled.module.len(),
                sandbox::Digest::of(&pulled.module)
            );
        }
        PolicyCommand::Inspect { reference, registry } => {
            let (session, r) = session_for(&registry, &reference)?;
            let digest = session.resolve(&r).await?;
            let manifest = session.manifest(&r, &digest).await?;
            let parsed: serde_json::Value = serde_json::from_slice(&manifest)?;
            println!("reference: {}", r.whole());
            println!("manifest:  {digest} ({} bytes)", manifest.len());
            match oci::artifact::check(&manifest, sandbox::Limits::default().module_bytes) {
                Ok(layer) => {
                    println!("module:    {} ({} bytes, {})", layer.digest, layer.size, layer.media_type);
                    let config = &parsed["config"];
                    println!("config:    {}", config["mediaType"].as_str().unwrap_or("?"));
                    let size = config["size"].as_u64().unwrap_or(u64::MAX);
                    if let (Some(d), true) = (config["digest"].as_str(), size <= 64 << 10) {
                        let blob = session.blob(&r, d, size).await?;
                        if let Ok(c) = serde_json::from_slice::<serde_json::Value>(&blob) {
                            let list = |v: &serde_json::Value| {
                                v.as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", "))
                            };
                            if let Some(i) = list(&c["component"]["imports"]) {
                                println!("imports:   {i}");
                            }
                            if let Some(e) = list(&c["component"]["exports"]) {
                                println!("exports:   {e}");
                            }
                        }
                    }
                }
                Err(e) => println!("NOT A POLICY: {e}"),
            }
            if let Some(a) = parsed["annotations"].as_object() {
                for (k, v) in a {
                    println!("annotation {k}: {}", v.as_str().unwrap_or_default());
                }
            }
            let sigs = oci::cosign::fetch(&session, &r, &digest).await?;
            println!("signatures: {} (tag {})", sigs.len(), oci::cosign::signature_tag(&r, &digest).whole());
        }
        PolicyCommand::Sign { reference, key, registry } => {
            let key = read_private_key(&key)?;
            let (session, r) = session_for(&registry, &reference)?;
            let (digest, tag) = oci::cosign::sign(&session, &r, &key).await?;
            println!("signed {}@{digest} with key {}: {}", r.whole(), key.public().id(), tag.whole());
        }
        PolicyCommand::Verify { reference, keys, registry } => {
            let (session, r) = session_for(&registry, &reference)?;
            let digest = session.resolve(&r).await?;
            let sigs = oci::cosign::fetch(&session, &r, &digest).await?;
            let trust = signature::Trust { keys, required: true };
            match oci::cosign::verify(&trust, &digest, &sigs) {
                Ok(v) => println!("{}@{digest}: verified by {}", r.whole(), v.key),
                Err(e) => {
                    println!("{}@{digest}: NOT verified: {e}", r.whole());
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        _ => anyhow::bail!("not a registry command"),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
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
