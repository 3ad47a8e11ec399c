//! A rollout's plan read as steps and windows, and its gates judged on what the
//! running step counted: pure functions, so that every rule is a unit test.

use std::time::Duration;

use crate::crd::{GateStatus, Rollout, RolloutGates, RolloutStep};
use crate::registry::Step;

/// A gate's name, as `status.rollout.gates[].name` and `aborted.gate` write it.
pub const FAILED_DECISIONS: &str = "failedDecisions";
pub const RECONCILE_FAILURES: &str = "reconcileFailures";
pub const SHADOW_AGREEMENT: &str = "shadowAgreement";
pub const READINESS: &str = "readiness";
/// The "gate" of a rollout someone aborted.
pub const MANUAL: &str = "Manual";

/// What step `index` (0-based) of `plan` does.
pub fn step(plan: &Rollout, index: usize) -> Step {
    match plan.steps.get(index) {
        Some(RolloutStep { shadow: true, .. }) => Step::Shadow,
        Some(s) => Step::Share(s.percent.unwrap_or(100).clamp(1, 100) as u8),
        None => Step::Share(100),
    }
}

/// The least time and number of decisions of a step.
pub fn window(step: &RolloutStep) -> (Duration, i64) {
    let time = step.duration.as_deref().and_then(|d| humantime::parse_duration(d).ok()).unwrap_or_default();
    (time, step.decisions.unwrap_or(0).max(0))
}

/// The grace a parent's readiness gets.
pub fn readiness_grace(gates: &RolloutGates) -> Duration {
    humantime::parse_duration(&gates.readiness_grace).unwrap_or(Duration::from_secs(120))
}

/// What a step counted so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// The new module's decisions (shadow decisions in a shadow step).
    pub decisions: i64,
    /// Those that failed, or were refused by the checks or the schemas.
    pub failed: i64,
    /// Writes the API server refused.
    pub refused: i64,
    /// In a shadow step: shadow decisions compared, and those that agreed.
    pub compared: i64,
    pub agreed: i64,
    /// Parents whose readiness regressed (`Kind namespace/name: why`).
    pub regressions: Vec<String>,
    /// The objects the failures and refusals were about, the last few.
    pub objects: Vec<String>,
}

/// A gate that failed: its name and the objects it failed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub gate: &'static str,
    pub objects: Vec<String>,
}

/// Each gate's value against its limit, and the first that fails.
pub fn judge(gates: &RolloutGates, step: Step, counted: &Counted) -> (Vec<GateStatus>, Option<Failed>) {
    let mut out = Vec::new();
    let mut failed = None;
    let mut gate = |name: &'static str, value: String, limit: String, holds: bool, objects: &[String]| {
        if !holds && failed.is_none() {
            failed = Some(Failed { gate: name, objects: objects.to_vec() });
        }
        out.push(GateStatus { name: name.into(), value, limit, holds });
    };
    let f = counted.failed;
    gate(
        FAILED_DECISIONS,
        f.to_string(),
        format!("≤ {}", gates.max_failed_decisions),
        f <= gates.max_failed_decisions,
        &counted.objects,
    );
    let r = counted.refused;
    gate(
        RECONCILE_FAILURES,
        r.to_string(),
        format!("≤ {}", gates.max_reconcile_failures),
        r <= gates.max_reconcile_failures,
        &counted.objects,
    );
    if step == Step::Shadow {
        let share = (counted.compared > 0).then(|| counted.agreed as f64 * 100.0 / counted.compared as f64);
        let value = share.map_or_else(|| "no decision yet".to_string(), |s| format!("{s:.1}%"));
        match gates.min_shadow_agreement {
            // Judged once there is something to judge: no decision is not a failure.
            Some(min) => {
                let holds = share.is_none_or(|s| s >= f64::from(min));
                gate(SHADOW_AGREEMENT, value, format!("≥ {min}%"), holds, &[]);
            }
            None => gate(SHADOW_AGREEMENT, value, "reported, not gated".into(), true, &[]),
        }
    } else {
        let n = counted.regressions.len();
        gate(
            READINESS,
            format!("{n} regressed"),
            format!("none past {}", gates.readiness_grace),
            n == 0,
            &counted.regressions,
        );
    }
    (out, failed)
}

/// Whether a step's window has passed: its time and its decisions.
pub fn window_passed(step: &RolloutStep, elapsed: Duration, decisions: i64) -> bool {
    let (time, least) = window(step);
    elapsed >= time && decisions >= least
}

/// The step and its progress in a few words, for `kubectl get`.
pub fn progress(plan: &Rollout, index: usize, elapsed: Duration, decisions: i64) -> String {
    let n = plan.steps.len();
    let Some(s) = plan.steps.get(index) else { return format!("{n}/{n} done") };
    let what = match step(plan, index) {
        Step::Shadow => "shadow".to_string(),
        Step::Share(p) => format!("{p}%"),
    };
    let (time, least) = window(s);
    let mut parts = Vec::new();
    if !time.is_zero() {
        let shown = Duration::from_secs(elapsed.as_secs().min(time.as_secs()));
        parts.push(format!("{} of {}", humantime::format_duration(shown), humantime::format_duration(time)));
    }
    if least > 0 {
        parts.push(format!("{} of {least} decisions", decisions.min(least)));
    }
    format!("{}/{n} {what}, {}", index + 1, parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Rollout {
        let step = |shadow: bool, percent: Option<i32>, duration: &str, decisions: Option<i64>| RolloutStep {
            shadow,
            percent,
            duration: Some(duration.into()),
            decisions,
        };
        Rollout {
            steps: vec![
                step(true, None, "1m", Some(10)),
                step(false, Some(10), "30s", None),
                step(false, Some(50), "2m", None),
            ],
            gates: RolloutGates::default(),
            paused: false,
        }
    }

    #[test]
    fn steps_read_as_shadow_then_growing_shares() {
        let p = plan();
        assert_eq!(
            (step(&p, 0), step(&p, 1), step(&p, 2), step(&p, 3)),
            (Step::Shadow, Step::Share(10), Step::Share(50), Step::Share(100))
        );
        assert!(!window_passed(&p.steps[0], Duration::from_secs(61), 9), "ten decisions too");
        assert!(!window_passed(&p.steps[0], Duration::from_secs(59), 10), "and a minute");
        assert!(window_passed(&p.steps[0], Duration::from_secs(60), 10));
        assert_eq!(progress(&p, 0, Duration::from_secs(20), 4), "1/3 shadow, 20s of 1m, 4 of 10 decisions");
        assert_eq!(progress(&p, 1, Duration::from_secs(99), 0), "2/3 10%, 30s of 30s");
    }

    #[test]
    fn the_first_gate_that_fails_is_named_with_its_objects() {
        let mut gates = RolloutGates { min_shadow_agreement: Some(90), ..RolloutGates::default() };
        let fine = Counted { decisions: 20, compared: 20, agreed: 19, ..Counted::default() };
        let (values, failed) = judge(&gates, Step::Shadow, &fine);
        assert_eq!(failed, None);
        assert_eq!(
            values.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            [FAILED_DECISIONS, RECONCILE_FAILURES, SHADOW_AGREEMENT]
        );
        assert_eq!(values[2].value, "95.0%");
        let low = Counted { compared: 10, agreed: 8, ..fine.clone() };
        assert_eq!(judge(&gates, Step::Shadow, &low).1.map(|f| f.gate), Some(SHADOW_AGREEMENT));
        let trapped = Counted { failed: 1, objects: vec!["PodSet a/web: PolicyTrapped".into()], ..Counted::default() };
        let (_, failed) = judge(&gates, Step::Share(10), &trapped);
        assert_eq!(
            failed,
            Some(Failed { gate: FAILED_DECISIONS, objects: vec!["PodSet a/web: PolicyTrapped".into()] })
        );
        gates.max_failed_decisions = 1;
        assert_eq!(judge(&gates, Step::Share(10), &trapped).1, None, "within the limit");
        let regressed = Counted { regressions: vec!["PodSet a/web: not Ready for 2m".into()], ..Counted::default() };
        assert_eq!(judge(&gates, Step::Share(10), &regressed).1.map(|f| f.gate), Some(READINESS));
        // No shadow decision yet is not a disagreement.
        assert_eq!(judge(&gates, Step::Shadow, &Counted::default()).1, None);
    }
}
