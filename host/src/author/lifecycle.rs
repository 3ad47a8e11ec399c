//! `policy history`, `policy rollback` and `policy rollout`: a ReconcilePolicy's
//! revisions and rollout, on the cluster of KUBECONFIG. Each is one write a user could
//! make with kubectl (the command prints it); the operator carries it out.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use kube::api::{Api, Patch, PatchParams};

use crate::crd::{ReconcilePolicy, Revision, RolloutPhase};
use crate::sources::rollout::COMMAND_ANNOTATION;

/// The ReconcilePolicy a lifecycle command is about.
#[derive(Args, Clone)]
pub struct Target {
    /// The ReconcilePolicy's name.
    pub name: String,
    /// Its namespace [default: the kubeconfig's].
    #[arg(long, short)]
    pub namespace: Option<String>,
}

/// What `policy rollout` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RolloutAction {
    /// Print the rollout's step, progress and gates.
    Status,
    /// Hold it at its step (`spec.rollout.paused: true`); gates still abort.
    Pause,
    /// Let it move on again (`spec.rollout.paused: false`).
    Resume,
    /// End the current step now.
    Skip,
    /// Abort it: every parent goes back to the serving revision.
    Abort,
    /// Start an aborted rollout again from its first step.
    Retry,
}

async fn api(target: &Target) -> anyhow::Result<(Api<ReconcilePolicy>, String)> {
    let client = kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
    let ns = target.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    Ok((Api::namespaced(client, &ns), ns))
}

/// Prints a ReconcilePolicy's revisions.
pub async fn history(target: Target) -> anyhow::Result<ExitCode> {
    let (api, ns) = api(&target).await?;
    let rp = api.get(&target.name).await.with_context(|| format!("ReconcilePolicy {ns}/{}", target.name))?;
    let status = rp.status.unwrap_or_default();
    if status.revisions.is_empty() {
        println!("{ns}/{}: no revision has served yet", target.name);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&status.revisions, status.revision));
    Ok(ExitCode::SUCCESS)
}

/// The revisions as a table, the serving one marked.
pub fn table(revisions: &[Revision], serving: Option<i64>) -> String {
    let mut out = format!(
        "{:<9} {:<8} {:<20} {:<32} {:<21} {}\n",
        "REVISION", "SERVING", "DIGEST", "SOURCE", "STARTED", "STOPPED"
    );
    for r in revisions {
        let source = match (&r.config_map_ref, &r.image) {
            (Some(cm), _) => format!("configmap {}/{}", cm.name, cm.key),
            (None, Some(image)) => image.clone(),
            (None, None) => "-".into(),
        };
        let stopped = match (&r.stopped, &r.stop_reason) {
            (Some(t), Some(why)) => format!("{t} {why}"),
            (Some(t), None) => t.clone(),
            _ => "-".into(),
        };
        let mark = if Some(r.revision) == serving {
            "*"
        } else if r.complete {
            ""
        } else {
            "(part)"
        };
        let digest: String = r.digest.chars().take(19).collect();
        out.push_str(&format!(
            "{:<9} {:<8} {:<20} {:<32} {:<21} {}\n",
            r.revision,
            mark,
            digest,
            source,
            r.started.as_deref().unwrap_or("-"),
            stopped
        ));
    }
    out
}

/// Brings back a revision: the one before the serving one, or `to`. Waits up to
/// `wait` for the operator to serve it.
pub async fn rollback(target: Target, to: Option<String>, wait: Duration) -> anyhow::Result<ExitCode> {
    let (api, ns) = api(&target).await?;
    let rp = api.get(&target.name).await.with_context(|| format!("ReconcilePolicy {ns}/{}", target.name))?;
    let status = rp.status.clone().unwrap_or_default();
    let history =
        crate::sources::history::History::from_status(&status.revisions, status.revision, status.revisions.len());
    let wanted = match to.as_deref() {
        None => None,
        Some(t) if t.starts_with("sha256:") => {
            let r = status.revisions.iter().find(|r| r.digest == t);
            Some(r.with_context(|| format!("no revision of {ns}/{} has digest {t}", target.name))?.revision)
        }
        Some(t) => Some(t.parse::<i64>().with_context(|| format!("--to {t}: a revision number or a sha256:… digest"))?),
    };
    let Some(revision) = history.rollback_target(wanted).cloned() else {
        anyhow::bail!(
            "{ns}/{}: no revision to roll back to{}; `policy history {}` lists them",
            target.name,
            wanted.map(|n| format!(" numbered {n}")).unwrap_or_else(|| " before the serving one".into()),
            target.name
        );
    };
    if !revision.complete {
        eprintln!(
            "revision {} never served every parent (its rollout did not complete): it goes through spec.rollout's plan again, if there is one",
            revision.revision
        );
    }
    // The source as the revision had it; the other source and what only it uses go.
    let patch = serde_json::json!({ "spec": {
        "sha256": revision.digest,
        "configMapRef": revision.config_map_ref,
        "image": revision.image,
        "imagePullSecrets": if revision.image.is_some() { serde_json::to_value(&rp.spec.image_pull_secrets)? } else { serde_json::Value::Null },
        "registryCA": if revision.image.is_some() { serde_json::to_value(&rp.spec.registry_ca)? } else { serde_json::Value::Null },
    }});
    api.patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patching ReconcilePolicy {ns}/{}", target.name))?;
    println!(
        "{ns}/{}: spec now pins revision {} ({}); the same as\n  kubectl patch reconcilepolicy {} -n {ns} --type merge -p '{}'",
        target.name,
        revision.revision,
        revision.digest,
        target.name,
        serde_json::to_string(&patch)?
    );
    if wait.is_zero() {
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    while started.elapsed() < wait {
        let now = api.get(&target.name).await?.status.unwrap_or_default();
        let loaded = now.loaded_digest.as_deref() == Some(revision.digest.as_str());
        if now.revision == Some(revision.revision) && loaded {
            println!("{ns}/{}: revision {} serves ({:.1?})", target.name, revision.revision, started.elapsed());
            return Ok(ExitCode::SUCCESS);
        }
        let failed = now.conditions.iter().find(|c| c.type_ == "Failed" && c.status == "True");
        if let Some(failed) = failed.filter(|c| c.observed_generation >= rp.metadata.generation.map(|g| g + 1)) {
            println!("{ns}/{}: not served: {}: {}", target.name, failed.reason, failed.message);
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "{ns}/{}: revision {} is not serving after {wait:?}; see kubectl describe",
        target.name, revision.revision
    );
    Ok(ExitCode::FAILURE)
}

/// Acts on, or shows, a ReconcilePolicy's rollout.
pub async fn rollout(action: RolloutAction, target: Target) -> anyhow::Result<ExitCode> {
    let (api, ns) = api(&target).await?;
    let rp = api.get(&target.name).await.with_context(|| format!("ReconcilePolicy {ns}/{}", target.name))?;
    let name = &target.name;
    let patch = match action {
        RolloutAction::Status => return Ok(print_status(&rp, &ns)),
        RolloutAction::Pause | RolloutAction::Resume => {
            anyhow::ensure!(rp.spec.rollout.is_some(), "{ns}/{name} has no spec.rollout to pause or resume");
            serde_json::json!({ "spec": { "rollout": { "paused": action == RolloutAction::Pause } } })
        }
        RolloutAction::Skip | RolloutAction::Abort | RolloutAction::Retry => {
            let phase = rp.status.as_ref().and_then(|s| s.rollout.as_ref()).map(|r| r.phase);
            let running = matches!(phase, Some(RolloutPhase::Progressing | RolloutPhase::Paused));
            match action {
                RolloutAction::Retry => anyhow::ensure!(
                    phase == Some(RolloutPhase::Aborted),
                    "{ns}/{name}: only an aborted rollout is retried (it is {phase:?})"
                ),
                _ => anyhow::ensure!(running, "{ns}/{name}: no rollout is running (it is {phase:?})"),
            }
            let command = format!("{action:?}").to_lowercase();
            serde_json::json!({ "metadata": { "annotations": { COMMAND_ANNOTATION: command } } })
        }
    };
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("patching ReconcilePolicy {ns}/{name}"))?;
    println!(
        "{ns}/{name}: {action:?}; the same as\n  kubectl patch reconcilepolicy {name} -n {ns} --type merge -p '{}'",
        serde_json::to_string(&patch)?
    );
    Ok(ExitCode::SUCCESS)
}

fn print_status(rp: &ReconcilePolicy, ns: &str) -> ExitCode {
    let name = rp.metadata.name.as_deref().unwrap_or_default();
    let status = rp.status.clone().unwrap_or_default();
    let Some(r) = status.rollout else {
        println!(
            "{ns}/{name}: no rollout (serving revision {})",
            status.revision.map_or("-".into(), |n| n.to_string())
        );
        return ExitCode::SUCCESS;
    };
    println!("{ns}/{name}: rollout of revision {} ({}): {:?}", r.revision, r.digest, r.phase);
    println!("  step      {}", r.progress);
    println!("  since     {}", r.step_started.as_deref().unwrap_or("-"));
    println!("  decisions {}", r.decisions);
    for g in &r.gates {
        println!(
            "  gate      {:<18} {:<16} {:<24} {}",
            g.name,
            g.value,
            g.limit,
            if g.holds { "holds" } else { "FAILED" }
        );
    }
    if let Some(a) = &r.aborted {
        println!("  aborted   gate {} at step {} ({})", a.gate, a.step, a.time);
        for o in &a.objects {
            println!("            {o}");
        }
    }
    if !r.message.is_empty() {
        println!("  {}", r.message);
    }
    ExitCode::SUCCESS
}
