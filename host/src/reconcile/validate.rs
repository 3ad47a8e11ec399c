//! Checks a policy's decision against the PodSet it was made for, before anything
//! touches the cluster. A decision is applied whole or not at all: one bad action
//! rejects it, so a policy cannot half-succeed at something it should not do.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::pods::{SELECTOR_LABEL, controlled_by, is_active};
use crate::crd::PodSet;
use crate::policy::{Action, CreatePod, InFlight, KeyValue, PodName, PodsetStatus};

/// Conditions the operator itself owns; a policy may not set them.
pub const HOST_CONDITIONS: &[&str] = &["PolicyFailed"];

/// Shortest and longest requeue honoured.
const MIN_REQUEUE: Duration = Duration::from_millis(100);
const MAX_REQUEUE: Duration = Duration::from_secs(3600);

/// A decision that passed every check.
#[derive(Debug, Default)]
pub struct Checked {
    pub creates: Vec<CreatePod>,
    /// (name, uid) — the uid becomes a delete precondition.
    pub deletes: Vec<(String, String)>,
    pub status: Option<PodsetStatus>,
    pub requeue: Option<Duration>,
}

/// `owned` are the pods the PodSet controls (owner UID checked); `in_flight` what the
/// policy was told is pending.
pub fn check(actions: Vec<Action>, podset: &PodSet, owned: &[&Pod], in_flight: &InFlight) -> Result<Checked, String> {
    let mut out = Checked::default();
    let uid = podset.uid().unwrap_or_default();
    let mut deleting: HashSet<String> = HashSet::new();
    for action in actions {
        match action {
            Action::CreatePod(c) => {
                check_create(&c)?;
                out.creates.push(c);
            }
            Action::DeletePod(name) => {
                let pod = owned
                    .iter()
                    .find(|p| p.name_any() == name && controlled_by(p, &uid))
                    .ok_or_else(|| format!("delete-pod {name:?}: not a pod of this PodSet"))?;
                if deleting.insert(name.clone()) {
                    out.deletes.push((name, pod.uid().unwrap_or_default()));
                }
            }
            Action::UpdateStatus(s) => {
                check_status(&s, podset, owned)?;
                out.status = Some(s);
            }
            Action::RequeueAfter(ms) => {
                let d = Duration::from_millis(ms.into()).clamp(MIN_REQUEUE, MAX_REQUEUE);
                out.requeue = Some(out.requeue.map_or(d, |r| r.min(d)));
            }
        }
    }

    // Never more pods than the spec asks for, counting what is active and in flight. The
    // operator's own count: whatever a policy believes, this bound holds.
    let active =
        owned.iter().filter(|p| is_active(p) && !in_flight.deletions.iter().any(|d| *d == p.name_any())).count();
    let allowed =
        usize::try_from(podset.spec.replicas).unwrap_or(0).saturating_sub(active + in_flight.creations as usize);
    if out.creates.len() > allowed {
        return Err(format!(
            "asked to create {} pods, but spec.replicas={} with {active} active and {} being created allows {allowed}",
            out.creates.len(),
            podset.spec.replicas,
            in_flight.creations
        ));
    }
    Ok(out)
}

fn check_create(c: &CreatePod) -> Result<(), String> {
    match &c.name {
        PodName::Exact(n) => {
            dns1123_subdomain(n, 253).map_err(|e| format!("create-pod name {n:?}: {e}"))?;
        }
        // The API server appends 5 characters to a generateName prefix.
        PodName::Prefix(p) => {
            let base = p.strip_suffix('-').unwrap_or(p);
            dns1123_subdomain(base, 253 - 6).map_err(|e| format!("create-pod prefix {p:?}: {e}"))?;
        }
    }
    for KeyValue { key, value } in &c.labels {
        if key == SELECTOR_LABEL {
            return Err(format!("label {SELECTOR_LABEL} is the operator's selector; a policy may not set it"));
        }
        qualified_name(key).map_err(|e| format!("label key {key:?}: {e}"))?;
        label_value(value).map_err(|e| format!("label {key:?} value {value:?}: {e}"))?;
    }
    for KeyValue { key, .. } in &c.annotations {
        qualified_name(key).map_err(|e| format!("annotation key {key:?}: {e}"))?;
    }
    Ok(())
}

fn check_status(s: &PodsetStatus, podset: &PodSet, owned: &[&Pod]) -> Result<(), String> {
    let generation = podset.metadata.generation.unwrap_or(0);
    if s.observed_generation < 0 || s.observed_generation > generation {
        return Err(format!("status observed-generation {} is not in 0..={generation}", s.observed_generation));
    }
    let names: HashSet<String> = owned.iter().map(|p| p.name_any()).collect();
    if let Some(stranger) = s.pod_names.iter().find(|n| !names.contains(*n)) {
        return Err(format!("status pod-names lists {stranger:?}, which is not a pod of this PodSet"));
    }
    if s.available_replicas < 0 || s.available_replicas as usize > names.len() {
        return Err(format!("status available-replicas {} with {} pods", s.available_replicas, names.len()));
    }
    let mut types = HashSet::new();
    for c in &s.conditions {
        if HOST_CONDITIONS.contains(&c.type_.as_str()) {
            return Err(format!("condition {:?} is set by the operator, not by policies", c.type_));
        }
        qualified_name(&c.type_).map_err(|e| format!("condition type {:?}: {e}", c.type_))?;
        if !types.insert(c.type_.as_str()) {
            return Err(format!("condition {:?} appears twice", c.type_));
        }
        condition_reason(&c.reason).map_err(|e| format!("condition {:?} reason {:?}: {e}", c.type_, c.reason))?;
        if c.message.len() > 32 * 1024 {
            return Err(format!("condition {:?} message is over 32 KiB", c.type_));
        }
    }
    Ok(())
}

fn dns1123_subdomain(s: &str, max: usize) -> Result<(), String> {
    if s.is_empty() || s.len() > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(ok_label) {
        return Err("must be lowercase alphanumerics, '-' and '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

/// Kubernetes' qualified name: `[prefix/]name`, name ≤ 63 of `[A-Za-z0-9_.-]`,
/// alphanumeric at both ends; prefix a DNS subdomain.
fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        dns1123_subdomain(p, 253).map_err(|e| format!("prefix {e}"))?;
    }
    if name.is_empty() || name.len() > 63 {
        return Err("name part must be 1 to 63 characters".into());
    }
    label_value(name)
}

fn label_value(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    let edge_ok = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || !edge_ok(s.chars().next())
        || !edge_ok(s.chars().last())
    {
        return Err("must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

/// metav1.Condition's reason: CamelCase, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn condition_reason(s: &str) -> Result<(), String> {
    let ok = s.len() <= 1024
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { Ok(()) } else { Err("must be CamelCase (letters, digits, '_', ',' or ':'), starting with a letter".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::PodSetSpec;
    use crate::policy::{Condition, ConditionStatus};
    use crate::reconcile::pods;

    fn podset(replicas: i32) -> PodSet {
        let mut ps = PodSet::new("web", PodSetSpec { replicas, template: None, policy_ref: None });
        ps.metadata.namespace = Some("ns".into());
        ps.metadata.uid = Some("uid-web".into());
        ps.metadata.generation = Some(2);
        ps
    }

    fn owned_pod(ps: &PodSet, name: &str) -> Pod {
        let mut p = pods::build(
            ps,
            &CreatePod { name: PodName::Exact(name.into()), labels: Vec::new(), annotations: Vec::new() },
        );
        p.metadata.uid = Some(format!("uid-{name}"));
        p
    }

    fn create(name: PodName) -> Action {
        Action::CreatePod(CreatePod { name, labels: Vec::new(), annotations: Vec::new() })
    }

    fn none() -> InFlight {
        InFlight { creations: 0, deletions: Vec::new() }
    }

    #[test]
    fn a_sound_decision_passes_whole() {
        let ps = podset(3);
        let a = owned_pod(&ps, "web-a");
        let c = check(
            vec![create(PodName::Prefix("web-".into())), Action::DeletePod("web-a".into()), Action::RequeueAfter(5)],
            &ps,
            &[&a],
            &none(),
        )
        .unwrap();
        assert_eq!(c.creates.len(), 1);
        assert_eq!(c.deletes, vec![("web-a".to_string(), "uid-web-a".to_string())]);
        assert_eq!(c.requeue, Some(MIN_REQUEUE), "requeues are clamped");
    }

    #[test]
    fn deleting_a_pod_the_podset_does_not_control_is_refused() {
        let ps = podset(1);
        let other = podset(1);
        let mut stranger = owned_pod(&other, "db-0");
        stranger.metadata.owner_references.as_mut().unwrap()[0].uid = "uid-db".into();
        let e = check(vec![Action::DeletePod("db-0".into())], &ps, &[&stranger], &none()).unwrap_err();
        assert!(e.contains("not a pod of this PodSet"), "{e}");
        let e = check(vec![Action::DeletePod("kube-apiserver".into())], &ps, &[], &none()).unwrap_err();
        assert!(e.contains("not a pod of this PodSet"), "{e}");
    }

    #[test]
    fn creations_beyond_the_spec_are_refused() {
        let ps = podset(2);
        let a = owned_pod(&ps, "web-a");
        let two = vec![create(PodName::Prefix("web-".into())), create(PodName::Prefix("web-".into()))];
        let e = check(two.clone(), &ps, &[&a], &none()).unwrap_err();
        assert!(e.contains("allows 1"), "{e}");
        let pending = InFlight { creations: 1, deletions: Vec::new() };
        assert!(check(vec![create(PodName::Prefix("web-".into()))], &ps, &[&a], &pending).is_err());
        assert!(check(two, &ps, &[], &none()).is_ok());
    }

    #[test]
    fn names_labels_and_conditions_must_be_valid_kubernetes() {
        let ps = podset(3);
        assert!(check(vec![create(PodName::Exact("Web_A".into()))], &ps, &[], &none()).is_err());
        assert!(check(vec![create(PodName::Prefix("x".repeat(300)))], &ps, &[], &none()).is_err());
        let bad_label = Action::CreatePod(CreatePod {
            name: PodName::Prefix("web-".into()),
            labels: vec![KeyValue { key: "tier".into(), value: "not valid!".into() }],
            annotations: Vec::new(),
        });
        assert!(check(vec![bad_label], &ps, &[], &none()).is_err());
        let steal = Action::CreatePod(CreatePod {
            name: PodName::Prefix("web-".into()),
            labels: vec![KeyValue { key: SELECTOR_LABEL.into(), value: "other".into() }],
            annotations: Vec::new(),
        });
        assert!(check(vec![steal], &ps, &[], &none()).unwrap_err().contains("selector"));
        let status = |c: Condition| {
            Action::UpdateStatus(PodsetStatus {
                pod_names: Vec::new(),
                available_replicas: 0,
                observed_generation: 2,
                conditions: vec![c],
            })
        };
        let cond = |t: &str, reason: &str| Condition {
            type_: t.into(),
            status: ConditionStatus::True,
            reason: reason.into(),
            message: String::new(),
        };
        assert!(check(vec![status(cond("Available", "Fine"))], &ps, &[], &none()).is_ok());
        assert!(check(vec![status(cond("PolicyFailed", "Fine"))], &ps, &[], &none()).is_err());
        assert!(check(vec![status(cond("Available", "not camel"))], &ps, &[], &none()).is_err());
        assert!(check(vec![status(cond("Available", ""))], &ps, &[], &none()).is_err());
    }

    #[test]
    fn status_must_describe_this_podset() {
        let ps = podset(3);
        let a = owned_pod(&ps, "web-a");
        let s = |names: Vec<&str>, avail, gen_| {
            Action::UpdateStatus(PodsetStatus {
                pod_names: names.into_iter().map(String::from).collect(),
                available_replicas: avail,
                observed_generation: gen_,
                conditions: Vec::new(),
            })
        };
        assert!(check(vec![s(vec!["web-a"], 1, 2)], &ps, &[&a], &none()).is_ok());
        assert!(check(vec![s(vec!["db-0"], 1, 2)], &ps, &[&a], &none()).is_err());
        assert!(check(vec![s(vec!["web-a"], 2, 2)], &ps, &[&a], &none()).is_err());
        assert!(check(vec![s(vec!["web-a"], 1, 3)], &ps, &[&a], &none()).is_err());
    }
}
