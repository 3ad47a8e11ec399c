//! Policies acting as a service account of their namespace, as a platform team sets
//! them up: each tenant namespace has its own accounts and Roles, a ReconcilePolicy
//! names the account it acts as (or the operator's `--default-service-account` does),
//! and the API server's RBAC decides what its writes may do, against the real API
//! server's authorizer and impersonation.

use podset_test_support as common;

use std::time::Duration;

use common::{Operator, eventually, memcacheds};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, Patch, PatchParams, PostParams};
use podset_host::crd::ReconcilePolicy;
use serde_json::json;

const T: Duration = Duration::from_secs(90);

/// What the Memcached policy's writes need: its Deployments; and the pods it reads.
fn memcached_rules() -> Vec<PolicyRule> {
    vec![
        rule("apps", "deployments", &["get", "list", "watch", "create", "patch", "delete"]),
        rule("", "pods", &["get", "list"]),
    ]
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// Service account `name` of `ns`, bound to a Role of `rules`.
async fn account(client: &kube::Client, ns: &str, name: &str, rules: Vec<PolicyRule>) {
    let pp = PatchParams::apply("podset-tests").force();
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), ns).patch(name, &pp, &Patch::Apply(&sa)).await.expect("account");
    role(client, ns, name, rules).await;
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "Role".into(), name: name.into() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(ns.into()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .patch(name, &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
}

async fn role(client: &kube::Client, ns: &str, name: &str, rules: Vec<PolicyRule>) {
    let pp = PatchParams::apply("podset-tests").force();
    let role =
        Role { metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() }, rules: Some(rules) };
    Api::<Role>::namespaced(client.clone(), ns).patch(name, &pp, &Patch::Apply(&role)).await.expect("role");
}

/// An empty selector: the policy decides every Memcached of its namespace.
fn every() -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> {
    Some(Default::default())
}

/// Why the ReconcilePolicy's module was refused, while it is (its `Failed` condition):
/// (reason, message).
async fn refused(client: &kube::Client, ns: &str, rp: &str) -> Option<(String, String)> {
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let c = rps.get(rp).await.ok()?.status?.conditions.into_iter().find(|c| c.type_ == "Failed")?;
    (c.status == "True").then_some((c.reason, c.message))
}

/// A tenant namespace whose account may write ConfigMaps only: the Memcached policy
/// acting as it is refused when it loads, naming the account and what it lacks; with a
/// wider account it serves, its Deployment written as that account (the audit log
/// says so). Nine more tenant namespaces, each acting as its own account, add no watch:
/// the caches stay one per kind (the operator's RSS is printed). The wider account's Role
/// then loses Deployments: the next write is refused by the API server and the Memcached
/// says why.
#[tokio::test]
async fn a_policy_acts_as_its_service_account_and_only_may_what_it_may() {
    let client = common::client().await;
    let shard = format!("acting-{}", std::process::id());
    let label = [("podset.dev/test-shard", shard.as_str())];
    let a = common::namespace_labelled(&client, "tenant-a", &label).await;
    account(
        &client,
        &a,
        "narrow",
        vec![rule("", "configmaps", &["get", "list", "watch", "create", "patch", "delete"])],
    )
    .await;
    account(&client, &a, "deployer", memcached_rules()).await;

    let selector = format!("podset.dev/test-shard={shard}");
    let podset = common::policy_dir().join("podset.wasm");
    let op = Operator::spawn_shard(&shard, &selector, &[&podset], &common::kubeconfig_path(), &[]);
    op.ready().await;
    let module = common::read_policy("memcached.wasm");

    // Acting as an account that may not write Deployments: refused at load.
    common::publish_acting_as(&client, &a, "memcached", "memcached-module", &module, every(), "narrow").await;
    let (reason, message) =
        eventually("the narrow policy's refusal", T, || async { refused(&client, &a, "memcached").await }).await;
    println!("acting as {a}/narrow: {reason}: {message}");
    assert_eq!(reason, "ServiceAccountForbidden");
    assert!(
        message.contains(&format!("service account {a}/narrow")) && message.contains("deployments.apps"),
        "{message}"
    );
    let watches_before = op.sum("podset_watches", "").await;

    // The same policy acting as a wider account: it serves, and writes as that account.
    let audit = common::audit::AuditLog::open();
    let mark = audit.mark();
    common::publish_acting_as(&client, &a, "memcached", "memcached-module", &module, every(), "deployer").await;
    common::policy_loaded(&client, &a, "memcached", &op).await;
    memcacheds(&client, &a).create(&PostParams::default(), &common::memcached("cache", 1)).await.expect("create");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &a);
    eventually("the Deployment", T, || async { deployments.get("cache").await.ok() }).await;
    let as_deployer = format!("system:serviceaccount:{a}:deployer");
    let creates: Vec<common::audit::Entry> = audit
        .since(&mark)
        .into_iter()
        .filter(|e| e.verb == "create" && e.is("deployments", &a) && e.succeeded())
        .collect();
    assert!(!creates.is_empty(), "the Deployment's create is in the audit log");
    for e in &creates {
        let acted = e.impersonated_user.as_ref().map(|u| u.username.as_str());
        assert_eq!(acted, Some(as_deployer.as_str()), "written as the policy's account: {e:?}");
    }

    let watches_one = op.sum("podset_watches", "").await;
    let rss_one = op.rss_kib();

    // Nine more tenants, each acting as its own account: no new watch, the caches are shared.
    let mut others = Vec::new();
    for i in 0..9 {
        let ns = common::namespace_labelled(&client, &format!("tenant-{i}"), &label).await;
        account(&client, &ns, "deployer", memcached_rules()).await;
        common::publish_acting_as(&client, &ns, "memcached", "memcached-module", &module, every(), "deployer").await;
        common::policy_loaded(&client, &ns, "memcached", &op).await;
        memcacheds(&client, &ns).create(&PostParams::default(), &common::memcached("cache", 1)).await.expect("create");
        others.push(ns);
    }
    for ns in &others {
        let theirs: Api<Deployment> = Api::namespaced(client.clone(), ns);
        eventually("each tenant's Deployment", T, || async { theirs.get("cache").await.ok() }).await;
    }
    let watches_ten = op.sum("podset_watches", "").await;
    let rss_ten = op.rss_kib();

    // The account loses Deployments: the API server refuses the next write, the parent says why.
    role(&client, &a, "deployer", vec![rule("", "pods", &["get", "list"])]).await;
    memcacheds(&client, &a)
        .patch("cache", &PatchParams::default(), &Patch::Merge(json!({ "spec": { "size": 2 } })))
        .await
        .expect("scale");
    let message = eventually("the refused write on the Memcached", T, || async {
        let mc = memcacheds(&client, &a).get("cache").await.ok()?;
        let c = mc.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "ReconcileFailed")?.clone();
        Some(c["message"].as_str()?.to_string())
    })
    .await;
    println!("after the Role lost Deployments: {message}");
    assert!(message.contains("forbidden") && message.contains(&as_deployer), "{message}");
    let deployment = deployments.get("cache").await.expect("the Deployment");
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(1), "nothing written past RBAC");

    // Shared caches: the other tenants' policies (each with a client of its own) watched nothing more.
    assert!(watches_one > watches_before, "serving Memcacheds watches their kinds");
    assert_eq!(watches_ten, watches_one, "one watch per kind, whatever the number of tenants");
    println!(
        "watches: {watches_before} before any Memcached policy served, {watches_one} serving one tenant, \
         {watches_ten} serving ten; operator RSS {rss_one} KiB with one tenant, {rss_ten} KiB with ten"
    );
    drop(op);
    for ns in others.iter().chain([&a]) {
        common::delete_namespace(&client, ns).await;
    }
}
