//! Swapping policies in a running operator: the default policy's file, and
//! ReconcilePolicies backed by ConfigMaps. Against the real test control plane.

use podset_test_support as common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Env, active_pods, eventually};
use futures::future::join_all;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use podset_host::crd::{PodSet, ReconcilePolicy};
use podset_host::sandbox::Digest;

const T: Duration = Duration::from_secs(60);

fn digest(bytes: &[u8]) -> String {
    Digest::of(bytes).to_string()
}

/// Replaces `path` the way a build or a ConfigMap volume does: write aside, rename over.
fn replace_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

async fn status_digest(podsets: &Api<PodSet>, name: &str) -> Option<String> {
    podsets.get(name).await.ok()?.status?.policy_digest
}

fn condition<'a>(ps: &'a PodSet, type_: &str) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    ps.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

#[tokio::test]
async fn swapping_the_policy_file_redecides_every_podset_and_a_broken_file_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("policy.wasm");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    std::fs::write(&file, &good).expect("policy file");
    let env = Env::with_policy("fileswap", &file).await;
    let (podsets, pods, op) = (&env.podsets, &env.pods, &env.op);

    const N: usize = 50;
    let names: Vec<String> = (0..N).map(|i| format!("ps-{i:02}")).collect();
    for r in join_all(names.iter().map(|n| {
        let podsets = podsets.clone();
        let ps = common::podset(n, 1);
        async move { podsets.create(&PostParams::default(), &ps).await }
    }))
    .await
    {
        r.expect("create PodSet");
    }
    let (d_good, d_canary) = (digest(&good), digest(&canary));
    eventually("all PodSets converged on the first policy", T, || common::all_decided_by(podsets, N, &d_good, 1)).await;

    // Swap in the variant: every PodSet is re-decided by it, quickly, without failures.
    let started = Instant::now();
    replace_atomically(&file, &canary);
    eventually("every PodSet to report the new digest", T, || async {
        let all = podsets.list(&Default::default()).await.ok()?;
        let swapped = all.items.iter().filter(|p| {
            common::decided_by(*p, &d_canary)
                && condition(p, "Available").is_some_and(|c| c.message.ends_with("(canary policy)"))
        });
        (swapped.count() == N).then_some(())
    })
    .await;
    let took = started.elapsed();
    println!("{N} PodSets re-decided by the new policy {took:?} after the file was replaced");
    assert_eq!(op.sum("podset_reconcile_failures_total", "").await, 0.0, "no reconcile failed during the swap");
    // The new behaviour is visible on new pods.
    env.scale(&names[0], 2).await;
    let now = env.converged_by(&names[0], 2, Some(&d_canary)).await;
    let labelled = join_all(now.iter().map(|n| pods.get(n))).await.into_iter().filter(|p| {
        p.as_ref()
            .ok()
            .and_then(|p| p.metadata.labels.as_ref())
            .is_some_and(|l| l.get("app.example.com/policy-variant").map(String::as_str) == Some("canary"))
    });
    assert_eq!(labelled.count(), 1, "the pod created after the swap carries the variant's label");

    // A broken module, written in place: refused, reported, and the last good keeps serving.
    std::fs::write(&file, b"\0asm this is not a module").expect("write broken");
    eventually("the broken module to be refused", T, || async {
        (op.sum("podset_policy_loads_total", r#"result="rejected""#).await >= 1.0).then_some(())
    })
    .await;
    env.scale(&names[1], 3).await;
    env.converged_by(&names[1], 3, Some(&d_canary)).await;
    assert_eq!(op.sum("podset_reconcile_failures_total", "").await, 0.0);
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(log.contains("policy update rejected"), "the refusal is logged");
    env.cleanup().await;
}

/// Lays out `dir` as the kubelet does a ConfigMap volume: `podset.wasm` links to
/// `..data/podset.wasm`, and `..data` links to a timestamped directory. An update
/// writes a new directory and renames a fresh `..data` link over the old one.
fn kubelet_configmap_update(dir: &Path, generation: u32, module: &[u8]) {
    let versioned = dir.join(format!("..2026_11_22_{generation:04}"));
    std::fs::create_dir(&versioned).expect("versioned dir");
    std::fs::write(versioned.join("podset.wasm"), module).expect("module");
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(versioned.file_name().expect("name"), &tmp).expect("symlink");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
    let link = dir.join("podset.wasm");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/podset.wasm", &link).expect("file symlink");
    }
}

#[tokio::test]
async fn a_configmap_volume_update_swaps_the_default_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    kubelet_configmap_update(dir.path(), 1, &good);
    let env = Env::with_policy("cmvolume", &dir.path().join("podset.wasm")).await;
    env.create("web", 1).await;
    env.converged_by("web", 1, Some(&digest(&good))).await;
    kubelet_configmap_update(dir.path(), 2, &canary);
    eventually("the PodSet to be decided by the updated volume's module", T, || async {
        (status_digest(&env.podsets, "web").await? == digest(&canary)).then_some(())
    })
    .await;
    env.cleanup().await;
}

/// Publishes `module` as ReconcilePolicy `rp`, backed by ConfigMap `cm`.
async fn publish(env: &Env, rp: &str, cm: &str, module: &[u8]) {
    common::publish_policy(&env.client, &env.ns, rp, cm, module, None).await;
}

fn rps(env: &Env) -> Api<ReconcilePolicy> {
    Api::namespaced(env.client.clone(), &env.ns)
}

async fn policy_failed(env: &Env, name: &str, reason: &str) {
    let what = format!("{name} to report PolicyFailed/{reason} (log: {})", env.op.log.display());
    eventually(&what, T, || async {
        let ps = env.podsets.get(name).await.ok()?;
        condition(&ps, "PolicyFailed").filter(|c| c.status == "True" && c.reason == reason).map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn reconcile_policies_swap_through_configmaps_side_by_side_with_the_default() {
    let c = Env::new("rpswap").await;
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    publish(&c, "team", "team-module", &good).await;
    // Loaded before its PodSet exists: a PodSet decided before its ReconcilePolicy is
    // loaded fails (NoPolicy) and is retried, which would count as a reconcile failure.
    common::policy_loaded(&c.client, &c.ns, "team", &c.op).await;
    c.create("plain", 2).await;
    c.create_with("teamed", 2, Some("team")).await;
    c.converged_by("plain", 2, Some(&digest(&good))).await;
    c.converged_by("teamed", 2, Some(&digest(&good))).await;
    let rp = rps(&c).get("team").await.expect("ReconcilePolicy");
    let st = rp.status.expect("ReconcilePolicy status");
    assert_eq!(st.loaded_digest.as_deref(), Some(digest(&good).as_str()));
    assert!(st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));

    // Swap the team's module through its ConfigMap: only "teamed" moves.
    let started = Instant::now();
    publish(&c, "team", "team-module", &canary).await;
    eventually("teamed to report the canary digest", T, || async {
        (status_digest(&c.podsets, "teamed").await? == digest(&canary)).then_some(())
    })
    .await;
    println!("ReconcilePolicy swap reached its PodSet in {:?}", started.elapsed());
    assert_eq!(
        status_digest(&c.podsets, "plain").await,
        Some(digest(&good)),
        "the default policy's PodSet is untouched"
    );
    c.podsets
        .patch("teamed", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":3}})))
        .await
        .expect("scale");
    let names = c.converged_by("teamed", 3, Some(&digest(&canary))).await;
    let variant = join_all(names.iter().map(|n| c.pods.get(n))).await.into_iter().filter(|p| {
        p.as_ref()
            .ok()
            .and_then(|p| p.metadata.labels.clone())
            .is_some_and(|l| l.contains_key("app.example.com/policy-variant"))
    });
    assert_eq!(variant.count(), 1, "the new pod comes from the canary policy");

    // A broken module and a digest mismatch are refused; the last good keeps serving.
    publish(&c, "team", "team-module", &common::read_policy("fixtures/not-wasm.wasm")).await;
    eventually("the ReconcilePolicy to report the refusal", T, || async {
        let st = rps(&c).get("team").await.ok()?.status?;
        let failed = st.conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True" && c.reason == "NotWasm");
        let ready = st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        (failed && ready && st.loaded_digest == Some(digest(&canary))).then_some(())
    })
    .await;
    // A pin the ConfigMap does not hold, of a module that never served this policy (one
    // that did would come from the operator's revision store: a rollback).
    let never = digest(&common::read_policy("fixtures/panic.wasm"));
    let pin = serde_json::json!({ "spec": { "sha256": never } });
    rps(&c).patch("team", &PatchParams::default(), &Patch::Merge(&pin)).await.expect("repin");
    eventually("a digest mismatch to be refused", T, || async {
        let st = rps(&c).get("team").await.ok()?.status?;
        st.conditions.iter().any(|c| c.type_ == "Failed" && c.reason == "DigestMismatch").then_some(())
    })
    .await;
    c.podsets
        .patch("teamed", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":1}})))
        .await
        .expect("scale");
    c.converged_by("teamed", 1, Some(&digest(&canary))).await;
    assert_eq!(c.op.sum("podset_reconcile_failures_total", "").await, 0.0);
    c.cleanup().await;
}

#[tokio::test]
async fn a_hostile_or_missing_policy_leaves_its_pods_alone_while_others_converge() {
    let c = Env::new("hostile").await;
    let good = common::read_policy("podset.wasm");
    publish(&c, "team", "team-module", &good).await;
    c.create_with("victim", 2, Some("team")).await;
    c.create("bystander", 1).await;
    let before = c.converged_by("victim", 2, Some(&digest(&good))).await;
    c.converged_by("bystander", 1, Some(&digest(&good))).await;

    // The team's policy becomes an infinite loop: contained, reported, pods untouched.
    publish(&c, "team", "team-module", &common::read_policy("fixtures/infinite-loop.wasm")).await;
    policy_failed(&c, "victim", "DeadlineExceeded").await;
    c.podsets
        .patch("victim", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":4}})))
        .await
        .expect("scale");
    // Meanwhile the same operator keeps serving the other PodSet.
    c.podsets
        .patch("bystander", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":3}})))
        .await
        .expect("scale");
    c.converged_by("bystander", 3, Some(&digest(&good))).await;
    assert_eq!(active_pods(&c.pods, "victim").await, before, "the failing policy's PodSet kept exactly its pods");
    let events = kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(c.client.clone(), &c.ns)
        .list(&Default::default())
        .await
        .expect("events");
    assert!(
        events.items.iter().any(|e| e.reason.as_deref() == Some("PolicyFailed")),
        "a PolicyFailed Event was published"
    );
    assert!(c.op.sum("podset_policy_failures_total", r#"reason="DeadlineExceeded""#).await >= 1.0);

    // Fixed: the PodSet converges and the condition clears.
    publish(&c, "team", "team-module", &good).await;
    c.converged_by("victim", 4, Some(&digest(&good))).await;
    eventually("PolicyFailed to clear", T, || async {
        let ps = c.podsets.get("victim").await.ok()?;
        condition(&ps, "PolicyFailed").is_none().then_some(())
    })
    .await;

    // The ReconcilePolicy is deleted: reported on the PodSet, pods left alone.
    let pods_now = active_pods(&c.pods, "victim").await;
    rps(&c).delete("team", &DeleteParams::default()).await.expect("delete ReconcilePolicy");
    policy_failed(&c, "victim", "PolicyUnavailable").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(active_pods(&c.pods, "victim").await, pods_now);
    c.cleanup().await;
}
