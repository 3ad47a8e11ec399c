//! The `policy` subcommands that talk to a registry: push, pull, inspect, sign, verify.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::cli::PolicyCommand;
use super::keys::read_private_key;
use crate::config::shared::{RegistryArgs, SandboxArgs};
use crate::contract::declarations::{kind_name, to_gvk};
use crate::{contract, oci, sandbox, signature};

/// The commands that talk to a registry.
/// Runs one of the `policy` subcommands that talk to a registry.
pub async fn run(cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PolicyCommand::Push { module, reference, registry, sandbox } => {
            push(module, reference, registry, sandbox).await
        }
        PolicyCommand::Pull { reference, output, keys, registry } => pull(reference, output, keys, registry).await,
        PolicyCommand::Inspect { reference, registry } => inspect(reference, registry).await,
        PolicyCommand::Sign { reference, key, registry } => sign(reference, key, registry).await,
        PolicyCommand::Verify { reference, keys, registry } => verify(reference, keys, registry).await,
        _ => anyhow::bail!("not a registry command"),
    }
}

/// A session with the registry `reference` names, and the reference parsed.
fn session_for(registry: &RegistryArgs, reference: &str) -> anyhow::Result<(oci::Session, oci::Reference)> {
    let r = oci::parse_reference(reference)?;
    Ok((registry.registry()?.session(&r, &Default::default(), &[])?, r))
}

/// Publishes a module as an OCI artifact.
async fn push(
    module: PathBuf,
    reference: String,
    registry: RegistryArgs,
    sandbox: SandboxArgs,
) -> anyhow::Result<ExitCode> {
    let (engine, policy) = sandbox.load(&module)?;
    let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
    let (session, r) = session_for(&registry, &reference)?;
    anyhow::ensure!(r.digest().is_none(), "push to a tag (REGISTRY/REPOSITORY:TAG), not a digest");
    let info = policy.info();
    let world = if policy.is_podset_world() { "podset" } else { "reconciler" };
    let exports = vec![contract::bindings::interface_name("identity"), contract::bindings::interface_name(world)];
    let annotations = std::collections::BTreeMap::from([
        ("org.opencontainers.image.title".to_string(), info.name.clone()),
        ("org.opencontainers.image.version".to_string(), info.version.clone()),
        (format!("{}/policy-contract", crate::crd::GROUP), info.contract.clone()),
        (format!("{}/policy-kind", crate::crd::GROUP), kind_name(&to_gvk(&policy.declarations().parent))),
    ]);
    let built = oci::artifact::build(bytes, policy.imports(), &exports, annotations);
    let digest = session.push_artifact(&r, built).await?;
    drop(engine);
    println!("pushed {}@{digest}", r.whole());
    println!("module  {} ({}), sha256 for spec.sha256: {}", policy.label(), module.display(), policy.digest());
    Ok(ExitCode::SUCCESS)
}

/// Downloads a module, checked as the operator checks it.
async fn pull(
    reference: String,
    output: PathBuf,
    keys: Vec<PathBuf>,
    registry: RegistryArgs,
) -> anyhow::Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}

/// Shows what a reference resolves to, without downloading the module.
async fn inspect(reference: String, registry: RegistryArgs) -> anyhow::Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}

/// Signs what a reference names, in cosign's format.
async fn sign(reference: String, key: PathBuf, registry: RegistryArgs) -> anyhow::Result<ExitCode> {
    let key = read_private_key(&key)?;
    let (session, r) = session_for(&registry, &reference)?;
    let (digest, tag) = oci::cosign::sign(&session, &r, &key).await?;
    println!("signed {}@{digest} with key {}: {}", r.whole(), key.public().id(), tag.whole());
    Ok(ExitCode::SUCCESS)
}

/// Verifies the cosign signatures of what a reference names.
async fn verify(reference: String, keys: Vec<PathBuf>, registry: RegistryArgs) -> anyhow::Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}
