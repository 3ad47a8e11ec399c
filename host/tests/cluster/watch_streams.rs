//! Stale and odd watch streams: the operator reaches the real API server through a
//! proxy of ours that bends its pod watches (test-support's `watch_proxy`): events
//! seconds late after its own creates and deletes (Sieve's stale state), duplicated,
//! reordered, malformed, and a watch that closes every few seconds. In each, a PodSet
//! goes 0 → 5 → 2 → 4; the API server's audit log must show exactly the 7 creates and
//! 3 deletes that takes (no double action), never more than 5 active pods, and the
//! operator must still be serving at the end.

use podset_test_support as common;

use std::time::Duration;

use common::audit::{AuditLog, operator_pod_writes, peak_active_pods};
use common::watch_proxy::{Bend, WatchProxy};
use common::{Env, Operator, policy_dir};
use kube::api::Api;

struct Bent {
    env: Env,
    proxy: WatchProxy,
    _dir: tempfile::TempDir,
}

/// An operator whose pod watches pass through a proxy that bends them with `bend`.
async fn bent(prefix: &str, bend: Bend) -> Bent {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, prefix).await;
    let proxy = WatchProxy::start("pods", bend).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("bent.kubeconfig");
    proxy.kubeconfig(&kubeconfig);
    let op = Operator::spawn_with_args(&ns, &[&policy_dir().join("podset.wasm")], &kubeconfig, &[]);
    op.ready().await;
    let env = Env {
        podsets: Api::namespaced(client.clone(), &ns),
        pods: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        op,
    };
    Bent { env, proxy, _dir: dir }
}

/// The flow 0 → 5 → 2 → 4, checked in the audit log; returns the operator's log.
async fn flow(b: &Bent, what: &str) -> String {
    let audit = AuditLog::open();
    let mark = audit.mark();
    let env = &b.env;
    env.create("web", 5).await;
    env.converged("web", 5).await;
    env.scale("web", 2).await;
    env.converged("web", 2).await;
    env.scale("web", 4).await;
    env.converged("web", 4).await;
    // Late events have arrived by now, and whatever they would have made the operator do, it did.
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.converged("web", 4).await;

    let entries = audit.since(&mark);
    let ours = |verb| operator_pod_writes(&entries, &env.ns, verb);
    let (creates, deletes) = (ours("create"), ours("delete"));
    let peak = peak_active_pods(&entries, &env.ns, 0);
    let log = std::fs::read_to_string(&env.op.log).unwrap_or_default();
    println!("{what}: {creates} pod creates, {deletes} deletes, peak {peak} active pods");
    assert_eq!((creates, deletes), (7, 3), "{what}: exactly the creates and deletes 0 → 5 → 2 → 4 takes");
    assert!(peak <= 5, "{what}: never more active pods than asked: saw {peak}");
    assert!(env.op.readyz().await.is_some_and(|(ok, _)| ok), "{what}: the operator still serves");
    assert!(!log.contains("panicked"), "{what}: no panic (log: {})", env.op.log.display());
    log
}

#[tokio::test]
async fn a_pod_watch_seconds_behind_the_operators_own_writes_never_makes_more_pods_than_asked() {
    let b = bent("watch-delayed", Bend::Delay(Duration::from_secs(3))).await;
    flow(&b, "pod events 3 s late").await;
    b.env.cleanup().await;
}

#[tokio::test]
async fn duplicated_pod_events_cause_no_double_action() {
    let b = bent("watch-dup", Bend::Duplicate).await;
    flow(&b, "every pod event twice").await;
    b.env.cleanup().await;
}

#[tokio::test]
async fn reordered_pod_events_cause_no_double_action() {
    let b = bent("watch-reorder", Bend::Reorder).await;
    flow(&b, "pod events swapped in pairs").await;
    b.env.cleanup().await;
}

#[tokio::test]
async fn malformed_pod_events_are_reported_and_cause_no_double_action() {
    let b = bent("watch-malformed", Bend::Malformed { every: 4 }).await;
    let log = flow(&b, "a malformed line before every 4th pod event").await;
    assert!(log.contains("watch failed"), "the malformed event is reported (log: {})", b.env.op.log.display());
    b.env.cleanup().await;
}

#[tokio::test]
async fn a_pod_watch_closed_every_few_seconds_causes_no_double_action() {
    let b = bent("watch-closing", Bend::Close(Duration::from_secs(3))).await;
    flow(&b, "the pod watch closed every 3 s").await;
    b.env.cleanup().await;
}

/// A restart against a lagging API server: the operator's first pod list after the
/// restart may be answered from a cache older than its own last writes (the proxy
/// answers `resourceVersion=0` lists with the one it forwarded at the first start, before
/// any pod existed), and the watch catches up 3 s late. The operator's lists ask for the
/// most recent state, so the view it acts on is not older than its writes: no pod is
/// created twice. (With a list the API server may answer from its cache, kube's
/// `any_semantic()` without a page size, this test saw the restarted operator create 5
/// pods more, 10 active at once. kube drops `resourceVersion=0` from a paged list, so
/// `any_semantic()` alone changes nothing.)
#[tokio::test]
async fn a_restart_against_a_lagging_api_server_view_creates_nothing_twice() {
    let Bent { mut env, proxy, _dir } = bent("watch-lagging", Bend::Delay(Duration::from_secs(3))).await;
    let audit = AuditLog::open();
    env.create("web", 2).await;
    env.converged("web", 2).await;
    let mark = audit.mark();
    env.scale("web", 5).await;
    env.converged("web", 5).await;
    env.op.kill();
    proxy.lag();
    env.op.respawn();
    env.op.ready().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.converged("web", 5).await;

    let entries = audit.since(&mark);
    let creates = operator_pod_writes(&entries, &env.ns, "create");
    let peak = peak_active_pods(&entries, &env.ns, 2);
    println!("restart against a lagging view: {creates} pod creates for 2 → 5, peak {peak} active pods");
    assert_eq!(creates, 3, "2 → 5 takes 3 creates, the restart none");
    assert!(peak <= 5, "never more active pods than asked: saw {peak}");
    env.cleanup().await;
}
