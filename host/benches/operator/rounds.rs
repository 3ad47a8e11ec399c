//! The alternating rounds: the peer, the operator, its native build and the operator
//! with a shadow, one after the other in each round, in alternating order; then what is
//! measured beside them, and their tables.

use std::collections::HashMap;

use kube::Client;
use podset_test_support as common;

use crate::at_size::{self, hot_swap};
use crate::compared;
use crate::machine::{component_pid, rss};
use crate::metrics::{Decisions, ShadowSplit, Split};
use crate::peer::{Peer, Who, apiserver_writes};
use crate::round::{Round, bench_namespace, drop_namespace, kcm_rate, round};
use crate::shared::{Since, refused_creates};
use crate::sizes::Sizes;
use crate::table::Table;

/// The operator under test: a shard for the rounds, and the same build deciding natively.
struct Contenders {
    op: common::Operator,
    native_op: common::Operator,
    run_label: String,
    native_label: String,
    file: std::path::PathBuf,
    good: Vec<u8>,
    canary: Vec<u8>,
}

impl Contenders {
    /// Stops the operator that `who` is not, and starts the one it is (none for the
    /// peer). An operator serving none of a round's namespaces still watches every
    /// PodSet and pod its policies declare (a shard filters its caches, it does not
    /// scope its watches), so with both running, each operator round paid the API
    /// server and the machine for a second operator's watches, which the peer's round
    /// never did.
    async fn run_only(&mut self, who: Who) {
        let (op, native) = match who {
            Who::Wasm | Who::Shadowed => (true, false),
            Who::Native => (false, true),
            Who::ReplicaSet => (false, false),
        };
        for (o, wanted) in [(&mut self.op, op), (&mut self.native_op, native)] {
            let running = o.exited().is_none();
            if running && !wanted {
                o.kill();
            } else if !running && wanted {
                o.respawn();
                o.ready().await;
            }
        }
    }
}

/// What the rounds measured.
pub struct Rounds {
    pub by: HashMap<Who, Vec<Round>>,
    /// The peer at the controller manager's default client rate.
    pub default_rate: Round,
    /// The hot swap after the operator's last round.
    pub swap: Option<at_size::Swap>,
    /// The operator's peak memory over its rounds.
    pub busy_rss: f64,
}

/// The alternating rounds and what is measured beside them, as tables; the operators
/// they ran are stopped on return.
pub async fn tables(client: &Client, s: &Sizes, run_label: &str) -> Vec<(Table, &'static str)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("podset.wasm");
    let (good, canary) = (common::read_policy("podset.wasm"), common::read_policy("fixtures/canary.wasm"));
    std::fs::write(&file, &good).expect("policy file");
    let op = common::Operator::spawn_shard("bench", run_label, &[&file], &common::kubeconfig_path(), &[]);
    // The same operator build, with guest-podset's decision linked in natively
    // (`--features native-podset`), serving namespaces of its own.
    let native_label = format!("podset.dev/bench-native={}", std::process::id());
    let native_op = common::Operator::spawn_shard(
        "bench-native",
        &native_label,
        &[&file],
        &common::kubeconfig_path(),
        &["--native-podset"],
    );
    op.ready().await;
    native_op.ready().await;
    let idle_rss = rss(op.pid());
    let mut c = Contenders { op, native_op, run_label: run_label.to_string(), native_label, file, good, canary };

    let rounds = alternating_rounds(client, s, &mut c).await;
    let by = &rounds.by;
    let (peer, ours, native, shadowed) =
        (&by[&Who::ReplicaSet], &by[&Who::Wasm], &by[&Who::Native], &by[&Who::Shadowed]);
    let t1 = compared::versus_replicasets(s, peer, ours, &rounds.default_rate);
    let tn = compared::native_vs_wasm(s, native, ours);
    let ts = compared::with_a_shadow(s, ours, shadowed);
    let t2 = at_size::operator_at_size(s, &c.good, &rounds, idle_rss);
    vec![(t1, "ReplicaSet controller"), (tn, "native"), (ts, "no shadow"), (t2, "reference")]
}

/// The alternating rounds of the four contenders (the peer, the operator, its native
/// build, the operator with a shadow), then one round of the peer at its default client
/// rate; the hot swap after the operator's last round.
async fn alternating_rounds(client: &Client, s: &Sizes, c: &mut Contenders) -> Rounds {
    // Alternating rounds, the controller manager's client rate out of the way.
    kcm_rate(1000, 1000);
    let mut rounds: HashMap<Who, Vec<Round>> = HashMap::new();
    let mut swap = None;
    let mut busy_rss = 0.0;
    for r in 0..s.peer_rounds {
        let mut order = [Who::ReplicaSet, Who::Wasm, Who::Native, Who::Shadowed];
        if r % 2 == 1 {
            order.reverse();
        }
        for who in order {
            c.run_only(who).await;
            let (op, native_op, run_label, native_label) = (&c.op, &c.native_op, &c.run_label, &c.native_label);
            let (file, good, canary) = (&c.file, &c.good, &c.canary);
            let (label, operator) = match who {
                Who::Native => (native_label, Some(native_op)),
                Who::Wasm | Who::Shadowed => (run_label, Some(op)),
                Who::ReplicaSet => (run_label, None),
            };
            let ns = bench_namespace(client, "bench", label).await;
            let (before, few_before) = match operator {
                Some(o) => {
                    let m = o.metrics().await;
                    (Split::of(&m), Decisions::of(&m))
                }
                None => (Split::default(), Decisions::default()),
            };
            if who == Who::Shadowed {
                common::publish_shadow(client, &ns, "shadow", "shadow-module", good, None).await;
                common::policy_loaded(client, &ns, "shadow", op).await;
            }
            let rp_writes = apiserver_writes(client).await;
            // The native build and the shadowed operator are compared on converging only.
            let controller = operator.map_or_else(|| component_pid("kube-controller-manager"), |o| o.pid());
            let mut result =
                round(client, who.peer(), controller, &ns, s, !matches!(who, Who::Native | Who::Shadowed)).await;
            if let Some(o) = operator {
                let m = o.metrics().await;
                result.split = Split::of(&m).minus(&before);
                result.few_pods = Decisions::of(&m).minus(&few_before);
            }
            if who == Who::Shadowed {
                // The tally is written every few seconds: let the last one land.
                tokio::time::sleep(podset_host::sources::cluster::SHADOW_REPORT).await;
                result.shadow = ShadowSplit::of(op, &ns).await;
                let key = ("reconcilepolicies".to_string(), "status".to_string());
                let after = apiserver_writes(client).await;
                result.shadow.status_writes = after.get(&key).unwrap_or(&0.0) - rp_writes.get(&key).unwrap_or(&0.0);
                eprintln!(
                    "round {} shadow: {:.0} decisions, {:.0} agreed, {:.0} dropped, {:.0} µs each, {:.0} status writes",
                    r + 1,
                    result.shadow.decisions,
                    result.shadow.agreed,
                    result.shadow.dropped,
                    result.shadow.mean() * 1e6,
                    result.shadow.status_writes
                );
            }
            eprintln!(
                "round {} {who:?}: converged {:.2?}, {:.1} writes/object {:.1?}, 5→1 {:.2?}, 1→5 {:.2?}, decision {:.0} µs, {:.1} % of reconcile time",
                r + 1,
                result.converge,
                result.writes_per_object,
                result.writes_by_resource,
                result.down,
                result.up,
                result.split.mean_decision() * 1e6,
                result.split.decision_share() * 100.0,
            );
            if who == Who::Wasm {
                busy_rss = f64::max(busy_rss, rss(op.pid()));
                if r + 1 == s.peer_rounds {
                    swap = Some(hot_swap(client, &ns, file, good, canary, s.objects, s.replicas).await);
                }
            }
            let deleting = Since::now();
            drop_namespace(client, &ns).await;
            result.refused_on_delete = refused_creates(&deleting.entries(), &ns) as f64 / s.objects as f64;
            eprintln!(
                "round {} {who:?}: {}; per object while converging it allocated {:.2} MB and spent {:.1} ms \
                 collecting; {:.1} pod creates refused per object while the namespace was deleted",
                r + 1,
                result.shared,
                result.apiserver_heap.allocated / 1e6,
                result.apiserver_heap.gc_cpu * 1e3,
                result.refused_on_delete
            );
            rounds.entry(who).or_default().push(result);
        }
    }
    // The same, once, at the controller manager's default client rate (20 QPS, burst 30).
    c.run_only(Who::ReplicaSet).await;
    kcm_rate(20, 30);
    let ns = bench_namespace(client, "bench", &c.run_label).await;
    let default_rate = round(client, Peer::ReplicaSet, component_pid("kube-controller-manager"), &ns, s, false).await;
    drop_namespace(client, &ns).await;
    kcm_rate(1000, 1000);
    // What follows measures the operator.
    c.run_only(Who::Wasm).await;

    Rounds { by: rounds, default_rate, swap, busy_rss }
}
