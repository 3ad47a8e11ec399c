//! A policy in TypeScript and in Go against the same in Rust, inside the operator, in
//! alternating rounds: the PodSet policy and the Memcached policy, a table per language.

use kube::Client;
use podset_test_support as common;

use crate::machine::rss;
use crate::metrics::Split;
use crate::peer::Peer;
use crate::round::{Round, bench_namespace, drop_namespace, round};
use crate::sizes::Sizes;
use crate::stats::{percentile, secs};
use crate::table::{Row, Table, Unit};

/// A policy and its twins in the other languages: each language's target/policy file,
/// Rust's first, and the objects their rounds converge.
pub struct Family {
    pub kind: &'static str,
    pub peer: Peer,
    pub languages: [(&'static str, &'static str); 3],
}

/// The default PodSet policy's twins (`guest-podset/`, `typescript/guest-podset/`,
/// `go/guest-podset/`), on the typed PodSet world.
pub const PODSET: Family = Family {
    kind: "PodSet",
    peer: Peer::PodSet,
    languages: [("Rust", "podset.wasm"), ("TypeScript", "podset-ts.wasm"), ("Go", "podset-go.wasm")],
};

/// The Memcached policy's twins (`guest-memcached/`, `typescript/guest-memcached/`,
/// `go/guest-memcached/`), on the any-kind world: a Deployment each, pods by lookup.
pub const MEMCACHED: Family = Family {
    kind: "Memcached",
    peer: Peer::Memcached,
    languages: [("Rust", "memcached.wasm"), ("TypeScript", "memcached-ts.wasm"), ("Go", "memcached-go.wasm")],
};

/// One language's operator and what its rounds measured.
pub struct LanguageRun {
    pub file: std::path::PathBuf,
    pub name: String,
    pub label: String,
    /// Started for its first round, stopped after each.
    pub op: Option<common::Operator>,
    pub module_bytes: f64,
    /// Measured once the operator is ready, before its first round.
    pub idle_rss: f64,
    pub busy_rss: f64,
    pub rounds: Vec<Round>,
}

/// Both families: the PodSets at the rounds' size, the Memcacheds at the seeds'
/// ([`Sizes::of_memcacheds`]).
pub async fn tables(client: &Client, s: &Sizes) -> Vec<(Table, &'static str)> {
    let mut tables = family(client, s, &PODSET).await;
    tables.extend(family(client, &s.of_memcacheds(), &MEMCACHED).await);
    tables
}

/// A policy in TypeScript and in Go against the same in Rust, inside the operator: each
/// language served by an operator of its own, the only one running during its rounds (as
/// in the alternating rounds), in alternating rounds of `s`, converging only. A table per
/// language against Rust.
async fn family(client: &Client, s: &Sizes, f: &Family) -> Vec<(Table, &'static str)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs: Vec<LanguageRun> = f
        .languages
        .iter()
        .map(|(lang, module)| {
            let bytes = common::read_policy(module);
            let file = dir.path().join(module);
            std::fs::write(&file, &bytes).expect("policy file");
            let name = format!("bench-{}-{}", f.kind.to_lowercase(), lang.to_lowercase());
            let label = format!("podset.dev/{name}={}", std::process::id());
            let module_bytes = bytes.len() as f64;
            LanguageRun { file, name, label, op: None, module_bytes, idle_rss: 0.0, busy_rss: 0.0, rounds: Vec::new() }
        })
        .collect();
    for r in 0..s.rounds {
        let mut order: Vec<usize> = (0..runs.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let run = &mut runs[i];
            let mut op = match run.op.take() {
                Some(mut op) => {
                    op.respawn();
                    op
                }
                None => {
                    common::Operator::spawn_shard(&run.name, &run.label, &[&run.file], &common::kubeconfig_path(), &[])
                }
            };
            op.ready().await;
            if run.rounds.is_empty() {
                run.idle_rss = rss(op.pid());
            }
            let ns = bench_namespace(client, "bench-lang", &run.label).await;
            let before = Split::of(&op.metrics().await);
            let mut result = round(client, f.peer, op.pid(), &ns, s, false).await;
            result.split = Split::of(&op.metrics().await).minus(&before);
            run.busy_rss = f64::max(run.busy_rss, rss(op.pid()));
            eprintln!(
                "round {} {} {}: converged {:.2?}, decision {:.0} µs, {:.1} % of reconcile time",
                r + 1,
                f.kind,
                f.languages[i].0,
                result.converge,
                result.split.mean_decision() * 1e6,
                result.split.decision_share() * 100.0,
            );
            run.rounds.push(result);
            drop_namespace(client, &ns).await;
            op.kill();
            run.op = Some(op);
        }
    }
    let rust = &runs[0];
    runs[1..]
        .iter()
        .zip(&f.languages[1..])
        .map(|(run, (lang, module))| (table(s, f.kind, rust, run, lang, module), "Rust"))
        .collect()
}

const ROWS: &[Row] = &[
    Row::medians(
        "time until every object has converged (PodSets: all replicas available; Memcacheds: Available, pods ready)",
        |r| secs(r.converge),
        Unit::Seconds,
    ),
    Row::medians("per object, p99", |r| secs(percentile(&r.per_object, 0.99)), Unit::Seconds),
    // The goal for a decision in another language: ≤ 10× Rust's.
    Row::medians("mean decision inside the operator", |r| r.split.mean_decision() * 1e6, Unit::Micros).goal(10.0),
    Row::medians("decisions' share of reconcile time, %", |r| r.split.decision_share() * 100.0, Unit::Count),
    Row::medians("operator CPU per object", |r| r.controller_cpu * 1e3, Unit::MsCpu),
];

/// `run`'s language (its module `module` under target/policy/) against Rust's, both
/// policies of `kind`.
pub fn table(s: &Sizes, kind: &str, rust: &LanguageRun, run: &LanguageRun, lang: &str, module: &str) -> Table {
    let mut t = Table::new(&format!(
        "The {kind} policy in {lang} (target/policy/{module}) vs in Rust, inside the operator: {} × {}, {} \
         alternating rounds (medians)",
        s.objects, s.replicas, s.rounds
    ));
    t.rows(ROWS, &rust.rounds, &run.rounds, s);
    t.ratio("module size", rust.module_bytes / 1e6, run.module_bytes / 1e6, Unit::MB, None);
    t.ratio("operator RSS, idle, the policy loaded", rust.idle_rss, run.idle_rss, Unit::MiB, None);
    t.ratio("operator RSS, converged (peak of the rounds)", rust.busy_rss, run.busy_rss, Unit::MiB, None);
    t
}
