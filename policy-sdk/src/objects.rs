//! Objects, kinds and actions of the any-kind world, as serde sees them.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Action, Event, EventType, GroupVersionKind, Input, Object, ObjectKey, PolicyError};

/// A Kubernetes kind known at compile time: `Kind::new("apps", "v1", "Deployment")`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

impl Kind {
    pub const fn new(group: &'static str, version: &'static str, kind: &'static str) -> Self {
        Kind { group, version, kind }
    }

    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind { group: self.group.into(), version: self.version.into(), kind: self.kind.into() }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.into() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn is(&self, gvk: &GroupVersionKind) -> bool {
        gvk.group == self.group && gvk.version == self.version && gvk.kind == self.kind
    }

    /// Names a child of this kind.
    pub fn key(&self, name: &str) -> ObjectKey {
        ObjectKey { kind: self.gvk(), name: name.into() }
    }
}

/// A policy error with a reason, for `?` on anything the policy could not read.
pub fn error(reason: &str, message: impl Into<String>) -> PolicyError {
    PolicyError { reason: reason.into(), message: message.into() }
}

impl Object {
    /// The body (everything but `metadata`) as JSON.
    pub fn body(&self) -> Result<Value, PolicyError> {
        serde_json::from_str(&self.body).map_err(|e| error("InvalidObject", format!("{}: {e}", self.meta.name)))
    }

    /// The body as `T` (e.g. a k8s-openapi type, or a small struct of the fields read).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, PolicyError> {
        serde_json::from_str(&self.body).map_err(|e| error("InvalidObject", format!("{}: {e}", self.meta.name)))
    }

    /// `spec` as `T`.
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, PolicyError> {
        self.field("spec")
    }

    /// `status` as `T`, or `T::default()` while there is none.
    pub fn status<T: DeserializeOwned + Default>(&self) -> Result<T, PolicyError> {
        let body = self.body()?;
        match body.get("status") {
            None | Some(Value::Null) => Ok(T::default()),
            Some(s) => T::deserialize(s).map_err(|e| error("InvalidStatus", format!("{}: {e}", self.meta.name))),
        }
    }

    fn field<T: DeserializeOwned>(&self, field: &str) -> Result<T, PolicyError> {
        let body = self.body()?;
        let v = body.get(field).unwrap_or(&Value::Null);
        T::deserialize(v).map_err(|e| error("InvalidSpec", format!("{} {field}: {e}", self.meta.name)))
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.meta.labels.iter().find(|kv| kv.key == key).map(|kv| kv.value.as_str())
    }

    pub fn is(&self, kind: Kind) -> bool {
        kind.is(&self.kind)
    }
}

impl Input {
    /// The children of `kind` the parent controls.
    pub fn children(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.children.iter().filter(move |o| o.is(kind))
    }

    /// The child of `kind` named `name`, if the parent controls one.
    pub fn child(&self, kind: Kind, name: &str) -> Option<&Object> {
        self.children(kind).find(|o| o.meta.name == name)
    }

    /// The related objects of `kind` that matched the policy's selector.
    pub fn related(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.related.iter().filter(move |o| o.is(kind))
    }

    /// The host created this child and has not seen it yet: never create it again.
    pub fn creating(&self, kind: Kind, name: &str) -> bool {
        self.in_flight.creations.iter().any(|k| kind.is(&k.kind) && k.name == name)
    }

    /// The host deleted this child and has not seen it go yet: never count it.
    pub fn deleting(&self, kind: Kind, name: &str) -> bool {
        self.in_flight.deletions.iter().any(|k| kind.is(&k.kind) && k.name == name)
    }
}

fn json(what: &str, value: &impl Serialize) -> Result<String, PolicyError> {
    serde_json::to_string(value).map_err(|e| error("Unserializable", format!("{what}: {e}")))
}

/// Create or update a child by server-side apply (`apiVersion`, `kind`, `metadata.name`).
pub fn apply(child: &impl Serialize) -> Result<Action, PolicyError> {
    json("applied child", child).map(Action::Apply)
}

/// Create a child (`metadata.name` or `metadata.generateName`).
pub fn create(child: &impl Serialize) -> Result<Action, PolicyError> {
    json("created child", child).map(Action::Create)
}

/// The annotation that puts a child in a wave: the host creates or applies a child of
/// wave `n` only once every child of a lower wave is ready (by `podset.dev/ready-when`,
/// [`READY_WHEN`], or else as GitOps tools judge it), and says on the parent what waits
/// (condition `WaitingForWave`, Event `WaveWaiting`). Absent: wave 0.
pub const WAVE: &str = "podset.dev/wave";

/// The annotation with the rules that say a child is ready, as a JSON list of
/// `{"condition": TYPE}` and `{"field": "/json/pointer", "equals": VALUE}`, all of which
/// must hold.
pub const READY_WHEN: &str = "podset.dev/ready-when";

/// `child` (JSON with `metadata`) in wave `n`.
pub fn in_wave(mut child: Value, n: u32) -> Value {
    if let Some(meta) = child.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(WAVE.into(), Value::String(n.to_string()));
        }
    }
    child
}

/// Delete a child.
pub fn delete(kind: Kind, name: &str) -> Action {
    Action::Delete(kind.key(name))
}

/// Replace the parent's status.
pub fn update_status(status: &impl Serialize) -> Result<Action, PolicyError> {
    json("status", status).map(Action::UpdateStatus)
}

/// An Event on the parent.
pub fn event(warning: bool, reason: &str, message: impl Into<String>) -> Action {
    Action::EmitEvent(Event {
        type_: if warning { EventType::Warning } else { EventType::Normal },
        reason: reason.into(),
        message: message.into(),
        regarding: None,
    })
}

/// The status of a parent, as a policy writes it: only when it changed, so a converged
/// parent gets no actions (and no write, no hot loop).
pub trait Status: Serialize + PartialEq + Sized {
    /// `update-status` if `self` differs from `current`, else nothing.
    fn update_from(&self, current: &Self) -> Result<Option<Action>, PolicyError> {
        if self == current { Ok(None) } else { update_status(self).map(Some) }
    }
}

impl<T: Serialize + PartialEq> Status for T {}
