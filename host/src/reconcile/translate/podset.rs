//! The PodSet fast path: a PodSet and its pods as the `podset` interface's typed
//! records, and its typed actions as a [`Plan`]. What only a PodSet can be held to is
//! checked here (never more pods than `spec.replicas`, a status describing its own
//! pods); everything else goes through the same checks as any kind.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, ObjectMeta};
use kube::ResourceExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::conditions::{self, HOST_CONDITIONS};
use crate::contract::bindings::podset::{
    Action, CreatePod, InFlight, Input, Pod as WitPod, PodName, PodPhase, Podset, PodsetStatus,
};
use crate::contract::bindings::{Condition, ConditionStatus, KeyValue};
use crate::crd::{PodSetSpec, PodSetStatus};
use crate::kubernetes::object::Object;
use crate::reconcile::check::Rejection;
use crate::reconcile::keys::ChildKey;
use crate::reconcile::observe::Observed;
use crate::reconcile::plan::Plan;
use crate::reconcile::syntax::{condition_reason, qualified_name};

/// The label every pod of a PodSet carries (value: the PodSet's name), as the seed's
/// `kubectl get pods -l` selections expect a label to select by.
pub const SELECTOR_LABEL: &str = "app.example.com/podset";

/// The seed's pod labels, added when the template sets no `app` label of its own.
const SEED_VERSION: &str = "v0.1";

/// The seeds' pod: busybox sleeping for an hour, as a non-root user so the restricted
/// security context admits it.
pub fn default_template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "busybox".into(),
                image: Some("busybox:1.35".into()),
                command: Some(vec!["sleep".into(), "3600".into()]),
                ..Container::default()
            }],
            security_context: Some(PodSecurityContext { run_as_user: Some(1000), ..PodSecurityContext::default() }),
            ..PodSpec::default()
        }),
    }
}

/// The PodSet's spec and status, read from the parent.
pub struct PodSetView {
    pub name: String,
    pub spec: PodSetSpec,
    pub status: PodSetStatus,
}

impl PodSetView {
    pub fn of(parent: &Object) -> Result<Self, Rejection> {
        let malformed = |e: serde_json::Error| Rejection::Malformed { what: "PodSet".into(), error: e.to_string() };
        let spec = match parent.parse::<PodSetSpec>("spec").map_err(malformed)? {
            Some(spec) => spec,
            // As before: a PodSet without a spec is malformed in the spec's own words.
            None => PodSetSpec::deserialize(&Value::Null).map_err(malformed)?,
        };
        let status = parent.parse::<PodSetStatus>("status").map_err(malformed)?.unwrap_or_default();
        Ok(PodSetView { name: parent.name_any(), spec, status })
    }
}

/// What the policy is told: the PodSet, the pods it controls, what is in flight.
pub fn input(observed: &Observed) -> Result<Input, Rejection> {
    let parent = &observed.parent;
    let view = PodSetView::of(parent)?;
    let pods = observed.children.iter().map(|c| to_policy_pod(&c.object)).collect();
    let status = view.status;
    Ok(Input {
        podset: Podset {
            name: view.name,
            namespace: parent.namespace().unwrap_or_default(),
            uid: parent.uid().unwrap_or_default(),
            generation: parent.metadata.generation.unwrap_or(0),
            labels: key_values(parent.labels()),
            replicas: view.spec.replicas,
            status: PodsetStatus {
                pod_names: status.pod_names,
                available_replicas: status.available_replicas,
                observed_generation: status.observed_generation.unwrap_or(0),
                // The policy sees (and may replace) only its own conditions.
                conditions: status
                    .conditions
                    .iter()
                    .filter(|c| !HOST_CONDITIONS.contains(&c.type_.as_str()))
                    .map(to_policy_condition)
                    .collect(),
            },
        },
        pods,
        in_flight: InFlight {
            creations: u32::try_from(observed.in_flight.creations.len()).unwrap_or(u32::MAX),
            deletions: observed.in_flight.deletions.iter().map(|k| k.name.clone()).collect(),
        },
        now: observed.now,
    })
}

/// The typed actions as a plan, after the PodSet's own checks.
pub fn plan(actions: Vec<Action>, observed: &Observed) -> Result<Plan, Rejection> {
    let view = PodSetView::of(&observed.parent)?;
    let owned: Vec<&Object> = observed.children.iter().map(|c| c.object.as_ref()).collect();
    let mut plan = Plan::default();
    let mut creates = 0;
    // A template the restricted profile refuses is the PodSet's own fault: say so as
    // such, before any pod is built from it.
    if actions.iter().any(|a| matches!(a, Action::CreatePod(_)))
        && let Some(spec) = view.spec.template.as_ref().and_then(|t| t.spec.as_ref())
    {
        let mut spec = serde_json::to_value(spec).unwrap_or(Value::Null);
        crate::reconcile::restrict::pod_spec("spec.template.spec", &mut spec, observed.pod_security)
            .map_err(|weakening| Rejection::InvalidTemplate { weakening })?;
    }
    for action in actions {
        match action {
            Action::CreatePod(c) => {
                for kv in &c.labels {
                    if kv.key == SELECTOR_LABEL {
                        return Err(Rejection::Reserved {
                            what: format!("label {SELECTOR_LABEL} (the PodSet's selector)"),
                        });
                    }
                }
                creates += 1;
                plan.creates.push(pod(&view, &c));
            }
            Action::DeletePod(name) => plan.deletes.push(ChildKey::of("v1", "Pod", "", &name)),
            Action::UpdateStatus(s) => {
                check_status(&s, observed, &owned)?;
                plan.status = Some(status_json(&s, &view.status, observed.parent.metadata.generation));
            }
            Action::RequeueAfter(ms) => plan.requeue_ms = Some(plan.requeue_ms.map_or(ms, |r| r.min(ms))),
        }
    }

    // Never more pods than the spec asks for, counting what is active and in flight. The
    // operator's own count: whatever a policy believes, this bound holds.
    let deleting: HashSet<&str> = observed.in_flight.deletions.iter().map(|k| k.name.as_str()).collect();
    let active = owned.iter().filter(|p| is_active(p) && !deleting.contains(p.name_any().as_str())).count();
    let creating = observed.in_flight.creations.len();
    let allowed = usize::try_from(view.spec.replicas).unwrap_or(0).saturating_sub(active + creating);
    if creates > allowed {
        return Err(Rejection::TooManyPods { asked: creates, replicas: view.spec.replicas, active, creating, allowed });
    }
    // A PodSet's status only describes its pods. Written beside creations, it names
    // none of them, and the decision that sees them, milliseconds later, rewrites it:
    // make bench counted 3.0 status writes per new PodSet against the ReplicaSet
    // controller's 2.1. The new pods' watch events bring that decision; a create that
    // fails writes its failure, and one whose pod is never seen leaves an expectation
    // that the next resync finds expired. Fold the two.
    plan.fold_status = creates > 0;
    Ok(plan)
}

/// The pod for one `create-pod` action: the PodSet's template (or the default), the
/// policy's extra labels and annotations, the seed's labels, and the selector label.
/// The owner reference and the restricted security context are added by the checks
/// every child goes through.
pub fn pod(view: &PodSetView, action: &CreatePod) -> Value {
    let template = view.spec.template.clone().unwrap_or_else(default_template);
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    if !labels.contains_key("app") {
        labels.insert("app".into(), view.name.clone());
        labels.entry("version".into()).or_insert_with(|| SEED_VERSION.into());
    }
    labels.extend(action.labels.iter().map(|kv| (kv.key.clone(), kv.value.clone())));
    labels.insert(SELECTOR_LABEL.into(), view.name.clone());
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.extend(action.annotations.iter().map(|kv| (kv.key.clone(), kv.value.clone())));
    let (name, generate_name) = match &action.name {
        PodName::Exact(n) => (Some(n.clone()), None),
        PodName::Prefix(p) => (None, Some(p.clone())),
    };
    let pod = Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.unwrap_or_default()),
        status: None,
    };
    let mut value = serde_json::to_value(&pod).unwrap_or(Value::Null);
    value["apiVersion"] = "v1".into();
    value["kind"] = "Pod".into();
    value
}

fn check_status(s: &PodsetStatus, observed: &Observed, owned: &[&Object]) -> Result<(), Rejection> {
    let bad = |m: String| Err(Rejection::InvalidStatus(m));
    let generation = observed.parent.metadata.generation.unwrap_or(0);
    if s.observed_generation < 0 || s.observed_generation > generation {
        return bad(format!("observed-generation {} is not in 0..={generation}", s.observed_generation));
    }
    let names: HashSet<String> = owned.iter().map(|p| p.name_any()).collect();
    if let Some(stranger) = s.pod_names.iter().find(|n| !names.contains(*n)) {
        return bad(format!("pod-names lists {stranger:?}, which is not a pod of this PodSet"));
    }
    if s.available_replicas < 0 || s.available_replicas as usize > names.len() {
        return bad(format!("available-replicas {} with {} pods", s.available_replicas, names.len()));
    }
    let mut types = HashSet::new();
    for c in &s.conditions {
        if HOST_CONDITIONS.contains(&c.type_.as_str()) {
            return Err(Rejection::Reserved { what: format!("condition {:?}", c.type_) });
        }
        if let Err(why) = qualified_name(&c.type_) {
            return bad(format!("condition type {:?}: {why}", c.type_));
        }
        if !types.insert(c.type_.as_str()) {
            return bad(format!("condition {:?} appears twice", c.type_));
        }
        if let Err(why) = condition_reason(&c.reason) {
            return bad(format!("condition {:?} reason {:?}: {why}", c.type_, c.reason));
        }
        if c.message.len() > 32 * 1024 {
            return bad(format!("condition {:?} message is over 32 KiB", c.type_));
        }
    }
    Ok(())
}

/// The policy's status as the PodSet's `status`: its conditions keep their
/// `lastTransitionTime` unless their status changed.
fn status_json(s: &PodsetStatus, current: &PodSetStatus, generation: Option<i64>) -> Value {
    let mut next = PodSetStatus {
        pod_names: s.pod_names.clone(),
        available_replicas: s.available_replicas,
        observed_generation: Some(s.observed_generation),
        conditions: Vec::new(),
        // The host's to write (reconcile::status).
        policy_digest: None,
    };
    for c in &s.conditions {
        let new = conditions::new(&c.type_, status_str(c.status), &c.reason, &c.message, generation);
        conditions::set(&mut next.conditions, &current.conditions, new);
    }
    serde_json::to_value(&next).unwrap_or(Value::Null)
}

fn status_str(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

fn to_policy_condition(c: &K8sCondition) -> Condition {
    Condition {
        type_: c.type_.clone(),
        status: match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        },
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

fn key_values(m: &BTreeMap<String, String>) -> Vec<KeyValue> {
    m.iter().map(|(k, v)| KeyValue { key: k.clone(), value: v.clone() }).collect()
}

/// The few fields of a cached pod the policy is told, parsed from the pod's JSON text
/// (the rest is skipped).
#[derive(Default)]
struct PodView {
    spec: PodSpecView,
    status: PodStatusView,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpecView {
    node_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodStatusView {
    phase: Option<String>,
    conditions: Vec<PodConditionView>,
    container_statuses: Vec<ContainerStatusView>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodConditionView {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatusView {
    restart_count: i32,
}

fn view(pod: &Object) -> PodView {
    PodView { spec: part(pod, "spec"), status: part(pod, "status") }
}

/// The pod's top-level field `name` read into the view `T`; absent, or not of the
/// view's shape, it reads as empty (a pod just created has no status yet).
fn part<T: DeserializeOwned + Default>(pod: &Object, name: &str) -> T {
    pod.parse(name).ok().flatten().unwrap_or_default()
}

/// Pending or Running and not terminating: a pod that counts towards `spec.replicas`.
/// A pod with no phase yet was just created, so it is Pending.
pub fn is_active(pod: &Object) -> bool {
    let phase = part::<PodStatusView>(pod, "status").phase;
    matches!(phase.as_deref().unwrap_or("Pending"), "Pending" | "Running") && pod.metadata.deletion_timestamp.is_none()
}

/// The pod as a policy sees it.
pub fn to_policy_pod(pod: &Object) -> WitPod {
    let v = view(pod);
    let phase = match v.status.phase.as_deref() {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        // No status yet means the pod was just created: Pending.
        _ => PodPhase::Pending,
    };
    WitPod {
        name: pod.name_any(),
        phase,
        ready: v.status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        scheduled: v.spec.node_name.is_some(),
        created_at: pod.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_millisecond()),
        restart_count: v.status.container_statuses.iter().map(|c| c.restart_count).sum(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reconcile::check::check;
    use crate::reconcile::expectations::InFlight as Flight;
    use crate::reconcile::observe::fixtures::{observed, pod, pods, podset, resolved};

    fn create(name: PodName) -> Action {
        Action::CreatePod(CreatePod { name, labels: Vec::new(), annotations: Vec::new() })
    }

    fn prefix() -> Action {
        create(PodName::Prefix("web-".into()))
    }

    #[test]
    fn pods_are_built_from_the_template_with_the_seed_labels_owned_and_restricted() {
        let o = observed(podset(3), Vec::new());
        let tier = Action::CreatePod(CreatePod {
            name: PodName::Prefix("web-".into()),
            labels: vec![KeyValue { key: "tier".into(), value: "web".into() }],
            annotations: Vec::new(),
        });
        let plan = plan(vec![tier], &o).expect("plan");
        let checked = check(plan, &o, &resolved(None)).expect("checks pass");
        let pod = &checked.creates[0].object;
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        let labels = pod.metadata.labels.as_ref().expect("labels");
        assert_eq!((labels[SELECTOR_LABEL].as_str(), labels["tier"].as_str()), ("web", "web"));
        assert_eq!((labels["app"].as_str(), labels["version"].as_str()), ("web", "v0.1"), "the seed's labels");
        let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("PodSet", "uid-web"));
        let spec = &pod.data["spec"];
        assert_eq!(spec["securityContext"]["runAsNonRoot"], json!(true));
        assert_eq!(spec["containers"][0]["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(spec["containers"][0]["image"], json!("busybox:1.35"));
    }

    #[test]
    fn a_template_with_an_app_label_keeps_it_and_one_that_weakens_the_context_is_refused() {
        let mut ps = podset(1);
        ps.data["spec"]["template"] = json!({
            "metadata": { "labels": { "app": "mine", SELECTOR_LABEL: "other" } },
            "spec": { "containers": [{ "name": "c", "image": "busybox:1.35" }] }
        });
        let o = observed(ps.clone(), Vec::new());
        let checked = check(plan(vec![prefix()], &o).expect("plan"), &o, &resolved(None)).expect("passes");
        let labels = checked.creates[0].object.metadata.labels.clone().expect("labels");
        assert_eq!(labels["app"], "mine");
        assert!(!labels.contains_key("version"), "the seed's labels come only with its app label");
        assert_eq!(labels[SELECTOR_LABEL], "web", "a template cannot steal the selector");
        ps.data["spec"]["template"]["spec"]["volumes"] = json!([{ "name": "h", "hostPath": { "path": "/" } }]);
        let o = observed(ps, Vec::new());
        let e = plan(vec![prefix()], &o).expect_err("refused");
        assert!(matches!(e, Rejection::InvalidTemplate { .. }) && e.to_string().contains("hostPath"), "{e}");
        assert_eq!(e.reason(), "InvalidTemplate");
    }

    #[test]
    fn creations_beyond_the_spec_are_refused_counting_what_is_active_and_in_flight() {
        let o = observed(podset(2), vec![(pods(), pod("web-a", "Running")), (pods(), pod("web-f", "Failed"))]);
        let e = plan(vec![prefix(), prefix()], &o).expect_err("too many");
        assert!(e.to_string().contains("allows 1"), "{e}");
        let mut busy = o.clone();
        busy.in_flight = Flight { creations: vec![ChildKey::of("v1", "Pod", "ns", "web-b")], deletions: Vec::new() };
        assert!(plan(vec![prefix()], &busy).is_err());
        assert!(plan(vec![prefix()], &o).is_ok());
        let o = observed(podset(2), Vec::new());
        assert!(plan(vec![prefix(), prefix()], &o).is_ok());
    }

    #[test]
    fn a_status_decided_beside_creations_is_folded_into_the_next_decision() {
        let o = observed(podset(2), vec![(pods(), pod("web-a", "Running"))]);
        let status = Action::UpdateStatus(PodsetStatus {
            pod_names: vec!["web-a".into()],
            available_replicas: 0,
            observed_generation: 2,
            conditions: Vec::new(),
        });
        let creating = check(plan(vec![prefix(), status.clone()], &o).expect("plan"), &o, &resolved(None));
        let creating = creating.expect("checks pass");
        assert!(creating.fold_status && creating.status.is_some(), "checked, then held for the next decision");
        let settled = check(plan(vec![status], &o).expect("plan"), &o, &resolved(None)).expect("checks pass");
        assert!(!settled.fold_status, "with nothing created the status is written now");
        let bad = Action::UpdateStatus(PodsetStatus {
            pod_names: vec!["db-0".into()],
            available_replicas: 0,
            observed_generation: 2,
            conditions: Vec::new(),
        });
        assert!(plan(vec![prefix(), bad], &o).is_err(), "a folded status is checked all the same");
    }

    #[test]
    fn the_selector_label_is_the_hosts() {
        let o = observed(podset(2), Vec::new());
        let steal = Action::CreatePod(CreatePod {
            name: PodName::Prefix("web-".into()),
            labels: vec![KeyValue { key: SELECTOR_LABEL.into(), value: "other".into() }],
            annotations: Vec::new(),
        });
        assert!(matches!(plan(vec![steal], &o), Err(Rejection::Reserved { .. })));
    }

    #[test]
    fn status_must_describe_this_podset() {
        let o = observed(podset(3), vec![(pods(), pod("web-a", "Running"))]);
        let s = |names: Vec<&str>, avail, generation, conditions: Vec<Condition>| {
            Action::UpdateStatus(PodsetStatus {
                pod_names: names.into_iter().map(String::from).collect(),
                available_replicas: avail,
                observed_generation: generation,
                conditions,
            })
        };
        let cond = |t: &str, reason: &str| Condition {
            type_: t.into(),
            status: ConditionStatus::True,
            reason: reason.into(),
            message: String::new(),
        };
        assert!(plan(vec![s(vec!["web-a"], 1, 2, vec![cond("Available", "Fine")])], &o).is_ok());
        assert!(plan(vec![s(vec!["db-0"], 1, 2, vec![])], &o).is_err());
        assert!(plan(vec![s(vec!["web-a"], 2, 2, vec![])], &o).is_err());
        assert!(plan(vec![s(vec!["web-a"], 1, 3, vec![])], &o).is_err());
        assert!(plan(vec![s(vec![], 0, 2, vec![cond("PolicyFailed", "Fine")])], &o).is_err());
        assert!(plan(vec![s(vec![], 0, 2, vec![cond("Available", "not camel")])], &o).is_err());
        assert!(plan(vec![s(vec![], 0, 2, vec![cond("Available", "A"), cond("Available", "B")])], &o).is_err());
    }

    #[test]
    fn condition_transition_times_move_only_when_the_status_does() {
        let o = observed(podset(1), Vec::new());
        let status = |st: ConditionStatus| {
            Action::UpdateStatus(PodsetStatus {
                pod_names: Vec::new(),
                available_replicas: 0,
                observed_generation: 2,
                conditions: vec![Condition {
                    type_: "Available".into(),
                    status: st,
                    reason: "R".into(),
                    message: "m".into(),
                }],
            })
        };
        let first = plan(vec![status(ConditionStatus::False)], &o).expect("plan").status.expect("status");
        let mut back = first.clone();
        back["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        let mut ps = podset(1);
        ps.data["status"] = back;
        let o = observed(ps, Vec::new());
        let same = plan(vec![status(ConditionStatus::False)], &o).expect("plan").status.expect("status");
        assert_eq!(same["conditions"][0]["lastTransitionTime"], json!("2020-01-01T00:00:00Z"));
        let flipped = plan(vec![status(ConditionStatus::True)], &o).expect("plan").status.expect("status");
        assert_ne!(flipped["conditions"][0]["lastTransitionTime"], json!("2020-01-01T00:00:00Z"));
    }

    #[test]
    fn the_policy_sees_its_pods_and_what_is_in_flight() {
        let mut o = observed(podset(3), vec![(pods(), pod("web-a", "Running")), (pods(), pod("web-b", "Pending"))]);
        o.in_flight.deletions = vec![ChildKey::of("v1", "Pod", "ns", "web-b")];
        let i = input(&o).expect("input");
        assert_eq!((i.podset.replicas, i.podset.generation, i.pods.len()), (3, 2, 2));
        assert_eq!(i.pods[0].phase, PodPhase::Running);
        assert_eq!(i.in_flight.deletions, vec!["web-b".to_string()]);
    }
}
