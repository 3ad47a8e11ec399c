//! `make bench`: the operator (release build) on a private control plane. Prints a
//! table: convergence time for many PodSets, a policy swap across all of them, and the
//! operator's memory. Measurements only; nothing here asserts a speed.

use podset_test_support as common;

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use podset_host::crd::PodSet;
use podset_host::sandbox::Digest;

const PODSETS: usize = 50;
const REPLICAS: i32 = 3;
const T: Duration = Duration::from_secs(300);

/// Resident memory of `pid` from /proc: (current, peak) in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

#[tokio::main]
async fn main() {
    let client = common::client().await;
    let ns = common::namespace(&client, "bench").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("policy.wasm");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    std::fs::write(&file, &good).expect("policy file");
    let op = common::Operator::start(&ns, &file).await;
    let (idle_rss, _) = memory(op.pid());
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut rows: Vec<(String, String)> = Vec::new();

    let started = Instant::now();
    for r in join_all((0..PODSETS).map(|i| {
        let podsets = podsets.clone();
        let ps = common::podset(&format!("bench-{i:03}"), REPLICAS);
        async move { podsets.create(&PostParams::default(), &ps).await }
    }))
    .await
    {
        r.expect("create PodSet");
    }
    let d_good = Digest::of(&good).to_string();
    common::eventually("all PodSets converged", T, || common::all_decided_by(&podsets, PODSETS, &d_good, REPLICAS))
        .await;
    let converge = started.elapsed();
    let total_pods = pods.list(&ListParams::default()).await.expect("pods").items.len();
    rows.push((
        format!("{PODSETS} PodSets × {REPLICAS} replicas: created → all ready, status written"),
        format!("{converge:.2?}"),
    ));
    rows.push(("pods created".into(), total_pods.to_string()));

    let d_canary = Digest::of(&canary).to_string();
    let swap_started = Instant::now();
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, &canary).expect("write");
    std::fs::rename(&tmp, &file).expect("rename");
    common::eventually("all PodSets re-decided", T, || common::all_decided_by(&podsets, PODSETS, &d_canary, REPLICAS))
        .await;
    rows.push((
        format!("policy file swap → all {PODSETS} PodSets report the new digest"),
        format!("{:.2?}", swap_started.elapsed()),
    ));

    let metrics = op.metrics().await;
    let sum = common::sum_metric(&metrics, "podset_policy_decision_duration_seconds_sum", "");
    let count = common::sum_metric(&metrics, "podset_policy_decision_duration_seconds_count", "");
    let reconciles = common::sum_metric(&metrics, "podset_reconciles_total", "");
    let writes = common::sum_metric(&metrics, "podset_api_writes_total", "");
    rows.push(("reconciles".into(), format!("{reconciles}")));
    rows.push(("API writes (pods, status, events)".into(), format!("{writes}")));
    rows.push(("mean policy decision (fresh instance + call)".into(), format!("{:.1} µs", sum / count.max(1.0) * 1e6)));
    let (rss, peak) = memory(op.pid());
    rows.push((
        "operator RSS: idle → after the run (peak)".into(),
        format!("{idle_rss:.1} → {rss:.1} MiB ({peak:.1} MiB)"),
    ));

    let title = "operator (release build, embedded control plane)";
    let width = rows.iter().map(|(k, _)| k.chars().count()).chain([title.len()]).max().unwrap_or(0);
    let vw = rows.iter().map(|(_, v)| v.chars().count()).max().unwrap_or(0);
    println!("\n| {title:<width$} | {:>vw$} |", "");
    println!("|{}|{}:|", "-".repeat(width + 2), "-".repeat(vw + 1));
    for (k, v) in rows {
        println!("| {k:<width$} | {v:>vw$} |");
    }
    common::delete_namespace(&client, &ns).await;
}
