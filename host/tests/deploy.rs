//! The operator deployed as users deploy it (`hack/deploy.sh`, what `make deploy` runs):
//! its image imported into the real node, two replicas under the shipped ServiceAccount
//! and RBAC, one Lease. The leader pod is deleted, forced and gracefully, and the
//! standby takes over without a PodSet ever having more pods than asked for.
//!
//! Scoped to the test's namespace (WATCH_NAMESPACE), so the other tests' objects are
//! left to their own operators.

use podset_test_support as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{MostActive, active_pods, cluster_dir, eventually, http_body, kubectl, podset, workspace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use podset_host::crd::PodSet;

const SYSTEM: &str = "podset-system";
const SELECTOR: &str = "app.kubernetes.io/name=podset-host";
const METRICS_PORT: u16 = 8080;

fn deploy_script(args: &[&str], watch_namespace: &str) -> (bool, String) {
    let out = Command::new(workspace().join("hack/deploy.sh"))
        .args(args)
        .env("CLUSTER_DIR", cluster_dir())
        .env("WATCH_NAMESPACE", watch_namespace)
        .env("IMAGE_PROFILE", "debug")
        .env_remove("IMG")
        .output()
        .expect("hack/deploy.sh runs");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The operator's pods that are not terminating, by name, with their IPs once they have one.
async fn operator_pods(pods: &Api<Pod>) -> Vec<(String, Option<String>)> {
    let list = pods.list(&ListParams::default().labels(SELECTOR)).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.name?, p.status.and_then(|s| s.pod_ip))))
        .collect()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get("podset-host").await.ok()?.spec?.holder_identity
}

/// The pod's `/readyz` body (`ok (leader)`, `ok (standby)`), over its pod IP.
async fn readyz(ip: &str) -> Option<String> {
    http_body(ip, METRICS_PORT, "/readyz").await
}

/// Writes a pod sent that change the cluster, from its `/metrics`.
async fn writes(ip: &str) -> f64 {
    common::cluster_writes(&http_body(ip, METRICS_PORT, "/metrics").await.unwrap_or_default())
}

/// Waits until two operator pods serve, one leading (holding the Lease) and one on
/// standby; returns (leader, standby) as (name, IP).
async fn leader_and_standby(pods: &Api<Pod>, leases: &Api<Lease>) -> ((String, String), (String, String)) {
    eventually("two operator pods: a leader and a standby", Duration::from_secs(120), || async {
        let holder = holder(leases).await?;
        let mut leader = None;
        let mut standby = None;
        for (name, ip) in operator_pods(pods).await {
            let ip = ip?;
            match readyz(&ip).await?.as_str() {
                "ok (leader)" if name == holder => leader = Some((name, ip)),
                "ok (standby)" => standby = Some((name, ip)),
                _ => return None,
            }
        }
        Some((leader?, standby?))
    })
    .await
}

#[tokio::test]
async fn deployed_the_standby_pod_takes_over_when_the_leader_pod_is_deleted() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "deployed").await;
    let started = Instant::now();
    let (ok, out) = deploy_script(&["deploy"], &ns);
    assert!(ok, "hack/deploy.sh deploy failed:\n{out}");
    println!("deployed in {:?}", started.elapsed());

    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM);
    let ((leader, leader_ip), (standby, standby_ip)) = leader_and_standby(&pods, &leases).await;

    // The deployed operator serves the namespace; no local operator runs for it.
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let ns_pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let converged = |replicas: i32| {
        let (podsets, ns_pods) = (podsets.clone(), ns_pods.clone());
        async move {
            eventually(
                &format!("the deployed operator to converge web on {replicas}"),
                Duration::from_secs(60),
                || async {
                    (active_pods(&ns_pods, "web").await.len() == replicas as usize
                        && podsets.get("web").await.ok()?.status?.available_replicas == replicas)
                        .then_some(())
                },
            )
            .await
        }
    };
    let scale = |replicas: i32| {
        let podsets = podsets.clone();
        async move {
            let patch = serde_json::json!({ "spec": { "replicas": replicas } });
            podsets.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
        }
    };
    podsets.create(&PostParams::default(), &podset("web", 3)).await.expect("create PodSet");
    converged(3).await;
    assert!(writes(&leader_ip).await >= 3.0, "the leader {leader} created the pods");
    assert_eq!(writes(&standby_ip).await, 0.0, "the standby {standby} changed nothing");

    // Sample the active pods through both handovers.
    let sampler = MostActive::start(ns_pods.clone(), "web");

    let mut handovers = Vec::new();
    let mut replicas = 3;
    for (how, args) in [("forced", vec!["--grace-period=0", "--force"]), ("graceful", vec![])] {
        let (old, _) = leader_and_standby(&pods, &leases).await;
        let t = Instant::now();
        let mut delete = vec!["delete", "pod", "-n", SYSTEM, &old.0, "--wait=false"];
        delete.extend(args.iter().copied());
        let (ok, out) = kubectl(&delete);
        assert!(ok, "kubectl delete pod {}: {out}", old.0);
        let new_holder = eventually("another pod to take the Lease", Duration::from_secs(60), || async {
            holder(&leases).await.filter(|h| *h != old.0)
        })
        .await;
        let took = t.elapsed();
        replicas += 1;
        scale(replicas).await;
        converged(replicas).await;
        handovers.push(format!("{how} {took:?} (to {new_holder}, converged {:?} after the delete)", t.elapsed()));
    }
    // The replacement pod came up as a standby and changed nothing.
    let (_, (standby, standby_ip)) = leader_and_standby(&pods, &leases).await;
    assert_eq!(writes(&standby_ip).await, 0.0, "the new standby {standby} changed nothing");
    let most = sampler.stop().await;
    assert!(most <= replicas as usize, "never more active pods than asked for: saw {most}");

    let memory = pod_memory(&pods, &leader_now(&leases).await).await;
    println!(
        "leader handover on pod deletion: {}; at most {most} active pods; the leader pod's memory: {memory}",
        handovers.join(", ")
    );

    // Not `undeploy`: it deletes the CRDs, under every other test.
    let (ok, out) = kubectl(&["delete", "deployment,poddisruptionbudget", "-n", SYSTEM, "podset-host", "--wait=true"]);
    assert!(ok, "removing the Deployment: {out}");
    common::delete_namespace(&client, &ns).await;
}

async fn leader_now(leases: &Api<Lease>) -> String {
    holder(leases).await.expect("a Lease holder")
}

/// The pod's resident memory as its cgroup counts it (memory.stat `total_rss`), found
/// by the pod's UID under the node's cgroup root.
async fn pod_memory(pods: &Api<Pod>, name: &str) -> String {
    let Some(uid) = pods.get(name).await.ok().and_then(|p| p.metadata.uid) else {
        return format!("{name} is gone");
    };
    let want = format!("pod{uid}");
    let mut dirs = vec![std::path::PathBuf::from("/sys/fs/cgroup/memory")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            if entry.file_name().to_string_lossy() == want {
                let stat = std::fs::read_to_string(entry.path().join("memory.stat")).unwrap_or_default();
                let rss = stat.lines().find_map(|l| l.strip_prefix("total_rss ")).and_then(|v| v.parse::<u64>().ok());
                return rss.map(|b| format!("{:.1} MiB RSS", b as f64 / 1048576.0)).unwrap_or_else(|| "unknown".into());
            }
            dirs.push(entry.path());
        }
    }
    format!("no cgroup for {want}")
}
