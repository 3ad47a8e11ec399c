//! Whether two decisions agree: the one comparison shadow mode and
//! `podset-host policy replay` share.
//!
//! Both sides are first brought to a [`Normal`] form, and the forms compare equal or
//! not. The rules (docs/how-to/roll-out-a-policy-change.md):
//! - creates compare as a set, and so do deletes: their order does not matter;
//! - a create with a generated name compares by its prefix (`generateName`, or the
//!   PodSet world's `prefix`) and the object's content: the server's suffix is never
//!   part of a decision;
//! - objects and statuses compare as JSON values (key order and formatting do not
//!   matter), ignoring what the host sets itself: a child's `metadata.namespace` when it
//!   is its namespaced parent's (another namespace is the policy's choice, and counts),
//!   `metadata.ownerReferences`, and the host's own conditions
//!   (`PolicyFailed`, `ReconcileFailed`, `WaitingForWave`) in a status;
//! - applies and Events compare in order;
//! - `requeue-after` is ignored: it changes when the next look happens, not what is done;
//! - lookups compare as a set: a decision that reads something else is another
//!   decision, even when it does the same (its next one may not).
//!
//! A decision that failed compares by its reason (`Error::reason`, or a check's
//! rejection): two failures for the same reason agree.

use serde::Serialize;
use serde_json::{Map, Value};
use serde_yaml::Value as Yaml;
use similar::TextDiff;

use super::yaml::readable;
use crate::conditions::HOST_CONDITIONS;
use crate::sandbox::Actions;

/// A decision in the form it is compared in. Build one with [`Normal::of_actions`]
/// (a policy's world actions) or by hand from the host's plan, then [`Normal::normalise`].
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Normal {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub creates: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub applies: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deletes: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub finalize: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Value>,
    /// The namespace of the parent the decision is for ("" when cluster-scoped): a
    /// child's namespace is compared when it is another.
    #[serde(skip)]
    pub parent_namespace: String,
}

/// One side of a comparison: the decision, or why there was none.
pub type Side = Result<Normal, String>;

/// How two decisions compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Agree,
    /// A unified diff of the two normal forms, first side `-`, second `+`.
    Differ {
        diff: String,
    },
}

impl Outcome {
    pub fn agrees(&self) -> bool {
        matches!(self, Outcome::Agree)
    }
}

impl Normal {
    /// The normal form of a world's actions, as a policy returned them for a parent in
    /// `parent_namespace` ("" when cluster-scoped).
    pub fn of_actions(actions: &Actions, parent_namespace: &str) -> Normal {
        let mut n = Normal { parent_namespace: parent_namespace.into(), ..Normal::default() };
        let Yaml::Sequence(list) = readable(actions) else { return n };
        for action in list {
            let Yaml::Tagged(t) = action else { continue };
            let value = serde_json::to_value(&t.value).unwrap_or(Value::Null);
            match t.tag.to_string().trim_start_matches('!') {
                // The PodSet world names a pod exactly or by a prefix: the same two ways
                // an object's metadata does.
                "CreatePod" => n.creates.push(create_pod(value)),
                "Create" => n.creates.push(value),
                "Apply" => n.applies.push(value),
                "DeletePod" => n.deletes.push(serde_json::json!({ "apiVersion": "v1", "kind": "Pod", "name": value })),
                "Delete" => n.deletes.push(value),
                "UpdateStatus" => n.status = Some(value),
                "EmitEvent" => n.events.push(value),
                "FinalizeDone" => n.finalize = true,
                "LookUp" => n.lookups.push(value),
                // RequeueAfter, and any action a later contract adds that has no effect
                // on the cluster.
                _ => {}
            }
        }
        n.normalise()
    }

    /// Applies the rules of this module's header. Idempotent.
    pub fn normalise(mut self) -> Normal {
        for object in self.creates.iter_mut().chain(self.applies.iter_mut()) {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                let home = !self.parent_namespace.is_empty()
                    && meta.get("namespace").and_then(Value::as_str) == Some(self.parent_namespace.as_str());
                if home {
                    meta.remove("namespace");
                }
                meta.remove("ownerReferences");
            }
        }
        if let Some(Value::Object(status)) = self.status.as_mut() {
            strip_host_conditions(status);
        }
        self.creates.sort_by_cached_key(canonical);
        self.deletes.sort_by_cached_key(canonical);
        self.lookups.sort_by_cached_key(canonical);
        self.lookups.dedup();
        self
    }

    /// The form as YAML, for a person to read and diff.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_else(|e| format!("<unprintable: {e}>\n"))
    }
}

/// A `create-pod` record as an object's metadata would name it.
fn create_pod(mut value: Value) -> Value {
    if let Some(name) = value.get_mut("name").map(Value::take) {
        let (field, n) = match name {
            Value::Object(m) if m.len() == 1 => m.into_iter().next().unwrap_or_default(),
            other => ("name".into(), other),
        };
        // A YAML tag becomes a one-key map: `!Prefix p-` is `{"!Prefix": "p-"}`.
        let field = if field.trim_start_matches('!').eq_ignore_ascii_case("prefix") { "generateName" } else { "name" };
        if let Some(m) = value.as_object_mut() {
            m.remove("name");
            m.insert(field.into(), n);
        }
    }
    value
}

fn strip_host_conditions(status: &mut Map<String, Value>) {
    let Some(Value::Array(list)) = status.get_mut("conditions") else { return };
    // `type_` in the PodSet world's record, `type` in a Kubernetes condition.
    let host = |c: &Value| {
        let t = c.get("type").or_else(|| c.get("type_")).and_then(Value::as_str);
        t.is_some_and(|t| HOST_CONDITIONS.contains(&t))
    };
    list.retain(|c| !host(c));
    if list.is_empty() {
        status.remove("conditions");
    }
}

/// JSON text with sorted keys (serde_json's map is ordered by key): equal values give
/// equal text, so sorting by it makes a set's order canonical.
fn canonical(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Compares two sides; `labels` name them in the diff (e.g. `("live", "shadow")`).
pub fn compare(a: &Side, b: &Side, labels: (&str, &str)) -> Outcome {
    if a == b {
        return Outcome::Agree;
    }
    let text = |s: &Side| match s {
        Ok(n) => n.to_yaml(),
        Err(reason) => format!("error: {reason}\n"),
    };
    let diff = TextDiff::from_lines(&text(a), &text(b))
        .unified_diff()
        .context_radius(3)
        .header(labels.0, labels.1)
        .to_string();
    Outcome::Differ { diff }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": name, "namespace": "a"}, "spec": {}})
    }

    #[test]
    fn creates_and_deletes_are_sets_applies_are_not() {
        let a = Normal {
            creates: vec![pod("x-"), pod("y-")],
            deletes: vec![json!({"kind": "Pod", "name": "p1"}), json!({"kind": "Pod", "name": "p2"})],
            applies: vec![json!({"kind": "A"}), json!({"kind": "B"})],
            ..Normal::default()
        }
        .normalise();
        let mut b = a.clone();
        b.creates.reverse();
        b.deletes.reverse();
        assert_eq!(compare(&Ok(a.clone()), &Ok(b.clone().normalise()), ("a", "b")), Outcome::Agree);
        b.applies.reverse();
        let Outcome::Differ { diff } = compare(&Ok(a), &Ok(b.normalise()), ("live", "shadow")) else {
            panic!("applies in another order differ")
        };
        assert!(diff.contains("--- live") && diff.contains("+++ shadow"), "{diff}");
        assert!(diff.contains("-- kind: A") || diff.contains("-  kind: A") || diff.contains("- kind: A"), "{diff}");
    }

    #[test]
    fn what_the_host_sets_is_ignored() {
        let mut owned = pod("x-");
        owned["metadata"] = json!({ "generateName": "x-", "ownerReferences": [{"uid": "u"}] });
        let status = |extra: bool| {
            let mut c = vec![json!({"type": "Available", "status": "True"})];
            if extra {
                c.push(json!({"type": "PolicyFailed", "status": "True"}));
            }
            json!({"replicas": 1, "conditions": c})
        };
        // The parent's namespace, named by one side and left to the host by the other.
        let at_a = |n: Normal| Normal { parent_namespace: "a".into(), ..n }.normalise();
        let a = at_a(Normal { creates: vec![pod("x-")], status: Some(status(false)), ..Normal::default() });
        let b = at_a(Normal { creates: vec![owned], status: Some(status(true)), ..Normal::default() });
        assert_eq!(compare(&Ok(a.clone()), &Ok(b), ("a", "b")), Outcome::Agree);
        // A different prefix or content is a difference.
        let c = Normal { creates: vec![pod("z-")], status: Some(status(false)), ..Normal::default() }.normalise();
        assert!(!compare(&Ok(a.clone()), &Ok(c), ("a", "b")).agrees());
        let d = Normal { creates: vec![pod("x-")], status: Some(json!({"replicas": 2})), ..Normal::default() };
        assert!(!compare(&Ok(a), &Ok(d.normalise()), ("a", "b")).agrees());
    }

    #[test]
    fn a_childs_namespace_counts_unless_it_is_the_parents() {
        let placed = |parent: &str, ns: Option<&str>| {
            let mut p = pod("x-");
            match ns {
                Some(ns) => p["metadata"]["namespace"] = json!(ns),
                None => p["metadata"] = json!({ "generateName": "x-" }),
            }
            Normal { creates: vec![p], parent_namespace: parent.into(), ..Normal::default() }.normalise()
        };
        // A cluster-scoped parent's children name theirs.
        assert!(compare(&Ok(placed("", Some("acme"))), &Ok(placed("", Some("acme"))), ("a", "b")).agrees());
        let Outcome::Differ { diff } =
            compare(&Ok(placed("", Some("acme"))), &Ok(placed("", Some("other"))), ("a", "b"))
        else {
            panic!("children in two namespaces agree")
        };
        assert!(diff.contains("acme") && diff.contains("other"), "{diff}");
        // A namespaced parent's: its own namespace, named or not, is the same place.
        assert!(compare(&Ok(placed("ns", Some("ns"))), &Ok(placed("ns", None)), ("a", "b")).agrees());
        let elsewhere = compare(&Ok(placed("ns", Some("shared"))), &Ok(placed("ns", None)), ("a", "b"));
        assert!(!elsewhere.agrees(), "a child written elsewhere is another decision");
    }

    #[test]
    fn failures_compare_by_reason() {
        let trap: Side = Err("Trap".into());
        assert!(compare(&trap, &Err("Trap".into()), ("a", "b")).agrees());
        let Outcome::Differ { diff } = compare(&trap, &Ok(Normal::default()), ("recorded", "replayed")) else {
            panic!("an error and a decision differ")
        };
        assert!(diff.contains("-error: Trap"), "{diff}");
    }

    #[test]
    fn a_generated_pod_name_is_a_generate_name() {
        let exact = create_pod(json!({"name": {"!Exact": "p-1"}, "labels": []}));
        assert_eq!(exact, json!({"name": "p-1", "labels": []}));
        let prefix = create_pod(json!({"name": {"!Prefix": "p-"}, "labels": []}));
        assert_eq!(prefix, json!({"generateName": "p-", "labels": []}));
    }
}
