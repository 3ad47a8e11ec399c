//! What the operator's own metrics say of a round: where its reconcile time went, its
//! decisions about a few pods, and what a shadow did.

use podset_test_support as common;

/// Where an operator's reconcile time went, from its own metrics (all sums, seconds).
#[derive(Clone, Copy, Default)]
pub struct Split {
    pub decisions: f64,
    pub decision_seconds: f64,
    pub reconcile_seconds: f64,
}

impl Split {
    pub fn of(m: &str) -> Split {
        Split {
            decisions: common::sum_metric(m, "podset_policy_decision_duration_seconds_count", ""),
            decision_seconds: common::sum_metric(m, "podset_policy_decision_duration_seconds_sum", ""),
            reconcile_seconds: common::sum_metric(m, "podset_reconcile_duration_seconds_sum", ""),
        }
    }

    pub fn minus(&self, before: &Split) -> Split {
        Split {
            decisions: self.decisions - before.decisions,
            decision_seconds: self.decision_seconds - before.decision_seconds,
            reconcile_seconds: self.reconcile_seconds - before.reconcile_seconds,
        }
    }

    pub fn mean_decision(&self) -> f64 {
        self.decision_seconds / self.decisions.max(1.0)
    }

    /// The decisions' share of the time spent reconciling.
    pub fn decision_share(&self) -> f64 {
        self.decision_seconds / self.reconcile_seconds.max(f64::MIN_POSITIVE)
    }
}

/// An operator's decisions about a few pods (1-9, the rounds' size), from its metrics:
/// count, wall and CPU seconds.
#[derive(Clone, Copy, Default)]
pub struct Decisions {
    pub count: f64,
    pub wall: f64,
    pub cpu: f64,
}

impl Decisions {
    pub fn of(metrics: &str) -> Decisions {
        let few = r#"children="1-9""#;
        Decisions {
            count: common::sum_metric(metrics, "podset_policy_decision_duration_seconds_count", few),
            wall: common::sum_metric(metrics, "podset_policy_decision_duration_seconds_sum", few),
            cpu: common::sum_metric(metrics, "podset_policy_decision_cpu_seconds_sum", few),
        }
    }

    pub fn minus(&self, before: &Decisions) -> Decisions {
        Decisions { count: self.count - before.count, wall: self.wall - before.wall, cpu: self.cpu - before.cpu }
    }

    pub fn plus(&self, other: &Decisions) -> Decisions {
        Decisions { count: self.count + other.count, wall: self.wall + other.wall, cpu: self.cpu + other.cpu }
    }

    pub fn mean_wall(&self) -> f64 {
        self.wall / self.count.max(1.0)
    }

    pub fn mean_cpu(&self) -> f64 {
        self.cpu / self.count.max(1.0)
    }
}

/// A shadow's work in a round, from the operator's metrics and the API server's.
#[derive(Clone, Copy, Default)]
pub struct ShadowSplit {
    pub decisions: f64,
    pub agreed: f64,
    pub dropped: f64,
    pub seconds: f64,
    /// Writes to ReconcilePolicy status (the throttled tally).
    pub status_writes: f64,
}

impl ShadowSplit {
    pub async fn of(op: &common::Operator, ns: &str) -> ShadowSplit {
        let m = op.metrics().await;
        let policy = format!(r#"policy="{ns}/shadow""#);
        let outcome =
            |o: &str| common::sum_metric(&m, "podset_shadow_decisions_total", &format!(r#"{policy},outcome="{o}""#));
        ShadowSplit {
            decisions: ["agree", "differ", "failed"].iter().map(|o| outcome(o)).sum(),
            agreed: outcome("agree"),
            dropped: outcome("dropped"),
            seconds: common::sum_metric(&m, "podset_shadow_decision_duration_seconds_sum", &policy),
            status_writes: 0.0,
        }
    }

    pub fn mean(&self) -> f64 {
        self.seconds / self.decisions.max(1.0)
    }
}

/// The reconciles an operator cut short to run again soon, from its metrics
/// (`podset_reconciles_deferred_total`): each is a parent decided later than it could
/// have been, by the retry's delay at least.
#[derive(Clone, Copy, Debug, Default)]
pub struct Deferrals {
    /// Its cache had not seen its own last status write (again in 50 ms).
    pub behind: f64,
    /// The parent changed under the decision (again in 200 ms).
    pub conflict: f64,
}

impl Deferrals {
    pub fn of(metrics: &str) -> Deferrals {
        let reason =
            |r: &str| common::sum_metric(metrics, "podset_reconciles_deferred_total", &format!(r#"reason="{r}""#));
        Deferrals { behind: reason("behind"), conflict: reason("conflict") }
    }

    pub fn minus(&self, before: &Deferrals) -> Deferrals {
        Deferrals { behind: self.behind - before.behind, conflict: self.conflict - before.conflict }
    }
}

/// One kind of write the operator sends: its verb and resource
/// (`podset_api_writes_total`'s labels).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    pub resource: String,
}

/// The operator's writes by [`Request`], from its metrics: what a row of writes that
/// should be none names when there were some.
#[derive(Clone, Debug, Default)]
pub struct Writes(std::collections::BTreeMap<Request, f64>);

impl Writes {
    pub fn of(metrics: &str) -> Writes {
        let label = |line: &str, name: &str| {
            let from = line.find(&format!("{name}=\""))? + name.len() + 2;
            let len = line[from..].find('"')?;
            Some(line[from..from + len].to_string())
        };
        let mut by = std::collections::BTreeMap::new();
        for line in metrics.lines().filter(|l| l.starts_with("podset_api_writes_total{")) {
            let (Some(verb), Some(resource)) = (label(line, "verb"), label(line, "resource")) else { continue };
            let Some(n) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else { continue };
            *by.entry(Request { verb, resource }).or_insert(0.0) += n;
        }
        Writes(by)
    }

    /// The writes since `before` of the resources `counted` keeps, each kind with its
    /// count ("patch podsets/status 3, create events 2"), or "none".
    pub fn since(&self, before: &Writes, counted: impl Fn(&str) -> bool) -> String {
        let grown: Vec<String> = self
            .0
            .iter()
            .filter(|(r, _)| counted(&r.resource))
            .map(|(r, n)| (r, n - before.0.get(r).copied().unwrap_or(0.0)))
            .filter(|(_, n)| *n > 0.0)
            .map(|(r, n)| format!("{} {} {n}", r.verb, r.resource))
            .collect();
        if grown.is_empty() { "none".into() } else { grown.join(", ") }
    }
}
