//! Decision latency of a compiled policy (`podset-host policy bench`): a fresh
//! instance and one call per sample, as the operator runs it. A PodSet policy is
//! measured on generated PodSets of 10, 100 and 1000 pods; any policy on the inputs of
//! scenario files (recorded decisions are scenarios), one call each.

use std::fmt;
use std::time::{Duration, Instant};

use crate::contract::bindings::podset::{Action, InFlight, Input as PodsetInput, Pod, PodPhase, Podset, PodsetStatus};
use crate::sandbox::{Actions, Input, Policy, Result};

/// One row of the table.
pub struct Row {
    pub pods: usize,
    pub workload: &'static str,
    pub samples: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub actions: usize,
}

/// The inputs benchmarked: a converged PodSet (the common reconcile: nothing to do)
/// and a 10 % scale-down (ranking the pods).
pub fn inputs(pods: usize) -> Vec<(&'static str, PodsetInput)> {
    let pod_list: Vec<Pod> = (0..pods)
        .map(|i| Pod {
            name: format!("bench-{i:05}"),
            phase: PodPhase::Running,
            ready: i % 7 != 0,
            deleting: false,
            scheduled: true,
            created_at: 1_700_000_000_000 + i as i64,
            restart_count: (i % 5) as i32,
        })
        .collect();
    let podset = |replicas: usize| Podset {
        name: "bench".into(),
        namespace: "default".into(),
        uid: "uid-bench".into(),
        generation: 1,
        labels: Vec::new(),
        replicas: replicas as i32,
        status: PodsetStatus {
            pod_names: Vec::new(),
            available_replicas: 0,
            observed_generation: 0,
            conditions: Vec::new(),
        },
    };
    let mk = |replicas| PodsetInput {
        podset: podset(replicas),
        pods: pod_list.clone(),
        in_flight: InFlight { creations: 0, deletions: Vec::new() },
        now: 1_700_000_100_000,
    };
    vec![("converged", mk(pods)), ("scale-down 10%", mk(pods - pods / 10))]
}

/// The workload of a row measured with the CPU caches emptied before each decision.
pub const COLD: &str = "converged cold";

/// Bytes written before each cold sample: more than a server's last-level cache
/// (32 MiB per complex on the EPYC and Xeon machines this ran on), so that the
/// decision finds neither its code nor its data there.
const EVICT_BYTES: usize = 64 << 20;

/// Cold samples per size at most: each costs a walk of [`EVICT_BYTES`] (~5 ms).
const COLD_SAMPLES: usize = 200;

/// Benchmarks each size for about `budget` per workload (at least 20 samples). The
/// inputs are PodSets: `policy` must be a PodSet policy.
///
/// Hot rows: decisions back to back, as a loop of them keeps the caches warm. A
/// `converged cold` row per size: the same converged decision after the caches were
/// emptied, as a decision inside an operator runs, alone between network and JSON
/// work. On a 2-core Xeon at 5 pods: 5.5 µs hot, 114-135 µs of CPU cold (a scratch
/// probe, the same process and thread), where the operator measured 90 µs.
pub fn run(policy: &Policy, sizes: &[usize], budget: Duration) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut evict = vec![0u8; EVICT_BYTES];
    for &pods in sizes {
        for (workload, mut podset) in inputs(pods) {
            // The converged case needs the status the policy itself would write.
            if workload == "converged"
                && let Actions::PodSet(actions) = policy.decide(&Input::PodSet(podset.clone()))?.actions
                && let Some(Action::UpdateStatus(s)) = actions.into_iter().last()
            {
                podset.podset.status = s;
            }
            let input = Input::PodSet(podset);
            let actions = policy.decide(&input)?.actions.len();
            rows.push(sample(policy, &input, budget, 100_000, || {})?.row(pods, workload, actions));
            if workload == "converged" {
                let cold = sample(policy, &input, budget, COLD_SAMPLES, || {
                    // Writing every cache line: dirty lines must leave the cache too.
                    for line in evict.chunks_mut(64) {
                        line[0] = line[0].wrapping_add(1);
                    }
                    std::hint::black_box(&evict);
                })?;
                rows.push(cold.row(pods, COLD, actions));
            }
        }
    }
    Ok(rows)
}

/// `input` with `count` related objects: its own, repeated with their names suffixed
/// (`NAME-r7`), so that a scenario's decision is measured at a size; `None` when it has
/// none to repeat or is not of the any-kind world.
pub fn with_related(input: &Input, count: usize) -> Option<Input> {
    let Input::Reconcile(input) = input else { return None };
    if input.related.is_empty() {
        return None;
    }
    let mut sized = input.clone();
    sized.related = input
        .related
        .iter()
        .cycle()
        .take(count)
        .enumerate()
        .map(|(i, o)| {
            let mut o = o.clone();
            if i >= input.related.len() {
                o.meta.name = format!("{}-r{i}", o.meta.name);
                o.meta.uid = format!("{}-r{i}", o.meta.uid);
            }
            o
        })
        .collect();
    Some(Input::Reconcile(sized))
}

/// One row of the scenarios' table.
pub struct ScenarioRow {
    pub scenario: String,
    pub samples: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub actions: usize,
}

/// Benchmarks each `(name, input)` for about `budget` (at least 20 samples), back to
/// back. An input that names lookups its answers lack decides the same each time: it is
/// one call of the several its reconcile takes.
pub fn scenarios(policy: &Policy, inputs: &[(String, Input)], budget: Duration) -> Result<Vec<ScenarioRow>> {
    let mut rows = Vec::new();
    for (name, input) in inputs {
        let actions = policy.decide(input)?.actions.len();
        let (samples, p50, p99, max) = sample(policy, input, budget, 100_000, || {})?.quantiles();
        rows.push(ScenarioRow { scenario: name.clone(), samples, p50, p99, max, actions });
    }
    Ok(rows)
}

pub struct ScenarioTable<'a>(pub &'a [ScenarioRow]);

impl fmt::Display for ScenarioTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.0.iter().map(|r| r.scenario.len()).max().unwrap_or(0).max("scenario".len());
        writeln!(f, "| {:<width$} | actions | samples |      p50 |      p99 |      max |", "scenario")?;
        writeln!(f, "|:{}|--------:|--------:|---------:|---------:|---------:|", "-".repeat(width + 1))?;
        for r in self.0 {
            writeln!(f, "| {:<width$} | {} |", r.scenario, cells(r.actions, r.samples, [r.p50, r.p99, r.max]))?;
        }
        Ok(())
    }
}

/// Decisions' wall times, sorted.
struct Samples(Vec<Duration>);

/// At least 20 decisions of `input`, more until `budget` or `max`, each after `before`.
fn sample(policy: &Policy, input: &Input, budget: Duration, max: usize, mut before: impl FnMut()) -> Result<Samples> {
    let mut samples = Vec::new();
    let started = Instant::now();
    while samples.len() < 20 || (started.elapsed() < budget && samples.len() < max) {
        before();
        samples.push(policy.decide(input)?.spent.wall);
    }
    samples.sort();
    Ok(Samples(samples))
}

impl Samples {
    /// How many, the median, the 99th percentile and the largest.
    fn quantiles(&self) -> (usize, Duration, Duration, Duration) {
        let at = |q: f64| self.0[((self.0.len() - 1) as f64 * q).round() as usize];
        (self.0.len(), at(0.50), at(0.99), at(1.0))
    }

    fn row(&self, pods: usize, workload: &'static str, actions: usize) -> Row {
        let (samples, p50, p99, max) = self.quantiles();
        Row { pods, workload, samples, p50, p99, max, actions }
    }
}

pub struct Table<'a>(pub &'a [Row]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| pods | workload       | actions | samples |      p50 |      p99 |      max |")?;
        writeln!(f, "|-----:|:---------------|--------:|--------:|---------:|---------:|---------:|")?;
        for r in self.0 {
            writeln!(
                f,
                "| {:>4} | {:<14} | {} |",
                r.pods,
                r.workload,
                cells(r.actions, r.samples, [r.p50, r.p99, r.max])
            )?;
        }
        Ok(())
    }
}

/// The columns both tables end with: actions, samples, p50, p99, max.
fn cells(actions: usize, samples: usize, times: [Duration; 3]) -> String {
    let [p50, p99, max] = times.map(micros);
    format!("{actions:>7} | {samples:>7} | {p50:>8} | {p99:>8} | {max:>8}")
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
