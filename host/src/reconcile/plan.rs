//! A decision in the host's own terms, whichever world it came from: what to create,
//! apply and delete, the parent's next status, Events, and when to look again.
//! [`Plan`] is what a policy asked for; [`Checked`] is what passed every check and
//! will be performed.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

use super::keys::ChildKey;

/// What a policy asked for, translated from its world's actions, not yet checked.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// Whole child objects (`apiVersion`, `kind`, `metadata`, …).
    pub creates: Vec<Value>,
    pub applies: Vec<Value>,
    pub deletes: Vec<ChildKey>,
    /// The parent's whole next `status`.
    pub status: Option<Value>,
    /// No status write at all from this decision, the digest's included: the next
    /// decision, which comes as soon as this one's creations are observed, writes one
    /// that describes them.
    pub fold_status: bool,
    pub events: Vec<Note>,
    /// Milliseconds, as asked.
    pub requeue_ms: Option<u32>,
    pub finalize: bool,
}

/// An Event a policy asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: String,
    pub message: String,
    pub regarding: Option<ChildKey>,
}

/// A child to create or apply: its resource and the object as it will be sent.
#[derive(Debug, Clone)]
pub struct Child {
    pub resource: Arc<ApiResource>,
    pub object: DynamicObject,
}

impl Child {
    pub fn key(&self) -> ChildKey {
        ChildKey::of_meta(&self.resource, &self.object.metadata)
    }
}

/// A child to delete, with the UID it must still have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doomed {
    pub resource: Arc<ApiResource>,
    pub key: ChildKey,
    pub uid: String,
}

/// A plan that passed every check.
#[derive(Debug, Default)]
pub struct Checked {
    pub creates: Vec<Child>,
    /// Only the applies that would change something.
    pub applies: Vec<Child>,
    /// Looked-up objects to patch (contract 0.4), only where something would change.
    pub patches: Vec<Child>,
    pub deletes: Vec<Doomed>,
    pub status: Option<Value>,
    pub fold_status: bool,
    pub events: Vec<Note>,
    pub requeue: Option<Duration>,
    pub finalize: bool,
    /// What a held wave waits for ([`super::waves`]), for the parent's condition.
    pub waiting: Option<String>,
}

impl Checked {
    /// Whether it writes an object other than the parent: a child, or a looked-up object.
    pub fn writes_others(&self) -> bool {
        !(self.creates.is_empty() && self.applies.is_empty() && self.patches.is_empty() && self.deletes.is_empty())
    }
}
