//! Whether a parent has converged, for the `Reconciling` condition GitOps tools read
//! (kstatus, `sigs.k8s.io/cli-utils`): a parent converges while its decision creates or
//! changes children or changes looked-up objects, while a creation it asked for is in
//! flight, and while a child that is staying has not [`settled`]; it has converged when
//! none of that holds. A child
//! being deleted, by this decision or an earlier one, is not staying. Decided from the
//! decision and the cache alone, so every replica and a restart say the same.

use std::collections::{BTreeSet, HashSet};

use super::keys::ChildKey;
use super::observe::Observed;
use super::plan::Checked;
use super::readiness::{settled, view};

/// What a decided reconcile says of its parent's convergence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    Converged,
    Converging {
        reason: &'static str,
        message: String,
    },
    /// A wave of children waits for an earlier one ([`super::waves`]): what waits for what.
    WaitingForWave(String),
}

/// Reason of `Reconciling` while the decision changes looked-up objects (contract 0.4)
/// and every child is ready.
pub const CHILDREN_CHANGING: &str = "ChildrenChanging";
/// Reason of `Reconciling` while a child is being written or has not settled.
pub const CHILDREN_NOT_READY: &str = "ChildrenNotReady";

/// The progress of `observed`'s parent after `checked` is performed.
pub fn of(checked: &Checked, observed: &Observed) -> Progress {
    if let Some(waiting) = &checked.waiting {
        return Progress::WaitingForWave(waiting.clone());
    }
    // A child being deleted is on its way out, not part of what the parent converges
    // to: kstatus reads a ReplicaSet the same way (its status counts no pod with a
    // deletion timestamp). That holds from the moment the decision deletes it, so neither
    // the decision's deletes nor deletions in flight hold the parent converging: with
    // them, every scale down wrote its status twice, "children: N to delete" and then
    // converged, the second after the scale down had visibly converged (the fault
    // suite's "writes once converged", the partition test's 60 s cut, 2026-11-28).
    let leaving: HashSet<ChildKey> =
        checked.deletes.iter().map(|d| d.key.clone()).chain(observed.in_flight.deletions.iter().cloned()).collect();
    // What the decision creates or changes, and creations in flight, are not ready
    // either, until the cache shows them settled: one message from the write to the
    // settling. Said apart ("children: 1 to change", then "1 of 1 children not ready"),
    // the two were a status write each, one of the five or six a Memcached wrote while
    // 50 converged at once (a private cluster, 2026-12-01).
    let mut not_ready: BTreeSet<ChildKey> = checked
        .creates
        .iter()
        .chain(&checked.applies)
        .map(|c| c.key())
        .chain(observed.in_flight.creations.iter().cloned())
        .collect();
    let mut all = not_ready.clone();
    for child in &observed.children {
        let key = child.key();
        if child.object.metadata.deletion_timestamp.is_some() || leaving.contains(&key) {
            continue;
        }
        let kind = child.resource.kind.as_str();
        if settled(kind, &view(kind, &child.object)).is_err() {
            not_ready.insert(key.clone());
        }
        all.insert(key);
    }
    // The count and the first child not ready (in key order), not why: a
    // Deployment's why ("1 of 3 replicas available") changes at each of its status
    // updates, and every change of the message is a status write; the count changes when
    // the policy's own status does.
    if let Some(first) = not_ready.first() {
        let message = format!("{} of {} children not ready: {} {}", not_ready.len(), all.len(), first.kind, first.name);
        return Progress::Converging { reason: CHILDREN_NOT_READY, message };
    }
    if !checked.patches.is_empty() {
        let message = format!("looked-up objects: {} to change", checked.patches.len());
        return Progress::Converging { reason: CHILDREN_CHANGING, message };
    }
    Progress::Converged
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};
    use serde_json::{Value, json};

    use super::*;
    use crate::reconcile::observe::fixtures::{observed, podset};
    use crate::reconcile::plan::{Child, Doomed};

    fn of_kind<K: kube::Resource<DynamicType = ()>>(name: &str, status: Value) -> (ApiResource, DynamicObject) {
        let resource = ApiResource::erase::<K>(&());
        let mut o = DynamicObject::new(name, &resource);
        o.metadata.uid = Some(format!("uid-{name}"));
        o.data = json!({ "status": status });
        (resource, o)
    }

    fn pod(name: &str, ready: &str) -> (ApiResource, DynamicObject) {
        let status = json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": ready }] });
        of_kind::<k8s_openapi::api::core::v1::Pod>(name, status)
    }

    #[test]
    fn converging_until_every_child_is_written_and_settled() {
        let none = Checked::default();
        let o = observed(podset(2), vec![pod("web-a", "True"), pod("web-b", "False")]);
        let Progress::Converging { reason, message } = of(&none, &o) else { panic!("web-b is not ready") };
        assert_eq!(reason, CHILDREN_NOT_READY);
        assert_eq!(message, "1 of 2 children not ready: Pod web-b");

        let o = observed(podset(2), vec![pod("web-a", "True"), pod("web-b", "True")]);
        assert_eq!(of(&none, &o), Progress::Converged);

        // A scale down: the pod being deleted is not waited for.
        let (resource, mut leaving) = pod("web-c", "False");
        leaving.metadata.deletion_timestamp = Some(crate::conditions::now());
        let o = observed(podset(2), vec![pod("web-a", "True"), pod("web-b", "True"), (resource, leaving)]);
        assert_eq!(of(&none, &o), Progress::Converged);

        // Deleted by this decision, or by an earlier one whose delete the cache has not
        // seen yet: not waited for either, and no write to wait for.
        let o = observed(podset(1), vec![pod("web-a", "True"), pod("web-b", "False")]);
        let doomed = |name: &str| Doomed {
            resource: std::sync::Arc::new(ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&())),
            key: ChildKey::of("v1", "Pod", "", name),
            uid: format!("uid-{name}"),
        };
        let deleting = Checked { deletes: vec![doomed("web-b")], ..Checked::default() };
        assert_eq!(of(&deleting, &o), Progress::Converged);
        let mut deleted = o.clone();
        deleted.in_flight.deletions.push(ChildKey::of("v1", "Pod", "", "web-b"));
        assert_eq!(of(&none, &deleted), Progress::Converged);

        let mut flying = observed(podset(2), vec![pod("web-a", "True")]);
        flying.in_flight.creations.push(ChildKey::of("v1", "Pod", "ns", "web-b"));
        let expected =
            Progress::Converging { reason: CHILDREN_NOT_READY, message: "1 of 2 children not ready: Pod web-b".into() };
        assert_eq!(of(&none, &flying), expected);

        let held = Checked { waiting: Some("wave 1 waits".into()), ..Checked::default() };
        assert_eq!(of(&held, &o), Progress::WaitingForWave("wave 1 waits".into()));
    }

    #[test]
    fn a_child_written_says_the_same_until_it_settles_and_a_patch_alone_is_changing() {
        let (resource, deployment) = of_kind::<k8s_openapi::api::apps::v1::Deployment>("cache", json!({}));
        let applying = Checked {
            applies: vec![Child { resource: std::sync::Arc::new(resource.clone()), object: deployment.clone() }],
            ..Checked::default()
        };
        let o = observed(podset(1), vec![]);
        let said = Progress::Converging {
            reason: CHILDREN_NOT_READY,
            message: "1 of 1 children not ready: Deployment cache".into(),
        };
        assert_eq!(of(&applying, &o), said, "applied");
        // In the cache, its controller not yet at it: the same words, so no status write.
        assert_eq!(of(&Checked::default(), &observed(podset(1), vec![(resource, deployment)])), said, "not observed");

        let (resource, web_a) = pod("web-a", "True");
        let patching = Checked {
            patches: vec![Child { resource: std::sync::Arc::new(resource), object: web_a }],
            ..Checked::default()
        };
        let ready = observed(podset(1), vec![pod("web-a", "True")]);
        let expected =
            Progress::Converging { reason: CHILDREN_CHANGING, message: "looked-up objects: 1 to change".into() };
        assert_eq!(of(&patching, &ready), expected);
    }

    #[test]
    fn a_job_that_runs_and_a_pod_that_succeeded_have_settled() {
        let job = |status| of_kind::<k8s_openapi::api::batch::v1::Job>("nightly", status);
        let none = Checked::default();
        let running = observed(podset(1), vec![job(json!({ "startTime": "2026-11-28T00:00:00Z", "active": 1 }))]);
        assert_eq!(of(&none, &running), Progress::Converged, "kstatus: a started Job is Current");
        let waiting = observed(podset(1), vec![job(json!({}))]);
        assert!(matches!(of(&none, &waiting), Progress::Converging { .. }), "not started yet");
        let done = of_kind::<k8s_openapi::api::core::v1::Pod>("once", json!({ "phase": "Succeeded" }));
        assert_eq!(of(&none, &observed(podset(1), vec![done])), Progress::Converged);
    }
}
