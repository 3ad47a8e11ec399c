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
    let policy = policy_dir().join("podset.wasm");
    let duration = format!("{}s", LEASE_DURATION.as_secs());
    Operator::spawn_with_args(
        ns,
        &[&policy],
        &kubeconfig_path(),
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
    let by_a: Vec<&common::audit::Entry> = entries
        .iter()
        .filter(|e| e.user_agent.contains("(paused-a)") && e.verb != "get" && e.verb != "list" && e.verb != "watch")
        .collect();
    // Its last renewal was before the pause, so its deadline is at most the lease duration
    // − the margin (half the 2 s grace) after it.
    let bound = stopped + LEASE_DURATION - Duration::from_secs(1);
    let bound_text = humantime::format_rfc3339_micros(bound).to_string();
    let resumed_text = humantime::format_rfc3339_micros(resumed).to_string();
    let late: Vec<String> = by_a
        .iter()
        .filter(|e| e.stage_timestamp > bound_text)
        .map(|e| format!("{} {} {:?} at {}", e.verb, e.object_ref.resource, e.object_ref.name, e.stage_timestamp))
        .collect();
    assert!(
        late.is_empty(),
        "writes of the paused leader completed after its deadline bound {bound_text}:\n{}",
        late.join("\n")
    );
    assert!(!by_a.iter().any(|e| e.stage_timestamp > resumed_text), "no write of the old leader after it resumed");
    let peak = peak_active_pods(&entries, &env.ns, 0);
    assert!(peak <= 10, "never more active pods than asked: saw {peak}");
    let log = std::fs::read_to_string(&env.op.log).unwrap_or_default();
    let fenced = log.matches("write fenced").count();
    println!(
        "paused leader: {} writes before the pause completed, none after {bound_text}; standby took over in {took_over:?}; \
         {fenced} fenced write errors in its log; peak {peak} active pods",
        by_a.len()
    );
    env.cleanup().await;
}
