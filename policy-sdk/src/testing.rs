//! Inputs for native unit tests of a policy, built the way the host builds them.

use serde_json::Value;

use crate::objects::Kind;
use crate::{InFlight, Input, KeyValue, Object, ObjectMeta};

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
        in_flight: InFlight { creations: Vec::new(), deletions: Vec::new() },
        now: 1_700_000_100_000,
    }
}
