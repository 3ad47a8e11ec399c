//! The `policy` subcommand's command line. The flags it shares with `run` (registries,
//! trusted keys, the sandbox's bounds) are in [`crate::config::shared`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Subcommand, ValueEnum};

use crate::config::shared::{RegistryArgs, SandboxArgs};

#[derive(Subcommand)]
pub enum PolicyCommand {
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
    /// Run scenario files against a module; exits non-zero on any mismatch, or on
    /// output the kinds' schemas refuse.
    Test {
        module: PathBuf,
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        #[command(flatten)]
        schemas: super::schemas::SchemaArgs,
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
        schemas: super::schemas::SchemaArgs,
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
        /// NAMESPACE/NAME, or NAME for a cluster-scoped kind (a Tenant)
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
    /// Measure a policy's decision latency (fresh instance + call): a PodSet policy at 10, 100
    /// and 1000 pods, back to back and with the CPU caches emptied before each decision; any
    /// policy on the inputs of the scenario files given (recorded decisions included).
    Bench {
        module: PathBuf,
        /// Scenario files whose inputs to decide, one row each, instead of generated PodSets.
        scenarios: Vec<PathBuf>,
        /// Decide each scenario at these counts of related objects (its own, repeated
        /// under new names), one row each: e.g. `--related 10,100,1000`.
        #[arg(long, value_delimiter = ',')]
        related: Vec<usize>,
        /// Time spent per row.
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        budget: Duration,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// List a ReconcilePolicy's revisions (`status.revisions`) on the cluster of
    /// KUBECONFIG; `*` marks the one serving.
    History {
        #[command(flatten)]
        target: super::lifecycle::Target,
    },
    /// Bring back a revision of a ReconcilePolicy on the cluster of KUBECONFIG: the one
    /// before the serving one, or `--to`. It sets the spec's module to that revision's
    /// (a `kubectl patch`, printed); the operator swaps it in at once when it once served
    /// every parent, from its revision store when the source no longer has it.
    Rollback {
        #[command(flatten)]
        target: super::lifecycle::Target,
        /// The revision: its number, or its `sha256:…` digest.
        #[arg(long)]
        to: Option<String>,
        /// How long to wait for the operator to serve it (0: do not wait).
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        wait: Duration,
    },
    /// Show or steer a ReconcilePolicy's rollout (`spec.rollout`) on the cluster of
    /// KUBECONFIG. Each action is one `kubectl patch` (printed): `pause`/`resume` set
    /// `spec.rollout.paused`; `skip`, `abort` and `retry` set the annotation
    /// `podset.dev/rollout-command`, which the operator carries out once and removes.
    Rollout {
        #[arg(value_enum)]
        action: super::lifecycle::RolloutAction,
        #[command(flatten)]
        target: super::lifecycle::Target,
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
        /// The policy's language: a Rust crate, a TypeScript package (in this
        /// repository: typescript/guest-NAME/, built to NAME-ts.wasm), or a Go module (in
        /// this repository: go/guest-NAME/, built to NAME-go.wasm).
        #[arg(long, value_enum, default_value_t)]
        lang: super::scaffold::Lang,
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
    /// Sign what a reference names now, in cosign's format (the `sha256-<hex>.sig` tag).
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
pub enum Format {
    Yaml,
    Json,
}
