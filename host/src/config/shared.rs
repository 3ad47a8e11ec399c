//! The flag groups `run` shares with the `policy` subcommands: how registries are
//! reached, which signatures are trusted, the sandbox's bounds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::oci;
use crate::sandbox::{ArtifactCache, Limits, Policy, PolicyEngine};
use crate::signature;

/// How registries are reached: credentials, CAs, plain HTTP.
#[derive(Args, Clone)]
pub struct RegistryArgs {
    /// A Docker config file (`{"auths": {...}}`, as `docker login` writes and a
    /// kubernetes.io/dockerconfigjson Secret holds) with registry credentials;
    /// repeatable, the first to name a registry wins. No credential helpers are run.
    #[arg(long = "registry-config", env = "REGISTRY_CONFIG", value_delimiter = ',')]
    pub registry_configs: Vec<PathBuf>,
    /// A PEM CA certificate to trust for registries, besides the system's; repeatable.
    #[arg(long = "registry-ca", env = "REGISTRY_CA", value_delimiter = ',')]
    pub registry_cas: Vec<PathBuf>,
    /// A registry (`host:port`) to speak plain HTTP to; repeatable. Every other one is
    /// HTTPS only.
    #[arg(long = "insecure-registry", env = "INSECURE_REGISTRIES", value_delimiter = ',')]
    pub insecure_registries: Vec<String>,
}

impl RegistryArgs {
    pub fn settings(&self) -> anyhow::Result<oci::Settings> {
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

    pub fn registry(&self) -> anyhow::Result<oci::Registry> {
        Ok(oci::Registry::new(self.settings()?))
    }
}

/// Which signatures the operator trusts.
#[derive(Args, Clone)]
pub struct TrustArgs {
    /// A trusted public key (PEM, ECDSA P-256: a `policy keygen` .pub or a cosign.pub),
    /// or a directory of *.pub files (a Secret mounted as a volume); repeatable. Read
    /// at each verification, so a rotated Secret is picked up.
    #[arg(long = "trusted-key", env = "TRUSTED_KEYS", value_delimiter = ',')]
    pub trusted_keys: Vec<PathBuf>,
    /// Load only modules signed by a trusted key: from a registry, a cosign signature
    /// on the artifact; from a file or ConfigMap, a detached signature beside it
    /// (FILE.sig, or the ConfigMap key KEY.sig), as `cosign sign-blob` writes one.
    #[arg(long, env = "REQUIRE_SIGNATURES", requires = "trusted_keys")]
    pub require_signatures: bool,
}

impl TrustArgs {
    pub fn trust(&self) -> signature::Trust {
        signature::Trust { keys: self.trusted_keys.clone(), required: self.require_signatures }
    }
}

/// The sandbox bounds, shared by every command that runs a policy.
#[derive(Args, Clone)]
pub struct SandboxArgs {
    /// CPU deadline of one policy call.
    #[arg(long, env = "POLICY_DEADLINE", default_value = "100ms", value_parser = humantime::parse_duration)]
    pub policy_deadline: Duration,
    /// Linear-memory cap of one policy instance, in MiB.
    #[arg(long, env = "POLICY_MEMORY_MIB", default_value_t = 16)]
    pub policy_memory_mib: usize,
    /// Keep compiled modules in this directory (private to this user), by digest, and
    /// load them from it instead of compiling again (`run`: the policy cache directory's
    /// `compiled/` when not given).
    #[arg(long, env = "PODSET_COMPILED_CACHE")]
    pub compiled_cache: Option<PathBuf>,
}

impl SandboxArgs {
    pub fn limits(&self) -> Limits {
        Limits { deadline: self.policy_deadline, memory_bytes: self.policy_memory_mib << 20, ..Limits::default() }
    }

    /// An engine with these bounds, keeping compiled modules where asked.
    pub fn engine(&self) -> anyhow::Result<PolicyEngine> {
        let mut engine = PolicyEngine::new(self.limits())?;
        if let Some(dir) = &self.compiled_cache {
            let cache = ArtifactCache::open(dir).with_context(|| format!("compiled-module cache {}", dir.display()))?;
            engine.keep_compiled_in(cache);
        }
        Ok(engine)
    }

    pub fn load(&self, module: &PathBuf) -> anyhow::Result<(PolicyEngine, Arc<Policy>)> {
        let engine = self.engine()?;
        let bytes = std::fs::read(module).with_context(|| format!("reading {}", module.display()))?;
        let policy = engine.load(&bytes).with_context(|| format!("loading {}", module.display()))?;
        Ok((engine, policy))
    }
}
