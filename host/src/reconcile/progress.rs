//! Whether a parent has converged, for the `Reconciling` condition GitOps tools read
//! (kstatus, `sigs.k8s.io/cli-utils`): a parent converges while its decision creates or
//! changes children, while a creation it asked for is in flight, and while a child that
//! is staying has not [`settled`]; it has converged when none of that holds. A child
//! being deleted, by this decision or an earlier one, is not staying. Decided from the
//! decision and the cache alone, so every replica and a restart say the same.

use std::collections::HashSet;

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

/// Reason of `Reconciling` while the decision writes children or its writes are in flight.
pub const CHILDREN_CHANGING: &str = "ChildrenChanging";
/// Reason of `Reconciling` while a child has not settled.
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
    let writes = [checked.creates.len(), checked.applies.len() + checked.patches.len()];
    let flying = observed.in_flight.creations.len();
    if writes.iter().sum::<usize>() + flying > 0 {
        let [creates, changes] = writes;
        let mut parts = Vec::new();
        for (n, what) in [(creates, "to create"), (changes, "to change"), (flying, "in flight")] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let message = format!("children: {}", parts.join(", "));
        return Progress::Converging { reason: CHILDREN_CHANGING, message };
    }
    let leaving: HashSet<ChildKey> =
        checked.deletes.iter().map(|d| d.key.clone()).chain(observed.in_flight.deletions.iter().cloned()).collect();
    let staying: Vec<_> = observed
        .children
        .iter()
        .filter(|c| c.object.metadata.deletion_timestamp.is_none() && !leaving.contains(&c.key()))
        .collect();
    // The count and the first child not settled, by name, not why: a Deployment's why
    // ("1 of 3 replicas available") changes at each of its status updates, and every
    // change of the message is a status write; the count changes when the policy's
    // own status does.
    let mut unsettled = staying.iter().filter(|c| {
        let kind = c.resource.kind.as_str();
        settled(kind, &view(kind, &c.object)).is_err()
    });
    let Some(first) = unsettled.next() else { return Progress::Converged };
    let count = 1 + unsettled.count();
    let name = first.object.metadata.name.as_deref().unwrap_or_default();
    let (total, kind) = (staying.len(), &first.resource.kind);
    let message = format!("{count} of {total} children not ready: {kind} {name}");
    Progress::Converging { reason: CHILDREN_NOT_READY, message }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};
    use serde_json::{Value, json};

    use super::*;
    use crate::reconcile::observe::fixtures::{observed, podset};
    use crate::reconcile::plan::Doomed;

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
            resource: std::sync::Arc::new(pod(name, "False").0),
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
        let expected = Progress::Converging { reason: CHILDREN_CHANGING, message: "children: 1 in flight".into() };
        assert_eq!(of(&none, &flying), expected);

        let held = Checked { waiting: Some("wave 1 waits".into()), ..Checked::default() };
        assert_eq!(of(&held, &o), Progress::WaitingForWave("wave 1 waits".into()));
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
