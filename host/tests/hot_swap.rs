//! Swapping policies in a running operator: the default policy's file, and
//! ReconcilePolicies backed by ConfigMaps. Against the real test control plane.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Operator, active_pods, eventually};
use futures::future::join_all;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use podset_host::crd::{ConfigMapKeyRef, PodSet, PolicyRef, ReconcilePolicy, ReconcilePolicySpec};
use podset_host::policy::Digest;

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

async fn scale(podsets: &Api<PodSet>, name: &str, replicas: i32) {
    let patch = serde_json::json!({ "spec": { "replicas": replicas } });
    podsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
}

async fn converged(podsets: &Api<PodSet>, pods: &Api<Pod>, name: &str, n: usize, digest: &str) -> Vec<String> {
    eventually(&format!("{name} to converge on {n} pods decided by {digest}"), T, || async {
        let names = active_pods(pods, name).await;
        let st = podsets.get(name).await.ok()?.status?;
        (names.len() == n && st.available_replicas == n as i32 && st.policy_digest.as_deref() == Some(digest))
            .then_some(names)
    })
    .await
}

#[tokio::test]
async fn swapping_the_policy_file_redecides_every_podset_and_a_broken_file_changes_nothing() {
    let client = common::client().await;
    let ns = common::namespace(&client, "fileswap").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("policy.wasm");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    std::fs::write(&file, &good).expect("policy file");
    let op = Operator::start(&ns, &file).await;
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

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
    eventually("all PodSets converged on the first policy", T, || async {
        let all = podsets.list(&Default::default()).await.ok()?;
        let done = all.items.iter().filter(|p| {
            p.status.as_ref().is_some_and(|s| s.available_replicas == 1 && s.policy_digest.as_deref() == Some(&d_good))
        });
        (done.count() == N).then_some(())
    })
    .await;

    // Swap in the variant: every PodSet is re-decided by it, quickly, without failures.
    let started = Instant::now();
    replace_atomically(&file, &canary);
    eventually("every PodSet to report the new digest", T, || async {
        let all = podsets.list(&Default::default()).await.ok()?;
        let swapped = all.items.iter().filter(|p| {
            p.status.as_ref().is_some_and(|s| s.policy_digest.as_deref() == Some(&d_canary))
                && condition(p, "Available").is_some_and(|c| c.message.ends_with("(canary policy)"))
        });
        (swapped.count() == N).then_some(())
    })
    .await;
    let took = started.elapsed();
    println!("{N} PodSets re-decided by the new policy {took:?} after the file was replaced");
    assert_eq!(op.sum("podset_reconcile_failures_total", "").await, 0.0, "no reconcile failed during the swap");
    // The new behaviour is visible on new pods.
    scale(&podsets, &names[0], 2).await;
    let now = converged(&podsets, &pods, &names[0], 2, &d_canary).await;
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
    scale(&podsets, &names[1], 3).await;
    converged(&podsets, &pods, &names[1], 3, &d_canary).await;
    assert_eq!(op.sum("podset_reconcile_failures_total", "").await, 0.0);
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(log.contains("policy update rejected"), "the refusal is logged");
    common::delete_namespace(&client, &ns).await;
}

struct Cluster {
    client: kube::Client,
    ns: String,
    podsets: Api<PodSet>,
    pods: Api<Pod>,
    rps: Api<ReconcilePolicy>,
    cms: Api<ConfigMap>,
    op: Operator,
}

impl Cluster {
    async fn new(prefix: &str) -> Cluster {
        let client = common::client().await;
        let ns = common::namespace(&client, prefix).await;
        let op = Operator::start(&ns, &common::policy_dir().join("podset.wasm")).await;
        Cluster {
            podsets: Api::namespaced(client.clone(), &ns),
            pods: Api::namespaced(client.clone(), &ns),
            rps: Api::namespaced(client.clone(), &ns),
            cms: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            op,
        }
    }

    /// Publishes `module` as ConfigMap `cm` key `module.wasm` and points ReconcilePolicy
    /// `rp` at it (creating or updating both).
    async fn publish(&self, rp: &str, cm: &str, module: &[u8]) {
        let map = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(cm.into()), ..Default::default() },
            binary_data: Some(BTreeMap::from([("module.wasm".to_string(), ByteString(module.to_vec()))])),
            ..Default::default()
        };
        let pp = PatchParams::apply("hot-swap-test").force();
        self.cms.patch(cm, &pp, &Patch::Apply(&map)).await.expect("apply ConfigMap");
        let mut policy = ReconcilePolicy::new(
            rp,
            ReconcilePolicySpec {
                config_map_ref: ConfigMapKeyRef { name: cm.into(), key: "module.wasm".into() },
                sha256: digest(module),
            },
        );
        policy.metadata.namespace = Some(self.ns.clone());
        self.rps.patch(rp, &pp, &Patch::Apply(&policy)).await.expect("apply ReconcilePolicy");
    }

    async fn create(&self, name: &str, replicas: i32, policy: Option<&str>) {
        let mut ps = common::podset(name, replicas);
        ps.spec.policy_ref = policy.map(|p| PolicyRef { name: p.into() });
        self.podsets.create(&PostParams::default(), &ps).await.expect("create PodSet");
    }

    async fn policy_failed(&self, name: &str, reason: &str) {
        let what = format!("{name} to report PolicyFailed/{reason} (log: {})", self.op.log.display());
        eventually(&what, T, || async {
            let ps = self.podsets.get(name).await.ok()?;
            condition(&ps, "PolicyFailed").filter(|c| c.status == "True" && c.reason == reason).map(|_| ())
        })
        .await;
    }

    async fn cleanup(self) {
        common::delete_namespace(&self.client, &self.ns).await;
    }
}

#[tokio::test]
async fn reconcile_policies_swap_through_configmaps_side_by_side_with_the_default() {
    let c = Cluster::new("rpswap").await;
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    c.publish("team", "team-module", &good).await;
    c.create("plain", 2, None).await;
    c.create("teamed", 2, Some("team")).await;
    converged(&c.podsets, &c.pods, "plain", 2, &digest(&good)).await;
    converged(&c.podsets, &c.pods, "teamed", 2, &digest(&good)).await;
    let rp = c.rps.get("team").await.expect("ReconcilePolicy");
    let st = rp.status.expect("ReconcilePolicy status");
    assert_eq!(st.loaded_digest.as_deref(), Some(digest(&good).as_str()));
    assert!(st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));

    // Swap the team's module through its ConfigMap: only "teamed" moves.
    let started = Instant::now();
    c.publish("team", "team-module", &canary).await;
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
    let names = converged(&c.podsets, &c.pods, "teamed", 3, &digest(&canary)).await;
    let variant = join_all(names.iter().map(|n| c.pods.get(n))).await.into_iter().filter(|p| {
        p.as_ref()
            .ok()
            .and_then(|p| p.metadata.labels.clone())
            .is_some_and(|l| l.contains_key("app.example.com/policy-variant"))
    });
    assert_eq!(variant.count(), 1, "the new pod comes from the canary policy");

    // A broken module and a digest mismatch are refused; the last good keeps serving.
    c.publish("team", "team-module", &common::read_policy("fixtures/not-wasm.wasm")).await;
    eventually("the ReconcilePolicy to report the refusal", T, || async {
        let st = c.rps.get("team").await.ok()?.status?;
        let failed = st.conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True" && c.reason == "NotWasm");
        let ready = st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        (failed && ready && st.loaded_digest == Some(digest(&canary))).then_some(())
    })
    .await;
    let pin = serde_json::json!({ "spec": { "sha256": digest(&good) } });
    c.rps.patch("team", &PatchParams::default(), &Patch::Merge(&pin)).await.expect("repin");
    eventually("a digest mismatch to be refused", T, || async {
        let st = c.rps.get("team").await.ok()?.status?;
        st.conditions.iter().any(|c| c.type_ == "Failed" && c.reason == "DigestMismatch").then_some(())
    })
    .await;
    c.podsets
        .patch("teamed", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":1}})))
        .await
        .expect("scale");
    converged(&c.podsets, &c.pods, "teamed", 1, &digest(&canary)).await;
    assert_eq!(c.op.sum("podset_reconcile_failures_total", "").await, 0.0);
    c.cleanup().await;
}

#[tokio::test]
async fn a_hostile_or_missing_policy_leaves_its_pods_alone_while_others_converge() {
    let c = Cluster::new("hostile").await;
    let good = common::read_policy("podset.wasm");
    c.publish("team", "team-module", &good).await;
    c.create("victim", 2, Some("team")).await;
    c.create("bystander", 1, None).await;
    let before = converged(&c.podsets, &c.pods, "victim", 2, &digest(&good)).await;
    converged(&c.podsets, &c.pods, "bystander", 1, &digest(&good)).await;

    // The team's policy becomes an infinite loop: contained, reported, pods untouched.
    c.publish("team", "team-module", &common::read_policy("fixtures/infinite-loop.wasm")).await;
    c.policy_failed("victim", "DeadlineExceeded").await;
    c.podsets
        .patch("victim", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":4}})))
        .await
        .expect("scale");
    // Meanwhile the same operator keeps serving the other PodSet.
    c.podsets
        .patch("bystander", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec":{"replicas":3}})))
        .await
        .expect("scale");
    converged(&c.podsets, &c.pods, "bystander", 3, &digest(&good)).await;
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
    c.publish("team", "team-module", &good).await;
    converged(&c.podsets, &c.pods, "victim", 4, &digest(&good)).await;
    eventually("PolicyFailed to clear", T, || async {
        let ps = c.podsets.get("victim").await.ok()?;
        condition(&ps, "PolicyFailed").is_none().then_some(())
    })
    .await;

    // The ReconcilePolicy is deleted: reported on the PodSet, pods left alone.
    let pods_now = active_pods(&c.pods, "victim").await;
    c.rps.delete("team", &DeleteParams::default()).await.expect("delete ReconcilePolicy");
    c.policy_failed("victim", "PolicyUnavailable").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(active_pods(&c.pods, "victim").await, pods_now);
    c.cleanup().await;
}
