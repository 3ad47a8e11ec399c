//! A cluster-scoped parent as a user runs it: the Tenant policy (guest-tenant) with the
//! administrator's grant (manifests/reach/tenant.yaml), against the real API server,
//! garbage collector and namespace controller; deleted with its module replaced by one
//! that traps on every decision.
//!
//! The operator is the shard that serves cluster-scoped parents (`--cluster-scoped-parents`)
//! and no namespace (its selector matches none): an operator of every namespace would
//! also load the ReconcilePolicies and decide the PodSets of the tests running beside
//! this one.

use podset_test_support as common;

use std::path::Path;
use std::time::Duration;

use common::objects::tenants;
use common::{Operator, eventually, workspace};
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::DynamicObject;
use serde_json::json;

const T: Duration = Duration::from_secs(90);

fn tenant(name: &str) -> DynamicObject {
    let mut t = DynamicObject::new(name, &tenants());
    t.data =
        json!({ "spec": { "group": format!("{name}-devs"), "quota": { "cpu": "2", "memory": "4Gi", "pods": 10 } } });
    t
}

/// The Tenant's `Ready` condition, or the host's `PolicyFailed` when `type_` says so:
/// (status, reason, message).
fn condition(t: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let c = t.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?.clone();
    Some((c["status"].as_str()?.into(), c["reason"].as_str()?.into(), c["message"].as_str()?.into()))
}

fn grant(dir: &Path, owned: bool) -> std::path::PathBuf {
    let path = dir.join(format!("reach-{owned}.yaml"));
    let text = std::fs::read_to_string(workspace().join("manifests/reach/tenant.yaml")).expect("the committed grant");
    let text = if owned { text } else { text.replace("owned: true", "owned: false") };
    std::fs::write(&path, text).expect("grant file");
    path
}

#[tokio::test]
async fn a_tenant_gets_its_namespace_and_what_goes_in_it_only_where_granted_and_loses_them_when_deleted() {
    let client = common::client().await;
    let kubeconfig = common::kubeconfig_path();
    let dir = tempfile::tempdir().expect("tempdir");
    // A copy the operator serves: replaced below by a module that traps.
    let module = dir.path().join("tenant.wasm");
    std::fs::write(&module, common::read_policy("tenant.wasm")).expect("policy file");
    let name = format!("tenant-{}", std::process::id());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &tenants());
    let namespaces: Api<Namespace> = Api::all(client.clone());

    // Granted Namespaces but not the namespaces it owns: the namespace is made, and
    // every decision that writes into it is refused, with the reason on the Tenant.
    let no_namespace = format!("podset.dev/tenant-test={name}");
    let serve = |log: &str, kubeconfig: &Path, grant: &Path| {
        let grant = grant.to_str().expect("utf-8");
        let extra = ["--cluster-scoped-parents", "--reach", grant];
        Operator::spawn_shard(log, &no_namespace, &[&module], kubeconfig, &extra)
    };
    let mut op = serve("tenant-narrow", &kubeconfig, &grant(dir.path(), false));
    op.ready().await;
    api.create(&PostParams::default(), &tenant(&name)).await.expect("create the Tenant");
    let (_, reason, message) = eventually("the Tenant says why it is refused", T, || async {
        let t = api.get(&name).await.ok()?;
        condition(&t, "PolicyFailed").filter(|(status, _, _)| status == "True")
    })
    .await;
    assert_eq!(reason, "InvalidDecision", "{message}");
    assert!(message.contains(&format!("may not write in namespace \"{name}\"")), "{message}");
    let ns = namespaces.get(&name).await.expect("its namespace was made before anything went in it");
    let owner = &ns.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Tenant", name.as_str()));
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &name);
    assert!(quotas.get_opt("tenant").await.expect("list").is_none(), "nothing was written inside");
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops on TERM");

    // With the grant of manifests/reach/tenant.yaml, as the operator's ServiceAccount
    // with the shipped least-privilege RBAC: everything, and a Ready status.
    let service_account = common::service_account_kubeconfig(&client, dir.path()).await;
    let mut op = serve("tenant", &service_account, &grant(dir.path(), true));
    op.ready().await;
    eventually("the Tenant is Ready", T, || async {
        let t = api.get(&name).await.ok()?;
        let ready = condition(&t, "Ready").filter(|(status, _, _)| status == "True")?;
        (t.data["status"]["namespace"] == json!(name) && condition(&t, "PolicyFailed").is_none_or(|c| c.0 == "False"))
            .then_some(ready)
    })
    .await;
    let hard = quotas.get("tenant").await.expect("quota").spec.and_then(|s| s.hard).unwrap_or_default();
    assert_eq!(hard.get("pods").map(|q| q.0.as_str()), Some("10"));
    let limits: Api<LimitRange> = Api::namespaced(client.clone(), &name);
    limits.get("tenant").await.expect("limits");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &name);
    let rb = bindings.get("tenant-edit").await.expect("role binding");
    assert_eq!(rb.role_ref.name, "edit");
    assert_eq!(rb.subjects.unwrap_or_default()[0].name, format!("{name}-devs"));
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &name);
    policies.get("default-deny").await.expect("default-deny");

    // The module replaced by one that declares the same and traps on every decision:
    // the Tenant says so, and deleting it does not need the policy. The garbage
    // collector follows the owner references to the namespace, and the namespace
    // controller empties it.
    let trapping = common::read_policy("fixtures/trapping-tenant.wasm");
    let tmp = dir.path().join("tenant.wasm.new");
    std::fs::write(&tmp, &trapping).expect("write");
    std::fs::rename(&tmp, &module).expect("rename");
    let (_, reason, message) = eventually("the Tenant says its policy traps", T, || async {
        let t = api.get(&name).await.ok()?;
        condition(&t, "PolicyFailed").filter(|(status, _, _)| status == "True")
    })
    .await;
    assert!(message.contains("trap") || reason.contains("Trap"), "{reason}: {message}");
    api.delete(&name, &DeleteParams::foreground()).await.expect("delete the Tenant");
    eventually("the Tenant and its namespace are gone, with its policy trapping", T, || async {
        let gone = api.get_opt(&name).await.ok()?.is_none() && namespaces.get_opt(&name).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(!log.to_lowercase().contains("forbidden"), "the operator was refused something:\n{log}");
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops on TERM");
}
