//! Leader election on a coordination.k8s.io/v1 Lease, as two replicas of the operator
//! run it against the test cluster's API server: one acts, the standby writes nothing,
//! and it takes over when the leader is killed or stops.

use podset_test_support as common;

use std::time::{Duration, Instant};

use common::{Env, MostActive, Operator, eventually, kubeconfig_path, policy_dir};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

const LEASE: &str = "podset-host";
/// Short, so that a forced handover fits a test; the graceful one must not wait for it.
const LEASE_DURATION: Duration = Duration::from_secs(6);

fn replica(ns: &str, identity: &str) -> Operator {
    replica_at(ns, identity, &kubeconfig_path())
}

/// A replica whose API server is the one `kubeconfig` names (a proxy in front of it).
fn replica_at(ns: &str, identity: &str, kubeconfig: &std::path::Path) -> Operator {
    let policy = policy_dir().join("podset.wasm");
    let duration = format!("{}s", LEASE_DURATION.as_secs());
    Operator::spawn_with_args(
        ns,
        &[&policy],
        kubeconfig,
        &[
            "--leader-elect",
            "--lease-namespace",
            ns,
            "--lease-name",
            LEASE,
            "--lease-duration",
            &duration,
            "--lease-renew-deadline",
            "4s",
            "--lease-identity",
            identity,
        ],
    )
}

/// Waits until `/readyz` answers ok with `role` (`leader` or `standby`); returns how long.
async fn role(op: &Operator, role: &str) -> Duration {
    let started = Instant::now();
    eventually(&format!("the replica to be {role} (log: {})", op.log.display()), Duration::from_secs(60), || async {
        let (ready, body) = op.readyz().await?;
        (ready && body.contains(&format!("({role})"))).then_some(())
    })
    .await;
    started.elapsed()
}

async fn writes(op: &Operator) -> f64 {
    common::cluster_writes(&op.metrics().await)
}

async fn write_lines(op: &Operator) -> String {
    op.metrics().await.lines().filter(|l| l.starts_with("podset_api_writes_total")).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn the_standby_writes_nothing_and_takes_over_when_the_leader_is_killed_or_stops() {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "leader").await;
    let a = replica(&ns, "replica-a");
    role(&a, "leader").await;
    let mut b = replica(&ns, "replica-b");
    role(&b, "standby").await;
    assert_eq!(a.sum("podset_leader", "").await, 1.0, "the leader's gauge");
    assert_eq!(b.sum("podset_leader", "").await, 0.0, "the standby's gauge");
    let mut env = Env {
        podsets: Api::namespaced(client.clone(), &ns),
        pods: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        op: a,
    };

    env.create("web", 3).await;
    env.converged("web", 3).await;
    assert!(writes(&env.op).await >= 3.0, "the leader created the pods");
    assert_eq!(writes(&b).await, 0.0, "the standby wrote nothing:\n{}", write_lines(&b).await);
    let sampler = MostActive::start(env.pods.clone(), "web");

    // Forced: the leader dies without releasing; the standby waits out the Lease.
    env.op.kill();
    let forced = role(&b, "leader").await;
    env.scale("web", 5).await;
    env.converged("web", 5).await;

    // The killed replica comes back as a standby and stays silent.
    env.op.respawn();
    role(&env.op, "standby").await;
    env.scale("web", 4).await;
    env.converged("web", 4).await;
    assert_eq!(
        writes(&env.op).await,
        0.0,
        "the restarted standby wrote nothing while b led:\n{}",
        write_lines(&env.op).await
    );

    // Graceful: SIGTERM releases the Lease, and the standby takes it at once.
    assert!(b.terminate(Duration::from_secs(20)), "the leader stops cleanly on SIGTERM");
    let graceful = role(&env.op, "leader").await;
    assert!(graceful < LEASE_DURATION, "a released Lease is taken without waiting for it to expire: {graceful:?}");
    env.scale("web", 2).await;
    env.converged("web", 2).await;

    let most = sampler.stop().await;
    assert!(most <= 5, "never more active pods than the largest replicas asked for: saw {most}");
    let lease = Api::<Lease>::namespaced(env.client.clone(), &env.ns).get(LEASE).await.expect("the Lease");
    assert_eq!(lease.spec.and_then(|s| s.holder_identity).as_deref(), Some("replica-a"));
    println!(
        "handover with a {LEASE_DURATION:?} lease: forced (SIGKILL) {forced:?}, graceful (SIGTERM) {graceful:?}; at most {most} active pods"
    );
    env.cleanup().await;
}

/// A leader paused past its lease (SIGSTOP: a GC pause, a frozen VM) while it was
/// creating pods, resumed after the standby took over: the write fence refuses what its
/// tasks still had to send. Checked in the API server's audit log: no write of the old
/// leader completes after its deadline (its last renewal before the pause + the lease
/// duration − the margin), and never more pods than asked for.
#[tokio::test]
async fn a_leader_paused_past_its_lease_writes_nothing_once_resumed() {
    use common::audit::{AuditLog, peak_active_pods};
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "fenced").await;
    let a = replica(&ns, "paused-a");
    role(&a, "leader").await;
    let b = replica(&ns, "paused-b");
    role(&b, "standby").await;
    let audit = AuditLog::open();
    let mark = audit.mark();
    let env = Env {
        podsets: Api::namespaced(client.clone(), &ns),
        pods: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        op: a,
    };

    // Paused mid-reconcile: right after the PodSet appears, while its pods are being created.
    env.create("web", 10).await;
    first_pod(&env).await;
    let pid = env.op.pid().to_string();
    let stopped = std::time::SystemTime::now();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().expect("kill").success());
    let took_over = role(&b, "leader").await;
    // Long enough that the paused leader's deadline is well past.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resumed = std::time::SystemTime::now();
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().expect("kill").success());
    env.converged("web", 10).await;
    // Whatever the resumed replica still had to send, it has tried by now (it exits on seeing the Lease lost).
    tokio::time::sleep(Duration::from_secs(3)).await;

    let entries = audit.since(mark);
    // Its last renewal was before the pause, so its deadline is at most the lease duration
    // − the margin (half the 2 s grace) after it.
    let (writes, margin, late) = last_write(&entries, "paused-a", stopped + LEASE_DURATION - Duration::from_secs(1));
    assert!(writes > 0, "the leader was paused mid-reconcile, after its first writes");
    assert!(late.is_empty(), "writes of the paused leader completed after its deadline bound:\n{}", late.join("\n"));
    let (_, after_resume) = writes_after(&entries, "paused-a", resumed);
    assert!(after_resume.is_empty(), "no write of the old leader after it resumed:\n{}", after_resume.join("\n"));
    let peak = peak_active_pods(&entries, &env.ns, 0);
    assert!(peak <= 10, "never more active pods than asked: saw {peak}");
    let log = std::fs::read_to_string(&env.op.log).unwrap_or_default();
    let fenced = log.matches("write fenced").count();
    println!(
        "paused leader: {writes} writes before the pause completed, the last {margin:?} before its bound; standby took \
         over in {took_over:?}; {fenced} fenced write errors in its log; peak {peak} active pods"
    );
    env.cleanup().await;
}

/// A leader cut off from the API server while it creates pods: a proxy between them
/// stops forwarding (it keeps the connections and answers nothing), so the leader can
/// neither renew nor hear back from its writes. The standby takes over when the Lease
/// expires; then the partition outlasts the connections (the proxy drops them) and
/// heals. Checked in the audit log: no write of the old leader after its deadline bound,
/// and never more pods than asked for.
#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_writes_nothing_after_its_deadline() {
    use common::audit::{AuditLog, peak_active_pods};
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "cut-off").await;
    let upstream: std::net::SocketAddr = common::api_server_url()
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .expect("the test API server listens on an address");
    let proxy = common::proxy::Proxy::start(upstream).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("via-proxy.kubeconfig");
    let token = common::cluster_env("APISERVER_TOKEN").expect("the cluster's env names its APISERVER_TOKEN");
    common::write_kubeconfig(&kubeconfig, &format!("https://{}", proxy.addr), &token);
    let a = replica_at(&ns, "cut-a", &kubeconfig);
    role(&a, "leader").await;
    let b = replica(&ns, "cut-b");
    role(&b, "standby").await;
    let audit = AuditLog::open();
    let mark = audit.mark();
    let env = Env {
        podsets: Api::namespaced(client.clone(), &ns),
        pods: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        op: a,
    };

    env.create("web", 10).await;
    first_pod(&env).await;
    proxy.hold();
    let held = std::time::SystemTime::now();
    let took_over = role(&b, "leader").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let healed = std::time::SystemTime::now();
    proxy.cut();
    proxy.restore();
    env.converged("web", 10).await;
    // Whatever the old leader still tries, it has tried by now.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let entries = audit.since(mark);
    let (writes, margin, late) = last_write(&entries, "cut-a", held + LEASE_DURATION - Duration::from_secs(1));
    assert!(writes > 0, "the leader was cut off mid-reconcile, after its first writes");
    assert!(late.is_empty(), "writes of the cut-off leader completed after its deadline bound:\n{}", late.join("\n"));
    let (_, after_heal) = writes_after(&entries, "cut-a", healed);
    assert!(after_heal.is_empty(), "no write of the old leader once the path healed:\n{}", after_heal.join("\n"));
    let peak = peak_active_pods(&entries, &env.ns, 0);
    assert!(peak <= 10, "never more active pods than asked: saw {peak}");
    let log = std::fs::read_to_string(&env.op.log).unwrap_or_default();
    let (fenced, abandoned) = (log.matches("write fenced").count(), log.matches("write abandoned").count());
    println!(
        "cut-off leader: {writes} writes completed before the cut, the last {margin:?} before its bound; standby took \
         over in {took_over:?}; {abandoned} abandoned and {fenced} fenced write errors in its log; peak {peak} active pods"
    );
    env.cleanup().await;
}

/// Waits for the first pod of a reconcile: the next slow-start batch is then under way.
async fn first_pod(env: &Env) {
    eventually("the leader's first pod", Duration::from_secs(30), || async {
        let pods = env.pods.list(&Default::default()).await.ok()?;
        (!pods.items.is_empty()).then_some(())
    })
    .await;
}

/// How many writes (not reads) of the replica `identity` the audit log has, and those
/// completed after `bound`, described.
fn writes_after(
    entries: &[common::audit::Entry],
    identity: &str,
    bound: std::time::SystemTime,
) -> (usize, Vec<String>) {
    let (writes, _, late) = last_write(entries, identity, bound);
    (writes, late)
}

/// [`writes_after`], and how long before `bound` the last write completed.
fn last_write(
    entries: &[common::audit::Entry],
    identity: &str,
    bound: std::time::SystemTime,
) -> (usize, Option<Duration>, Vec<String>) {
    let agent = format!("({identity})");
    let bound = humantime::format_rfc3339_micros(bound).to_string();
    let writes: Vec<&common::audit::Entry> = entries
        .iter()
        .filter(|e| e.user_agent.contains(&agent) && !matches!(e.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    let late = writes
        .iter()
        .filter(|e| e.stage_timestamp > bound)
        .map(|e| format!("{} {} {:?} at {}", e.verb, e.object_ref.resource, e.object_ref.name, e.stage_timestamp))
        .collect();
    let last = writes.iter().map(|e| e.stage_timestamp.as_str()).max();
    let margin = last
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| humantime::parse_rfc3339(&bound).ok()?.duration_since(t).ok());
    (writes.len(), margin, late)
}
