//! The decision: from observed pods and in-flight work to actions.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::exports::podset::policy::podset::{Action, CreatePod, Input, Pod, PodName, PodPhase, PodsetStatus};
use crate::podset::policy::types::{Condition, ConditionStatus, KeyValue, PolicyError};

/// Most pods created in one decision. The rest follow on the next reconcile, so one
/// PodSet scaling up cannot flood the API server (the ReplicaSet controller's burst cap
/// plays the same role).
pub const MAX_CREATES_PER_PASS: usize = 100;

/// Asked for when creations were capped, as a safety net: the host also reconciles
/// again as soon as it observes the pods it created.
pub const REQUEUE_AFTER_CAP_MS: u32 = 1_000;

/// Condition reporting whether `spec.replicas` pods are ready.
pub const AVAILABLE: &str = "Available";

/// Labels this build adds to the pods it creates (the `canary` feature adds one, so a
/// swap to that build is visible on the cluster).
fn variant_labels() -> Vec<KeyValue> {
    if cfg!(feature = "canary") {
        vec![KeyValue { key: "app.example.com/policy-variant".into(), value: "canary".into() }]
    } else {
        Vec::new()
    }
}

/// Pending or Running and not terminating: the pods that count towards `spec.replicas`.
/// Failed and Succeeded pods never run again; a terminating pod is already leaving.
pub fn is_active(pod: &Pod) -> bool {
    matches!(pod.phase, PodPhase::Pending | PodPhase::Running) && !pod.deleting
}

pub fn decide(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let podset = &input.podset;
    let desired = usize::try_from(podset.replicas).map_err(|_| PolicyError {
        reason: "InvalidReplicas".into(),
        message: format!("spec.replicas is {}, must not be negative", podset.replicas),
    })?;
    // Test fixtures of rollouts (features, never in the default build).
    #[cfg(all(feature = "trap-one-in-ten", target_arch = "wasm32"))]
    if podset.uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 10 == 0 {
        core::arch::wasm32::unreachable();
    }
    let desired = if cfg!(feature = "one-too-many") { desired + 1 } else { desired };

    let active: Vec<&Pod> = input.pods.iter().filter(|p| is_active(p)).collect();
    // A deletion the host issued but has not yet observed still shows an active pod in
    // its cache. That pod is going away: neither count it nor pick it again.
    let deleting: HashSet<&str> = input.in_flight.deletions.iter().map(String::as_str).collect();
    let mut staying: Vec<&Pod> = active.iter().copied().filter(|p| !deleting.contains(p.name.as_str())).collect();
    let expected = staying.len() + input.in_flight.creations as usize;

    let mut actions = Vec::new();
    match expected.cmp(&desired) {
        Ordering::Less => {
            let missing = desired - expected;
            let now = missing.min(MAX_CREATES_PER_PASS);
            actions.extend((0..now).map(|_| {
                Action::CreatePod(CreatePod {
                    name: PodName::Prefix(format!("{}-", podset.name)),
                    labels: variant_labels(),
                    annotations: Vec::new(),
                })
            }));
            if missing > now {
                actions.push(Action::RequeueAfter(REQUEUE_AFTER_CAP_MS));
            }
        }
        Ordering::Greater => {
            // In-flight creations cannot be deleted; only observed pods can go.
            let surplus = (expected - desired).min(staying.len());
            staying.sort_by(|a, b| deletion_order(a, b));
            actions.extend(staying.drain(..surplus).map(|p| Action::DeletePod(p.name.clone())));
        }
        Ordering::Equal => {}
    }

    // The status names the pods that stay: not those this decision deletes, nor those
    // whose deletion is in flight. The host writes it only once the deletions are
    // done, and a pod being deleted is not active. Counted from the pods observed
    // before, it took a second status write once the deletions were seen: with
    // reconciles taken first come first served, that write queued behind every other
    // PodSet's, and 200 × 5 → 1 took ~1.5× the ReplicaSet controller's time.
    if let Some(status) = changed_status(input, &staying) {
        actions.push(Action::UpdateStatus(status));
    }
    Ok(actions)
}

/// The status that describes `active` (the pods that stay), unless the current one does. The
/// pod names are compared borrowed and copied only into a status that changed: a
/// converged PodSet, the common reconcile, copies none.
fn changed_status(input: &Input, active: &[&Pod]) -> Option<PodsetStatus> {
    let mut names: Vec<&str> = active.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    let ready = active.iter().filter(|p| p.ready).count();
    let available_replicas = i32::try_from(ready).unwrap_or(i32::MAX);
    let replicas = input.podset.replicas;
    let enough = available_replicas >= replicas;
    let conditions = vec![Condition {
        type_: AVAILABLE.into(),
        status: if enough { ConditionStatus::True } else { ConditionStatus::False },
        reason: if enough { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" }.into(),
        message: format!(
            "{available_replicas} of {replicas} pods ready{}",
            if cfg!(feature = "canary") { " (canary policy)" } else { "" }
        ),
    }];
    let current = &input.podset.status;
    let same = current.pod_names.iter().map(String::as_str).eq(names.iter().copied())
        && current.available_replicas == available_replicas
        && current.observed_generation == input.podset.generation
        && current.conditions == conditions;
    (!same).then(|| PodsetStatus {
        pod_names: names.into_iter().map(String::from).collect(),
        available_replicas,
        observed_generation: input.podset.generation,
        conditions,
    })
}

/// The ReplicaSet controller's scale-down order: the pod that is cheapest to lose first.
/// Unscheduled before scheduled, Pending before Unknown before Running, not ready before
/// ready, more restarts before fewer, newer before older; the name breaks ties so the
/// decision is deterministic.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    fn phase_rank(p: PodPhase) -> u8 {
        match p {
            PodPhase::Pending => 0,
            PodPhase::Unknown => 1,
            PodPhase::Running => 2,
            PodPhase::Succeeded | PodPhase::Failed => 3,
        }
    }
    a.scheduled
        .cmp(&b.scheduled)
        .then_with(|| phase_rank(a.phase).cmp(&phase_rank(b.phase)))
        .then_with(|| a.ready.cmp(&b.ready))
        .then_with(|| b.restart_count.cmp(&a.restart_count))
        .then_with(|| b.created_at.cmp(&a.created_at))
        .then_with(|| a.name.cmp(&b.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::podset::policy::podset::{InFlight, Podset};

    fn podset(replicas: i32) -> Podset {
        Podset {
            name: "web".into(),
            namespace: "default".into(),
            uid: "u-web".into(),
            generation: 1,
            labels: Vec::new(),
            replicas,
            status: PodsetStatus {
                pod_names: Vec::new(),
                available_replicas: 0,
                observed_generation: 0,
                conditions: Vec::new(),
            },
        }
    }

    fn pod(name: &str) -> Pod {
        Pod {
            name: name.into(),
            phase: PodPhase::Running,
            ready: true,
            deleting: false,
            scheduled: true,
            created_at: 1_000,
            restart_count: 0,
        }
    }

    fn input(replicas: i32, pods: Vec<Pod>) -> Input {
        Input {
            podset: podset(replicas),
            pods,
            in_flight: InFlight { creations: 0, deletions: Vec::new() },
            now: 10_000,
        }
    }

    fn creates(a: &[Action]) -> usize {
        a.iter().filter(|a| matches!(a, Action::CreatePod(_))).count()
    }

    fn deletes(a: &[Action]) -> Vec<&str> {
        a.iter()
            .filter_map(|a| match a {
                Action::DeletePod(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    fn status(a: &[Action]) -> Option<&PodsetStatus> {
        a.iter().find_map(|a| match a {
            Action::UpdateStatus(s) => Some(s),
            _ => None,
        })
    }

    #[test]
    fn scale_from_zero_creates_every_missing_pod_in_one_pass() {
        let a = decide(&input(5, vec![])).unwrap();
        assert_eq!(creates(&a), 5);
        let s = status(&a).unwrap();
        assert_eq!(s.available_replicas, 0);
        assert_eq!(s.observed_generation, 1);
        assert_eq!(s.conditions[0].status, ConditionStatus::False);
    }

    #[test]
    fn creations_are_capped_per_pass_and_a_requeue_asked() {
        let a = decide(&input(250, vec![])).unwrap();
        assert_eq!(creates(&a), MAX_CREATES_PER_PASS);
        assert!(a.contains(&Action::RequeueAfter(REQUEUE_AFTER_CAP_MS)));
    }

    #[test]
    fn in_flight_creations_count_as_pods() {
        let mut i = input(3, vec![pod("a")]);
        i.in_flight.creations = 2;
        assert_eq!(creates(&decide(&i).unwrap()), 0);
        i.in_flight.creations = 1;
        assert_eq!(creates(&decide(&i).unwrap()), 1);
    }

    #[test]
    fn failed_succeeded_and_terminating_pods_do_not_count() {
        let mut failed = pod("f");
        failed.phase = PodPhase::Failed;
        let mut done = pod("s");
        done.phase = PodPhase::Succeeded;
        let mut leaving = pod("t");
        leaving.deleting = true;
        let a = decide(&input(2, vec![pod("a"), failed, done, leaving])).unwrap();
        assert_eq!(creates(&a), 1);
        assert!(deletes(&a).is_empty(), "inactive pods are never deleted by the policy");
        assert_eq!(status(&a).unwrap().pod_names, vec!["a".to_string()]);
    }

    #[test]
    fn scale_down_follows_replicaset_ranking() {
        let mut unscheduled = pod("unscheduled");
        unscheduled.scheduled = false;
        unscheduled.phase = PodPhase::Pending;
        unscheduled.ready = false;
        let mut pending = pod("pending");
        pending.phase = PodPhase::Pending;
        pending.ready = false;
        let mut not_ready = pod("not-ready");
        not_ready.ready = false;
        let mut newer = pod("newer");
        newer.created_at = 5_000;
        let older = pod("older");
        let pods = vec![older, newer, not_ready, pending, unscheduled];
        let a = decide(&input(1, pods)).unwrap();
        assert_eq!(deletes(&a), vec!["unscheduled", "pending", "not-ready", "newer"]);
    }

    #[test]
    fn a_scale_down_s_status_names_only_the_pods_that_stay() {
        let mut i = input(1, vec![pod("a"), pod("b"), pod("c")]);
        i.in_flight.deletions = vec!["c".into()];
        let a = decide(&i).unwrap();
        let s = status(&a).expect("a status with the deletions");
        let stay: Vec<String> = ["a", "b"].iter().filter(|n| !deletes(&a).contains(n)).map(|n| n.to_string()).collect();
        assert_eq!(s.pod_names, stay, "neither the pod deleted now nor the one in flight");
        assert_eq!((s.pod_names.len(), s.available_replicas), (1, 1));
        // Once the deletions are seen, the status written with them holds: nothing to do.
        i.podset.status = s.clone();
        i.pods.retain(|p| stay.contains(&p.name));
        i.in_flight.deletions.clear();
        assert_eq!(decide(&i).unwrap(), Vec::<Action>::new());
    }

    #[test]
    fn restarts_rank_before_age() {
        let mut flaky = pod("flaky");
        flaky.restart_count = 4;
        let mut newer = pod("newer");
        newer.created_at = 9_000;
        let a = decide(&input(1, vec![newer, flaky])).unwrap();
        assert_eq!(deletes(&a), vec!["flaky"]);
    }

    #[test]
    fn in_flight_deletions_are_not_chosen_again_nor_counted() {
        let mut i = input(1, vec![pod("a"), pod("b"), pod("c")]);
        i.in_flight.deletions = vec!["c".into()];
        let d = decide(&i).unwrap();
        assert_eq!(deletes(&d).len(), 1);
        assert!(!deletes(&d).contains(&"c"));
    }

    #[test]
    fn converged_podset_yields_no_actions() {
        let mut i = input(2, vec![pod("b"), pod("a")]);
        let first = decide(&i).unwrap();
        i.podset.status = status(&first).unwrap().clone();
        assert_eq!(decide(&i).unwrap(), Vec::<Action>::new());
    }

    #[test]
    fn status_names_are_sorted_and_count_ready_pods_only() {
        let mut warming = pod("b");
        warming.ready = false;
        let a = decide(&input(2, vec![warming, pod("a")])).unwrap();
        let s = status(&a).unwrap();
        assert_eq!(s.pod_names, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(s.available_replicas, 1);
    }

    #[test]
    fn negative_replicas_is_a_policy_error() {
        let e = decide(&input(-1, vec![])).unwrap_err();
        assert_eq!(e.reason, "InvalidReplicas");
    }
}
