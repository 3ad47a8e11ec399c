//! The any-kind world: observed objects as typed metadata plus a JSON body, and the
//! policy's actions (JSON children and status) as a [`Plan`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sObjectMeta;
use kube::api::ApiResource;
use serde_json::Value;

use crate::contract::bindings::reconciler::{
    Action, Answer, EventType, InFlight, Input, Object, ObjectKey, ObjectMeta,
};
use crate::contract::bindings::{GroupVersionKind, KeyValue};
use crate::reconcile::check::Rejection;
use crate::reconcile::keys::ChildKey;
use crate::reconcile::observe::Observed;
use crate::reconcile::plan::{Note, Plan};

/// What the policy is told.
pub fn input(observed: &Observed) -> Input {
    Input {
        parent: object(&observed.parent_resource, &observed.parent.metadata, observed.parent.body()),
        children: observed.children.iter().map(|c| object(&c.resource, &c.object.metadata, c.object.body())).collect(),
        related: observed.related.iter().map(|r| object(&r.resource, &r.object.metadata, r.object.body())).collect(),
        looked_up: observed
            .looked_up
            .iter()
            .map(|a| Answer {
                lookup: a.lookup.clone(),
                objects: a.objects.iter().map(|o| object(&o.resource, &o.object.metadata, o.object.body())).collect(),
            })
            .collect(),
        in_flight: InFlight {
            creations: observed.in_flight.creations.iter().map(to_object_key).collect(),
            deletions: observed.in_flight.deletions.iter().map(to_object_key).collect(),
        },
        now: observed.now,
    }
}

/// The actions as a plan. JSON that does not parse is refused here, with what it was.
pub fn plan(actions: Vec<Action>) -> Result<Plan, Rejection> {
    let mut plan = Plan::default();
    for action in actions {
        match action {
            Action::Create(json) => plan.creates.push(parse("created child", &json)?),
            Action::Apply(json) => plan.applies.push(parse("applied child", &json)?),
            Action::Delete(key) => plan.deletes.push(to_child_key(&key)),
            Action::UpdateStatus(json) => plan.status = Some(parse("status", &json)?),
            Action::EmitEvent(e) => plan.events.push(Note {
                warning: e.type_ == EventType::Warning,
                reason: e.reason,
                message: e.message,
                regarding: e.regarding.as_ref().map(to_child_key),
            }),
            Action::RequeueAfter(ms) => plan.requeue_ms = Some(plan.requeue_ms.map_or(ms, |r| r.min(ms))),
            Action::FinalizeDone => plan.finalize = true,
            // Answered before the plan is made (reconcile::lookups): a plan is made only
            // from a call whose every lookup had its answer.
            Action::LookUp(_) => {}
        }
    }
    Ok(plan)
}

fn parse(what: &str, json: &str) -> Result<Value, Rejection> {
    serde_json::from_str(json).map_err(|e| Rejection::Malformed { what: what.into(), error: e.to_string() })
}

/// An object as the contract carries it; the caches keep `body` as JSON text already.
fn object(resource: &ApiResource, m: &K8sObjectMeta, body: String) -> Object {
    Object {
        kind: GroupVersionKind {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
        },
        meta: ObjectMeta {
            name: m.name.clone().unwrap_or_default(),
            namespace: m.namespace.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            generation: m.generation.unwrap_or(0),
            resource_version: m.resource_version.clone().unwrap_or_default(),
            labels: key_values(m.labels.as_ref()),
            annotations: key_values(m.annotations.as_ref()),
            created_at: m.creation_timestamp.as_ref().map_or(0, |t| t.0.as_millisecond()),
            deleting: m.deletion_timestamp.is_some(),
            finalizers: m.finalizers.clone().unwrap_or_default(),
        },
        body,
    }
}

fn key_values(m: Option<&BTreeMap<String, String>>) -> Vec<KeyValue> {
    m.into_iter().flatten().map(|(k, v)| KeyValue { key: k.clone(), value: v.clone() }).collect()
}

fn to_object_key(k: &ChildKey) -> ObjectKey {
    let (group, version) = match k.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), k.api_version.clone()),
    };
    ObjectKey { kind: GroupVersionKind { group, version, kind: k.kind.clone() }, name: k.name.clone() }
}

/// A key as the policy named it: without a namespace, which contract 0.3 keys do not
/// carry (`check::locate` finds it).
fn to_child_key(k: &ObjectKey) -> ChildKey {
    let api_version =
        if k.kind.group.is_empty() { k.kind.version.clone() } else { format!("{}/{}", k.kind.group, k.kind.version) };
    ChildKey::of(&api_version, &k.kind.kind, "", &k.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_keys_round_trip_through_the_contract() {
        for api_version in ["v1", "apps/v1", "cache.example.com/v1alpha1"] {
            let k = ChildKey::of(api_version, "X", "", "n");
            assert_eq!(to_child_key(&to_object_key(&k)), k);
        }
    }

    #[test]
    fn json_that_does_not_parse_is_refused_with_what_it_was() {
        let e = plan(vec![Action::Apply("{not json".into())]).unwrap_err();
        assert!(e.to_string().contains("applied child"), "{e}");
        let p = plan(vec![
            Action::RequeueAfter(900),
            Action::RequeueAfter(300),
            Action::UpdateStatus(r#"{"nodes":["a"]}"#.into()),
            Action::FinalizeDone,
        ])
        .expect("plan");
        assert_eq!(p.requeue_ms, Some(300));
        assert_eq!(p.status, Some(serde_json::json!({"nodes": ["a"]})));
        assert!(p.finalize);
    }
}
