//! The Reloader policy (guest-reloader) as a user runs it: the sample applied with
//! kubectl under the shipped least-privilege RBAC, on the real node. It looks up the
//! Deployment its ConfigReload names and the ConfigMap and Secret the pods use
//! (contract 0.4 lookups), and rolls the Deployment when either changes. A change to one
//! Deployment's ConfigMap re-triggers that ConfigReload and no other (counted from the
//! recorded decisions); a shadow of the same module agrees and every recorded decision
//! replays exactly, Secrets included (recorded as digests).

use podset_test_support as common;

use std::path::Path;
use std::time::Duration;

use common::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(120);
const HASH: &str = "reloader.example.com/config-hash";

fn configreloads() -> ApiResource {
    ApiResource {
        group: "reloader.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "reloader.example.com/v1alpha1".into(),
        kind: "ConfigReload".into(),
        plural: "configreloads".into(),
    }
}

/// The hash the Deployment's pods were started with, if it carries one.
fn template_hash(d: &Deployment) -> Option<String> {
    d.spec.as_ref()?.template.metadata.as_ref()?.annotations.as_ref()?.get(HASH).cloned()
}

/// How many decisions were recorded for ConfigReload `name`.
fn decisions(record: &Path, ns: &str, name: &str) -> usize {
    let dir = record.join("ConfigReload.reloader.example.com").join(ns).join(name);
    podset_host::author::replay::files(&[dir]).map_or(0, |f| f.len())
}

/// The ConfigReload's status once it watches its Deployment (Ready=True), with `reloads`.
async fn watching(api: &Api<DynamicObject>, name: &str, reloads: i64) -> Value {
    eventually(&format!("ConfigReload {name} to be Ready with {reloads} reloads"), T, || async {
        let status = api.get(name).await.ok()?.data["status"].clone();
        let ready = status["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
        (ready && status["reloads"].as_i64().unwrap_or(0) == reloads).then_some(status)
    })
    .await
}

#[tokio::test]
async fn the_sample_rolls_its_deployment_on_each_change_and_nothing_else_is_reconciled() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "reloader").await;
    let module = common::policy_dir().join("reloader.wasm");
    let record = tempfile::tempdir().expect("tempdir");
    let sa = tempfile::tempdir().expect("tempdir");
    let kubeconfig = common::service_account_kubeconfig(&client, sa.path()).await;
    let mut op = common::Operator::spawn_with_args(
        &ns,
        &[&module],
        &kubeconfig,
        &["--record-dir", &record.path().to_string_lossy()],
    );
    op.ready().await;
    common::publish_shadow(&client, &ns, "shadow", "shadow-module", &common::read_policy("reloader.wasm"), None).await;
    common::policy_loaded(&client, &ns, "shadow", &op).await;

    // As the tutorial: kubectl apply the sample.
    let sample = common::workspace().join("manifests/samples/configreload.yaml");
    let (ok, out) = common::kubectl(&["apply", "-n", &ns, "-f", &sample.to_string_lossy()]);
    assert!(ok, "kubectl apply: {out}");
    // A second application beside it, with its own ConfigMap, Deployment and ConfigReload.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let reloads: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &configreloads());
    let pp = PostParams::default();
    let api_config: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "api-config"}, "data": {"mode": "fast"}})).expect("cm");
    configmaps.create(&pp, &api_config).await.expect("api-config");
    let mut api_deployment = deployments.get("web").await.expect("the sample's Deployment");
    api_deployment.metadata = kube::api::ObjectMeta { name: Some("api".into()), ..Default::default() };
    let mut spec = serde_json::to_value(api_deployment.spec.take()).expect("spec");
    spec["selector"] = json!({"matchLabels": {"app": "api"}});
    spec["template"]["metadata"]["labels"] = json!({"app": "api"});
    spec["template"]["spec"]["volumes"][0]["configMap"]["name"] = json!("api-config");
    spec["template"]["spec"]["containers"][0]["envFrom"] = json!([]);
    spec["template"]["spec"]["containers"][0]["command"] =
        json!(["sh", "-c", "echo \"mode: $(cat /config/mode)\"; trap 'exit 0' TERM; sleep 3600 & wait"]);
    api_deployment.spec = Some(serde_json::from_value(spec).expect("a Deployment spec"));
    api_deployment.status = None;
    deployments.create(&pp, &api_deployment).await.expect("api Deployment");
    let mut api_reload = DynamicObject::new("api", &configreloads());
    api_reload.data = json!({"spec": {"deployment": "api"}});
    reloads.create(&pp, &api_reload).await.expect("api ConfigReload");

    // First sight: each records the hash of what its pods use and rolls nothing.
    let web = watching(&reloads, "web", 0).await;
    common::kstatus::reads("web", "Current", T, || async { reloads.get("web").await.ok() }).await;
    assert_eq!(web["watching"], json!(["ConfigMap/web-config", "Secret/web-credentials"]));
    let api = watching(&reloads, "api", 0).await;
    assert_eq!(api["watching"], json!(["ConfigMap/api-config"]));
    let first = web["configHash"].as_str().expect("a hash").to_string();
    let web_deployment = deployments.get("web").await.expect("web");
    assert_eq!(template_hash(&web_deployment), None, "the first sight rolls nothing");
    // Settled: both Deployments rolled out, nothing left to decide.
    for name in ["web", "api"] {
        eventually(&format!("Deployment {name} available"), T, || async {
            let d = deployments.get(name).await.ok()?;
            (d.status?.available_replicas == Some(1)).then_some(())
        })
        .await;
    }
    let settled = || async {
        let before = (decisions(record.path(), &ns, "web"), decisions(record.path(), &ns, "api"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = (decisions(record.path(), &ns, "web"), decisions(record.path(), &ns, "api"));
        (before == after).then_some(after)
    };
    let (web_before, api_before) = eventually("no decision for 3 s", T, settled).await;

    // kubectl edit the ConfigMap: the Deployment is rolled (its template annotation), the
    // pods restart with the new greeting, and the status says so.
    let greeting = json!({"data": {"greeting": "hello, world"}});
    configmaps.patch("web-config", &PatchParams::default(), &Patch::Merge(&greeting)).await.expect("edit");
    let web = watching(&reloads, "web", 1).await;
    let second = web["configHash"].as_str().expect("a hash").to_string();
    assert_ne!(second, first);
    let rolled = eventually("the Deployment rolled with the new hash, its pods available", T, || async {
        let d = deployments.get("web").await.ok()?;
        let status = d.status.as_ref()?;
        let done = status.updated_replicas == Some(1) && status.available_replicas == Some(1);
        (template_hash(&d).as_deref() == Some(second.as_str()) && done && status.replicas == Some(1)).then_some(d)
    })
    .await;
    assert!(rolled.metadata.owner_references.is_none(), "patched, never owned");
    eventually("the new pod to say the new greeting", T, || async {
        let (ok, out) = common::kubectl(&["logs", "-n", &ns, "deploy/web"]);
        (ok && out.contains("greeting: hello, world")).then_some(())
    })
    .await;
    let (web_after, api_after) = eventually("no decision for 3 s", T, settled).await;
    assert_eq!(api_after, api_before, "a change to web's ConfigMap re-triggers nothing of api");
    println!(
        "ConfigMap web-config changed: {} decisions of ConfigReload web (its own change, its Deployment's patch and \
         rollout), {} of api",
        web_after - web_before,
        api_after - api_before
    );

    // The Secret, too: rolled again.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let rotated = json!({"stringData": {"PASSWORD": "correct horse"}});
    secrets.patch("web-credentials", &PatchParams::default(), &Patch::Merge(&rotated)).await.expect("rotate");
    let web = watching(&reloads, "web", 2).await;
    let third = web["configHash"].as_str().expect("a hash").to_string();
    assert!(third != second && third != first);
    eventually("the Deployment rolled again", T, || async {
        let d = deployments.get("web").await.ok()?;
        (template_hash(&d).as_deref() == Some(third.as_str())).then_some(())
    })
    .await;

    // `policy record` turns the live ConfigReload into a scenario that passes (its
    // lookups answered by what it lists), the Secret as digests.
    let case = record.path().join("web-now.yaml");
    let (ok, out) = common::policy_cli(&[
        "record".as_ref(),
        "configreloads".as_ref(),
        format!("{ns}/web").as_ref(),
        "--policy".as_ref(),
        module.as_os_str(),
        "-o".as_ref(),
        case.as_os_str(),
    ]);
    assert!(ok, "{out}");
    let scenario = std::fs::read_to_string(&case).expect("the scenario");
    assert!(!scenario.contains("Y29ycmVjdCBob3JzZQ=="), "the Secret's value is not recorded:\n{scenario}");
    assert!(scenario.contains("REDACTED:sha256:"), "{scenario}");
    let (ok, out) = common::policy_cli(&["test".as_ref(), module.as_os_str(), case.as_os_str()]);
    assert!(ok && out.contains("1 passed, 0 failed"), "the recorded ConfigReload passes as a scenario:\n{out}");

    // Deleting the ConfigReload leaves the Deployment: it was never the ConfigReload's.
    reloads.delete("web", &DeleteParams::default()).await.expect("delete");
    eventually("the ConfigReload to go", T, || async { reloads.get_opt("web").await.ok()?.is_none().then_some(()) })
        .await;
    assert!(deployments.get_opt("web").await.expect("get").is_some(), "the Deployment stays");

    // A shadow of the same module agreed on every decision, and every recorded decision
    // (each call, lookups answered or not) replays the same.
    let st = common::shadow_settled(&client, &ns, "shadow", &op).await;
    assert_eq!((st.agreed, st.differed, st.failed, st.dropped), (st.decisions, 0, 0, 0), "{st:#?}");
    // What the lookups cost here: calls into the policy per decision, and a call's time.
    // The first decision of each ConfigReload took 3 calls (the Deployment, then what it
    // mounts), so at least one decision took more than one.
    let calls = op.sum("podset_policy_decision_calls_sum", "").await;
    let decisions = op.sum("podset_policy_decision_calls_count", "").await;
    let in_one = op.sum("podset_policy_decision_calls_bucket", r#"le="1.0""#).await;
    let timed = op.sum("podset_policy_decision_duration_seconds_count", "").await;
    let spent = op.sum("podset_policy_decision_duration_seconds_sum", "").await;
    assert_eq!(calls, timed, "every call is timed");
    assert!(decisions > in_one && in_one > 0.0, "{decisions} decisions, {in_one} in one call");
    println!(
        "{decisions} decisions, {calls} calls into the policy ({:.2} a decision, {in_one} in one call), {:.0} µs a call",
        calls / decisions,
        spent / calls * 1e6
    );
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops cleanly (log: {})", op.log.display());
    let recorded = record.path().join("ConfigReload.reloader.example.com").join(&ns);
    let n = common::replays_exactly(&module, &recorded);
    println!("ConfigReload: 2 reloads; {n} decisions shadowed and replayed, all agree");
    common::delete_namespace(&client, &ns).await;
}
