//! The peers a user would otherwise write: operator-sdk's PodSet tutorial operator and
//! its Memcached sample (hack/peers/, controller-runtime v0.25), on the same objects
//! (our CRDs), against the operator serving guest-podset and guest-memcached, in
//! alternating rounds, each the only controller of its kind running during its rounds.
//!
//! The tutorial's operator runs as the tutorial has it (docs/performance.md says what
//! that means for the comparison): one pod created per reconcile, then a requeue; one
//! reconcile at a time; the client at 20 requests per second (burst 30), the rate the
//! tutorials ran with. It watches only the round's namespace and is started for each
//! round, before its objects are created.

use kube::Client;
use podset_test_support as common;

use common::peers::{GoOperator, Seed};

use crate::machine::rss;
use crate::peer::Peer;
use crate::round::{Round, drop_namespace, kcm_rate, round};
use crate::sizes::Sizes;
use crate::stats::{percentile, secs};
use crate::table::{Row, Table, Unit};

/// What one contender's rounds measured, and its memory.
#[derive(Default)]
struct Contender {
    rounds: Vec<Round>,
    /// Before its first round, serving nothing yet.
    idle_rss: f64,
    /// The peak after its rounds.
    busy_rss: f64,
}

/// The seeds' operators against ours: the PodSet tutorial's at the rounds' size, the
/// Memcached sample's at [`Sizes::of_memcacheds`], in alternating rounds.
pub async fn tables(client: &Client, s: &Sizes) -> Vec<(Table, &'static str)> {
    // The Deployment and ReplicaSet controllers make the Memcacheds' pods for both: at
    // the rate the rounds give the controller manager, so that they are not what is
    // measured (at its default 20 requests per second, a scale of 50 Memcacheds took
    // 11.5 s whoever asked for it).
    kcm_rate(1000, 1000);
    let m = s.of_memcacheds();
    let (sample, ours) =
        compare(client, &m, Seed::Memcached, Peer::MemcachedSample, Peer::Memcached, "memcached.wasm").await;
    let memcached =
        (table(&m, "Memcached sample", "Memcached", MEMCACHED_ROWS, &sample, &ours), "the Memcached sample");
    let (tutorial, ours) = compare(client, s, Seed::PodSet, Peer::Tutorial, Peer::PodSet, "podset.wasm").await;
    let podset = table(s, "PodSet tutorial", "PodSet", ROWS, &tutorial, &ours);
    vec![(podset, "the tutorial's operator"), memcached]
}

/// `seed`'s operator (reconciling as `go`) against ours serving `policy` (as `wasm`),
/// in alternating rounds of `s`, each the only controller of the kind running.
async fn compare(client: &Client, s: &Sizes, seed: Seed, go: Peer, wasm: Peer, policy: &str) -> (Contender, Contender) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(policy);
    std::fs::write(&file, common::read_policy(policy)).expect("policy file");
    let label = format!("podset.dev/bench-seed={}", std::process::id());
    let mut op = common::Operator::spawn_shard("bench-seed", &label, &[&file], &common::kubeconfig_path(), &[]);
    op.ready().await;
    let mut ours = Contender { idle_rss: rss(op.pid()), ..Contender::default() };
    op.kill();
    let mut theirs = Contender::default();
    for r in 0..s.rounds {
        let mut order = [go, wasm];
        if r % 2 == 1 {
            order.reverse();
        }
        for peer in order {
            // No Pod Security labels: the seeds' pods have no restricted security
            // context (ours have it anyway). Labelled for our operator's shard.
            let shard = label.split_once('=').expect("the shard label is k=v");
            let ns = common::namespace_labelled(client, "bench-seed", &[shard]).await;
            // Each operator stays until its round's namespace is gone: both hold a
            // Memcached's deletion for their finalizer.
            let (result, busy) = if peer == go {
                let process = GoOperator::start(seed, &ns, &[]).await;
                if theirs.rounds.is_empty() {
                    theirs.idle_rss = rss(process.pid());
                }
                let result = round(client, peer, process.pid(), &ns, s, true).await;
                let busy = rss(process.pid());
                theirs.busy_rss = f64::max(theirs.busy_rss, busy);
                drop_namespace(client, &ns).await;
                (result, busy)
            } else {
                op.respawn();
                op.ready().await;
                let result = round(client, peer, op.pid(), &ns, s, true).await;
                let busy = rss(op.pid());
                ours.busy_rss = f64::max(ours.busy_rss, busy);
                drop_namespace(client, &ns).await;
                op.kill();
                (result, busy)
            };
            eprintln!(
                "round {} {}: converged {:.2?}, {:.1} writes/object, operator CPU {:.1} ms/object, RSS {busy:.1} MiB, \
                 {}→1 {:.2?}, 1→{} {:.2?}",
                r + 1,
                if peer == go { format!("{seed:?}'s Go operator") } else { "ours".into() },
                result.converge,
                result.writes_per_object,
                result.controller_cpu * 1e3,
                s.replicas,
                result.down,
                s.replicas,
                result.up,
            );
            let contender = if peer == go { &mut theirs } else { &mut ours };
            contender.rounds.push(result);
        }
    }
    (theirs, ours)
}

const ROWS: &[Row] = &[
    Row::medians(
        "time until every PodSet has its {replicas} pods ready and says so",
        |r| secs(r.converge),
        Unit::Seconds,
    )
    .goal(1.0)
    .each_round(),
    Row::medians("per object, p50", |r| secs(percentile(&r.per_object, 0.5)), Unit::Seconds),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    Row::medians("API writes per object (apiserver_request_total)", |r| r.writes_per_object, Unit::Count).goal(1.0),
    Row::medians("… of which pods", |r| r.writes_by_resource[0], Unit::Count),
    Row::medians("… of which the PodSet (its create included)", |r| r.writes_by_resource[1], Unit::Count),
    Row::medians("… of which the PodSet's status", |r| r.writes_by_resource[2], Unit::Count),
    Row::medians("… of which Events", |r| r.writes_by_resource[3], Unit::Count),
    Row::medians("API server CPU per object while converging", |r| r.apiserver_cpu * 1e3, Unit::MsCpu),
    Row::medians("operator CPU per object while converging", |r| r.controller_cpu * 1e3, Unit::MsCpu),
    Row::medians("scale {replicas} → 1, all objects", |r| secs(r.down), Unit::Seconds).each_round(),
    Row::medians("scale 1 → {replicas}, all objects, until the new pods are ready", |r| secs(r.up), Unit::Seconds)
        .each_round(),
];

const MEMCACHED_ROWS: &[Row] = &[
    Row::medians(
        "time until every Memcached says Available and its Deployment has its {replicas} pods ready",
        |r| secs(r.converge),
        Unit::Seconds,
    )
    .goal(1.0)
    .each_round(),
    Row::medians("per object, p50", |r| secs(percentile(&r.per_object, 0.5)), Unit::Seconds),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    Row::medians("API writes per object (apiserver_request_total)", |r| r.writes_per_object, Unit::Count).goal(1.0),
    Row::medians("… of which the Deployment", |r| r.writes_by_resource[0], Unit::Count),
    Row::medians("… of which the Memcached (its create included)", |r| r.writes_by_resource[1], Unit::Count),
    Row::medians("… of which the Memcached's status", |r| r.writes_by_resource[2], Unit::Count),
    Row::medians("… of which Events (the Deployment controller's too)", |r| r.writes_by_resource[3], Unit::Count),
    Row::medians("changes of the Memcached's status, watched", |r| r.status_changes, Unit::Count),
    Row::medians(
        "… of which moved only its pods listed (`status.nodes`, which the sample's status lacks)",
        |r| r.status_changes_listing_only,
        Unit::Count,
    ),
    Row::medians("API server CPU per object while converging", |r| r.apiserver_cpu * 1e3, Unit::MsCpu),
    Row::medians("operator CPU per object while converging", |r| r.controller_cpu * 1e3, Unit::MsCpu),
    Row::medians("size {replicas} → 1, all objects, until the Deployments have 1 pod", |r| secs(r.down), Unit::Seconds)
        .each_round(),
    Row::medians("size 1 → {replicas}, all objects, until the new pods are ready", |r| secs(r.up), Unit::Seconds)
        .each_round(),
];

/// Ours against a seed's operator: `rows` of their rounds, then memory; `seed` names
/// their operator in the title, `kind` the parents and the policy ours loaded.
fn table(s: &Sizes, seed: &str, kind: &str, rows: &[Row], theirs: &Contender, ours: &Contender) -> Table {
    let mut t = Table::new(&format!(
        "{kind} vs operator-sdk's {seed} operator (Go, controller-runtime; hack/peers/): {} × {}, {} alternating \
         rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    t.rows(rows, &theirs.rounds, &ours.rounds, s);
    let idle = format!("operator RSS, idle (ours: the {kind} policy loaded)");
    t.ratio(&idle, theirs.idle_rss, ours.idle_rss, Unit::MiB, None);
    t.ratio("operator RSS, converged (peak of the rounds)", theirs.busy_rss, ours.busy_rss, Unit::MiB, None);
    t
}
