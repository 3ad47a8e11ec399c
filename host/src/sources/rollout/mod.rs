//! Progressive rollout of a ReconcilePolicy's new module (`spec.rollout`): the
//! module is a candidate beside the serving revision, a shadow first, then deciding
//! for growing shares of the parents; every step moves on only when its window has
//! passed with its gates held, and the first gate that fails aborts the rollout: every
//! parent goes back to the serving revision at once, with no one watching.
//!
//! The ReconcilePolicy controller ([`super::cluster`]) starts a rollout when a new
//! module loads; [`drive`] looks at every running rollout every [`TICK`]: it judges
//! the gates ([`gates`]) on what the candidate's decisions came to (its
//! [`Outcomes`](crate::registry::outcomes::Outcomes), its shadow tally, the readiness
//! of the parents it decides for), moves steps on, completes, aborts, and carries out
//! the commands of the `podset.dev/rollout-command` annotation. Its state is written in
//! `status.rollout` (the step and when it began), so that a restarted operator, or a
//! standby taking over, goes on from the same step: a standby follows the status its
//! leader writes.

pub mod gates;
pub mod state;

pub use state::{Lifecycles, RolloutState, Tracked};

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use self::gates::Counted;
use self::state::Watch;
use super::Sources;
use super::history::{History, Source, Stop};
use crate::crd::{ReconcilePolicy, RolloutAbort, RolloutPhase};
use crate::kubernetes::events::{Origin, event};
use crate::kubernetes::object::Object;
use crate::registry::{Admitted, PolicyRef, Selection, ShadowSource, Step};

/// How often every running rollout is looked at.
pub const TICK: Duration = Duration::from_secs(2);
/// A rollout's status is written at most this often while only its progress changes
/// (a step moving on, completing or aborting is written at once).
const WRITE_EVERY: Duration = Duration::from_secs(5);
/// The annotation whose value is a one-time command to a rollout: `skip` (the step
/// ends now), `abort`, or `retry` (an aborted rollout starts again from its first
/// step). The operator removes it once carried out.
pub const COMMAND_ANNOTATION: &str = "podset.dev/rollout-command";

/// The ReconcilePolicy controller's queue: a rollout that completed or aborted changes
/// what serves, which its reconcile reports (`loadedDigest`, the conditions).
pub type Requeue = futures::channel::mpsc::UnboundedSender<ObjectRef<ReconcilePolicy>>;

/// Until shutdown: every [`TICK`], every running rollout is judged and moved on; every
/// minute, the revision store drops the modules no policy lists any more.
pub async fn drive(src: Arc<Sources>, policies: Store<ReconcilePolicy>, requeue: Requeue) {
    let mut last_gc = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = src.ctx.shutdown.cancelled() => return,
        }
        for key in src.lifecycles.keys() {
            let Some(rp) = policies.get(&key) else { continue };
            if !src.ctx.leadership.is_acting() {
                follow(&src, &key, &rp);
            } else if (src.lifecycles.rolling(&key) || rp.annotations().contains_key(COMMAND_ANNOTATION))
                && tick(&src, &key, &rp).await
            {
                let _ = requeue.unbounded_send(key.clone());
            }
        }
        if last_gc.elapsed() >= Duration::from_secs(60) && src.ctx.policy_cache.is_synced() {
            last_gc = Instant::now();
            if let Some(store) = &src.revisions {
                let mut keep = src.lifecycles.digests();
                keep.extend(src.ctx.registry.enforcing().iter().map(|a| *a.policy.digest()));
                store.keep(&keep);
            }
        }
    }
}

/// What a tick decided.
enum Transition {
    None,
    Advanced,
    Completed,
    Aborted(gates::Failed),
    Paused(bool),
}

/// One look at `key`'s rollout, on the leader; returns whether what serves changed
/// (it completed, aborted or was retried).
async fn tick(src: &Arc<Sources>, key: &PolicyRef, rp: &Arc<ReconcilePolicy>) -> bool {
    let mut command = rp.annotations().get(COMMAND_ANNOTATION).cloned();
    if let Some(c) = command.clone()
        && !take_command(src, key, rp, &c).await
    {
        command = None;
    }
    let retried = command.as_deref() == Some("retry");
    let Some((candidate, step)) =
        src.lifecycles.get(key, |t| t.rollout.as_ref().map(|r| (r.candidate.clone(), r.step()))).flatten()
    else {
        return retried;
    };
    let parents = served_parents(src, key, &candidate);
    let shadow = src.ctx.shadows.status(&ShadowSource::Named(key.clone()));
    let paused = rp.spec.rollout.as_ref().is_some_and(|r| r.paused);
    let transition = src
        .lifecycles
        .get(key, |t| {
            let Some(r) = t.rollout.as_mut().filter(|r| r.running()) else { return Transition::None };
            judge(r, step, &parents, shadow.as_ref(), paused, command.as_deref())
        })
        .unwrap_or(Transition::None);
    let now = super::history::now();
    let label = key_label(key);
    match &transition {
        Transition::None => {}
        Transition::Paused(paused) => {
            let what = if *paused { "paused at its step (spec.rollout.paused)" } else { "resumed" };
            publish(
                src,
                rp,
                EventType::Normal,
                if *paused { "RolloutPaused" } else { "RolloutResumed" },
                format!("The rollout {what}"),
            );
        }
        Transition::Advanced => {
            let Some((step, progress)) = src
                .lifecycles
                .get(key, |t| t.rollout.as_ref().map(|r| (r.step(), r.status.progress.clone())))
                .flatten()
            else {
                return false;
            };
            src.ctx.registry.step(key, &candidate, step);
            let n = super::swapped(src, &candidate.parent_kind(), |p| src.ctx.registry.concerns(key, p)).await;
            src.ctx.metrics.rollout_step(&label, step_number(src, key), share(step));
            info!(rp = %key, ?step, requeued = n, "rollout step");
            publish(src, rp, EventType::Normal, "RolloutStep", format!("Step {progress}: {n} parents re-queued"));
        }
        Transition::Completed => {
            src.ctx.registry.promote(key, &candidate);
            src.lifecycles.get(key, |t| t.history.completed(candidate.policy.digest(), &now));
            let n = super::swapped(src, &candidate.parent_kind(), |p| src.ctx.registry.concerns(key, p)).await;
            src.ctx.metrics.rollout_ended(&label, "completed", None);
            info!(rp = %key, policy = %candidate.policy.label(), requeued = n, "rollout completed");
            let note = format!("{} serves every parent now; {n} re-queued", candidate.policy.label());
            publish(src, rp, EventType::Normal, "RolloutCompleted", note);
        }
        Transition::Aborted(failed) => {
            abort(src, key, &candidate, failed, &now).await;
            src.ctx.metrics.rollout_ended(&label, "aborted", Some(failed.gate));
            let on = match failed.objects.as_slice() {
                [] => String::new(),
                [one] => format!(" on {one}"),
                [first, rest @ ..] => format!(" on {first} (and {} more: status.rollout.aborted)", rest.len()),
            };
            warn!(rp = %key, gate = failed.gate, objects = ?failed.objects, "rollout aborted");
            let note = format!("Gate {} failed{on}: every parent is back on the serving revision", failed.gate);
            publish(src, rp, EventType::Warning, "RolloutAborted", note);
        }
    }
    write(src, key, !matches!(transition, Transition::None)).await;
    retried || matches!(transition, Transition::Completed | Transition::Aborted(_))
}

/// Carries out a rollout command, once: the annotation is removed first, on the
/// condition that the object did not change since it was read (a resourceVersion
/// precondition), so that a command is never carried out twice, nor a newer one lost.
/// Returns whether it was taken.
async fn take_command(src: &Arc<Sources>, key: &PolicyRef, rp: &ReconcilePolicy, command: &str) -> bool {
    let api: Api<ReconcilePolicy> =
        Api::namespaced(src.ctx.client.clone(), key.namespace.as_deref().unwrap_or_default());
    let patch = serde_json::json!({ "metadata": {
        "resourceVersion": rp.metadata.resource_version,
        "annotations": { COMMAND_ANNOTATION: null },
    }});
    if let Err(e) = api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        warn!(rp = %key, command, "cannot take the rollout command (taken at the next look): {e}");
        return false;
    }
    info!(rp = %key, command, "rollout command");
    if command == "retry" {
        retry(src, key).await;
    }
    true
}

/// An aborted rollout starts again from its first step, with the module it had.
async fn retry(src: &Arc<Sources>, key: &PolicyRef) {
    let now = super::history::now();
    let restarted = src
        .lifecycles
        .get(key, |t| {
            let r = t.rollout.as_ref().filter(|r| r.status.phase == RolloutPhase::Aborted)?;
            let (candidate, plan, revision) = (r.candidate.clone(), r.plan.clone(), r.status.revision);
            let (state, step) = RolloutState::begin(candidate.clone(), &plan, revision, None);
            let source = t.history.get(candidate.policy.digest()).map(Source::of).unwrap_or_default();
            t.history.started(candidate.policy.digest(), &source, None, false, &now);
            t.rollout = Some(state);
            Some((candidate, step))
        })
        .flatten();
    if let Some((candidate, step)) = restarted {
        src.ctx.registry.roll_out(key, candidate.clone(), step);
        super::swapped(src, &candidate.parent_kind(), |p| src.ctx.registry.concerns(key, p)).await;
        info!(rp = %key, "rollout retried from its first step");
    }
}

/// Judges a running rollout's step, and moves it on when it may.
fn judge(
    r: &mut RolloutState,
    step: Step,
    parents: &[(Arc<Object>, bool)],
    shadow: Option<&crate::crd::ShadowStatus>,
    paused: bool,
    command: Option<&str>,
) -> Transition {
    let counts = r.candidate.outcomes.since(r.mark);
    let digest = r.candidate.policy.digest().to_string();
    let tally = shadow.filter(|s| s.digest == digest).map_or((0, 0, 0), |s| (s.decisions, s.agreed, s.failed));
    let grace = gates::readiness_grace(&r.plan.gates);
    let mut regressions = Vec::new();
    if step != Step::Shadow {
        let now = Instant::now();
        for (parent, ready) in parents {
            let uid = parent.metadata.uid.clone().unwrap_or_default();
            let w = r.watched.entry(uid).or_insert(Watch { was_ready: *ready, unready_since: None });
            if *ready {
                w.unready_since = None;
            } else if w.was_ready {
                let since = *w.unready_since.get_or_insert(now);
                if now.duration_since(since) >= grace {
                    regressions.push(format!(
                        "{}/{}: Ready before the new module decided for it, not Ready for {}",
                        parent.namespace().unwrap_or_default(),
                        parent.name_any(),
                        humantime::format_duration(Duration::from_secs(grace.as_secs()))
                    ));
                }
            }
        }
    }
    let (compared, agreed, shadow_failed) =
        (tally.0 - r.shadow_mark.0, tally.1 - r.shadow_mark.1, tally.2 - r.shadow_mark.2);
    let decisions = match step {
        Step::Shadow => compared,
        Step::Share(_) => counts.decisions as i64,
    } + r.decisions_before;
    let failed = counts.failed as i64 + if step == Step::Shadow { shadow_failed.max(0) } else { 0 };
    let mut objects = counts.objects.clone();
    if step == Step::Shadow
        && let Some(s) = shadow
    {
        objects.extend(s.last_failures.iter().map(|f| format!("{}: {}", f.object, f.reason)));
    }
    let counted = Counted { decisions, failed, refused: counts.refused as i64, compared, agreed, regressions, objects };
    let (values, failed) = gates::judge(&r.plan.gates, step, &counted);
    let elapsed = r.elapsed();
    r.status.gates = values;
    r.status.decisions = decisions;
    r.status.progress = gates::progress(&r.plan, r.index, elapsed, decisions);
    if command == Some("abort") {
        return Transition::Aborted(gates::Failed { gate: gates::MANUAL, objects: Vec::new() });
    }
    if let Some(failed) = failed {
        return Transition::Aborted(failed);
    }
    let was_paused = r.status.phase == RolloutPhase::Paused;
    if paused != was_paused {
        r.status.phase = if paused { RolloutPhase::Paused } else { RolloutPhase::Progressing };
        r.status.message = if paused { "paused (spec.rollout.paused)".into() } else { String::new() };
        return Transition::Paused(paused);
    }
    // A step ends when its window has passed, unless the rollout is paused; or at once
    // when someone skips it, paused or not.
    let skip = command == Some("skip");
    let window = r.plan.steps.get(r.index).is_some_and(|s| gates::window_passed(s, elapsed, decisions));
    if !(skip || (window && !paused)) {
        return Transition::None;
    }
    if r.index + 1 >= r.plan.steps.len() {
        r.status.phase = RolloutPhase::Completed;
        r.status.message = "completed: the new module serves every parent".into();
        return Transition::Completed;
    }
    r.next_step(tally);
    r.status.progress = gates::progress(&r.plan, r.index, Duration::ZERO, 0);
    r.status.message = if skip { "step skipped by hand".into() } else { String::new() };
    Transition::Advanced
}

/// Aborts `key`'s rollout: the candidate decides for no parent from now on, and the
/// parents it decided for are decided again by the serving revision.
async fn abort(src: &Arc<Sources>, key: &PolicyRef, candidate: &Arc<Admitted>, failed: &gates::Failed, now: &str) {
    src.ctx.registry.drop_candidate(key);
    src.lifecycles.get(key, |t| {
        t.history.stopped(candidate.policy.digest(), Stop::RolloutAborted, now);
        if let Some(r) = t.rollout.as_mut() {
            r.status.phase = RolloutPhase::Aborted;
            r.status.message = format!(
                "aborted: gate {} failed at step {}; the serving revision decides for every parent",
                failed.gate, r.status.step
            );
            r.status.aborted = Some(RolloutAbort {
                gate: failed.gate.to_string(),
                step: r.status.step,
                time: now.to_string(),
                objects: failed.objects.clone(),
            });
        }
    });
    super::swapped(src, &candidate.parent_kind(), |p| src.ctx.registry.concerns(key, p)).await;
}

/// On a standby: its state follows what the leader wrote, the revisions and the step,
/// so that a takeover serves the same parents the same way and writes no stale list.
fn follow(src: &Arc<Sources>, key: &PolicyRef, rp: &ReconcilePolicy) {
    let status = rp.status.clone().unwrap_or_default();
    let changed = src.lifecycles.get(key, |t| {
        t.history = History::from_status(&status.revisions, status.revision, t.history.kept());
        let written = status.rollout.as_ref()?;
        let r = t.rollout.as_mut().filter(|r| r.status.digest == written.digest)?;
        let index = (written.step.max(1) as usize - 1).min(r.plan.steps.len().saturating_sub(1));
        let moved = index != r.index || written.phase != r.status.phase;
        r.index = index;
        r.status = written.clone();
        if let Some(t) = written.step_started.as_deref().and_then(|t| t.parse().ok()) {
            r.step_started = t;
        }
        moved.then(|| (r.candidate.clone(), written.phase, gates::step(&r.plan, index)))
    });
    let Some(Some((candidate, phase, step))) = changed else { return };
    match phase {
        RolloutPhase::Progressing | RolloutPhase::Paused => {
            src.ctx.registry.step(key, &candidate, step);
        }
        RolloutPhase::Completed => {
            src.ctx.registry.promote(key, &candidate);
        }
        RolloutPhase::Aborted => {
            src.ctx.registry.drop_candidate(key);
        }
    }
}

/// The parents of `key`'s namespace that `candidate` decides for now, each with
/// whether it is ready (a `Ready` or `Available` condition True).
fn served_parents(src: &Sources, key: &PolicyRef, candidate: &Arc<Admitted>) -> Vec<(Arc<Object>, bool)> {
    let kind = candidate.parent_kind();
    let Some(k) = src.kinds.get(&kind) else { return Vec::new() };
    k.parents
        .state()
        .into_iter()
        .filter(|p| p.namespace() == key.namespace)
        .filter(|p| matches!(src.ctx.registry.select(p, &kind), Selection::Ready(a) if Arc::ptr_eq(&a, candidate)))
        .map(|p| {
            let ready = is_ready(&p);
            (p, ready)
        })
        .collect()
}

/// A `Ready` or `Available` condition True.
pub fn is_ready(parent: &Object) -> bool {
    #[derive(serde::Deserialize)]
    struct Status {
        #[serde(default)]
        conditions: Vec<Cond>,
    }
    #[derive(serde::Deserialize)]
    struct Cond {
        #[serde(rename = "type")]
        type_: String,
        status: String,
    }
    parent.parse::<Status>("status").ok().flatten().is_some_and(|s| {
        s.conditions.iter().any(|c| (c.type_ == "Ready" || c.type_ == "Available") && c.status == "True")
    })
}

/// Writes `key`'s lifecycle into its status: at once when `now`, else when it changed
/// and `WRITE_EVERY` (5 s) has passed.
pub async fn write(src: &Sources, key: &PolicyRef, now: bool) {
    let due = src
        .lifecycles
        .get(key, |t| {
            let Some(r) = t.rollout.as_mut() else { return now };
            let due = now || r.written.is_none_or(|w| w.elapsed() >= WRITE_EVERY);
            if due {
                r.written = Some(Instant::now());
            }
            due
        })
        .unwrap_or(false);
    if !due {
        return;
    }
    let lock = src.lifecycles.write_lock(key);
    let _held = lock.lock().await;
    let Some((revision, revisions, rollout)) = src.lifecycles.status(key) else { return };
    let api: Api<ReconcilePolicy> =
        Api::namespaced(src.ctx.client.clone(), key.namespace.as_deref().unwrap_or_default());
    let patch = serde_json::json!({ "status": { "revision": revision, "revisions": revisions, "rollout": rollout } });
    if let Err(e) = api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        warn!(rp = %key, "cannot write status.rollout: {e}");
    }
}

fn publish(src: &Sources, rp: &ReconcilePolicy, type_: EventType, reason: &str, note: String) {
    let ev = event(type_, reason, "Rollout", note, None);
    src.ctx.events.publish(&rp.object_ref(&()), ev, Origin::Host);
}

/// `namespace/name`, as metrics label a ReconcilePolicy.
pub fn key_label(key: &PolicyRef) -> String {
    format!("{}/{}", key.namespace.as_deref().unwrap_or_default(), key.name)
}

fn step_number(src: &Sources, key: &PolicyRef) -> i64 {
    src.lifecycles.get(key, |t| t.rollout.as_ref().map_or(0, |r| i64::from(r.status.step))).unwrap_or(0)
}

/// The share of the parents a step gives the candidate, in percent.
pub fn share(step: Step) -> i64 {
    match step {
        Step::Shadow => 0,
        Step::Share(p) => i64::from(p),
    }
}
