//! Pods as this operator creates and reads them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, Pod, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::crd::PodSet;
use crate::policy::{self, CreatePod, PodName, PodPhase};

/// The label every pod of a PodSet carries (value: the PodSet's name). The operator
/// watches only pods with this label.
pub const SELECTOR_LABEL: &str = "app.example.com/podset";

/// The seeds' pod: busybox sleeping for an hour, as a non-root user so the restricted
/// security context admits it.
pub fn default_template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "busybox".into(),
                image: Some("busybox:1.36".into()),
                command: Some(vec!["sleep".into(), "3600".into()]),
                ..Container::default()
            }],
            security_context: Some(PodSecurityContext { run_as_user: Some(1000), ..PodSecurityContext::default() }),
            ..PodSpec::default()
        }),
    }
}

/// The selector labels of a PodSet's pods.
pub fn selector_labels(podset: &PodSet) -> BTreeMap<String, String> {
    BTreeMap::from([(SELECTOR_LABEL.to_string(), podset.name_any())])
}

/// Builds the pod for one `create-pod` action: the PodSet's template (or the default),
/// the policy's extra labels and annotations, the selector label, a controller owner
/// reference (so the garbage collector removes it with the PodSet), and the restricted
/// security context, which a template cannot weaken.
pub fn build(podset: &PodSet, action: &CreatePod) -> Pod {
    let template = podset.spec.template.clone().unwrap_or_else(default_template);
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.extend(action.labels.iter().map(|kv| (kv.key.clone(), kv.value.clone())));
    labels.extend(selector_labels(podset));
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.extend(action.annotations.iter().map(|kv| (kv.key.clone(), kv.value.clone())));

    let (name, generate_name) = match &action.name {
        PodName::Exact(n) => (Some(n.clone()), None),
        PodName::Prefix(p) => (None, Some(p.clone())),
    };
    let mut spec = template.spec.unwrap_or_default();
    restrict(&mut spec);
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: podset.namespace(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            // blockOwnerDeletion: foreground deletion of the PodSet waits for its pods.
            owner_references: podset
                .controller_owner_ref(&())
                .map(|r| vec![OwnerReference { block_owner_deletion: Some(true), ..r }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The Pod Security Standards' "restricted" profile, as the seeds set it.
fn restrict(spec: &mut PodSpec) {
    let psc = spec.security_context.get_or_insert_with(Default::default);
    psc.run_as_non_root = Some(true);
    if psc.seccomp_profile.is_none() {
        psc.seccomp_profile = Some(runtime_default());
    }
    let containers = spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let sc = c.security_context.get_or_insert_with(Default::default);
        *sc = SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            seccomp_profile: sc.seccomp_profile.take().or_else(|| Some(runtime_default())),
            ..sc.clone()
        };
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }
}

/// Pending or Running and not terminating: a pod that counts towards `spec.replicas`.
/// A pod with no phase yet was just created, so it is Pending.
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    matches!(phase, "Pending" | "Running") && pod.metadata.deletion_timestamp.is_none()
}

/// Whether `pod` is controlled by the PodSet with `uid` (controller owner reference).
pub fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references().iter().any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The pod as a policy sees it.
pub fn to_policy(pod: &Pod) -> policy::Pod {
    let status = pod.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        // No status yet means the pod was just created: Pending.
        _ => PodPhase::Pending,
    };
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let restart_count =
        status.and_then(|s| s.container_statuses.as_ref()).map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum());
    policy::Pod {
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        phase,
        ready,
        deleting: pod.metadata.deletion_timestamp.is_some(),
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        created_at: pod.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_millisecond()),
        labels: pod.labels().iter().map(|(k, v)| policy::KeyValue { key: k.clone(), value: v.clone() }).collect(),
        restart_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::PodSetSpec;

    fn podset() -> PodSet {
        let mut ps = PodSet::new("web", PodSetSpec { replicas: 3, template: None, policy_ref: None });
        ps.metadata.namespace = Some("team-a".into());
        ps.metadata.uid = Some("uid-web".into());
        ps
    }

    fn create(labels: &[(&str, &str)]) -> CreatePod {
        CreatePod {
            name: PodName::Prefix("web-".into()),
            labels: labels.iter().map(|(k, v)| policy::KeyValue { key: (*k).into(), value: (*v).into() }).collect(),
            annotations: Vec::new(),
        }
    }

    #[test]
    fn pods_are_owned_labelled_and_restricted() {
        let pod = build(&podset(), &create(&[("tier", "web")]));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("team-a"));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("PodSet", "uid-web"));
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SELECTOR_LABEL], "web");
        assert_eq!(labels["tier"], "web");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.security_context.as_ref().unwrap().run_as_non_root, Some(true));
        let sc = spec.containers[0].security_context.as_ref().unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.capabilities.as_ref().unwrap().drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!(sc.seccomp_profile.as_ref().unwrap().type_, "RuntimeDefault");
        assert!(controlled_by(&pod, "uid-web"));
        assert!(!controlled_by(&pod, "uid-other"));
    }

    #[test]
    fn a_template_cannot_weaken_the_security_context_nor_steal_the_selector() {
        let mut ps = podset();
        let mut t = default_template();
        t.metadata = Some(ObjectMeta {
            labels: Some(BTreeMap::from([(SELECTOR_LABEL.to_string(), "other".to_string())])),
            ..Default::default()
        });
        let spec = t.spec.as_mut().unwrap();
        spec.containers[0].security_context = Some(SecurityContext {
            privileged: Some(true),
            allow_privilege_escalation: Some(true),
            ..Default::default()
        });
        ps.spec.template = Some(t);
        let pod = build(&ps, &create(&[(SELECTOR_LABEL, "evil")]));
        assert_eq!(pod.metadata.labels.as_ref().unwrap()[SELECTOR_LABEL], "web");
        let sc = pod.spec.as_ref().unwrap().containers[0].security_context.as_ref().unwrap();
        assert_eq!((sc.privileged, sc.allow_privilege_escalation), (Some(false), Some(false)));
    }
}
