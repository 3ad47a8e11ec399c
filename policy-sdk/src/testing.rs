//! Inputs for native unit tests of a policy, built the way the host builds them, and
//! readers of the actions a decision returns.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::objects::Kind;
use crate::{Action, Answer, InFlight, Input, KeyValue, Lookup, LookupMatch, Object, ObjectMeta};

/// An object of `kind` named `name` in namespace `default`, with `body` (spec, status…).
pub fn object(kind: Kind, name: &str, body: Value) -> Object {
    Object {
        kind: kind.gvk(),
        meta: ObjectMeta {
            name: name.into(),
            namespace: "default".into(),
            uid: format!("uid-{name}"),
            generation: 1,
            resource_version: "1".into(),
            labels: Vec::new(),
            annotations: Vec::new(),
            created_at: 1_700_000_000_000,
            deleting: false,
            finalizers: Vec::new(),
        },
        body: body.to_string(),
    }
}

/// Adds a label.
pub fn labelled(mut o: Object, key: &str, value: &str) -> Object {
    o.meta.labels.push(KeyValue { key: key.into(), value: value.into() });
    o
}

/// Marks an object as being deleted.
pub fn deleting(mut o: Object) -> Object {
    o.meta.deleting = true;
    o
}

/// An input for `parent` with nothing else observed, at a fixed `now`.
pub fn input(parent: Object) -> Input {
    Input {
        parent,
        children: Vec::new(),
        related: Vec::new(),
        looked_up: Vec::new(),
        in_flight: InFlight { creations: Vec::new(), deletions: Vec::new() },
        now: 1_700_000_100_000,
    }
}

/// `input` with the host's answer to a lookup of `kind` by `name` in the parent's
/// namespace: `found`, or nothing there.
pub fn answered(mut input: Input, kind: Kind, name: &str, found: Option<Object>) -> Input {
    let lookup = Lookup { kind: kind.gvk(), namespace: String::new(), match_: LookupMatch::Name(name.into()) };
    input.looked_up.push(Answer { lookup, objects: found.into_iter().collect() });
    input
}

/// The lookups a decision names.
pub fn looked_up(actions: &[Action]) -> Vec<Lookup> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::LookUp(l) => Some(l.clone()),
            _ => None,
        })
        .collect()
}

/// The children a decision creates, as JSON.
pub fn created(actions: &[Action]) -> Vec<Value> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Create(json) => serde_json::from_str(json).ok(),
            _ => None,
        })
        .collect()
}

/// The children a decision applies, as JSON.
pub fn applied(actions: &[Action]) -> Vec<Value> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Apply(json) => serde_json::from_str(json).ok(),
            _ => None,
        })
        .collect()
}

/// The names of the children a decision deletes.
pub fn deleted(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete(key) => Some(key.name.clone()),
            _ => None,
        })
        .collect()
}

/// The status a decision writes, if it writes one.
pub fn status<T: DeserializeOwned>(actions: &[Action]) -> Option<T> {
    actions.iter().find_map(|a| match a {
        Action::UpdateStatus(json) => serde_json::from_str(json).ok(),
        _ => None,
    })
}

/// The milliseconds after which a decision asks to be called again, if it does.
pub fn requeue_after(actions: &[Action]) -> Option<u32> {
    actions.iter().find_map(|a| match a {
        Action::RequeueAfter(ms) => Some(*ms),
        _ => None,
    })
}
