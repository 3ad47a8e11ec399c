//! Tests against the real control plane started by `hack/cluster.sh up` (etcd, kube-apiserver,
//! kube-controller-manager and the node simulator). They prove the pieces the operator relies
//! on: CRD schema validation, owner-reference garbage collection, and pods that reach Running,
//! Failed, or disappear on deletion. Needs PODSET_TEST_KUBECONFIG; fails without it.

use podset_test_support as common;

use std::time::Duration;

use common::{eventually_ok, on_simulated_node, require_sim_node, with_namespace};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::{Client, Error};
use serde_json::json;

const CRD_NAME: &str = "widgets.test.podset.dev";

fn widget_resource() -> ApiResource {
    ApiResource {
        group: "test.podset.dev".into(),
        version: "v1".into(),
        api_version: "test.podset.dev/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// Installs the test-only Widget CRD (or reuses it) and waits until it is Established.
async fn install_widget_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // A previous run's CRD may still be terminating: a create would then 409 forever.
    eventually_ok("an old Widget CRD to finish terminating", Duration::from_secs(30), || async {
        match crds.get_opt(CRD_NAME).await {
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Err("terminating".to_owned()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": CRD_NAME },
        "spec": {
            "group": "test.podset.dev",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "required": ["replicas"],
                        "properties": { "replicas": { "type": "integer", "minimum": 1, "maximum": 10 } },
                    }},
                }},
            }],
        },
    }))
    .expect("CRD literal deserializes");
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => panic!("creating CRD {CRD_NAME}: {e}"),
    }
    eventually_ok("the Widget CRD to be Established", Duration::from_secs(30), || async {
        let crd = crds.get(CRD_NAME).await.map_err(|e| e.to_string())?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
            .ok_or_else(|| format!("conditions {conditions:?}"))
    })
    .await;
}

#[tokio::test]
async fn crd_schema_bounds_replicas() {
    let client = common::client().await;
    install_widget_crd(&client).await;
    with_namespace("crd", |client, ns| async move {
        let widgets: Api<DynamicObject> = Api::namespaced_with(client, &ns, &widget_resource());
        let widget = |name: &str, replicas: i64| {
            DynamicObject::new(name, &widget_resource()).data(json!({ "spec": { "replicas": replicas } }))
        };
        for bad in [0, 11] {
            let err = widgets
                .create(&PostParams::default(), &widget(&format!("w{bad}"), bad))
                .await
                .expect_err(&format!("replicas {bad} must be rejected"));
            let Error::Api(status) = err else {
                panic!("replicas {bad}: expected an API error, got {err}");
            };
            assert_eq!(status.code, 422, "replicas {bad}: {status:?}");
            assert_eq!(status.reason, "Invalid", "replicas {bad}: {status:?}");
            assert!(status.message.contains("spec.replicas"), "replicas {bad}: message {:?}", status.message);
        }
        let created =
            widgets.create(&PostParams::default(), &widget("w3", 3)).await.expect("replicas 3 is within bounds");
        assert_eq!(created.data["spec"]["replicas"], 3);
    })
    .await;
    // Cluster-scoped, so not covered by the namespace cleanup. Best effort: the next run
    // waits for a terminating leftover anyway.
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    if let Err(e) = crds.delete(CRD_NAME, &DeleteParams::default()).await {
        eprintln!("warning: deleting CRD {CRD_NAME}: {e}");
    }
}

/// A pod for the simulated node (its label and toleration): the scheduler binds it there.
fn pod(name: &str, annotations: &[(&str, &str)]) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        },
        "spec": common::restricted(json!({ "containers": [{ "name": "app", "image": "registry.invalid/app:1" }] })),
    }))
    .expect("pod literal deserializes");
    if let Some(spec) = pod.spec.as_mut() {
        on_simulated_node(spec);
    }
    pod
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_).map(|c| c.status.as_str())
}

/// Waits until the pod's phase is `want`, returning the pod as then observed.
async fn wait_for_phase(pods: &Api<Pod>, name: &str, want: &str) -> Pod {
    eventually_ok(&format!("pod {name} to be {want}"), Duration::from_secs(20), || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        if phase(&pod) == Some(want) {
            Ok(pod)
        } else {
            Err(format!("phase {:?}, status {:?}", phase(&pod), pod.status))
        }
    })
    .await
}

#[tokio::test]
async fn owned_pod_is_garbage_collected_with_its_owner() {
    with_namespace("gc", |client, ns| async move {
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let owner = configmaps
            .create(
                &PostParams::default(),
                &ConfigMap {
                    metadata: ObjectMeta { name: Some("owner".into()), ..Default::default() },
                    ..Default::default()
                },
            )
            .await
            .expect("creating the owner ConfigMap");
        let mut child = pod("child", &[]);
        child.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.clone().expect("created object has a uid"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        pods.create(&PostParams::default(), &child).await.expect("creating the owned pod");

        configmaps.delete("owner", &DeleteParams::default()).await.expect("deleting the owner");
        eventually_ok("the owned pod to be garbage-collected", Duration::from_secs(30), || async {
            match pods.get_opt("child").await {
                Ok(None) => Ok(()),
                Ok(Some(p)) => Err(format!("still there: deletionTimestamp {:?}", p.metadata.deletion_timestamp)),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn simulator_runs_a_pod() {
    with_namespace("sim-run", |client, ns| async move {
        let node = require_sim_node(&client).await;
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        pods.create(&PostParams::default(), &pod("web", &[])).await.expect("creating the pod");
        let pod = wait_for_phase(&pods, "web", "Running").await;

        assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some(node.as_str()));
        assert_eq!(condition(&pod, "Ready"), Some("True"));
        assert_eq!(condition(&pod, "ContainersReady"), Some("True"));
        let status = pod.status.as_ref().expect("status");
        let containers = status.container_statuses.as_deref().unwrap_or_default();
        assert_eq!(containers.len(), 1, "{containers:?}");
        assert!(containers[0].ready);
        assert!(containers[0].state.as_ref().and_then(|s| s.running.as_ref()).is_some());
        assert!(status.start_time.is_some());
        assert!(status.pod_ip.as_deref().is_some_and(|ip| ip.starts_with("127.")), "{:?}", status.pod_ip);
    })
    .await;
}

#[tokio::test]
async fn simulator_fails_an_annotated_pod() {
    with_namespace("sim-fail", |client, ns| async move {
        require_sim_node(&client).await;
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        pods.create(&PostParams::default(), &pod("doomed", &[("sim.podset.dev/fail", "true")]))
            .await
            .expect("creating the pod");
        let pod = wait_for_phase(&pods, "doomed", "Failed").await;

        assert_eq!(condition(&pod, "Ready"), Some("False"));
        let containers = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
        let terminated = containers
            .first()
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .unwrap_or_else(|| panic!("container not terminated: {containers:?}"));
        assert_eq!(terminated.exit_code, 1);
    })
    .await;
}

#[tokio::test]
async fn simulator_finishes_a_graceful_deletion() {
    with_namespace("sim-del", |client, ns| async move {
        require_sim_node(&client).await;
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        pods.create(&PostParams::default(), &pod("victim", &[])).await.expect("creating the pod");
        wait_for_phase(&pods, "victim", "Running").await;

        // Default grace period (30 s): the pod only goes away this fast because the simulator
        // caps the grace period and then removes it, as a kubelet does once containers stop.
        pods.delete("victim", &DeleteParams::default()).await.expect("deleting the pod");
        eventually_ok("the deleted pod to disappear", Duration::from_secs(15), || async {
            match pods.get_opt("victim").await {
                Ok(None) => Ok(()),
                Ok(Some(p)) => Err(format!("still there: deletionTimestamp {:?}", p.metadata.deletion_timestamp)),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    })
    .await;
}
