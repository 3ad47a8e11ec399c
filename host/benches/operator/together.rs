//! The three seeds at once: operator-sdk's PodSet tutorial operator, its Memcached
//! sample and the Netperf operator as three processes (hack/peers/, controller-runtime),
//! against one podset-host serving the three policies, on the same objects of the three
//! kinds. Memory is the row: the Wasm-operator paper's headline (arXiv 2209.01077) is
//! what one host of many controllers saves over a process per controller.
//!
//! Each kind's objects go to a namespace of their own (each Go operator watches one),
//! all three labelled for our operator's shard. The Netperfs are pinned to the
//! simulated node, whose pods run and never end: a test waits in phase Test for a client
//! that never finishes, so "converged" for a Netperf is its client created and the
//! status saying Test — both operators then hold two pods and the Netperf, as during a
//! real test.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use podset_test_support as common;
use serde_json::json;

use common::peers::{GoOperator, Seed};

use crate::machine::rss;
use crate::peer::Peer;
use crate::round::{create_and_converge, drop_namespace};
use crate::sizes::{MEMCACHED_SIZE, Sizes};
use crate::table::{Table, Unit};
use crate::watch::until_all;

/// What one side measured.
#[derive(Default)]
struct Side {
    /// Once every operator is ready, before any object exists.
    idle: Vec<f64>,
    /// Once every object has converged.
    converged: Vec<f64>,
    took: Duration,
}

/// The three seeds' operators against ours, once each: theirs first.
pub async fn table(client: &Client, s: &Sizes) -> Table {
    let node = common::require_sim_node(client).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let policies: Vec<_> = ["podset.wasm", "memcached.wasm", "netperf.wasm"]
        .iter()
        .map(|p| {
            let file = dir.path().join(p);
            std::fs::write(&file, common::read_policy(p)).expect("policy file");
            file
        })
        .collect();
    let label = format!("podset.dev/bench-together={}", std::process::id());
    let shard = label.split_once('=').expect("the shard label is k=v");

    let mut theirs = Side::default();
    {
        let namespaces = namespaces(client, shard).await;
        // The Netperf peer tolerates the simulated node's taint (a test cluster's is
        // tainted; the bench's is not); the tutorial's pods copy the template's.
        let operators = [
            GoOperator::start(Seed::PodSet, &namespaces[0], &[]).await,
            GoOperator::start(Seed::Memcached, &namespaces[1], &["--simulated-node"]).await,
            GoOperator::start(Seed::Netperf, &namespaces[2], &["--simulated-node"]).await,
        ];
        let pids: Vec<u32> = operators.iter().map(GoOperator::pid).collect();
        theirs.idle = pids.iter().map(|p| rss(*p)).collect();
        theirs.took = converge(client, s, &namespaces, [Peer::Tutorial, Peer::MemcachedSample], &node).await;
        theirs.converged = pids.iter().map(|p| rss(*p)).collect();
        // Each operator stays until its namespace is gone: a Memcached's deletion waits
        // for the sample's finalizer.
        for ns in &namespaces {
            drop_namespace(client, ns).await;
        }
    }
    let mut ours = Side::default();
    {
        let files: Vec<&std::path::Path> = policies.iter().map(|p| p.as_path()).collect();
        let mut op = common::Operator::spawn_shard("bench-together", &label, &files, &common::kubeconfig_path(), &[]);
        op.ready().await;
        let namespaces = namespaces(client, shard).await;
        ours.idle = vec![rss(op.pid())];
        ours.took = converge(client, s, &namespaces, [Peer::PodSet, Peer::Memcached], &node).await;
        ours.converged = vec![rss(op.pid())];
        for ns in &namespaces {
            drop_namespace(client, ns).await;
        }
        op.kill();
    }
    eprintln!(
        "three seeds: theirs idle {:.1?} converged {:.1?} MiB in {:.2?}; ours idle {:.1} converged {:.1} MiB in {:.2?}",
        theirs.idle, theirs.converged, theirs.took, ours.idle[0], ours.converged[0], ours.took
    );
    draw(s, &theirs, &ours)
}

/// A namespace for each kind, labelled for our shard; no Pod Security labels (the
/// seeds' pods carry no restricted security context).
async fn namespaces(client: &Client, shard: (&str, &str)) -> [String; 3] {
    let mut out = Vec::new();
    for kind in ["podset", "memcached", "netperf"] {
        out.push(common::namespace_labelled(client, &format!("bench-three-{kind}"), &[shard]).await);
    }
    out.try_into().expect("three namespaces")
}

/// Creates the three kinds' objects at once and waits until all have converged: the
/// PodSets and Memcacheds as their rounds judge them (`podsets` and `memcacheds` say
/// whose), the Netperfs once in phase Test.
async fn converge(
    client: &Client,
    s: &Sizes,
    ns: &[String; 3],
    [podsets, memcacheds]: [Peer; 2],
    node: &str,
) -> Duration {
    let started = Instant::now();
    let m = s.of_memcacheds();
    let netperf = ApiResource::from_gvk(&GroupVersionKind::gvk("app.example.com", "v1alpha1", "Netperf"));
    let netperfs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns[2], &netperf);
    tokio::join!(
        create_and_converge(client, podsets, &ns[0], s, started),
        create_and_converge(client, memcacheds, &ns[1], &m, started),
        async {
            for i in 0..s.netperfs {
                let object = serde_json::from_value(json!({
                    "apiVersion": "app.example.com/v1alpha1", "kind": "Netperf",
                    "metadata": { "name": format!("np-{i:03}") },
                    // Long enough that no test times out before memory is read.
                    "spec": { "serverNode": node, "clientNode": node, "duration": 60 }
                }))
                .expect("a Netperf");
                netperfs.create(&Default::default(), &object).await.expect("create a Netperf");
            }
            let testing = |o: &DynamicObject| o.data["status"]["status"] == "Test";
            until_all(&netperfs, s.netperfs, started, "every Netperf in phase Test", testing).await
        },
    );
    let took = started.elapsed();
    // Memory once the writes that trail the last status have settled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    took
}

fn draw(s: &Sizes, theirs: &Side, ours: &Side) -> Table {
    let mut t = Table::new(&format!(
        "The three seeds' Go operators as three processes vs one podset-host serving the three policies: {} PodSets \
         × {}, {} Memcacheds × {MEMCACHED_SIZE}, {} Netperfs (in phase Test), one round",
        s.objects, s.replicas, s.memcacheds, s.netperfs
    ));
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    t.ratio(
        "time until every object of the three kinds has converged",
        theirs.took.as_secs_f64(),
        ours.took.as_secs_f64(),
        Unit::Seconds,
        None,
    );
    t.ratio("RSS, idle (ours: the three policies loaded)", sum(&theirs.idle), sum(&ours.idle), Unit::MiB, Some(1.0));
    t.ratio("RSS, every object converged", sum(&theirs.converged), sum(&ours.converged), Unit::MiB, Some(1.0));
    for (i, who) in
        ["the PodSet tutorial's operator", "the Memcached sample", "the Netperf operator"].iter().enumerate()
    {
        let at = |v: &[f64]| v.get(i).copied().unwrap_or_default();
        t.peer(&format!("… {who}, idle / converged"), &[at(&theirs.idle), at(&theirs.converged)], Unit::MiB);
    }
    t
}
