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

    // Granted Namespaces but not the namespaces it owns: every decision writes into the
    // namespace (wave 1), so each is refused whole, with the reason on the Tenant, and
    // nothing is made, not even the namespace.
    let no_namespace = format!("podset.dev/tenant-test={name}");
    let serve = |log: &str, kubeconfig: &Path, grant: &Path, more: &[&str]| {
        let grant = grant.to_str().expect("utf-8");
        let mut extra = vec!["--cluster-scoped-parents", "--reach", grant];
        extra.extend_from_slice(more);
        Operator::spawn_shard(log, &no_namespace, &[&module], kubeconfig, &extra)
    };
    let mut op = serve("tenant-narrow", &kubeconfig, &grant(dir.path(), false), &[]);
    op.ready().await;
    api.create(&PostParams::default(), &tenant(&name)).await.expect("create the Tenant");
    let (_, reason, message) = eventually("the Tenant says why it is refused", T, || async {
        let t = api.get(&name).await.ok()?;
        condition(&t, "PolicyFailed").filter(|(status, _, _)| status == "True")
    })
    .await;
    assert_eq!(reason, "InvalidDecision", "{message}");
    assert!(message.contains(&format!("may not write in namespace \"{name}\"")), "{message}");
    assert!(namespaces.get_opt(&name).await.expect("get").is_none(), "refused whole: no namespace either");
    let refused = common::kstatus::reads(&name, "Failed", T, || async { api.get(&name).await.ok() }).await;
    assert!(refused.message.contains("may not write in namespace"), "kstatus says why: {refused:?}");
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops on TERM");

    // With the grant of manifests/reach/tenant.yaml, as the operator's ServiceAccount
    // with the shipped least-privilege RBAC: everything, and a Ready status. Every
    // decision is recorded, and a shadow of the same module decides beside it.
    let service_account = common::service_account_kubeconfig(&client, dir.path()).await;
    let (record, shadow) = (dir.path().join("record"), dir.path().join("shadow-tenant.wasm"));
    std::fs::write(&shadow, common::read_policy("tenant.wasm")).expect("shadow file");
    let more = ["--record-dir", record.to_str().expect("utf-8"), "--shadow", shadow.to_str().expect("utf-8")];
    let mut op = serve("tenant", &service_account, &grant(dir.path(), true), &more);
    op.ready().await;
    eventually("the Tenant is Ready", T, || async {
        let t = api.get(&name).await.ok()?;
        let ready = condition(&t, "Ready").filter(|(status, _, _)| status == "True")?;
        (t.data["status"]["namespace"] == json!(name) && condition(&t, "PolicyFailed").is_none_or(|c| c.0 == "False"))
            .then_some(ready)
    })
    .await;
    common::kstatus::reads(&name, "Current", T, || async { api.get(&name).await.ok() }).await;
    // The order the policy stated: what goes in the namespace (wave 1) waited for the
    // namespace (wave 0), and the operator said so on the Tenant. (A cluster-scoped
    // object's Events are in `default`.)
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "default");
    let waited = eventually("the WaveWaiting Event", T, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let about = e.regarding.as_ref()?.name.as_deref() == Some(name.as_str());
            (about && e.reason.as_deref() == Some("WaveWaiting")).then_some(e.note?)
        })
    })
    .await;
    let expected = format!(
        "wave 1 (ResourceQuota tenant, LimitRange tenant, RoleBinding tenant-edit, NetworkPolicy default-deny) waits \
         for wave 0: Namespace {name}: being created"
    );
    assert_eq!(waited, expected);
    let t = api.get(&name).await.expect("the Tenant");
    assert!(condition(&t, "WaitingForWave").is_none(), "nothing waits once Ready: {:?}", t.data["status"]);
    let ns = namespaces.get(&name).await.expect("its namespace");
    let owner = &ns.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Tenant", name.as_str()));
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &name);
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
    // A second Tenant, deleted at the end by an operator that never loads their policy.
    let second = format!("{name}-b");
    api.create(&PostParams::default(), &tenant(&second)).await.expect("create the second Tenant");
    eventually("the second Tenant's namespace", T, || async { namespaces.get_opt(&second).await.ok()? }).await;

    // Shadow, recording and replay work for a cluster-scoped parent as for any other:
    // the shadow agreed on every decision, and each recorded decision replays the same.
    let label = format!(r#"policy="{}""#, shadow.display());
    let agreed = eventually("the shadow's decisions to be counted", T, || async {
        let n = op.sum("podset_shadow_decisions_total", &format!(r#"{label},outcome="agree""#)).await;
        (n > 0.0).then_some(n)
    })
    .await;
    for outcome in ["differ", "failed"] {
        let n = op.sum("podset_shadow_decisions_total", &format!(r#"{label},outcome="{outcome}""#)).await;
        assert_eq!(n, 0.0, "{outcome}: {n} of {agreed} shadow decisions");
    }
    let recorded = record.join("Tenant.tenancy.example.com");
    let files = podset_host::author::replay::files(std::slice::from_ref(&recorded)).expect("recordings");
    let (ok, out) = common::replay(&[common::policy_dir().join("tenant.wasm").as_os_str(), recorded.as_os_str()]);
    assert!(ok && !files.is_empty(), "{out}");
    let (n, agree, _, _) = common::replay_summary(&out).expect("a summary");
    assert!(n >= files.len() && agree == n, "{out}");
    // `policy record` turns the live Tenant (a bare name: it has no namespace) into a
    // scenario that passes; NAMESPACE/NAME is refused, with why.
    let case = dir.path().join("tenant-now.yaml");
    let tenant_wasm = common::policy_dir().join("tenant.wasm");
    let record_args = |object: &str, out: &Path| {
        common::policy_cli(&[
            "record".as_ref(),
            "tenants".as_ref(),
            object.as_ref(),
            "--policy".as_ref(),
            tenant_wasm.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ])
    };
    let (ok, out) = record_args(&name, &case);
    assert!(ok, "{out}");
    let (ok, out) = common::policy_cli(&["test".as_ref(), tenant_wasm.as_os_str(), case.as_os_str()]);
    assert!(ok && out.contains("1 passed, 0 failed"), "the recorded Tenant passes as a scenario:\n{out}");
    let (ok, out) = record_args(&format!("default/{name}"), Path::new("-"));
    assert!(!ok && out.contains("cluster-scoped"), "{out}");

    // The module replaced by one that declares the same and traps on every decision:
    // the Tenant says so, and deleting it does not need the policy. The operator tears
    // it down in reverse wave order (its finalizer holds the Tenant meanwhile): what is
    // in the namespace, then the namespace, which the namespace controller empties.
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
    common::kstatus::reads(&name, "Failed", T, || async { api.get(&name).await.ok() }).await;
    let t = api.get(&name).await.expect("the Tenant");
    assert!(t.metadata.finalizers.unwrap_or_default().contains(&"podset.dev/teardown".to_string()));
    api.delete(&name, &DeleteParams::default()).await.expect("delete the Tenant");
    eventually("the Tenant and its namespace are gone, with its policy trapping", T, || async {
        let gone = api.get_opt(&name).await.ok()?.is_none() && namespaces.get_opt(&name).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    // Wave 1 first, then wave 0, each deleted once what came after it was gone.
    let teardown = eventually("the TeardownWave Events", T, || async {
        let list = events.list(&Default::default()).await.ok()?;
        let mut waves: Vec<(String, String)> = list
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.reason.as_deref() == Some("TeardownWave")
            })
            .map(|e| (e.event_time.map(|t| t.0.to_string()).unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        waves.sort();
        (waves.len() == 2).then_some(waves.into_iter().map(|(_, note)| note).collect::<Vec<_>>())
    })
    .await;
    assert_eq!(
        teardown,
        [
            "deleting wave 1: LimitRange tenant, NetworkPolicy default-deny, ResourceQuota tenant, RoleBinding tenant-edit"
                .to_string(),
            format!("deleting wave 0: Namespace {name}"),
        ]
    );
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(!log.to_lowercase().contains("forbidden"), "the operator was refused something:\n{log}");
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops on TERM");

    // An operator started with no Tenant policy at all: the teardown ledger it reads at
    // start (podset-system/podset-host-teardown, written before the first Tenant got
    // its teardown finalizer) names the kind and its child kinds, so deleting the second
    // Tenant still removes everything it made.
    let podset_only = common::policy_dir().join("podset.wasm");
    let op = Operator::spawn_shard(
        "tenant-none",
        &no_namespace,
        &[&podset_only],
        &service_account,
        &["--cluster-scoped-parents"],
    );
    op.ready().await;
    api.delete(&second, &DeleteParams::default()).await.expect("delete the second Tenant");
    eventually("the second Tenant and its namespace are gone, with no Tenant policy", T, || async {
        let gone = api.get_opt(&second).await.ok()?.is_none() && namespaces.get_opt(&second).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(log.contains("teardown only"), "a teardown-only controller for Tenant:\n{log}");
}
