//! The Netperf policy on the real node: the sample measures real pod-to-pod TCP
//! throughput over the node's bridge; the operator is killed (SIGKILL) in each phase
//! and a new one finishes the test from the status, with exactly one server and one
//! client pod ever created (the API server's audit log); a Netperf deleted mid-test
//! leaves nothing behind.

use podset_test_support as common;

use std::time::{Duration, Instant};

use common::audit::{AuditLog, operator_pod_writes};
use common::{Operator, eventually, kubectl, policy_dir, workspace};
use guest_netperf::types::{Netperf, NetperfSpec, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

/// Long enough for a pod start, a test and the phases around it on a busy machine.
const T: Duration = Duration::from_secs(120);

async fn operator(ns: &str) -> Operator {
    let policy = policy_dir().join("netperf.wasm");
    Operator::start_serving(ns, &[&policy], &common::kubeconfig_path()).await
}

async fn phase_of(netperfs: &Api<Netperf>, name: &str) -> Option<Phase> {
    Some(netperfs.get(name).await.ok()?.status?.status)
}

async fn finished(netperfs: &Api<Netperf>, name: &str, op: &Operator) -> Netperf {
    eventually(&format!("{name} to finish (operator log: {})", op.log.display()), T, || async {
        let np = netperfs.get(name).await.ok()?;
        np.status.as_ref()?.status.finished().then_some(np)
    })
    .await
}

/// The pods of Netperf `name` still there (terminating ones included).
async fn pods_of(pods: &Api<Pod>, name: &str) -> Vec<String> {
    let selector = format!("app.kubernetes.io/name=netperf,app.kubernetes.io/instance={name}");
    let list = pods.list(&ListParams::default().labels(&selector)).await.map(|l| l.items).unwrap_or_default();
    list.into_iter().filter_map(|p| p.metadata.name).collect()
}

#[tokio::test]
async fn the_sample_measures_pod_to_pod_throughput_on_the_real_node() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "netperf").await;
    // Every decision of the phase machine is recorded, and replayed at the end.
    let record = tempfile::tempdir().expect("tempdir");
    let netperf = policy_dir().join("netperf.wasm");
    let mut op = Operator::spawn_with_args(
        &ns,
        &[&netperf],
        &common::kubeconfig_path(),
        &["--record-dir", &record.path().to_string_lossy()],
    );
    op.ready().await;
    // A shadow of the serving module: given the same input, the phase machine decides
    // the same at every step.
    common::publish_shadow(&client, &ns, "shadow", "shadow-module", &common::read_policy("netperf.wasm"), None).await;
    common::policy_loaded(&client, &ns, "shadow", &op).await;
    let audit = AuditLog::open();
    let mark = audit.mark();

    let sample = workspace().join("manifests/samples/app_v1alpha1_netperf.yaml");
    let applied = Instant::now();
    let (ok, out) = kubectl(&["apply", "-n", &ns, "-f", &sample.to_string_lossy()]);
    assert!(ok, "kubectl apply: {out}");
    let netperfs: Api<Netperf> = Api::namespaced(client.clone(), &ns);
    let np = finished(&netperfs, "netperf-sample", &op).await;
    let took = applied.elapsed();
    let status = np.status.expect("a status");
    assert_eq!(status.status, Phase::Done, "the test failed: {:?}", status.message);
    common::kstatus::reads("netperf-sample", "Current", Duration::from_secs(30), || async {
        netperfs.get("netperf-sample").await.ok()
    })
    .await;
    let speed = status.speed_bits_per_sec.expect("a speed");
    assert!(speed > 0, "a measured speed: {speed}");
    println!("netperf-sample: {:.2} Gbit/s, Done {took:.1?} after kubectl apply", speed as f64 / 1e9);

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    eventually("the test's pods to be deleted", T, || async {
        pods_of(&pods, "netperf-sample").await.is_empty().then_some(())
    })
    .await;
    let (ok, out) = kubectl(&["get", "netperf", "-n", &ns, "netperf-sample"]);
    assert!(ok && out.contains("Done"), "the Phase column: {out}");
    assert_eq!(operator_pod_writes(&audit.since(&mark), &ns, "create"), 2, "one server and one client");
    let st = common::shadow_settled(&client, &ns, "shadow", &op).await;
    assert_eq!((st.agreed, st.differed, st.failed, st.dropped), (st.decisions, 0, 0, 0), "{st:#?}");
    println!("netperf-sample: a shadow of the same module agreed on all {} decisions", st.decisions);

    // Replayed with the module that made them, the phase machine's recorded decisions
    // are the same, one by one: each carries the status it decided from.
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops cleanly (log: {})", op.log.display());
    let recorded = record.path().join("Netperf.app.example.com").join(&ns).join("netperf-sample");
    let n = common::replays_exactly(&netperf, &recorded);
    assert!(n >= 4, "a decision per phase at least: {n}");
    println!("netperf-sample: {n} recorded decisions replayed, all agree");
    common::delete_namespace(&client, &ns).await;
}

/// Kills the operator with SIGKILL at each point of the test, in turn, and starts a new
/// one: the test finishes, with one server and one client pod created in all.
#[tokio::test]
async fn killed_in_any_phase_the_operator_resumes_the_test_from_its_status() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "netperf-kill").await;
    let mut op = operator(&ns).await;
    let netperfs: Api<Netperf> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let audit = AuditLog::open();

    // Where to kill: once the server pod exists (the status may not say Server yet),
    // once the client pod exists (the status may not say Test yet), and while the
    // client runs.
    let points: [(&str, &str); 3] = [("server-made", "-server"), ("client-made", "-client"), ("mid-test", "")];
    let mut report = Vec::new();
    for (name, pod_suffix) in points {
        let mark = audit.mark();
        let spec = NetperfSpec { server_node: None, client_node: None, duration: 3 };
        netperfs.create(&PostParams::default(), &Netperf::new(name, spec)).await.expect("create the Netperf");
        let killed_in = eventually(&format!("{name}: the point to kill at"), T, || async {
            if pod_suffix.is_empty() {
                let client = pods.get(&format!("{name}-client")).await.ok()?;
                let running = client.status?.phase.as_deref() == Some("Running");
                return running.then_some(phase_of(&netperfs, name).await);
            }
            pods.get(&format!("{name}{pod_suffix}")).await.ok().map(|_| ())?;
            Some(phase_of(&netperfs, name).await)
        })
        .await;
        op.kill();
        op.respawn();
        let np = finished(&netperfs, name, &op).await;
        let status = np.status.expect("a status");
        assert_eq!(status.status, Phase::Done, "{name}: {:?}", status.message);
        assert!(status.speed_bits_per_sec.is_some_and(|s| s > 0), "{name}: a speed");
        eventually(&format!("{name}: the pods to be deleted"), T, || async {
            pods_of(&pods, name).await.is_empty().then_some(())
        })
        .await;
        let creates = operator_pod_writes(&audit.since(&mark), &ns, "create");
        assert_eq!(creates, 2, "{name}: one server and one client pod ever created");
        report.push(format!("{name} (status then {killed_in:?}): Done, {creates} pods created"));
    }
    println!("killed and resumed: {}", report.join("; "));
    drop(op);
    common::delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_netperf_deleted_mid_test_leaves_nothing_behind() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "netperf-delete").await;
    let op = operator(&ns).await;
    let netperfs: Api<Netperf> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let spec = NetperfSpec { server_node: None, client_node: None, duration: 30 };
    netperfs.create(&PostParams::default(), &Netperf::new("doomed", spec)).await.expect("create the Netperf");
    eventually(&format!("the test to run (operator log: {})", op.log.display()), T, || async {
        (phase_of(&netperfs, "doomed").await == Some(Phase::Test)).then_some(())
    })
    .await;
    assert_eq!(pods_of(&pods, "doomed").await.len(), 2, "server and client run");
    netperfs.delete("doomed", &DeleteParams::default()).await.expect("delete the Netperf");
    eventually("the Netperf and its pods to be gone", T, || async {
        let gone = netperfs.get_opt("doomed").await.ok()?.is_none() && pods_of(&pods, "doomed").await.is_empty();
        gone.then_some(())
    })
    .await;
    drop(op);
    common::delete_namespace(&client, &ns).await;
}
