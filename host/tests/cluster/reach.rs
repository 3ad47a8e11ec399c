//! Children beyond a namespaced parent's namespace, as an administrator grants them:
//! a ReconcilePolicy in the namespace the operator's `--reach-namespace` names carries
//! `spec.reach` (here namespaces by label selector); the same field elsewhere is refused.
//! A child in another namespace carries the host's mark (an owner reference cannot point
//! there), a look-alike of it is never touched, and the host deletes the child when its
//! parent goes (the garbage collector would not).
//!
//! The operator is a shard serving the namespaces labelled for this test only: one of
//! every namespace would also decide the PodSets of the tests running beside this one.

use podset_test_support as common;

use std::time::Duration;

use common::{ATTACK, Operator, attackers, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use podset_host::crd::{NamespaceReach, PodSet, Reach, ReconcilePolicy};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

async fn label(client: &Client, namespace: &str, key: &str, value: &str) {
    let patch = json!({ "metadata": { "labels": { key: value } } });
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label the namespace");
}

/// A PodSet the fixture decides: a ConfigMap `NAME-cm` in namespace `to`.
fn podset(name: &str, to: &str) -> PodSet {
    let mut ps = common::podset(name, 1);
    ps.metadata.labels = Some(
        [(ATTACK.to_string(), "elsewhere".to_string()), ("fixture.podset.dev/to".to_string(), to.to_string())].into(),
    );
    ps
}

/// The host's `PolicyFailed` or `ReconcileFailed` condition on `name`: (reason, message).
async fn failure(podsets: &Api<PodSet>, name: &str, type_: &str) -> (String, String) {
    eventually(&format!("{name}: {type_}"), T, || async {
        let ps = podsets.get(name).await.ok()?;
        let c = ps.status?.conditions.into_iter().find(|c| c.type_ == type_ && c.status == "True")?;
        Some((c.reason, c.message))
    })
    .await
}

#[tokio::test]
async fn children_go_beyond_their_parents_namespace_only_where_the_administrator_grants_it() {
    let client = common::client().await;
    let id = format!("reach-{}", std::process::id());
    let admin = common::namespace(&client, "reach-admin").await;
    let target = common::namespace(&client, "reach-target").await;
    let tenant = common::namespace(&client, "reach-tenant").await;
    for served in [&admin, &tenant] {
        label(&client, served, "podset.dev/reach-test", &id).await;
    }
    label(&client, &target, "podset.dev/reach-target", &id).await;

    let policy = common::policy_dir().join("podset.wasm");
    let selector = format!("podset.dev/reach-test={id}");
    let op = Operator::spawn_shard(
        "reach",
        &selector,
        &[&policy],
        &common::kubeconfig_path(),
        &["--reach-namespace", &admin],
    );
    op.ready().await;

    // The administrator's namespace: spec.reach grants the namespaces labelled for this test.
    let fixture = common::read_policy("fixtures/generic-hostile.wasm");
    let reach = Reach {
        namespaces: NamespaceReach {
            selector: Some(LabelSelector {
                match_labels: Some([("podset.dev/reach-target".to_string(), id.clone())].into()),
                ..LabelSelector::default()
            }),
            ..NamespaceReach::default()
        },
        ..Reach::default()
    };
    common::publish_reaching(
        &client,
        &admin,
        "reaching",
        "reaching-module",
        &fixture,
        Some(attackers()),
        reach.clone(),
    )
    .await;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &admin);
    eventually("the policy to load", T, || async { rps.get("reaching").await.ok()?.status?.loaded_digest }).await;

    // A tenant's namespace: the same field is refused, with the reason on the policy.
    common::publish_reaching(&client, &tenant, "greedy", "greedy-module", &fixture, Some(attackers()), reach).await;
    let theirs: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &tenant);
    let (reason, message) = eventually("the tenant's reach refused", T, || async {
        let status = theirs.get("greedy").await.ok()?.status?;
        let c = status.conditions.into_iter().find(|c| c.type_ == "Failed" && c.status == "True")?;
        Some((c.reason, c.message))
    })
    .await;
    assert_eq!(reason, "ReachNotAllowed", "{message}");
    assert!(message.contains(&format!("--reach-namespace {admin}")), "{message}");

    // Granted: the ConfigMap lands in the target namespace, marked, with no owner
    // reference, and the parent holds the host's teardown finalizer.
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &admin);
    podsets.create(&PostParams::default(), &podset("mirror", &target)).await.expect("create");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &target);
    let cm =
        eventually("the ConfigMap in the granted namespace", T, || async { cms.get("mirror-cm").await.ok() }).await;
    let ps = podsets.get("mirror").await.expect("the PodSet");
    assert_eq!(cm.labels().get("podset.dev/parent-uid"), ps.metadata.uid.as_ref());
    let parent = format!("{} PodSet {admin}/mirror", common::objects::podsets().api_version);
    assert_eq!(cm.annotations().get("podset.dev/parent"), Some(&parent));
    assert_eq!(cm.metadata.owner_references, None);
    assert!(ps.finalizers().contains(&"podset.dev/teardown".to_string()), "{:?}", ps.finalizers());

    // `policy record` sees the child elsewhere, as the operator does: the recorded
    // decision (the apply of what already holds) passes as a scenario.
    let dir = tempfile::tempdir().expect("tempdir");
    let case = dir.path().join("mirror.yaml");
    let fixture_path = common::policy_dir().join("fixtures/generic-hostile.wasm");
    let object = format!("{admin}/mirror");
    let (ok, out) = common::policy_cli(&[
        "record".as_ref(),
        "podsets".as_ref(),
        object.as_ref(),
        "--policy".as_ref(),
        fixture_path.as_os_str(),
        "-o".as_ref(),
        case.as_os_str(),
    ]);
    assert!(ok, "{out}");
    let recorded = std::fs::read_to_string(&case).expect("the scenario");
    let input = recorded.split("\nexpect:").next().unwrap_or_default();
    let children = input.split("\n  children:").nth(1).unwrap_or_default();
    assert!(
        children.contains("name: mirror-cm") && children.contains(&format!("namespace: {target}")),
        "the child elsewhere is in the input:\n{recorded}"
    );
    let (ok, out) = common::policy_cli(&["test".as_ref(), fixture_path.as_os_str(), case.as_os_str()]);
    assert!(ok && out.contains("1 passed, 0 failed"), "{out}");

    // Not granted: the tenant's own namespace is not selected.
    podsets.create(&PostParams::default(), &podset("astray", &tenant)).await.expect("create");
    let (reason, message) = failure(&podsets, "astray", "PolicyFailed").await;
    assert_eq!(reason, "InvalidDecision", "{message}");
    assert!(message.contains(&format!("may not write in namespace \"{tenant}\"")), "{message}");
    assert!(message.contains(&format!("selected podset.dev/reach-target={id}")), "{message}");

    // A look-alike the host did not make is never taken over.
    let look_alike: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "copycat-cm" }, "data": { "mine": "yes" } }))
            .expect("a ConfigMap");
    cms.create(&PostParams::default(), &look_alike).await.expect("the look-alike");
    podsets.create(&PostParams::default(), &podset("copycat", &target)).await.expect("create");
    let (reason, message) = failure(&podsets, "copycat", "ReconcileFailed").await;
    assert!(message.contains("already exists"), "{reason}: {message}");
    let untouched = cms.get("copycat-cm").await.expect("still there");
    assert_eq!(untouched.data, look_alike.data);
    assert!(!untouched.labels().contains_key("podset.dev/parent-uid"));

    // Deleted: the host deletes the child the garbage collector cannot reach.
    podsets.delete("mirror", &DeleteParams::default()).await.expect("delete");
    eventually("the PodSet and its ConfigMap elsewhere gone", T, || async {
        let gone = podsets.get_opt("mirror").await.ok()?.is_none() && cms.get_opt("mirror-cm").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    for name in ["astray", "copycat"] {
        podsets.delete(name, &DeleteParams::default()).await.expect("delete");
    }
    eventually("the other PodSets gone", T, || async {
        podsets.list(&Default::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await;
    assert!(cms.get_opt("copycat-cm").await.expect("get").is_some(), "the look-alike stays");

    drop(op);
    for ns in [&admin, &target, &tenant] {
        common::delete_namespace(&client, ns).await;
    }
}
