//! The Memcached policy as a user runs it: the operator-sdk walkthrough, side by side
//! with PodSets in one operator, and a hot swap of the policy, against the real API
//! server, garbage collector, and Deployment and ReplicaSet controllers.

use podset_test_support as common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{eventually, memcacheds, sum_metric};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use podset_host::crd::PodSet;
use serde_json::json;

const T: Duration = Duration::from_secs(90);

fn sample(size: i32) -> DynamicObject {
    common::memcached("memcached-sample", size)
}

/// `stats` over TCP, as a memcached client would ask it; the reply up to `END`.
async fn memcached_stats(ip: &str, port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut conn = tokio::net::TcpStream::connect((ip, port)).await?;
        conn.write_all(b"stats\r\n").await?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        while !reply.ends_with(b"END\r\n") {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&reply).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(5), ask).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => panic!("memcached at {ip}:{port}: {e}"),
        Err(_) => panic!("memcached at {ip}:{port} did not answer stats in 5 s"),
    }
}

/// `field` of every Event about a Memcached in `ns`, as kubectl prints them.
fn memcached_events(ns: &str, field: &str) -> String {
    let jsonpath = format!("jsonpath={{.items[*].{field}}}");
    let args = ["get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Memcached", "-o", &jsonpath];
    let (ok, out) = common::kubectl(&args);
    assert!(ok, "kubectl get events: {out}");
    out
}

fn condition(mc: &DynamicObject, type_: &str) -> Option<(String, String)> {
    let conditions = mc.data["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
}

/// Waits until the sample reports `size` ready pods, `Available`, and lists them.
async fn converged(mcs: &Api<DynamicObject>, deployments: &Api<Deployment>, size: i32) -> Vec<String> {
    eventually(&format!("memcached-sample at {size}/{size}"), T, || async {
        let d = deployments.get("memcached-sample").await.ok()?;
        let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
        let mc = mcs.get("memcached-sample").await.ok()?;
        let nodes: Vec<String> = serde_json::from_value(mc.data["status"]["nodes"].clone()).ok()?;
        let available = condition(&mc, "Available").is_some_and(|(s, _)| s == "True");
        (d.spec.as_ref()?.replicas == Some(size) && ready == size && available && nodes.len() == size as usize)
            .then_some(nodes)
    })
    .await
}

#[tokio::test]
async fn the_operator_sdk_walkthrough_with_a_podset_beside_it_in_one_operator() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "memcached").await;
    let dir = common::policy_dir();
    // Every decision is recorded, and replayed at the end.
    let record = tempfile::tempdir().expect("tempdir");
    let mut op = common::Operator::spawn_with_args(
        &ns,
        &[&dir.join("podset.wasm"), &dir.join("memcached.wasm")],
        &common::kubeconfig_path(),
        &["--record-dir", &record.path().to_string_lossy()],
    );
    op.ready().await;
    // A shadow of the serving module beside it: it must agree on every decision.
    common::publish_shadow(&client, &ns, "shadow", "shadow-module", &common::read_policy("memcached.wasm"), None).await;
    common::policy_loaded(&client, &ns, "shadow", &op).await;
    let mcs = memcacheds(&client, &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // A PodSet, served by the same process.
    podsets.create(&PostParams::default(), &common::podset("web", 2)).await.expect("create PodSet");

    // As the walkthrough says: kubectl apply (which keeps the object as applied in an
    // annotation: recordings redact it).
    let started = Instant::now();
    let sample_file = common::workspace().join("manifests/samples/cache_v1alpha1_memcached.yaml");
    let (ok, out) = common::kubectl(&["apply", "-n", &ns, "-f", &sample_file.to_string_lossy()]);
    assert!(ok, "kubectl apply: {out}");
    let nodes = converged(&mcs, &deployments, 3).await;
    let to_three = started.elapsed();
    common::kstatus::reads("memcached-sample", "Current", T, || async { mcs.get("memcached-sample").await.ok() }).await;
    let mc = mcs.get("memcached-sample").await.expect("get");
    assert_eq!(mc.metadata.finalizers.as_deref(), Some(&["cache.example.com/finalizer".to_string()][..]));
    let d = deployments.get("memcached-sample").await.expect("deployment");
    let owner = &d.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Memcached", Some(true)));
    let container = &d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec").containers[0];
    assert_eq!(container.image.as_deref(), Some("memcached:1.6.18"));
    assert_eq!(container.security_context.as_ref().and_then(|s| s.run_as_non_root), Some(true));
    let listed: Vec<String> = {
        let lp = ListParams::default().labels("app.kubernetes.io/instance=memcached-sample");
        let mut names: Vec<String> =
            pods.list(&lp).await.expect("pods").items.into_iter().filter_map(|p| p.metadata.name).collect();
        names.sort();
        names
    };
    assert_eq!(nodes, listed, "status.nodes lists the Deployment's pods");
    // They are real memcached processes: each answers the protocol on its pod IP.
    for name in &listed {
        let pod = pods.get(name).await.expect("pod");
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("a Running pod has an IP");
        let stats = memcached_stats(&ip, 11211).await;
        assert!(stats.contains("STAT version 1.6.18"), "{name} at {ip} answers stats: {stats}");
    }
    common::eventually("the PodSet beside it", T, || async {
        (common::active_pods(&pods, "web").await.len() == 2).then_some(())
    })
    .await;

    // kubectl patch memcached memcached-sample -p '{"spec":{"size":5}}'
    let started = Instant::now();
    let patch = json!({ "spec": { "size": 5 } });
    mcs.patch("memcached-sample", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
    converged(&mcs, &deployments, 5).await;
    let to_five = started.elapsed();

    // The live object as a test case (`policy record` reads it from the API server, where
    // kubectl's last-applied copy is): redacted, and it passes as a scenario.
    let case = record.path().join("memcached-sample.yaml");
    let object = format!("{ns}/memcached-sample");
    let memcached_wasm = dir.join("memcached.wasm");
    let (ok, out) = common::policy_cli(&[
        "record".as_ref(),
        "memcacheds".as_ref(),
        object.as_ref(),
        "--policy".as_ref(),
        memcached_wasm.as_os_str(),
        "-o".as_ref(),
        case.as_os_str(),
    ]);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&case).expect("the recorded case");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let last_applied = doc["input"]["parent"]["meta"]["annotations"]
        .as_sequence()
        .and_then(|a| a.iter().find(|kv| kv["key"] == "kubectl.kubernetes.io/last-applied-configuration"))
        .unwrap_or_else(|| panic!("kubectl's annotation is on the object:\n{text}"));
    assert_eq!(last_applied["value"], podset_host::reconcile::record::REDACTED, "{text}");
    assert!(!text.contains("\"containerPort\":11211"), "nothing of the applied JSON is left:\n{text}");
    assert!(text.contains("replicas: 5"), "the Deployment it controls is in the input:\n{text}");
    let (ok, out) = common::policy_cli(&["test".as_ref(), memcached_wasm.as_os_str(), case.as_os_str()]);
    assert!(ok && out.contains("1 passed, 0 failed"), "{out}");

    // Converged: nothing more is written for it, whatever wakes it.
    // (The shadow's tally, written to its ReconcilePolicy every few seconds, aside.)
    let writes = |metrics: &str| {
        sum_metric(metrics, "podset_api_writes_total", "")
            - sum_metric(metrics, "podset_api_writes_total", r#"resource="reconcilepolicies"#)
    };
    let before = writes(&op.metrics().await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = writes(&op.metrics().await);
    assert_eq!(after, before, "a converged Memcached and PodSet cost no writes");

    // kubectl delete: the finalizer flow runs, then everything is gone.
    let started = Instant::now();
    mcs.delete("memcached-sample", &DeleteParams::default()).await.expect("delete");
    eventually("the Memcached to be gone", T, || async {
        mcs.get_opt("memcached-sample").await.ok()?.is_none().then_some(())
    })
    .await;
    let gone = started.elapsed();
    assert!(memcached_events(&ns, "reason").contains("Deleting"), "the finalizer flow's Event");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    eventually("its Deployment, ReplicaSets and pods to be garbage-collected", T, || async {
        let lp = ListParams::default().labels("app.kubernetes.io/instance=memcached-sample");
        let d = deployments.list(&lp).await.ok()?.items.len();
        let r = rss.list(&lp).await.ok()?.items.len();
        let p = pods.list(&lp).await.ok()?.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
        (d + r + p == 0).then_some(())
    })
    .await;
    println!("Memcached walkthrough: 0→3 ready in {to_three:?}, 3→5 in {to_five:?}, deleted in {gone:?}");
    let st = common::shadow_settled(&client, &ns, "shadow", &op).await;
    assert_eq!((st.agreed, st.differed, st.failed, st.dropped), (st.decisions, 0, 0, 0), "{st:#?}");
    println!("Memcached shadow of the same module: {} decisions, all agree", st.decisions);

    // Every decision of the walkthrough, replayed with the module that made it, is the
    // same; the object kubectl applied reached the files redacted.
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops cleanly (log: {})", op.log.display());
    for (kind, module) in [("Memcached.cache.example.com", "memcached.wasm"), ("PodSet.app.example.com", "podset.wasm")]
    {
        let n = common::replays_exactly(&dir.join(module), &record.path().join(kind).join(&ns));
        assert!(n >= 3, "{kind}: {n} recorded decisions");
        println!("{kind}: {n} recorded decisions replayed, all agree");
    }
    // The operator's caches drop kubectl's last-applied copy: it never reaches a policy.
    let memcached = record.path().join("Memcached.cache.example.com").join(&ns).join("memcached-sample");
    for file in podset_host::author::replay::files(&[memcached]).expect("recordings") {
        let text = std::fs::read_to_string(&file).expect("read");
        assert!(!text.contains("last-applied"), "{text}");
    }
    common::delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn swapping_the_memcached_policy_redecides_every_memcached() {
    let client = common::client().await;
    let ns = common::namespace(&client, "mcswap").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memcached.wasm");
    let original = common::read_policy("memcached.wasm");
    std::fs::write(&file, &original).expect("policy file");
    let op = common::Operator::start_serving(&ns, &[&file], &common::kubeconfig_path()).await;
    let mcs = memcacheds(&client, &ns);
    const N: usize = 4;
    for i in 0..N {
        let mut mc = sample(1);
        mc.metadata.name = Some(format!("cache-{i}"));
        mcs.create(&PostParams::default(), &mc).await.expect("create");
    }
    let decided_by = |digest: String| {
        let mcs = mcs.clone();
        async move {
            let all = mcs.list(&ListParams::default()).await.ok()?;
            let n = all.items.iter().filter(|m| common::decided_by(*m, &digest)).count();
            (n == N).then_some(())
        }
    };
    let first = podset_host::sandbox::Digest::of(&original).to_string();
    eventually("every Memcached decided by the first module", T, || decided_by(first.clone())).await;

    // A rebuilt module: the same logic with one more byte in a custom section, so a
    // new digest, as an edit-and-rebuild gives.
    let rebuilt = common::with_custom_section(&original, "podset-test", b"v2");
    let second = podset_host::sandbox::Digest::of(&rebuilt).to_string();
    let started = Instant::now();
    replace(&file, &rebuilt);
    eventually("every Memcached re-decided by the new module", T, || decided_by(second.clone())).await;
    println!("{N} Memcacheds re-decided {:?} after the file was replaced", started.elapsed());
    assert_eq!(op.sum("podset_policy_loads_total", "result=\"ok\"").await, 2.0);
    common::delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_memcached_whose_policy_traps_is_deleted_once_the_finalizer_timeout_passes() {
    let client = common::client().await;
    let ns = common::namespace(&client, "mcteardown").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memcached.wasm");
    std::fs::write(&file, common::read_policy("memcached.wasm")).expect("policy file");
    let mut op =
        common::Operator::spawn_with_args(&ns, &[&file], &common::kubeconfig_path(), &["--finalizer-timeout", "5s"]);
    op.ready().await;
    let mcs = memcacheds(&client, &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    mcs.create(&PostParams::default(), &sample(1)).await.expect("create");
    eventually("the Memcached's finalizer and Deployment", T, || async {
        let mc = mcs.get("memcached-sample").await.ok()?;
        let finalizer = mc.metadata.finalizers.unwrap_or_default().contains(&"cache.example.com/finalizer".into());
        (finalizer && deployments.get_opt("memcached-sample").await.ok()?.is_some()).then_some(())
    })
    .await;

    // The module replaced by one that declares the same finalizer and traps on every
    // decision: the Memcached's cleanup can never be done by it.
    replace(&file, &common::read_policy("fixtures/trapping-memcached.wasm"));
    eventually("the trapping module to serve", T, || async {
        (op.sum("podset_policy_loads_total", "result=\"ok\"").await == 2.0).then_some(())
    })
    .await;
    // A change brings a decision, which traps: GitOps tools read the Memcached as Failed.
    let resize = Patch::Merge(json!({ "spec": { "size": 2 } }));
    mcs.patch("memcached-sample", &PatchParams::default(), &resize).await.expect("resize");
    let failed =
        common::kstatus::reads("memcached-sample", "Failed", T, || async { mcs.get("memcached-sample").await.ok() })
            .await;
    assert!(failed.message.contains("trap"), "{failed:?}");
    let started = Instant::now();
    mcs.delete("memcached-sample", &DeleteParams::default()).await.expect("delete");
    eventually("the Memcached to be gone", T, || async {
        mcs.get_opt("memcached-sample").await.ok()?.is_none().then_some(())
    })
    .await;
    let took = started.elapsed();
    // deletionTimestamp has whole seconds: the 5 s count from up to 1 s before the delete.
    assert!(took >= Duration::from_secs(4), "the policy had its 5 s first: gone after {took:?}");
    eventually("its Deployment to be garbage-collected", T, || async {
        deployments.get_opt("memcached-sample").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(op.sum("podset_policy_failures_total", "reason=\"FinalizerTimedOut\"").await >= 1.0);
    let events = memcached_events(&ns, "message");
    assert!(events.contains("FinalizerTimedOut"), "a Warning Event says why: {events}");
    assert!(events.contains("trap"), "and the traps before it: {events}");
    println!("a Memcached whose policy traps: deleted {took:?} after kubectl delete (timeout 5 s)");
    assert!(op.terminate(Duration::from_secs(10)));
    common::delete_namespace(&client, &ns).await;
}

fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
