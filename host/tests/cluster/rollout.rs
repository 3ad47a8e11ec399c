//! Revisions, rollbacks and progressive rollouts of ReconcilePolicies on the real test
//! control plane, as a platform team runs them: a plan in `spec.rollout` walks a module
//! from shadow to every parent with no one watching; a module that hurts is aborted by a
//! gate and every parent goes back to the revision before; a revision comes back in one
//! command, after a restart, with its registry down. Each test runs its own operator in
//! its own namespace.

use podset_test_support as common;

use std::time::{Duration, Instant};

use common::audit::{AuditLog, operator_pod_writes};
use common::registry::{OwnRegistry, push};
use common::{Env, eventually, kubectl, policy_cli, policy_dir, read_policy};
use kube::api::{Api, ListParams, Patch, PatchParams};
use podset_host::crd::{PodSet, ReconcilePolicy, RolloutPhase, RolloutStatus};
use podset_host::sandbox::Digest;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(120);

fn digest(module: &str) -> String {
    Digest::of(&read_policy(module)).to_string()
}

/// Puts `module` in ConfigMap `rp` and applies ReconcilePolicy `rp` deciding every PodSet
/// of the namespace, with `rollout` (JSON) when given.
async fn publish(env: &Env, rp: &str, module: &str, rollout: Option<Value>) {
    let selector = Some(Default::default());
    match rollout {
        Some(plan) => {
            let plan = serde_json::from_value(plan).expect("a rollout plan");
            common::publish_rolling(&env.client, &env.ns, rp, rp, &read_policy(module), selector, plan).await
        }
        None => common::publish_policy(&env.client, &env.ns, rp, rp, &read_policy(module), selector).await,
    }
}

fn rps(env: &Env) -> Api<ReconcilePolicy> {
    Api::namespaced(env.client.clone(), &env.ns)
}

/// Waits until `rp`'s rollout is in `phase`; returns its status.
async fn rollout_in(env: &Env, rp: &str, phase: RolloutPhase) -> RolloutStatus {
    let what = format!("the rollout of {rp} to be {phase:?} (log: {})", env.op.log.display());
    eventually(&what, T, || async {
        let r = rps(env).get(rp).await.ok()?.status?.rollout?;
        (r.phase == phase).then_some(r)
    })
    .await
}

/// Waits until `rp` serves revision `n` (with its module loaded).
async fn serving(env: &Env, rp: &str, n: i64, module: &str) -> ReconcilePolicy {
    let d = digest(module);
    eventually(&format!("{rp} to serve revision {n} ({module})"), T, || async {
        let policy = rps(env).get(rp).await.ok()?;
        let st = policy.status.as_ref()?;
        (st.revision == Some(n) && st.loaded_digest.as_deref() == Some(d.as_str())).then_some(policy.clone())
    })
    .await
}

fn has_event(ns: &str, name: &str, reason: &str) -> bool {
    let selector = format!("involvedObject.name={name},reason={reason}");
    let (ok, out) = kubectl(&["get", "events", "-n", ns, "--field-selector", &selector, "-o", "name"]);
    ok && !out.trim().is_empty()
}

/// PodSets `prefix-0` … of `replicas` each, converged.
async fn podsets(env: &Env, prefix: &str, count: usize, replicas: i32) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    for n in &names {
        env.create(n, replicas).await;
    }
    for n in &names {
        env.converged(n, replicas as usize).await;
    }
    names
}

/// Where `name` falls among the parents for a canary share (0 to 9999; a step of P %
/// takes those below P × 100): by UID hash, so tests whose canary must decide for some
/// parent add parents until one falls in its share.
async fn share_of(env: &Env, name: &str) -> (PodSet, u32) {
    let p = env.podsets.get(name).await.expect("PodSet");
    let object: podset_host::kubernetes::object::Object =
        serde_json::from_value(serde_json::to_value(&p).expect("json")).expect("object");
    let share = podset_host::registry::share_of(&object);
    (p, share)
}

/// Every PodSet of the namespace with `n` ready pods, decided last by `module`.
async fn all_decided_by(env: &Env, count: usize, module: &str, n: i32) {
    let d = digest(module);
    eventually(&format!("{count} PodSets decided by {module}"), T, || async {
        common::all_decided_by(&env.podsets, count, &d, n).await
    })
    .await;
}

#[tokio::test]
async fn a_good_module_rolls_out_from_shadow_to_every_podset_by_itself() {
    let env = Env::new("roll-good").await;
    podsets(&env, "ps", 6, 1).await;
    let plan = json!({ "steps": [
        { "shadow": true, "decisions": 3, "duration": "2s" },
        { "percent": 50, "duration": "3s" },
        { "percent": 100, "duration": "1s" },
    ]});
    let started = Instant::now();
    publish(&env, "next", "fixtures/canary.wasm", Some(plan)).await;
    let done = rollout_in(&env, "next", RolloutPhase::Completed).await;
    println!("rolled out to every PodSet in {:.1?}: {done:#?}", started.elapsed());
    assert_eq!((done.step, done.steps, done.revision), (3, 3, 1));
    assert!(done.gates.iter().all(|g| g.holds), "{:#?}", done.gates);
    let policy = serving(&env, "next", 1, "fixtures/canary.wasm").await;
    let st = policy.status.expect("status");
    assert!(st.revisions.len() == 1 && st.revisions[0].complete, "{:#?}", st.revisions);
    let shadow = st.shadow.expect("the shadow step's tally");
    assert!(shadow.decisions >= 3 && shadow.failed == 0, "{shadow:#?}");
    all_decided_by(&env, 6, "fixtures/canary.wasm", 1).await;
    for reason in ["RolloutStarted", "RolloutStep", "RolloutCompleted"] {
        assert!(has_event(&env.ns, "next", reason), "a {reason} Event");
    }
    let (ok, table) = kubectl(&["get", "reconcilepolicies", "-n", &env.ns]);
    assert!(ok && table.contains("REVISION") && table.contains("ROLLOUT") && table.contains("Completed"), "{table}");
    println!("{table}");
    env.cleanup().await;
}

#[tokio::test]
async fn a_module_wanting_one_pod_too_many_is_aborted_as_a_shadow_and_as_a_canary() {
    let env = Env::new("roll-toomany").await;
    let audit = AuditLog::open();
    publish(&env, "rp", "podset.wasm", None).await;
    serving(&env, "rp", 1, "podset.wasm").await;
    // At least one of them in the canary step's 50 % below: with four, none was in 1 run
    // of 16 (the canary then decided for no parent and completed).
    let mut count = 4;
    podsets(&env, "ps", count, 2).await;
    let mut in_share = 0;
    for i in 0..count {
        in_share += usize::from(share_of(&env, &format!("ps-{i}")).await.1 < 5_000);
    }
    while in_share == 0 {
        let name = format!("ps-{count}");
        env.create(&name, 2).await;
        env.converged(&name, 2).await;
        count += 1;
        in_share += usize::from(share_of(&env, &name).await.1 < 5_000);
        assert!(count < 40, "no PodSet of 40 falls in a 50 % share");
    }
    all_decided_by(&env, count, "podset.wasm", 2).await;

    // As a shadow: the host's checks refuse its decisions, the gate aborts.
    let mark = audit.mark();
    let started = Instant::now();
    let plan = json!({ "steps": [{ "shadow": true, "decisions": 10, "duration": "1m" }, { "percent": 50, "duration": "1m" }] });
    publish(&env, "rp", "fixtures/one-too-many.wasm", Some(plan)).await;
    let aborted = rollout_in(&env, "rp", RolloutPhase::Aborted).await;
    println!("aborted in its shadow step {:.1?} after the spec changed: {aborted:#?}", started.elapsed());
    let why = aborted.aborted.clone().expect("why it aborted");
    assert_eq!((why.gate.as_str(), why.step), ("failedDecisions", 1));
    assert!(why.objects.iter().any(|o| o.contains("TooManyPods")), "{why:#?}");
    // status.shadow is written every few seconds: it says why the shadow failed.
    let shadow = eventually("status.shadow to name the failures", T, || async {
        let shadow = rps(&env).get("rp").await.ok()?.status?.shadow?;
        let named =
            shadow.last_failures.iter().any(|f| f.reason.contains("TooManyPods") && f.object.starts_with("PodSet "));
        named.then_some(shadow)
    })
    .await;
    println!("status.shadow: {shadow:#?}");
    let policy = rps(&env).get("rp").await.expect("rp");
    let st = policy.status.expect("status");
    assert_eq!(st.revision, Some(1), "revision 1 serves on");
    let candidate = st.revisions.iter().find(|r| r.digest == digest("fixtures/one-too-many.wasm")).expect("revision 2");
    assert_eq!(
        (candidate.revision, candidate.stop_reason.as_deref(), candidate.complete),
        (2, Some("RolloutAborted"), false)
    );
    assert!(has_event(&env.ns, "rp", "RolloutAborted"));
    let label = format!(r#"policy="{}/rp",result="aborted",gate="failedDecisions""#, env.ns);
    assert_eq!(env.op.sum("podset_rollouts_total", &label).await, 1.0);

    // As a canary (the plan now starts with a share; `retry` starts it again): its
    // decisions are refused, the gate aborts, and every parent is back on revision 1.
    let plan = json!({ "steps": [{ "percent": 50, "duration": "1m" }] });
    publish(&env, "rp", "fixtures/one-too-many.wasm", Some(plan)).await;
    let started = Instant::now();
    let (ok, out) = policy_cli(&["rollout".as_ref(), "retry".as_ref(), "rp".as_ref(), "-n".as_ref(), env.ns.as_ref()]);
    assert!(ok, "{out}");
    eventually("the retried rollout to run", T, || async {
        let r = rps(&env).get("rp").await.ok()?.status?.rollout?;
        (r.phase == RolloutPhase::Progressing || r.aborted.as_ref().is_some_and(|a| a.time != why.time)).then_some(())
    })
    .await;
    let again = eventually("the canary to be aborted", T, || async {
        let r = rps(&env).get("rp").await.ok()?.status?.rollout?;
        (r.phase == RolloutPhase::Aborted && r.aborted.as_ref().is_some_and(|a| a.time != why.time)).then_some(r)
    })
    .await;
    println!("aborted as a canary {:.1?} after the retry: {:?}", started.elapsed(), again.aborted);
    assert_eq!(again.aborted.as_ref().map(|a| a.gate.as_str()), Some("failedDecisions"));
    // Every PodSet decided again by revision 1, none ever with more pods than asked.
    let ps: Api<PodSet> = Api::namespaced(env.client.clone(), &env.ns);
    for p in ps.list(&ListParams::default()).await.expect("list").items {
        let name = p.metadata.name.clone().unwrap_or_default();
        env.converged_by(&name, 2, Some(&digest("podset.wasm"))).await;
    }
    let writes = audit.since(&mark);
    assert_eq!(
        operator_pod_writes(&writes, &env.ns, "create"),
        0,
        "no pod created by the module that wants one too many"
    );
    env.cleanup().await;
}

/// The hash `fixtures/trap-one-in-ten.wasm` traps by (guest-podset's `trap-one-in-ten`).
fn traps(uid: &str) -> bool {
    uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 10 == 0
}

#[tokio::test]
async fn a_module_trapping_for_one_parent_in_ten_is_aborted_at_its_first_canary_step() {
    let env = Env::new("roll-trap").await;
    publish(&env, "rp", "podset.wasm", None).await;
    serving(&env, "rp", 1, "podset.wasm").await;
    // UIDs are the API server's: PodSets are added until one that the module traps for
    // falls in the first step's 20 % share (the share is by UID hash too).
    let mut count = 0;
    loop {
        let name = format!("ps-{count}");
        env.create(&name, 1).await;
        count += 1;
        let (p, share) = share_of(&env, &name).await;
        if traps(p.metadata.uid.as_deref().unwrap_or_default()) && share < 2_000 {
            break;
        }
        assert!(count < 400, "no PodSet of 400 both traps and falls in a 20 % share");
    }
    println!("{count} PodSets");
    all_decided_by(&env, count, "podset.wasm", 1).await;
    let plan = json!({ "steps": [{ "percent": 20, "duration": "1m" }, { "percent": 100, "duration": "1m" }] });
    let started = Instant::now();
    publish(&env, "rp", "fixtures/trap-one-in-ten.wasm", Some(plan)).await;
    let aborted = rollout_in(&env, "rp", RolloutPhase::Aborted).await;
    println!("aborted {:.1?} after the spec changed: {:?}", started.elapsed(), aborted.aborted);
    let why = aborted.aborted.expect("why");
    assert_eq!((why.gate.as_str(), why.step), ("failedDecisions", 1), "at the first canary step");
    assert!(why.objects.iter().any(|o| o.contains("PolicyTrapped")), "{why:#?}");
    all_decided_by(&env, count, "podset.wasm", 1).await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_rollout_goes_on_from_its_step_after_a_restart_and_obeys_pause_skip_and_abort() {
    let mut env = Env::new("roll-restart").await;
    podsets(&env, "ps", 4, 1).await;
    let plan = json!({ "steps": [
        { "shadow": true, "duration": "1s" },
        { "percent": 50, "duration": "1h" },
        { "percent": 100, "duration": "1h" },
    ]});
    publish(&env, "next", "fixtures/canary.wasm", Some(plan)).await;
    let at_two = eventually("step 2", T, || async {
        let r = rps(&env).get("next").await.ok()?.status?.rollout?;
        (r.step == 2).then_some(r)
    })
    .await;
    // Killed and started again: the same step, the same window.
    env.op.kill();
    env.op.respawn();
    env.op.ready().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = rps(&env).get("next").await.expect("rp").status.and_then(|s| s.rollout).expect("rollout");
    assert_eq!(
        (after.step, after.phase, after.step_started.clone()),
        (2, RolloutPhase::Progressing, at_two.step_started.clone())
    );

    // Paused: it holds; skip moves it on anyway; abort ends it.
    let cli = |action: &str| {
        policy_cli(&["rollout".as_ref(), action.as_ref(), "next".as_ref(), "-n".as_ref(), env.ns.as_ref()])
    };
    let (ok, out) = cli("pause");
    assert!(ok, "{out}");
    rollout_in(&env, "next", RolloutPhase::Paused).await;
    let (ok, out) = cli("skip");
    assert!(ok && out.contains("podset.dev/rollout-command"), "{out}");
    eventually("step 3", T, || async {
        let r = rps(&env).get("next").await.ok()?.status?.rollout?;
        (r.step == 3).then_some(())
    })
    .await;
    let (ok, out) = cli("status");
    assert!(ok && out.contains("3/3 100%") && out.contains("gate"), "{out}");
    println!("{out}");
    let (ok, out) = cli("abort");
    assert!(ok, "{out}");
    let aborted = rollout_in(&env, "next", RolloutPhase::Aborted).await;
    assert_eq!(aborted.aborted.map(|a| a.gate), Some("Manual".to_string()));
    // No serving revision before it: every PodSet is back on the default policy.
    all_decided_by(&env, 4, "podset.wasm", 1).await;
    let policy = rps(&env).get("next").await.expect("rp");
    assert!(
        !policy.metadata.annotations.unwrap_or_default().contains_key("podset.dev/rollout-command"),
        "commands are taken once"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn policy_rollback_brings_back_a_revision_after_a_restart_with_the_registry_down() {
    let mut own = OwnRegistry::start(false).await;
    let (v1, v2) = (format!("{}/p/podset:v1", own.addr), format!("{}/p/podset:v2", own.addr));
    push(&policy_dir().join("podset.wasm"), &v1, &own.flags());
    push(&policy_dir().join("fixtures/canary.wasm"), &v2, &own.flags());
    let cache = tempfile::tempdir().expect("cache");
    let mut args = own.flags();
    args.extend(["--policy-cache-dir".to_string(), cache.path().display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = Env::with_args("roll-back", &policy_dir().join("podset.wasm"), &args).await;
    let apply = |image: &str, module: &str| {
        json!({ "apiVersion": "podset.dev/v1alpha1", "kind": "ReconcilePolicy", "metadata": { "name": "p" },
                "spec": { "image": image, "sha256": digest(module), "selector": {} } })
    };
    let pp = PatchParams::apply("rollout-tests").force();
    rps(&env).patch("p", &pp, &Patch::Apply(&apply(&v1, "podset.wasm"))).await.expect("apply");
    serving(&env, "p", 1, "podset.wasm").await;
    env.create("web", 2).await;
    env.converged_by("web", 2, Some(&digest("podset.wasm"))).await;
    rps(&env).patch("p", &pp, &Patch::Apply(&apply(&v2, "fixtures/canary.wasm"))).await.expect("apply");
    serving(&env, "p", 2, "fixtures/canary.wasm").await;
    env.scale("web", 3).await;
    env.converged_by("web", 3, Some(&digest("fixtures/canary.wasm"))).await;

    // Restarted, with the registry down, revision 1 comes back in one command.
    env.op.kill();
    own.stop();
    env.op.respawn();
    env.op.ready().await;
    let started = Instant::now();
    let (ok, out) =
        policy_cli(&["rollback".as_ref(), "p".as_ref(), "--to".as_ref(), "1".as_ref(), "-n".as_ref(), env.ns.as_ref()]);
    assert!(ok, "{out}");
    assert!(out.contains("revision 1 serves"), "{out}");
    println!("rolled back in {:.1?}:\n{out}", started.elapsed());
    let policy = serving(&env, "p", 1, "podset.wasm").await;
    let st = policy.status.expect("status");
    let two = st.revisions.iter().find(|r| r.revision == 2).expect("revision 2");
    assert_eq!(two.stop_reason.as_deref(), Some("RolledBack"));
    assert!(has_event(&env.ns, "p", "RolledBack"));
    assert_eq!(env.op.sum("podset_policy_rollbacks_total", &format!(r#"policy="{}/p""#, env.ns)).await, 1.0);
    env.scale("web", 1).await;
    env.converged_by("web", 1, Some(&digest("podset.wasm"))).await;
    let (ok, history) = policy_cli(&["history".as_ref(), "p".as_ref(), "-n".as_ref(), env.ns.as_ref()]);
    assert!(ok && history.lines().count() == 3 && history.contains("RolledBack"), "{history}");
    println!("{history}");
    env.cleanup().await;
}
