//! Performs a checked decision on the cluster: pods created in slow-start batches,
//! deletions with a UID precondition, and the status written only when it changed.

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use super::Context;
use super::expectations::OwnerKey;
use super::input::status_str;
use super::pods;
use crate::conditions;
use crate::crd::{PodSet, PodSetStatus};
use crate::error::{Error, Result};
use crate::policy::{CreatePod, PodsetStatus};

/// The condition the operator sets when its policy cannot decide.
pub const POLICY_FAILED: &str = "PolicyFailed";

/// Creates pods 1, 2, 4, … at a time and stops at the first failure, as the
/// ReplicaSet controller does: a quota or admission error then costs one request, not
/// `replicas` of them. Pods not attempted are decided again on the next reconcile.
pub async fn create_pods(ctx: &Context, podset: &PodSet, creates: &[CreatePod]) -> Result<()> {
    let mut batch = 1;
    let mut rest = creates;
    while !rest.is_empty() {
        let (now, later) = rest.split_at(batch.min(rest.len()));
        let results = join_all(now.iter().map(|c| create_pod(ctx, podset, c))).await;
        if let Some(err) = results.into_iter().find_map(Result::err) {
            return Err(err);
        }
        rest = later;
        batch *= 2;
    }
    Ok(())
}

async fn create_pod(ctx: &Context, podset: &PodSet, action: &CreatePod) -> Result<()> {
    let ns = podset.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let key = owner_key(podset);
    match api.create(&PostParams::default(), &pods::build(podset, action)).await {
        Ok(pod) => {
            let name = pod.name_any();
            // The watch may have delivered the pod already; then nothing is in flight.
            if ctx.pods.get(&ObjectRef::new(&name).within(&ns)).is_none() {
                ctx.expectations.expect_creation(&key, &name);
            }
            let related = pod_ref(&ns, &name, &pod.uid().unwrap_or_default());
            ctx.event(
                podset,
                Some(related),
                EventType::Normal,
                "SuccessfulCreate",
                "Create",
                format!("Created pod: {name}"),
            )
            .await;
            Ok(())
        }
        Err(e) => {
            ctx.event(podset, None, EventType::Warning, "FailedCreate", "Create", format!("Error creating pod: {e}"))
                .await;
            Err(e.into())
        }
    }
}

pub async fn delete_pods(ctx: &Context, podset: &PodSet, deletes: &[(String, String)]) -> Result<()> {
    let ns = podset.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let key = owner_key(podset);
    let results = join_all(deletes.iter().map(|(name, uid)| {
        let (api, key, ns) = (api.clone(), key.clone(), ns.as_str());
        async move {
            // The UID precondition: if the pod was replaced by a namesake since the
            // policy decided, the namesake is left alone.
            let dp = DeleteParams {
                preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            };
            match api.delete(name, &dp).await {
                Ok(_) => {
                    ctx.expectations.expect_deletion(&key, name);
                    ctx.event(
                        podset,
                        Some(pod_ref(ns, name, uid)),
                        EventType::Normal,
                        "SuccessfulDelete",
                        "Delete",
                        format!("Deleted pod: {name}"),
                    )
                    .await;
                    Ok(())
                }
                // Already gone, or no longer the pod the policy chose.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
                Err(e) => {
                    ctx.event(
                        podset,
                        Some(pod_ref(ns, name, uid)),
                        EventType::Warning,
                        "FailedDelete",
                        "Delete",
                        format!("Error deleting pod {name}: {e}"),
                    )
                    .await;
                    Err(Error::from(e))
                }
            }
        }
    }))
    .await;
    results.into_iter().collect()
}

/// What the status should become. `from_policy` replaces the policy-owned fields and
/// conditions; `failure` sets (or, when `None`, clears) the operator's PolicyFailed
/// condition; `digest`, when known, records who decided.
pub fn next_status(
    podset: &PodSet,
    from_policy: Option<&PodsetStatus>,
    failure: Option<(&str, &str)>,
    digest: Option<String>,
) -> PodSetStatus {
    let current = podset.status.clone().unwrap_or_default();
    let generation = podset.metadata.generation;
    let mut next = current.clone();
    if let Some(s) = from_policy {
        next.pod_names = s.pod_names.clone();
        next.available_replicas = s.available_replicas;
        next.observed_generation = Some(s.observed_generation);
        next.conditions.retain(|c| c.type_ == POLICY_FAILED);
        for c in &s.conditions {
            let new = conditions::new(&c.type_, status_str(c.status), &c.reason, &c.message, generation);
            conditions::set(&mut next.conditions, &current.conditions, new);
        }
    }
    next.conditions.retain(|c| c.type_ != POLICY_FAILED);
    if let Some((reason, message)) = failure {
        let new = conditions::new(POLICY_FAILED, "True", reason, message, generation);
        conditions::set(&mut next.conditions, &current.conditions, new);
    }
    next.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    if digest.is_some() {
        next.policy_digest = digest;
    }
    next
}

/// Writes `next` unless it equals the current status. Returns whether it wrote.
pub async fn write_status(ctx: &Context, podset: &PodSet, next: PodSetStatus) -> Result<bool> {
    let mut current = podset.status.clone().unwrap_or_default();
    current.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    if current == next {
        return Ok(false);
    }
    let api: Api<PodSet> = Api::namespaced(ctx.client.clone(), &podset.namespace().unwrap_or_default());
    let mut body = serde_json::to_value(&next).map_err(|e| Error::Internal(format!("serializing status: {e}")))?;
    // A merge patch leaves out fields untouched; conditions must be replaced even when
    // the list became empty.
    body["conditions"] = serde_json::to_value(&next.conditions).unwrap_or_default();
    let patch = serde_json::json!({ "status": body });
    api.patch_status(&podset.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(true)
}

pub fn owner_key(podset: &PodSet) -> OwnerKey {
    (podset.namespace().unwrap_or_default(), podset.name_any())
}

/// A reference to a pod for Events, from what is known without fetching it.
fn pod_ref(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::PodSetSpec;
    use crate::policy::{Condition, ConditionStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    /// Rewinds every condition's transition time to `secs`, as if set back then.
    fn set_back(mut s: PodSetStatus, secs: i64) -> PodSetStatus {
        s.conditions.iter_mut().for_each(|c| c.last_transition_time = at(secs));
        s
    }

    fn policy_status(available: ConditionStatus) -> PodsetStatus {
        PodsetStatus {
            pod_names: vec!["web-a".into()],
            available_replicas: 1,
            observed_generation: 1,
            conditions: vec![Condition {
                type_: "Available".into(),
                status: available,
                reason: "R".into(),
                message: "m".into(),
            }],
        }
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut ps = PodSet::new("web", PodSetSpec { replicas: 1, template: None, policy_ref: None });
        ps.metadata.generation = Some(1);
        let first = next_status(&ps, Some(&policy_status(ConditionStatus::False)), None, None);
        ps.status = Some(set_back(first, 100));
        let same = next_status(&ps, Some(&policy_status(ConditionStatus::False)), None, None);
        assert_eq!(same.conditions[0].last_transition_time, at(100));
        let flipped = next_status(&ps, Some(&policy_status(ConditionStatus::True)), None, None);
        assert_ne!(flipped.conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn policy_failed_is_set_kept_and_cleared() {
        let mut ps = PodSet::new("web", PodSetSpec { replicas: 1, template: None, policy_ref: None });
        ps.status = Some(next_status(&ps, Some(&policy_status(ConditionStatus::True)), None, Some("sha256:a".into())));
        let failed = next_status(&ps, None, Some(("DeadlineExceeded", "too slow")), None);
        assert_eq!(failed.conditions.len(), 2, "the policy's own conditions stay while it fails");
        assert_eq!(failed.pod_names, vec!["web-a".to_string()], "pods and status are left as they were");
        assert_eq!(failed.policy_digest.as_deref(), Some("sha256:a"));
        ps.status = Some(set_back(failed, 5));
        let again = next_status(&ps, None, Some(("DeadlineExceeded", "too slow")), None);
        assert_eq!(again, ps.status.clone().unwrap(), "the same failure rewrites nothing");
        let recovered = next_status(&ps, None, None, None);
        assert!(recovered.conditions.iter().all(|c| c.type_ != POLICY_FAILED));
    }
}
