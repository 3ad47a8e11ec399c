//! Shadow policies against the real test control plane: a ReconcilePolicy in Shadow
//! mode (and `run --shadow FILE`) decides beside the live policy, is compared, and never
//! acts. The Memcached and Netperf walkthroughs run a shadow too (memcached.rs, netperf.rs).

use podset_test_support as common;

use std::time::Duration;

use common::audit::{AuditLog, operator_pod_writes};
use common::{Env, eventually, kubectl, policy_loaded, policy_observed, publish_shadow, read_policy, shadow_settled};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ListParams, PostParams};
use podset_host::crd::ShadowStatus;

const T: Duration = Duration::from_secs(60);
const VARIANT: &str = "app.example.com/policy-variant";

async fn loaded(env: &Env, rp: &str) {
    policy_loaded(&env.client, &env.ns, rp, &env.op).await;
}

async fn settled(env: &Env, rp: &str) -> ShadowStatus {
    shadow_settled(&env.client, &env.ns, rp, &env.op).await
}

/// The walkthrough (docs/how-to/roll-out-a-policy-change.md): create 2, scale to 4, scale to 1.
async fn walkthrough(env: &Env, name: &str) {
    env.create(name, 2).await;
    env.converged(name, 2).await;
    env.scale(name, 4).await;
    env.converged(name, 4).await;
    env.scale(name, 1).await;
    env.converged(name, 1).await;
}

/// `kubectl patch reconcilepolicy NAME --type=KIND -p PATCH` in the test's namespace.
fn patch_policy(env: &Env, name: &str, kind: &str, patch: &str) -> (bool, String) {
    kubectl(&["patch", "reconcilepolicy", name, "-n", &env.ns, &format!("--type={kind}"), "-p", patch])
}

async fn observed(env: &Env, rp: &str) {
    policy_observed(&env.client, &env.ns, rp, &env.op).await;
}

async fn variant_pods(env: &Env) -> usize {
    let pods = env.pods.list(&ListParams::default()).await.expect("list pods");
    pods.items.iter().filter(|p| p.metadata.labels.as_ref().is_some_and(|l| l.contains_key(VARIANT))).count()
}

#[tokio::test]
async fn a_shadow_of_the_serving_module_agrees_on_every_decision() {
    let env = Env::new("shsame").await;
    publish_shadow(&env.client, &env.ns, "candidate", "candidate-module", &read_policy("podset.wasm"), None).await;
    loaded(&env, "candidate").await;
    walkthrough(&env, "web").await;
    let st = settled(&env, "candidate").await;
    assert_eq!((st.agreed, st.differed, st.failed, st.dropped), (st.decisions, 0, 0, 0), "{st:#?}");
    assert!(st.decisions >= 3, "a shadow decision per step at least: {st:#?}");
    let digest = podset_host::sandbox::Digest::of(&read_policy("podset.wasm")).to_string();
    assert_eq!(st.digest, digest);
    let (ok, table) = kubectl(&["get", "reconcilepolicies", "-n", &env.ns]);
    assert!(ok, "{table}");
    let header = table.lines().next().unwrap_or_default();
    for column in ["MODE", "AGREED", "DIFFERED", "DIGEST", "READY"] {
        assert!(header.contains(column), "kubectl get reconcilepolicies shows {column}:\n{table}");
    }
    assert!(table.contains("Shadow") && table.contains(&st.agreed.to_string()), "{table}");
    println!("{table}");
    env.cleanup().await;
}

#[tokio::test]
async fn a_different_shadow_is_reported_and_never_acts() {
    // The same walkthrough without a shadow and with one: the operator's writes to
    // pods, read from the API server's audit log, are the same.
    let audit = AuditLog::open();
    let plain = Env::new("shnone").await;
    let mark = audit.mark();
    walkthrough(&plain, "web").await;
    let without = audit.since(&mark);

    let env = Env::new("shdiff").await;
    publish_shadow(&env.client, &env.ns, "variant", "variant-module", &read_policy("fixtures/canary.wasm"), None).await;
    loaded(&env, "variant").await;
    let mark = audit.mark();
    walkthrough(&env, "web").await;
    let st = settled(&env, "variant").await;
    let with = audit.since(&mark);

    assert!(st.differed > 0 && st.failed == 0, "{st:#?}");
    assert_eq!(st.decisions, st.agreed + st.differed);
    assert_eq!(st.first_divergences + st.persistent_divergences, st.differed);
    let last = st.last_differences.last().expect("a difference is kept");
    assert_eq!(last.object, format!("PodSet {}/web", env.ns));
    assert!(last.diff.contains("--- live") && last.diff.contains("+++ shadow"), "{}", last.diff);
    // The canary labels its pods and says so in its condition: the diffs show which.
    assert!(
        st.last_differences.iter().all(|d| d.diff.contains(VARIANT) || d.diff.contains("(canary policy)")),
        "{:#?}",
        st.last_differences
    );
    assert_eq!(variant_pods(&env).await, 0, "no pod of the shadow's was created");
    for verb in ["create", "delete"] {
        assert_eq!(
            operator_pod_writes(&with, &env.ns, verb),
            operator_pod_writes(&without, &plain.ns, verb),
            "pod {verb}s with a shadow are those without"
        );
    }
    assert_eq!(operator_pod_writes(&with, &env.ns, "create"), 4, "2 pods, then 2 more");
    // Reported on the ReconcilePolicy: an Event.
    let (ok, events) =
        kubectl(&["get", "events", "-n", &env.ns, "--field-selector", "reason=ShadowDiffers", "-o", "name"]);
    assert!(ok && !events.trim().is_empty(), "a ShadowDiffers Event: {events}");
    println!("shadow status: {st:#?}");
    plain.cleanup().await;
    env.cleanup().await;
}

#[tokio::test]
async fn hostile_shadows_leave_live_convergence_intact() {
    let env = Env::new("shhostile").await;
    let hostile = ["infinite-loop", "memory-bomb", "panic"];
    for h in hostile {
        let module = read_policy(&format!("fixtures/{h}.wasm"));
        publish_shadow(&env.client, &env.ns, h, &format!("{h}-module"), &module, None).await;
    }
    for h in hostile {
        loaded(&env, h).await;
    }
    walkthrough(&env, "web").await;
    for h in hostile {
        let st = settled(&env, h).await;
        assert_eq!(st.agreed + st.differed, 0, "{h} never decides: {st:#?}");
        assert!(st.failed > 0, "{h} is counted as failed: {st:#?}");
    }
    let ps = env.podsets.get("web").await.expect("PodSet");
    let conditions = ps.status.map(|s| s.conditions).unwrap_or_default();
    assert!(
        !conditions.iter().any(|c| c.type_ == "PolicyFailed" && c.status == "True"),
        "the live policy never failed: {conditions:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn a_shadow_decision_the_servers_schema_refuses_fails_and_never_acts() {
    // A shadow's decisions are checked against the API server's own documents of the kinds
    // it declares (here apps/v1, read from the server). The hostile fixture decides a
    // Deployment with a misspelled field for a parent labelled so.
    let env = Env::new("shschema").await;
    let module = read_policy("fixtures/generic-hostile.wasm");
    publish_shadow(&env.client, &env.ns, "misspelled", "misspelled-module", &module, None).await;
    loaded(&env, "misspelled").await;
    let mut ps = common::podset("web", 2);
    ps.metadata.labels = Some([("fixture.podset.dev/attack".to_string(), "misspelled-field".to_string())].into());
    env.podsets.create(&PostParams::default(), &ps).await.expect("create PodSet");
    env.converged("web", 2).await;
    let st = settled(&env, "misspelled").await;
    assert!(st.failed > 0 && st.agreed + st.differed == 0, "every decision refused: {st:#?}");
    let failure = st.last_failures.last().expect("a failure is kept");
    assert_eq!(failure.object, format!("PodSet {}/web", env.ns));
    assert!(
        failure.reason.starts_with("SchemaViolation")
            && failure.reason.contains("create apps/v1 Deployment web")
            && failure.reason.contains("spec.replicass: unknown field"),
        "{failure:#?}"
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.ns);
    let made = deployments.list(&ListParams::default()).await.expect("list Deployments");
    assert!(made.items.is_empty(), "the shadow wrote nothing: {:?}", made.items);
    env.cleanup().await;
}

#[tokio::test]
async fn a_shadow_file_is_compared_cluster_wide_and_never_acts() {
    let canary = common::policy_dir().join("fixtures/canary.wasm");
    let env =
        Env::with_args("shfile", &common::policy_dir().join("podset.wasm"), &["--shadow", &canary.to_string_lossy()])
            .await;
    walkthrough(&env, "web").await;
    let label = format!(r#"policy="{}""#, canary.display());
    let differ = eventually("the --shadow file's differences to be counted", T, || async {
        let n = env.op.sum("podset_shadow_decisions_total", &format!(r#"{label},outcome="differ""#)).await;
        (n > 0.0).then_some(n)
    })
    .await;
    assert_eq!(variant_pods(&env).await, 0, "no pod of the shadow's was created");
    let failed = env.op.sum("podset_shadow_decisions_total", &format!(r#"{label},outcome="failed""#)).await;
    assert_eq!(failed, 0.0);
    let timed = env.op.sum("podset_shadow_decision_duration_seconds_count", &label).await;
    assert!(timed >= differ, "every shadow decision is timed");
    let log = std::fs::read_to_string(&env.op.log).expect("operator log");
    assert!(log.contains("shadow differs from the live policy"), "the difference is logged");
    env.cleanup().await;
}

#[tokio::test]
async fn a_policy_is_promoted_from_shadow_to_canary_to_everyone_and_never_demoted() {
    let env = Env::new("shpromote").await;
    env.create("stable", 1).await;
    let mut canary_ps = common::podset("trial", 1);
    canary_ps.metadata.labels = Some([("track".to_string(), "canary".to_string())].into());
    env.podsets.create(&Default::default(), &canary_ps).await.expect("create PodSet");
    env.converged("stable", 1).await;
    env.converged("trial", 1).await;

    // 1. Shadow: decides beside the live policy for the canary track, acts on nothing.
    let module = read_policy("fixtures/canary.wasm");
    let selector = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("track".to_string(), "canary".to_string())].into()),
        ..Default::default()
    };
    publish_shadow(&env.client, &env.ns, "next", "next-module", &module, Some(selector)).await;
    loaded(&env, "next").await;
    env.scale("trial", 2).await;
    env.converged("trial", 2).await;
    let st = settled(&env, "next").await;
    assert!(st.differed > 0, "{st:#?}");
    assert_eq!(variant_pods(&env).await, 0);

    // Demoting a live policy is refused by the API server; promoting is a patch.
    let (ok, out) = patch_policy(&env, "next", "merge", r#"{"spec":{"mode":"Enforce"}}"#);
    assert!(ok, "{out}");
    observed(&env, "next").await;
    let (ok, out) = patch_policy(&env, "next", "merge", r#"{"spec":{"mode":"Shadow"}}"#);
    assert!(!ok && out.contains("cannot change from Enforce to Shadow"), "{out}");

    // 2. Canary: the canary track's PodSets are decided by it now, the others are not.
    env.scale("trial", 3).await;
    eventually("the canary track to get the new policy's pod", T, || async {
        (variant_pods(&env).await == 1).then_some(())
    })
    .await;
    env.converged("trial", 3).await;
    env.scale("stable", 2).await;
    env.converged("stable", 2).await;
    assert_eq!(variant_pods(&env).await, 1, "the stable track stays with the default policy");

    // 3. Everyone in the namespace: an empty selector (a JSON patch: a merge patch of
    // `{}` would leave the old selector as it is).
    let everyone = r#"[{"op":"replace","path":"/spec/selector","value":{}}]"#;
    let (ok, out) = patch_policy(&env, "next", "json", everyone);
    assert!(ok, "{out}");
    observed(&env, "next").await;
    env.scale("stable", 3).await;
    eventually("the stable track to get the new policy's pod", T, || async {
        (variant_pods(&env).await == 2).then_some(())
    })
    .await;
    env.converged("stable", 3).await;
    env.cleanup().await;
}
