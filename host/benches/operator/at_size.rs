//! The operator at the rounds' size, beside the rounds: the hot swap, its decision
//! against the module alone in this process (as `policy bench` measures it), its memory.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};
use podset_host::sandbox::Digest;
use podset_test_support as common;

use crate::metrics::Decisions;
use crate::peer::{Peer, Who};
use crate::rounds::Rounds;
use crate::sizes::Sizes;
use crate::table::{Table, Unit};
use crate::watch::until_all;

/// The operator at the rounds' size: the hot swap, its decision against the module
/// alone, its memory. `good` is the module of its rounds.
pub fn operator_at_size(s: &Sizes, good: &[u8], rounds: &Rounds, idle_rss: f64) -> Table {
    // The decision inside the busy operator against the same module alone, same pod
    // count: its rounds' decisions (it is started afresh for each of its rounds).
    let decisions = rounds.by[&Who::Wasm].iter().fold(Decisions::default(), |all, r| all.plus(&r.few_pods));
    let alone = isolated_decisions(good, s.replicas as usize);
    // A large PodSet's decision alone, the module's own cost at 100 pods.
    let hundred = isolated_decisions(good, MANY_PODS).hot;
    let figures = AtSize { swap: rounds.swap, decisions, alone, hundred, idle_rss, busy_rss: rounds.busy_rss };
    table(s, &figures)
}

/// The pods of the large PodSet whose decision alone has a goal of its own.
const MANY_PODS: usize = 100;

/// What [`operator_at_size`] measured.
pub struct AtSize {
    pub swap: Option<Swap>,
    /// Its decisions of a few pods in its rounds, and the module's alone.
    pub decisions: Decisions,
    pub alone: Alone,
    /// The module's decision alone at [`MANY_PODS`], p50.
    pub hundred: Duration,
    pub idle_rss: f64,
    pub busy_rss: f64,
}

/// The table of what [`operator_at_size`] measured.
pub fn table(s: &Sizes, f: &AtSize) -> Table {
    let mut t = Table::new(&format!("The operator at {} PodSets", s.objects));
    if let Some(swap) = &f.swap {
        t.alone(
            &format!("hot swap: policy file replaced → all {} report the new digest", s.objects),
            swap.last.as_secs_f64(),
            Unit::Millis,
            Some(1.0),
        );
        // Slow to start (the file seen, the module compiled) or slow to get through
        // the PodSets (each re-decided and its status written): the two tell apart.
        t.because(&format!(
            "the first re-decided after {}, the last {} after it",
            Unit::Millis.show(swap.first.as_secs_f64()),
            Unit::Millis.show(swap.last.saturating_sub(swap.first).as_secs_f64()),
        ));
    }
    t.decisions(
        &format!(
            "policy decision, 1-{} pods: alone (p50 at {0}, as `policy bench`) vs inside the operator (mean)",
            s.replicas
        ),
        &f.alone,
        &f.decisions,
        // Issue 45: within 2× the module alone back to back, or at the measured floor
        // (the next row).
        Some(2.0),
    );
    t.alone(
        &format!("policy decision alone, {MANY_PODS} pods converged, p50 (as `policy bench`)"),
        f.hundred.as_secs_f64() * 1e6,
        Unit::Micros,
        Some(30.0),
    );
    // Its cost at the rounds' few pods, and what each pod beyond them adds (reading it
    // in, listing it in the status).
    let (few, hundred) = (f.alone.hot.as_secs_f64() * 1e6, f.hundred.as_secs_f64() * 1e6);
    let per_pod = (hundred - few) / (MANY_PODS as f64 - f64::from(s.replicas)).max(1.0);
    t.because(&format!("{} at {} pods, then {per_pod:.2} µs per pod", Unit::Micros.show(few), s.replicas));
    t.alone("operator RSS, idle", f.idle_rss, Unit::MiB, None);
    t.alone(
        &format!("operator RSS, {} × {} converged (peak of the rounds)", s.objects, s.replicas),
        f.busy_rss,
        Unit::MiB,
        None,
    );
    t
}

/// A hot swap's times from the policy file's replacement: to the first PodSet that
/// reports the new digest, and to the last.
#[derive(Clone, Copy, Debug)]
pub struct Swap {
    pub first: Duration,
    pub last: Duration,
}

/// Times until the first and all `n` PodSets report the canary's digest after the
/// policy file is replaced (as a build or a ConfigMap volume replaces it: write aside,
/// rename).
pub async fn hot_swap(
    client: &Client,
    ns: &str,
    file: &std::path::Path,
    good: &[u8],
    canary: &[u8],
    n: usize,
    replicas: i32,
) -> Swap {
    let podsets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &Peer::PodSet.resource());
    // Decided by `digest`, and still settled at `replicas` (the swap must not cost a pod).
    let decided = |digest: String| {
        move |o: &DynamicObject| common::decided_by(o, &digest) && Peer::PodSet.settled(o, i64::from(replicas))
    };
    until_all(
        &podsets,
        n,
        Instant::now(),
        "every PodSet decided by the first policy",
        decided(Digest::of(good).to_string()),
    )
    .await;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, canary).expect("write");
    let started = Instant::now();
    std::fs::rename(&tmp, file).expect("rename");
    let at = until_all(&podsets, n, started, "every PodSet re-decided", decided(Digest::of(canary).to_string())).await;
    let took = Swap {
        first: at.values().min().copied().unwrap_or_default(),
        last: at.values().max().copied().unwrap_or_default(),
    };
    // Back to the first policy for what follows.
    std::fs::write(&tmp, good).expect("write");
    std::fs::rename(&tmp, file).expect("rename");
    took
}

/// The module alone at `pods`, converged, p50: decisions back to back (`hot`), and each
/// after the CPU caches were emptied (`cold`).
pub struct Alone {
    pub hot: Duration,
    pub cold: Duration,
}

/// A converged PodSet's decision with `pods` pods, the module alone in this process
/// (what `podset-host policy bench` measures).
pub fn isolated_decisions(module: &[u8], pods: usize) -> Alone {
    use podset_host::author::bench;
    let engine = podset_host::sandbox::PolicyEngine::new(podset_host::sandbox::Limits::default()).expect("engine");
    let policy = engine.load(module).expect("the policy loads");
    let rows = bench::run(&policy, &[pods], Duration::from_millis(500)).expect("policy bench");
    let p50 = |workload: &str| rows.iter().find(|r| r.workload == workload).map(|r| r.p50).unwrap_or_default();
    Alone { hot: p50("converged"), cold: p50(bench::COLD) }
}
