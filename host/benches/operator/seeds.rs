//! The peer a user would otherwise write: operator-sdk's PodSet tutorial operator
//! (hack/peers/, controller-runtime v0.25), on the same PodSets (our CRD), against the
//! operator serving guest-podset, in alternating rounds, each the only controller of
//! PodSets running during its rounds.
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
use crate::round::{Round, drop_namespace, round};
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

/// The tutorial's operator against ours, in alternating rounds of the rounds' size.
pub async fn tables(client: &Client, s: &Sizes) -> Vec<(Table, &'static str)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("podset.wasm");
    std::fs::write(&file, common::read_policy("podset.wasm")).expect("policy file");
    let label = format!("podset.dev/bench-seed={}", std::process::id());
    let mut op = common::Operator::spawn_shard("bench-seed", &label, &[&file], &common::kubeconfig_path(), &[]);
    op.ready().await;
    let mut ours = Contender { idle_rss: rss(op.pid()), ..Contender::default() };
    op.kill();
    let mut tutorial = Contender::default();
    for r in 0..s.rounds {
        let mut order = [Peer::Tutorial, Peer::PodSet];
        if r % 2 == 1 {
            order.reverse();
        }
        for peer in order {
            // No Pod Security labels: the tutorial's pod has no restricted security
            // context (ours have it anyway). Labelled for our operator's shard.
            let shard = label.split_once('=').expect("the shard label is k=v");
            let ns = common::namespace_labelled(client, "bench-seed", &[shard]).await;
            let result = if peer == Peer::Tutorial {
                let go = GoOperator::start(Seed::PodSet, &ns, &[]).await;
                if tutorial.rounds.is_empty() {
                    tutorial.idle_rss = rss(go.pid());
                }
                let result = round(client, peer, go.pid(), &ns, s, true).await;
                tutorial.busy_rss = f64::max(tutorial.busy_rss, rss(go.pid()));
                result
            } else {
                op.respawn();
                op.ready().await;
                let result = round(client, peer, op.pid(), &ns, s, true).await;
                ours.busy_rss = f64::max(ours.busy_rss, rss(op.pid()));
                op.kill();
                result
            };
            eprintln!(
                "round {} {}: converged {:.2?}, {:.1} writes/object, 5→1 {:.2?}, 1→5 {:.2?}",
                r + 1,
                if peer == Peer::Tutorial { "the tutorial's operator" } else { "ours" },
                result.converge,
                result.writes_per_object,
                result.down,
                result.up,
            );
            let contender = if peer == Peer::Tutorial { &mut tutorial } else { &mut ours };
            contender.rounds.push(result);
            drop_namespace(client, &ns).await;
        }
    }
    vec![(table(s, &tutorial, &ours), "the tutorial's operator")]
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

/// Ours against the tutorial's operator.
fn table(s: &Sizes, tutorial: &Contender, ours: &Contender) -> Table {
    let mut t = Table::new(&format!(
        "PodSet vs operator-sdk's PodSet tutorial operator (Go, controller-runtime; hack/peers/): {} × {}, {} alternating rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    t.rows(ROWS, &tutorial.rounds, &ours.rounds, s);
    t.ratio("operator RSS, idle (ours: the PodSet policy loaded)", tutorial.idle_rss, ours.idle_rss, Unit::MiB, None);
    t.ratio("operator RSS, converged (peak of the rounds)", tutorial.busy_rss, ours.busy_rss, Unit::MiB, None);
    t
}
