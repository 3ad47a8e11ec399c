//! Decision latency of a compiled policy (`podset-host policy bench`): a fresh
//! instance and one call per sample, as the operator runs it.

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

/// Benchmarks each size for about `budget` per workload (at least 20 samples). The
/// inputs are PodSets: `policy` must be a PodSet policy.
pub fn run(policy: &Policy, sizes: &[usize], budget: Duration) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
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
            let warmup = policy.decide(&input)?;
            let mut samples = Vec::new();
            let started = Instant::now();
            while samples.len() < 20 || (started.elapsed() < budget && samples.len() < 100_000) {
                samples.push(policy.decide(&input)?.spent.wall);
            }
            samples.sort();
            let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
            rows.push(Row {
                pods,
                workload,
                samples: samples.len(),
                p50: at(0.50),
                p99: at(0.99),
                max: at(1.0),
                actions: warmup.actions.len(),
            });
        }
    }
    Ok(rows)
}

pub struct Table<'a>(pub &'a [Row]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| pods | workload       | actions | samples |      p50 |      p99 |      max |")?;
        writeln!(f, "|-----:|:---------------|--------:|--------:|---------:|---------:|---------:|")?;
        for r in self.0 {
            writeln!(
                f,
                "| {:>4} | {:<14} | {:>7} | {:>7} | {:>8} | {:>8} | {:>8} |",
                r.pods,
                r.workload,
                r.actions,
                r.samples,
                micros(r.p50),
                micros(r.p99),
                micros(r.max)
            )?;
        }
        Ok(())
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
