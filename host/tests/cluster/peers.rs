//! The seeds' own Go operators, the benchmark's peers (hack/peers/, controller-runtime),
//! converge on our CRDs as the tutorials' operators do: operator-sdk's PodSet tutorial
//! operator (the tutorial's pods and labels, `podNames` and `availableReplicas`, scale
//! down by deleting) and its Memcached sample (the finalizer, a Deployment of `size`,
//! resized with Update, `Available=True`, and the finalizer's work on delete), against the
//! real API server, Deployment controller and garbage collector, their pods on the
//! simulated node; and the Netperf operator, which measures throughput between two iperf3
//! pods on the real node. Nothing is built here: `hack/go-tool.sh peers` built them once
//! (`PODSET_PEERS`).

use podset_test_support as common;

use std::time::Duration;

use common::peers::{GoOperator, Seed};
use common::{eventually, sum_metric};
use guest_netperf::types::{Netperf, NetperfSpec, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use podset_host::crd::PodSet;
use serde_json::json;

const T: Duration = Duration::from_secs(60);

/// Waits until PodSet `name` reports `replicas` pods, and its pods are exactly those:
/// the tutorial's labels, controlled by it, running on the simulated node.
async fn podset_converged(podsets: &Api<PodSet>, pods: &Api<Pod>, name: &str, replicas: i32, node: &str) {
    let what = format!("PodSet {name} at {replicas} pods on {node}, in its status");
    let selector = format!("app={name},version=v0.1");
    eventually(&what, T, || async {
        let ps = podsets.get(name).await.ok()?;
        let status = ps.status?;
        let mut listed = status.pod_names.clone();
        listed.sort();
        let mut running: Vec<String> = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter(|p| {
                p.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.name == name)
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        running.sort();
        (status.available_replicas == replicas && running.len() == replicas as usize && listed == running).then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_podset_tutorials_operator_converges_on_our_podset_crd() {
    let client = common::client().await;
    let node = common::require_sim_node(&client).await;
    // No Pod Security labels: the tutorial's pod has no restricted security context.
    let ns = common::namespace_labelled(&client, "peer-podset", &[]).await;
    let op = GoOperator::start(Seed::PodSet, &ns, &[]).await;
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // PodSets as the bench creates them: our default template, on the simulated node.
    let names = ["web", "api", "db"];
    for name in names {
        podsets.create(&PostParams::default(), &common::podset(name, 3)).await.expect("create PodSet");
    }
    for name in names {
        podset_converged(&podsets, &pods, name, 3, &node).await;
    }
    // The tutorial's pod, not the template's: busybox, sleep 3600, named after the PodSet.
    let pod = pods.list(&ListParams::default().labels("app=web,version=v0.1")).await.expect("list").items.remove(0);
    assert!(pod.metadata.name.as_deref().is_some_and(|n| n.starts_with("web-pod")), "{:?}", pod.metadata.name);
    let container = &pod.spec.as_ref().expect("spec").containers[0];
    assert_eq!(container.command.as_deref(), Some(&["sleep".to_string(), "3600".to_string()][..]));

    // Scaled down: it deletes the surplus.
    let scale = json!({ "spec": { "replicas": 1 } });
    podsets.patch("web", &PatchParams::default(), &Patch::Merge(&scale)).await.expect("scale down");
    podset_converged(&podsets, &pods, "web", 1, &node).await;

    // controller-runtime's metrics: what a benchmark reads RSS and CPU from.
    let metrics = op.metrics().await;
    assert!(sum_metric(&metrics, "process_resident_memory_bytes", "") > 0.0, "no RSS in its metrics");
    assert!(sum_metric(&metrics, "controller_runtime_reconcile_total", r#"controller="podset""#) >= 9.0);
    common::delete_namespace(&client, &ns).await;
}

fn condition(mc: &DynamicObject, type_: &str) -> Option<(String, String)> {
    let c = mc.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?.to_string(), c["message"].as_str()?.to_string()))
}

/// Waits until Memcached `name` holds the sample's finalizer and reads `Available=True`
/// for `size` pods, and its Deployment (which it controls) has them all available.
async fn memcached_converged(mcs: &Api<DynamicObject>, deployments: &Api<Deployment>, name: &str, size: i32) {
    let what = format!("Memcached {name} Available with {size} pods");
    let message = format!("with {size} replicas created successfully");
    eventually(&what, T, || async {
        let mc = mcs.get(name).await.ok()?;
        let finalized = mc.metadata.finalizers.iter().flatten().any(|f| f == "cache.example.com/finalizer");
        let available = condition(&mc, "Available").is_some_and(|(s, m)| s == "True" && m.contains(&message));
        let d = deployments.get(name).await.ok()?;
        let owned = d.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.name == name);
        let ready = d.status.as_ref().and_then(|s| s.available_replicas) == Some(size);
        (finalized && available && owned && ready).then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_memcached_samples_operator_converges_on_our_memcached_crd() {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    // Restricted: the sample's pods carry the restricted security context.
    let ns = common::namespace(&client, "peer-memcached").await;
    let _op = GoOperator::start(Seed::Memcached, &ns, &["--simulated-node"]).await;
    let mcs = common::memcacheds(&client, &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    for name in ["cache-a", "cache-b"] {
        mcs.create(&PostParams::default(), &common::memcached(name, 1)).await.expect("create Memcached");
    }
    for name in ["cache-a", "cache-b"] {
        memcached_converged(&mcs, &deployments, name, 1).await;
    }
    // The sample's memcached, with `-m 64` (not its `-m=64`).
    let d = deployments.get("cache-a").await.expect("deployment");
    let container = &d.spec.and_then(|s| s.template.spec).expect("pod spec").containers[0];
    let command: Vec<&str> = container.command.iter().flatten().map(String::as_str).collect();
    assert_eq!(command, ["memcached", "-m", "64", "-o", "modern", "-v"]);

    // Resized: the Deployment follows spec.size.
    let resize = json!({ "spec": { "size": 2 } });
    mcs.patch("cache-a", &PatchParams::default(), &Patch::Merge(&resize)).await.expect("resize");
    memcached_converged(&mcs, &deployments, "cache-a", 2).await;

    // Deleted: the finalizer's work (a Warning Event), then the finalizer removed.
    mcs.delete("cache-b", &DeleteParams::default()).await.expect("delete");
    eventually("Memcached cache-b gone once its finalizer ran", T, || async {
        mcs.get_opt("cache-b").await.ok()?.is_none().then_some(())
    })
    .await;
    // The recorder posts its Events in the background.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let about_b = ListParams::default().fields("involvedObject.name=cache-b");
    eventually("a Warning Event Deleting about cache-b", T, || async {
        let events = events.list(&about_b).await.ok()?;
        let warned = |e: &Event| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("Deleting");
        events.items.iter().any(warned).then_some(())
    })
    .await;
    common::delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn the_seeds_netperf_operator_measures_throughput_on_our_netperf_crd() {
    let client = common::client().await;
    let node = common::require_real_node(&client).await;
    // No Pod Security labels: the seed's pods have no restricted security context.
    let ns = common::namespace_labelled(&client, "peer-netperf", &[]).await;
    let op = GoOperator::start(Seed::Netperf, &ns, &[]).await;
    let netperfs: Api<Netperf> = Api::namespaced(client.clone(), &ns);
    let spec = NetperfSpec { server_node: Some(node.clone()), client_node: Some(node), duration: 2 };
    netperfs.create(&PostParams::default(), &Netperf::new("np", spec)).await.expect("create the Netperf");

    // Its phases, as the seed's: Server, Test, then Done with the receiver's speed, the
    // pods deleted. A real test: iperf3 between two pods over the node's bridge.
    let what = format!("Netperf np to finish (log: {})", op.log.display());
    let status = eventually(&what, Duration::from_secs(120), || async {
        let status = netperfs.get("np").await.ok()?.status?;
        matches!(status.status, Phase::Done | Phase::Error).then_some(status)
    })
    .await;
    assert_eq!(status.status, Phase::Done, "{:?}", status.message);
    let speed = status.speed_bits_per_sec.expect("a speed");
    assert!(speed > 0, "a measured speed: {speed}");
    let (server, client_pod) = (status.server_pod.expect("serverPod"), status.client_pod.expect("clientPod"));
    assert!(
        server.starts_with("netperf-server-") && client_pod.starts_with("netperf-client-"),
        "{server}, {client_pod}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    eventually("the test's pods to be deleted", T, || async {
        let left = pods.list(&ListParams::default().labels("app=netperf-operator")).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    println!("the seed's Netperf operator: {:.2} Gbit/s", speed as f64 / 1e9);
    common::delete_namespace(&client, &ns).await;
}
