//! Bad input and a bad environment (issue 8): each case ends in a clear error or
//! condition, and nothing else changes.

use podset_test_support as common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Env, eventually, kubectl};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use podset_host::crd::PodSet;
use serde_json::json;

const T: Duration = Duration::from_secs(60);

fn podset_json(name: &str, spec: serde_json::Value, meta: serde_json::Value) -> PodSet {
    let mut v = json!({ "apiVersion": "app.example.com/v1alpha1", "kind": "PodSet", "metadata": { "name": name }, "spec": spec });
    if let (Some(m), Some(extra)) = (v["metadata"].as_object_mut(), meta.as_object()) {
        m.extend(extra.clone());
    }
    serde_json::from_value(v).expect("PodSet")
}

fn template(container: serde_json::Value, pod: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({ "containers": [container] });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), pod.as_object()) {
        s.extend(extra.clone());
    }
    json!({ "spec": spec })
}

fn busybox(extra: serde_json::Value) -> serde_json::Value {
    let mut c = json!({ "name": "c", "image": "busybox:1.35", "command": ["sleep", "3600"] });
    if let (Some(m), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    c
}

/// The API server's refusal of `ps`, which must not exist afterwards.
async fn refused(env: &Env, ps: &PodSet) -> String {
    let e = env.podsets.create(&PostParams::default(), ps).await.expect_err("refused");
    let name = ps.metadata.name.clone().unwrap_or_default();
    assert!(env.podsets.get_opt(&name).await.expect("get").is_none(), "{name} must not exist");
    e.to_string()
}

/// The host's condition `type_` on `name` once set: (reason, message).
async fn host_condition(env: &Env, name: &str, type_: &str) -> (String, String) {
    eventually(&format!("{type_} on {name} (operator log: {})", env.op.log.display()), T, || async {
        let c = env.podsets.get(name).await.ok()?.status?.conditions.into_iter().find(|c| c.type_ == type_)?;
        (c.status == "True").then_some((c.reason, c.message))
    })
    .await
}

#[tokio::test]
async fn invalid_and_oversized_podsets_are_refused_by_the_api_server() {
    let env = Env::new("badinput").await;
    let e =
        refused(&env, &podset_json("labels", json!({ "replicas": 1 }), json!({ "labels": { "tier": "not valid!" } })))
            .await;
    assert!(e.contains("labels") && e.contains("not valid!"), "{e}");
    let huge = "x".repeat(300 * 1024);
    let e =
        refused(&env, &podset_json("annotations", json!({ "replicas": 1 }), json!({ "annotations": { "a": huge } })))
            .await;
    assert!(e.contains("annotations") && e.contains("Too long"), "{e}");
    let e = refused(&env, &podset_json("replicas", json!({ "replicas": 11 }), json!({}))).await;
    assert!(e.contains("spec.replicas") && e.contains("10"), "{e}");
    // Over etcd's request limit (the API server's own is 3 MiB, etcd's 2 MiB): refused
    // whole, with the reason.
    let big = "y".repeat(2 * 1024 * 1024);
    let spec = json!({ "replicas": 1, "template": { "metadata": { "annotations": { "big": big } }, "spec": { "containers": [busybox(json!({}))] } } });
    let e = refused(&env, &podset_json("oversized", spec, json!({}))).await;
    assert!(e.contains("larger than max") || e.to_lowercase().contains("too large"), "{e}");
    // What the restricted profile forbids and a schema can say is refused by the CRD.
    for (name, pod, container, field) in [
        ("hostnetwork", json!({ "hostNetwork": true }), json!({}), "hostNetwork"),
        ("privileged", json!({}), json!({ "securityContext": { "privileged": true } }), "privileged"),
        (
            "escalation",
            json!({}),
            json!({ "securityContext": { "allowPrivilegeEscalation": true } }),
            "allowPrivilegeEscalation",
        ),
    ] {
        let spec = json!({ "replicas": 1, "template": template(busybox(container), pod) });
        let e = refused(&env, &podset_json(name, spec, json!({}))).await;
        assert!(e.contains(field) && e.contains("supported values"), "{name}: {e}");
    }
    // What a boolean cannot say, the CRD's CEL rules do.
    for (name, pod, container, field) in [
        ("hostpath", json!({ "volumes": [{ "name": "root", "hostPath": { "path": "/" } }] }), json!({}), "volumes[0]"),
        ("hostport", json!({}), json!({ "ports": [{ "containerPort": 80, "hostPort": 8080 }] }), "ports[0]"),
    ] {
        let spec = json!({ "replicas": 1, "template": template(busybox(container), pod) });
        let e = refused(&env, &podset_json(name, spec, json!({}))).await;
        assert!(e.contains(field) && e.contains("restricted security profile"), "{name}: {e}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn templates_the_api_server_or_the_profile_refuse_end_in_a_condition_and_no_pod() {
    let env = Env::new("badtemplate").await;
    // An added capability: the CRD's schema takes it, the operator refuses it.
    let caps = template(busybox(json!({ "securityContext": { "capabilities": { "add": ["SYS_ADMIN"] } } })), json!({}));
    env.podsets
        .create(&PostParams::default(), &podset_json("caps", json!({ "replicas": 2, "template": caps }), json!({})))
        .await
        .expect("accepted");
    let (reason, message) = host_condition(&env, "caps", "PolicyFailed").await;
    assert_eq!(reason, "InvalidTemplate");
    assert!(message.contains("capabilities.add") && message.contains("restricted"), "{message}");
    // An NFS volume: the CRD's schema takes it (its rules look at hostPath only); the
    // operator's restricted profile, the whole of Pod Security's, refuses it before any
    // pod is asked for.
    let nfs = template(
        busybox(json!({})),
        json!({ "volumes": [{ "name": "share", "nfs": { "server": "nfs.invalid", "path": "/" } }] }),
    );
    env.podsets
        .create(&PostParams::default(), &podset_json("nfs", json!({ "replicas": 2, "template": nfs }), json!({})))
        .await
        .expect("accepted");
    let (reason, message) = host_condition(&env, "nfs", "PolicyFailed").await;
    assert_eq!(reason, "InvalidTemplate");
    assert!(
        message.contains("spec.volumes[0].nfs")
            && message.contains(r#"volume "share" uses restricted volume type "nfs""#)
            && message.contains("check restrictedVolumes"),
        "{message}"
    );
    // A container name the API server refuses: the pod create fails, the PodSet says so.
    let bad_name = template(json!({ "name": "Not_A_DNS_Label", "image": "busybox:1.35" }), json!({}));
    env.podsets
        .create(
            &PostParams::default(),
            &podset_json("badname", json!({ "replicas": 2, "template": bad_name }), json!({})),
        )
        .await
        .expect("accepted");
    let (reason, message) = host_condition(&env, "badname", "ReconcileFailed").await;
    assert_eq!(reason, "FailedCreate");
    assert!(message.contains("Not_A_DNS_Label"), "{message}");
    // Nothing else changed: no pod for either, and a sound PodSet beside them converges.
    env.create("sound", 1).await;
    env.converged("sound", 1).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for name in ["caps", "nfs", "badname"] {
        assert!(common::active_pods(&pods, name).await.is_empty(), "{name} got pods");
    }
    assert!(env.op.sum("podset_reconcile_failures_total", "reason=\"InvalidTemplate\"").await >= 1.0);
    env.cleanup().await;
}

#[tokio::test]
async fn a_100_mb_module_in_a_configmap_is_refused_and_the_operator_goes_on() {
    let env = Env::new("bigmodule").await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let module = vec![0u8; 100 * 1024 * 1024];
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("huge".into()), ..Default::default() },
        binary_data: Some(BTreeMap::from([("module.wasm".to_string(), ByteString(module))])),
        ..Default::default()
    };
    let e = cms.create(&PostParams::default(), &cm).await.expect_err("a 100 MB ConfigMap is refused");
    println!("a 100 MB ConfigMap: {e}");
    assert!(cms.get_opt("huge").await.expect("get").is_none());
    env.create("web", 2).await;
    env.converged("web", 2).await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_taken_metrics_address_fails_the_start_with_that_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = std::process::Command::new(common::operator_binary())
        .args(["run", "--policy"])
        .arg(common::policy_dir().join("podset.wasm"))
        .args(["--metrics-addr", &addr])
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the start must fail");
    assert!(stderr.contains(&format!("cannot listen on {addr}")) && stderr.contains("in use"), "{stderr}");
}

#[tokio::test]
async fn a_kind_whose_crd_is_missing_is_named_in_readyz_and_served_once_installed() {
    let client = common::client().await;
    let ns = common::namespace(&client, "nocrd").await;
    let dir = common::policy_dir();
    let (podset, ghost) = (dir.join("podset.wasm"), dir.join("fixtures/missing-kind.wasm"));
    let op = common::Operator::spawn_serving(&ns, &[&podset, &ghost], &common::kubeconfig_path());
    let body = eventually("/readyz to say which kind is not served", T, || async {
        op.readyz().await.filter(|(ok, body)| !ok && body.contains("Ghost")).map(|(_, b)| b)
    })
    .await;
    assert!(body.contains("fixtures.podset.dev/v1 Ghost") && body.contains("CustomResourceDefinition"), "{body}");
    let log = std::fs::read_to_string(&op.log).expect("log");
    assert!(log.contains("Ghost") && log.contains("retrying"), "the log says it too, and that it retries");
    // PodSets are served meanwhile.
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    podsets.create(&PostParams::default(), &common::podset("web", 1)).await.expect("create");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    eventually("the PodSet served while Ghost is not", T, || async {
        (common::active_pods(&pods, "web").await.len() == 1).then_some(())
    })
    .await;
    // Install the CRD: the operator picks it up without a restart.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "ghosts.fixtures.podset.dev" },
        "spec": { "group": "fixtures.podset.dev", "scope": "Namespaced",
            "names": { "kind": "Ghost", "plural": "ghosts", "singular": "ghost" },
            "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }] }
    });
    let file = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(file.path(), crd.to_string()).expect("crd");
    let (ok, out) = kubectl(&["apply", "-f", &file.path().to_string_lossy()]);
    assert!(ok, "{out}");
    let body = eventually("/readyz ok once the CRD is installed", T, || async {
        op.readyz().await.filter(|(ok, _)| *ok).map(|(_, body)| body)
    })
    .await;
    // The test cluster runs a Kubernetes this build supports: no version warning.
    assert!(!body.contains("warning"), "{body}");
    let log = std::fs::read_to_string(&op.log).expect("log");
    assert!(log.contains("Kubernetes API server version is supported"), "the version was checked:\n{log}");
    let _ = kubectl(&["delete", "crd", "ghosts.fixtures.podset.dev", "--wait=false"]);
    common::delete_namespace(&client, &ns).await;
}
