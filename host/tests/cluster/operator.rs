//! The operator as users run it (`podset-host run`), against the real API server,
//! garbage collector and node simulator of the test control plane.

use podset_test_support as common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Env, active_pods, eventually, is_active};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;

const T: Duration = Duration::from_secs(30);

/// Holds the observed active pod count steady for `d`, asserting it stays `n`.
async fn stays(env: &Env, name: &str, n: usize, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        assert_eq!(active_pods(&env.pods, name).await.len(), n, "{name} drifted from {n} active pods");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn seed_walkthrough_scales_exactly_and_garbage_collects() {
    let env = Env::new("walkthrough").await;
    common::require_real_node(&env.client).await;
    let started = Instant::now();
    // The seed's PodSet, no template: busybox pods that really run on the real node.
    env.create_real("web", 3).await;
    let names = env.converged("web", 3).await;
    let t3 = started.elapsed();

    // Owner references, labels, restricted security context.
    let ps = env.podsets.get("web").await.expect("PodSet");
    let uid = ps.metadata.uid.clone().expect("uid");
    for name in &names {
        let pod = env.pods.get(name).await.expect("pod");
        let owner = &pod.metadata.owner_references.as_ref().expect("owner refs")[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("PodSet", "web", uid.as_str()));
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
        assert_eq!(pod.metadata.labels.as_ref().expect("labels")["app.example.com/podset"], "web");
        let spec = pod.spec.expect("spec");
        let psc = spec.security_context.expect("pod security context");
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.seccomp_profile.expect("seccomp").type_, "RuntimeDefault");
        let sc = spec.containers[0].security_context.clone().expect("container security context");
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]));
    }
    let status = ps.status.expect("status");
    assert_eq!(status.observed_generation, ps.metadata.generation);
    let digest = status.policy_digest.as_ref();
    assert!(digest.is_some_and(|d| d.starts_with("sha256:")), "the deciding digest is recorded: {digest:?}");
    assert!(status.conditions.iter().any(|c| c.type_ == "Available" && c.status == "True"));

    let t = Instant::now();
    env.scale("web", 5).await;
    env.converged("web", 5).await;
    let t5 = t.elapsed();
    stays(&env, "web", 5, Duration::from_secs(1)).await;
    assert_eq!(
        env.op.sum("podset_api_writes_total", r#"verb="POST",resource="pods""#).await,
        5.0,
        "exactly 5 creations"
    );

    let t = Instant::now();
    env.scale("web", 1).await;
    env.converged("web", 1).await;
    let t1 = t.elapsed();
    stays(&env, "web", 1, Duration::from_secs(1)).await;
    assert_eq!(
        env.op.sum("podset_api_writes_total", r#"verb="DELETE",resource="pods""#).await,
        4.0,
        "exactly 4 deletions"
    );
    println!("converged: 0→3 in {t3:?}, 3→5 in {t5:?}, 5→1 in {t1:?}");

    env.podsets.delete("web", &DeleteParams::default()).await.expect("delete PodSet");
    let t = Instant::now();
    eventually("the garbage collector to delete the pods", Duration::from_secs(60), || async {
        let left = env.pods.list(&Default::default()).await.ok()?;
        left.items.iter().all(|p| p.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    let collected = t.elapsed();
    // The seed's `sleep` ignores SIGTERM, so the kubelet kills it after the 30 s grace period.
    eventually("the kubelet to remove the pods", Duration::from_secs(120), || async {
        let left = env.pods.list(&Default::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    println!("garbage-collected in {collected:?}; pods gone after {:?}", t.elapsed());
    env.cleanup().await;
}

#[tokio::test]
async fn deleted_failed_and_terminating_pods_are_replaced_and_not_counted() {
    let env = Env::new("replace").await;
    env.create("web", 2).await;
    let names = env.converged("web", 2).await;

    // Deleted by hand: replaced.
    env.pods.delete(&names[0], &DeleteParams::default()).await.expect("delete pod");
    let after = env.converged("web", 2).await;
    assert!(!after.contains(&names[0]));

    // Failed (set by hand on the simulated node; real_node.rs has a container that
    // really exits non-zero): replaced, not counted, not deleted.
    let failed = after[0].clone();
    let status = serde_json::json!({ "status": { "phase": "Failed" } });
    env.pods.patch_status(&failed, &PatchParams::default(), &Patch::Merge(&status)).await.expect("fail pod");
    let after = env.converged("web", 2).await;
    assert!(!after.contains(&failed));
    let still = env.pods.get(&failed).await.expect("the Failed pod is left alone");
    assert_eq!(still.status.and_then(|s| s.phase).as_deref(), Some("Failed"));

    // Terminating (held by a finalizer): replaced and not counted while it lingers.
    let held = after[0].clone();
    let fin = serde_json::json!({ "metadata": { "finalizers": ["test.podset.dev/hold"] } });
    env.pods.patch(&held, &PatchParams::default(), &Patch::Merge(&fin)).await.expect("add finalizer");
    env.pods.delete(&held, &DeleteParams::default()).await.expect("delete held pod");
    let after = env.converged("web", 2).await;
    assert!(!after.contains(&held));
    let lingering = env.pods.get(&held).await.expect("still terminating");
    assert!(lingering.metadata.deletion_timestamp.is_some());
    stays(&env, "web", 2, Duration::from_secs(1)).await;
    let unfin = serde_json::json!({ "metadata": { "finalizers": null } });
    env.pods.patch(&held, &PatchParams::default(), &Patch::Merge(&unfin)).await.expect("release finalizer");
    env.cleanup().await;
}

#[tokio::test]
async fn a_labelled_pod_without_owner_is_neither_counted_nor_deleted() {
    let env = Env::new("orphan").await;
    let orphan: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "stray", "labels": { "app.example.com/podset": "web" } },
        "spec": common::restricted(serde_json::json!({ "containers": [{ "name": "c", "image": "busybox" }] }))
    }))
    .expect("pod");
    env.pods.create(&PostParams::default(), &orphan).await.expect("create orphan");
    env.create("web", 2).await;
    let names = env.converged("web", 2).await;
    assert!(!names.contains(&"stray".to_string()), "the orphan is not counted");
    let status = env.podsets.get("web").await.expect("PodSet").status.expect("status");
    assert!(!status.pod_names.contains(&"stray".to_string()));
    stays(&env, "web", 2, Duration::from_secs(1)).await;
    let stray = env.pods.get("stray").await.expect("the orphan survives");
    assert!(stray.metadata.deletion_timestamp.is_none() && stray.metadata.owner_references.is_none());
    env.cleanup().await;
}

#[tokio::test]
async fn bursts_of_updates_never_overshoot_and_converge_exactly() {
    let env = Env::new("burst").await;
    // Record the most active pods ever seen, from a watch of our own.
    let max_active = Arc::new(Mutex::new(0usize));
    let watch = {
        let (pods, max_active) = (env.pods.clone(), max_active.clone());
        tokio::spawn(async move {
            let mut active: HashMap<String, bool> = HashMap::new();
            let mut stream = watcher(pods, watcher::Config::default()).boxed();
            while let Some(Ok(ev)) = stream.next().await {
                match ev {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                        active.insert(p.metadata.name.clone().unwrap_or_default(), is_active(&p));
                    }
                    watcher::Event::Delete(p) => {
                        active.remove(&p.metadata.name.unwrap_or_default());
                    }
                    _ => {}
                }
                let n = active.values().filter(|a| **a).count();
                let mut m = max_active.lock().expect("lock");
                *m = (*m).max(n);
            }
        })
    };

    env.create("web", 2).await;
    env.converged("web", 2).await;
    // Mid-scale-up changes, no waiting in between.
    for r in [8, 4, 6, 3] {
        env.scale("web", r).await;
    }
    env.converged("web", 3).await;
    stays(&env, "web", 3, Duration::from_secs(2)).await;
    for r in [1, 7, 2, 5] {
        env.scale("web", r).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    env.converged("web", 5).await;
    stays(&env, "web", 5, Duration::from_secs(2)).await;
    watch.abort();
    let max = *max_active.lock().expect("lock");
    assert!(max <= 8, "saw {max} active pods; the largest replicas requested was 8");
    env.cleanup().await;
}

#[tokio::test]
async fn a_converged_podset_costs_no_writes() {
    let env = Env::new("nowrites").await;
    env.create("web", 2).await;
    let names = env.converged("web", 2).await;
    // Let the last events and status settle.
    let writes = eventually("writes to settle", T, || async {
        let a = env.op.sum("podset_api_writes_total", "").await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        let b = env.op.sum("podset_api_writes_total", "").await;
        (a == b).then_some(b)
    })
    .await;
    let reconciles = env.op.sum("podset_reconciles_total", "").await;

    // Force reconciles: touch a pod (a pod event re-queues its owner) twice.
    for i in 0..2 {
        let touch = serde_json::json!({ "metadata": { "labels": { "touched": i.to_string() } } });
        env.pods.patch(&names[0], &PatchParams::default(), &Patch::Merge(&touch)).await.expect("touch pod");
        eventually("a reconcile after the touch", T, || async {
            (env.op.sum("podset_reconciles_total", "").await > reconciles + i as f64).then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = env.op.sum("podset_api_writes_total", "").await;
    assert_eq!(after, writes, "a converged PodSet's reconcile wrote to the API:\n{}", env.op.metrics().await);
    env.cleanup().await;
}

/// The operator's Events with `reason` about PodSet `name`, once there are `n` of them
/// (they are posted in the background), then still `n` after a moment.
async fn events_about(env: &Env, name: &str, reason: &str, n: usize) -> Vec<Event> {
    let events: kube::Api<Event> = kube::Api::namespaced(env.client.clone(), &env.ns);
    let about = || async {
        let list = events.list(&Default::default()).await.expect("events").items;
        let wanted = |e: &Event| {
            e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        };
        list.into_iter().filter(wanted).collect::<Vec<_>>()
    };
    eventually(&format!("{n} {reason} Events about {name}"), T, || async { (about().await.len() >= n).then_some(()) })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = about().await;
    assert_eq!(seen.len(), n, "{reason} Events about {name}: {:?}", seen.iter().map(|e| &e.note).collect::<Vec<_>>());
    seen
}

#[tokio::test]
async fn what_a_decision_creates_or_deletes_is_one_event_naming_every_child() {
    let env = Env::new("events").await;
    env.create("web", 3).await;
    let mut three = env.converged("web", 3).await;
    let created = events_about(&env, "web", "SuccessfulCreate", 1).await;
    let note = created[0].note.clone().unwrap_or_default();
    let (said, listed) = note.split_once(": ").unwrap_or_default();
    assert_eq!(said, "Created 3 pods", "{note}");
    let mut named: Vec<String> = listed.split(", ").map(String::from).collect();
    named.sort();
    three.sort();
    assert_eq!(named, three, "the Event names the pods made");
    assert_eq!(created[0].related, None, "about the PodSet alone: {:?}", created[0].related);

    env.scale("web", 1).await;
    let one = env.converged("web", 1).await;
    let deleted = events_about(&env, "web", "SuccessfulDelete", 1).await;
    let note = deleted[0].note.clone().unwrap_or_default();
    assert!(note.starts_with("Deleted 2 pods: "), "{note}");
    assert!(three.iter().filter(|p| !one.contains(p)).all(|p| note.contains(p.as_str())), "{note} of {three:?}");

    // One pod: the ReplicaSet controller's words, about the pod itself.
    env.scale("web", 2).await;
    let two = env.converged("web", 2).await;
    let created = events_about(&env, "web", "SuccessfulCreate", 2).await;
    let new = two.iter().find(|p| !one.contains(p)).expect("a new pod");
    let single = created.iter().find(|e| e.note.as_deref() == Some(&format!("Created pod: {new}"))).expect("its Event");
    assert_eq!(single.related.as_ref().and_then(|r| r.name.as_deref()), Some(new.as_str()));
    env.cleanup().await;
}

#[tokio::test]
async fn sigterm_stops_the_operator_gracefully() {
    let mut env = Env::new("sigterm").await;
    env.create("web", 1).await;
    env.converged("web", 1).await;
    assert!(env.op.terminate(Duration::from_secs(10)), "exit after SIGTERM (log: {})", env.op.log.display());
    env.cleanup().await;
}

#[tokio::test]
async fn an_operator_that_cannot_reach_its_cluster_is_not_ready_and_still_stops() {
    // A kubeconfig pointing at a loopback port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, &format!("https://127.0.0.1:{closed}"), "t");
    let mut op = common::Operator::spawn("nowhere", &common::policy_dir().join("podset.wasm"), &kubeconfig);
    eventually("the operator to serve /healthz", T, || async { common::http_get(op.port, "/healthz").await }).await;
    // Not ready, and /readyz says why: the API server cannot be reached.
    let body = eventually("/readyz to say why it is not ready", T, || async {
        op.readyz().await.filter(|(ok, body)| !ok && body.contains("does not answer")).map(|(_, b)| b)
    })
    .await;
    assert!(body.contains("podset.wasm"), "it names what waits for the API server: {body}");
    let log = std::fs::read_to_string(&op.log).expect("log");
    assert!(
        log.contains(&format!("127.0.0.1:{closed}")) && log.contains("retrying"),
        "the log names the server and retries"
    );
    assert!(op.terminate(Duration::from_secs(10)), "SIGTERM before the caches synced (log: {})", op.log.display());
}
