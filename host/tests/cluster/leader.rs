//! Leader election on a coordination.k8s.io/v1 Lease, as two replicas of the operator
//! run it against the test cluster's API server: one acts, the standby writes nothing,
//! and it takes over when the leader is killed or stops.

use podset_test_support as common;

use std::time::{Duration, Instant, SystemTime};

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

    // Forced: the leader dies without releasing; the standby waits out the Lease. The
    // scale right after the kill is work the standby (its caches warm, its reconcile
    // queued) does the moment it leads: its first write times the takeover.
    let audit = common::audit::AuditLog::open();
    let renewed = lease_renewed(&env).await;
    let mark = audit.mark();
    env.op.kill();
    let killed = SystemTime::now();
    env.scale("web", 5).await;
    let forced = role(&b, "leader").await;
    env.converged("web", 5).await;
    let forced_write = first_write(&audit.since(&mark), "replica-b").expect("the new leader wrote");
    let expired = renewed + LEASE_DURATION;

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
    let (standby_rss, standby_watches) = (env.op.rss_kib(), env.op.sum("podset_watches", "").await);
    let (leader_rss, leader_watches) = (b.rss_kib(), b.sum("podset_watches", "").await);
    let mark = audit.mark();
    let stopping = SystemTime::now();
    let stopped = std::thread::spawn(move || b.terminate(Duration::from_secs(20)));
    env.scale("web", 2).await;
    let graceful = role(&env.op, "leader").await;
    assert!(stopped.join().expect("the stopping thread"), "the leader stops cleanly on SIGTERM");
    assert!(graceful < LEASE_DURATION, "a released Lease is taken without waiting for it to expire: {graceful:?}");
    env.converged("web", 2).await;
    let graceful_write = first_write(&audit.since(&mark), "replica-a").expect("the new leader wrote");

    let most = sampler.stop().await;
    assert!(most <= 5, "never more active pods than the largest replicas asked for: saw {most}");
    let lease = Api::<Lease>::namespaced(env.client.clone(), &env.ns).get(LEASE).await.expect("the Lease");
    assert_eq!(lease.spec.and_then(|s| s.holder_identity).as_deref(), Some("replica-a"));
    let since = |t: SystemTime, from: SystemTime| t.duration_since(from).unwrap_or_default();
    println!(
        "handover with a {LEASE_DURATION:?} lease: forced (SIGKILL) leader in {forced:?}, first write {:?} after the \
         kill and {:?} after the Lease expired; graceful (SIGTERM) leader in {graceful:?}, first write {:?} after the \
         signal; at most {most} active pods. The standby beforehand: RSS {standby_rss} KiB, {standby_watches} \
         watches; the leader: {leader_rss} KiB, {leader_watches} watches",
        since(forced_write, killed),
        since(forced_write, expired),
        since(graceful_write, stopping),
    );
    env.cleanup().await;
}

/// When the Lease was last renewed, as the API server has it.
async fn lease_renewed(env: &Env) -> SystemTime {
    let lease = Api::<Lease>::namespaced(env.client.clone(), &env.ns).get(LEASE).await.expect("the Lease");
    lease.spec.and_then(|s| s.renew_time).map(|t| SystemTime::from(t.0)).expect("a renewed Lease")
}

/// When the first write of replica `identity` among `entries` reached the API server.
fn first_write(entries: &[common::audit::Entry], identity: &str) -> Option<SystemTime> {
    let agent = format!("({identity})");
    entries
        .iter()
        .filter(|e| e.user_agent.contains(&agent) && !matches!(e.verb.as_str(), "get" | "list" | "watch"))
        .map(|e| e.request_received_timestamp.as_str())
        .min()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
}

/// A leader `a` (reaching the API server through `a_kubeconfig` when given) and a
/// standby `b` in a new namespace, the leader mid-reconcile: a PodSet of 10 created and
/// its first pod made, so that the next slow-start batch is under way.
struct MidReconcile {
    env: Env,
    standby: Operator,
    identity: String,
    audit: common::audit::AuditLog,
    mark: common::audit::Mark,
}

async fn mid_reconcile(prefix: &str, a_kubeconfig: Option<&std::path::Path>) -> MidReconcile {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, prefix).await;
    let identity = format!("{prefix}-a");
    let a = replica_at(&ns, &identity, a_kubeconfig.unwrap_or(&kubeconfig_path()));
    role(&a, "leader").await;
    let standby = replica(&ns, &format!("{prefix}-b"));
    role(&standby, "standby").await;
    let audit = common::audit::AuditLog::open();
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
    MidReconcile { env, standby, identity, audit, mark }
}

impl MidReconcile {
    /// Once the standby has converged the PodSet, the audit log's verdict on the old
    /// leader faulted at `fault`: it wrote before the fault; after its deadline bound (its
    /// last renewal was before the fault: the lease duration − the margin, half the 2 s
    /// grace, after it) only writes it had handed to its connection before the deadline,
    /// as many as its log says it abandoned (so none once its path was back but those);
    /// and never more pods active than 10 and those late creates.
    /// Returns its writes, how long before the bound the last completed, and the peak.
    ///
    /// The fence reads the deadline before a write in flight goes on, but a request the
    /// HTTP connection had already taken is written by the connection's own task: in a
    /// `make test` run a create taken before the SIGSTOP reached the API server 6 ms
    /// before the resumed fence logged it abandoned. No client-side check closes that.
    async fn verdict(&self, fault: SystemTime) -> (usize, Option<Duration>, usize) {
        self.env.converged("web", 10).await;
        // Whatever the old leader still had to send, it has tried by now (it exits on seeing the Lease lost).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let entries = self.audit.since(&self.mark);
        let id = &self.identity;
        let (writes, margin, late) = last_write(&entries, id, fault + LEASE_DURATION - Duration::from_secs(1));
        assert!(writes > 0, "{id} was faulted mid-reconcile, after its first writes");
        let abandoned = self.abandoned();
        assert!(
            late.len() <= abandoned,
            "writes of {id} completed after its deadline bound, {abandoned} of them abandoned in its log ({}):\n{}",
            self.env.op.log.display(),
            late.join("\n")
        );
        let late_pods = late.iter().filter(|w| w.starts_with("create pods")).count();
        let peak = common::audit::peak_active_pods(&entries, &self.env.ns, 0);
        assert!(peak <= 10 + late_pods, "never more active pods than asked and {late_pods} late creates: saw {peak}");
        (writes, margin, peak)
    }

    /// How many writes the old leader's log reports abandoned at its deadline (each is
    /// one warning: of the reconcile that made it, or of an Event not published).
    fn abandoned(&self) -> usize {
        let log = std::fs::read_to_string(&self.env.op.log).unwrap_or_default();
        log.lines().filter(|l| l.contains("WARN") && l.contains("write abandoned")).count()
    }

    /// How many times the old leader's log says `what`.
    fn logged(&self, what: &str) -> usize {
        std::fs::read_to_string(&self.env.op.log).unwrap_or_default().matches(what).count()
    }
}

/// A leader paused past its lease (SIGSTOP: a GC pause, a frozen VM) while it was
/// creating pods, resumed after the standby took over: the write fence refuses what its
/// tasks still had to send. Checked in the API server's audit log: no write of the old
/// leader completes after its deadline (its last renewal before the pause + the lease
/// duration − the margin) but those it had handed to its connection before it, and
/// never more pods than asked for but those (see [`MidReconcile::verdict`]).
#[tokio::test]
async fn a_leader_paused_past_its_lease_writes_nothing_once_resumed() {
    let m = mid_reconcile("paused", None).await;
    let pid = m.env.op.pid().to_string();
    let stopped = SystemTime::now();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().expect("kill").success());
    let took_over = role(&m.standby, "leader").await;
    // Long enough that the paused leader's deadline is well past.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().expect("kill").success());
    let (writes, margin, peak) = m.verdict(stopped).await;
    println!(
        "paused leader: {writes} writes before the pause completed, the last {margin:?} before its bound; standby took \
         over in {took_over:?}; {} fenced write errors in its log; peak {peak} active pods",
        m.logged("write fenced")
    );
    m.env.cleanup().await;
}

/// A leader cut off from the API server while it creates pods: a proxy between them
/// stops forwarding (it keeps the connections and answers nothing), so the leader can
/// neither renew nor hear back from its writes. The standby takes over when the Lease
/// expires; then the partition outlasts the connections (the proxy drops them) and
/// heals. Checked in the audit log as for the paused leader: no write of the old leader
/// after its deadline bound but those it had sent before it, and never more pods than
/// asked for but those.
#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_writes_nothing_after_its_deadline() {
    let (proxy, _dir, kubeconfig) = via_proxy().await;
    let m = mid_reconcile("cut-off", Some(&kubeconfig)).await;
    proxy.hold();
    let held = SystemTime::now();
    let took_over = role(&m.standby, "leader").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The held connections die with the partition; new ones are forwarded again.
    proxy.cut();
    proxy.release();
    proxy.restore();
    let (writes, margin, peak) = m.verdict(held).await;
    println!(
        "cut-off leader: {writes} writes completed before the cut, the last {margin:?} before its bound; standby took \
         over in {took_over:?}; {} abandoned and {} fenced write errors in its log; peak {peak} active pods",
        m.logged("write abandoned"),
        m.logged("write fenced")
    );
    m.env.cleanup().await;
}

/// A leader whose path to the API server holds what it sends and delivers it late: the
/// proxy stops forwarding mid slow-start (its creates were handed over before its
/// deadline, so the fence let them go), the standby takes over and makes the PodSet's 10
/// pods, then the path delivers everything it held. The held creates name the slots the
/// new leader filled (the host names children, alike on every replica), so they fail
/// with AlreadyExists instead of adding pods: never more than 10 active pods in the audit
/// log, and no pod create of the old leader succeeded after its deadline bound. (With
/// names the API server generated: 11 of 10 in 2 of 3 runs, 2026-11-26.)
#[tokio::test]
async fn a_leader_whose_path_delivers_its_creates_late_adds_no_pod() {
    let (proxy, _dir, kubeconfig) = via_proxy().await;
    let m = mid_reconcile("stalled", Some(&kubeconfig)).await;
    proxy.hold();
    let held = SystemTime::now();
    let took_over = role(&m.standby, "leader").await;
    m.env.converged("web", 10).await;
    // Delivered late, not dropped: the held requests reach the API server now.
    proxy.release();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let entries = m.audit.since(&m.mark);
    let bound = humantime::format_rfc3339_micros(held + LEASE_DURATION - Duration::from_secs(1)).to_string();
    let agent = format!("({})", m.identity);
    let old_creates: Vec<&common::audit::Entry> = entries
        .iter()
        .filter(|e| e.user_agent.contains(&agent) && e.verb == "create" && e.is("pods", &m.env.ns))
        .collect();
    assert!(old_creates.iter().any(|e| e.succeeded()), "{} created pods before its path held", m.identity);
    let late: Vec<&&common::audit::Entry> = old_creates.iter().filter(|e| e.stage_timestamp > bound).collect();
    let late_made: Vec<String> = late
        .iter()
        .filter(|e| e.succeeded())
        .map(|e| format!("{:?} at {}", e.object_ref.name, e.stage_timestamp))
        .collect();
    assert!(late_made.is_empty(), "pod creates of {} succeeded after its deadline bound: {late_made:?}", m.identity);
    let peak = common::audit::peak_active_pods(&entries, &m.env.ns, 0);
    assert!(peak <= 10, "never more active pods than the 10 asked for: saw {peak}");
    m.env.converged("web", 10).await;
    println!(
        "stalled path: standby took over in {took_over:?}; {} pod creates of the old leader reached the API server \
         after its deadline bound, each refused (AlreadyExists); peak {peak} active pods",
        late.len()
    );
    m.env.cleanup().await;
}

/// A proxy in front of the test API server, and a kubeconfig (in the directory returned
/// with it) that reaches the server through it.
async fn via_proxy() -> (common::proxy::Proxy, tempfile::TempDir, std::path::PathBuf) {
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
    (proxy, dir, kubeconfig)
}

/// Waits for the first pod of a reconcile: the next slow-start batch is then under way.
async fn first_pod(env: &Env) {
    eventually("the leader's first pod", Duration::from_secs(30), || async {
        let pods = env.pods.list(&Default::default()).await.ok()?;
        (!pods.items.is_empty()).then_some(())
    })
    .await;
}

/// How many writes (not reads) of the replica `identity` the audit log has, how long before
/// `bound` the last completed, and those completed after `bound`, described.
fn last_write(
    entries: &[common::audit::Entry],
    identity: &str,
    bound: SystemTime,
) -> (usize, Option<Duration>, Vec<String>) {
    let agent = format!("({identity})");
    let bound = humantime::format_rfc3339_micros(bound).to_string();
    let writes: Vec<&common::audit::Entry> = entries
        .iter()
        // Applied writes: a request whose body the cut path never delivered ends in the
        // audit log as a 504 when the connection dies, and changed nothing.
        .filter(|e| {
            e.user_agent.contains(&agent) && e.succeeded() && !matches!(e.verb.as_str(), "get" | "list" | "watch")
        })
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

/// A rollout goes on from its step when its leader goes: the standby followed the step
/// its leader wrote in `status.rollout`, takes over with the same parents on each
/// revision, and carries on from there.
#[tokio::test]
async fn a_rollout_goes_on_from_its_step_after_a_leader_change() {
    use podset_host::crd::{ReconcilePolicy, RolloutPhase};
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "leader-rollout").await;
    let a = replica(&ns, "rollout-a");
    role(&a, "leader").await;
    let b = replica(&ns, "rollout-b");
    role(&b, "standby").await;
    let mut env = Env {
        podsets: Api::namespaced(client.clone(), &ns),
        pods: Api::namespaced(client.clone(), &ns),
        client,
        ns,
        op: a,
    };
    for i in 0..4 {
        env.create(&format!("ps-{i}"), 1).await;
    }
    let plan = serde_json::from_value(serde_json::json!({ "steps": [
        { "shadow": true, "duration": "1s" },
        { "percent": 50, "duration": "1h" },
        { "percent": 100, "duration": "1h" },
    ]}))
    .expect("a plan");
    let module = common::read_policy("fixtures/canary.wasm");
    common::publish_rolling(&env.client, &env.ns, "next", "next", &module, Some(Default::default()), plan).await;
    let rps: Api<ReconcilePolicy> = Api::namespaced(env.client.clone(), &env.ns);
    let rollout = || async { rps.get("next").await.ok()?.status?.rollout };
    let at_two =
        eventually("step 2", Duration::from_secs(60), || async { rollout().await.filter(|r| r.step == 2) }).await;

    env.op.kill();
    let took = role(&b, "leader").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = rollout().await.expect("the rollout");
    assert_eq!((after.step, after.phase), (2, RolloutPhase::Progressing), "{after:#?}");
    assert_eq!(after.step_started, at_two.step_started, "the same step, its window from the same start");
    // The new leader acts on it: a skip moves it on.
    let (ok, out) =
        common::kubectl(&["annotate", "reconcilepolicy", "next", "-n", &env.ns, "podset.dev/rollout-command=skip"]);
    assert!(ok, "{out}");
    eventually("step 3 under the new leader", Duration::from_secs(60), || async {
        rollout().await.filter(|r| r.step == 3).map(drop)
    })
    .await;
    println!("the standby took over in {took:?} and went on from step 2");
    drop(b);
    env.cleanup().await;
}
