//! Whether a child is ready, for ordered waves ([`super::waves`]): by the rules its
//! policy stated on it (annotation [`READY_WHEN`]), or else by the rules GitOps tools
//! use (kstatus, `sigs.k8s.io/cli-utils/pkg/kstatus`): not being deleted, the
//! controller caught up with the spec (`observedGeneration`), not `Reconciling` or
//! `Stalled`, the built-in kinds' own signs of readiness, and a `Ready` condition, if
//! any, True. A pure function of one object: a restart computes the same answer.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::kubernetes::object::Object;

/// The annotation on a child with the rules that say it is ready, as a JSON list; each
/// rule is `{"condition": "Type"}` (that condition True, for the object's current
/// generation when it says which) or `{"field": "/json/pointer", "equals": value}`.
/// All must hold. Without it, the kstatus rules apply.
pub const READY_WHEN: &str = "podset.dev/ready-when";

/// One rule of [`READY_WHEN`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Rule {
    Condition { condition: String },
    Field { field: String, equals: Value },
}

/// The rules of a [`READY_WHEN`] annotation, or why they do not parse.
pub fn rules(annotation: &str) -> Result<Vec<Rule>, String> {
    let rules: Vec<Rule> = serde_json::from_str(annotation).map_err(|e| {
        format!("a JSON list of {{\"condition\": TYPE}} or {{\"field\": POINTER, \"equals\": VALUE}} rules: {e}")
    })?;
    for rule in &rules {
        if let Rule::Field { field, .. } = rule
            && !(field.is_empty() || field.starts_with('/'))
        {
            return Err(format!("field {field:?} is not a JSON pointer (RFC 6901), e.g. /status/phase"));
        }
    }
    Ok(rules)
}

/// `Ok` when `object` (the whole object as JSON, of `kind`) is ready; else why not.
pub fn ready(kind: &str, object: &Value) -> Result<(), String> {
    if deleting(object) {
        return Err("being deleted".into());
    }
    if let Some(annotation) = stated(object) {
        return rules(annotation)?.iter().try_for_each(|rule| holds(rule, object));
    }
    kstatus(kind, object)
}

/// Whether a child has settled, for its parent's `Reconciling` ([`super::progress`]):
/// ready, except as kstatus has it for what runs to an end of its own: a Job once it
/// has started, a Pod that succeeded. (A wave, by contrast, waits for its Job to
/// complete: a migration before the server.)
pub fn settled(kind: &str, object: &Value) -> Result<(), String> {
    let ran = match kind {
        "Job" => object.pointer("/status/startTime").is_some_and(|t| !t.is_null()),
        "Pod" => object.pointer("/status/phase").is_some_and(|p| p == "Succeeded"),
        _ => false,
    };
    // Only where kstatus' rules apply: not for a child being deleted or one whose
    // policy stated its own.
    if ran && !deleting(object) && stated(object).is_none() {
        return Ok(());
    }
    ready(kind, object)
}

fn deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// The [`READY_WHEN`] annotation's text, when the object carries it.
fn stated(object: &Value) -> Option<&str> {
    object.get("metadata")?.get("annotations")?.get(READY_WHEN)?.as_str()
}

/// What these rules read of a cached object, as JSON: its metadata's generation,
/// deletion time and annotations, its status, and its spec where a rule reads it (the
/// workload kinds' replicas; anything for a [`READY_WHEN`] rule). Not the whole
/// object: a pod's managed fields and spec are most of it, and a parent's convergence
/// is read at every decision.
pub fn view(kind: &str, o: &Object) -> Value {
    let meta = &o.metadata;
    let rules_stated = meta.annotations.as_ref().is_some_and(|a| a.contains_key(READY_WHEN));
    let mut v = if rules_stated {
        serde_json::from_str(&o.body()).unwrap_or_else(|_| json!({}))
    } else {
        let mut v = Map::new();
        for field in ["status", "spec"] {
            if field == "spec" && !matches!(kind, "Deployment" | "StatefulSet" | "ReplicaSet") {
                continue;
            }
            if let Ok(Some(value)) = o.parse::<Value>(field) {
                v.insert(field.into(), value);
            }
        }
        Value::Object(v)
    };
    if let Some(m) = v.as_object_mut() {
        let metadata = json!({
            "name": meta.name,
            "generation": meta.generation,
            "deletionTimestamp": meta.deletion_timestamp,
            "annotations": meta.annotations,
        });
        m.insert("metadata".into(), metadata);
    }
    v
}

fn generation(object: &Value) -> Option<i64> {
    object.pointer("/metadata/generation").and_then(Value::as_i64)
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

fn holds(rule: &Rule, object: &Value) -> Result<(), String> {
    match rule {
        Rule::Condition { condition: type_ } => {
            let c = condition(object, type_).ok_or_else(|| format!("no {type_} condition yet"))?;
            if c["status"] != "True" {
                return Err(format!("{type_} is {}", c["status"].as_str().unwrap_or("unknown")));
            }
            let observed = c.get("observedGeneration").and_then(Value::as_i64);
            if observed.zip(generation(object)).is_some_and(|(o, g)| o < g) {
                return Err(format!("{type_} is for generation {}, not the current one", observed.unwrap_or(0)));
            }
            Ok(())
        }
        Rule::Field { field, equals } => match object.pointer(field) {
            Some(v) if v == equals => Ok(()),
            Some(v) => Err(format!("{field} is {v}, not {equals}")),
            None => Err(format!("{field} is not set")),
        },
    }
}

/// kstatus' generic rules, then its rules for the built-in kinds, then `Ready`.
fn kstatus(kind: &str, object: &Value) -> Result<(), String> {
    let observed = object.pointer("/status/observedGeneration").and_then(Value::as_i64);
    if let (Some(o), Some(g)) = (observed, generation(object))
        && o < g
    {
        return Err(format!("its controller has not observed generation {g} yet"));
    }
    for abnormal in ["Reconciling", "Stalled"] {
        if condition(object, abnormal).is_some_and(|c| c["status"] == "True") {
            return Err(format!("{abnormal} is True"));
        }
    }
    let status = object.get("status").unwrap_or(&Value::Null);
    let int = |p: &str| object.pointer(p).and_then(Value::as_i64);
    let want = int("/spec/replicas").unwrap_or(1);
    let replicas = |field: &str| int(&format!("/status/{field}")).unwrap_or(0);
    let (updated, available, ready_replicas) =
        (replicas("updatedReplicas"), replicas("availableReplicas"), replicas("readyReplicas"));
    let not_ready = match kind {
        "Deployment" => (updated < want || available < want)
            .then(|| format!("{} of {want} replicas updated and available", updated.min(available))),
        "StatefulSet" | "ReplicaSet" => {
            (ready_replicas < want).then(|| format!("{ready_replicas} of {want} replicas ready"))
        }
        "DaemonSet" => {
            let (desired, ready) = (replicas("desiredNumberScheduled"), replicas("numberReady"));
            (status.is_null() || ready < desired).then(|| format!("{ready} of {desired} pods ready"))
        }
        "Pod" => condition(object, "Ready").is_none_or(|c| c["status"] != "True").then(|| "not Ready".into()),
        "Job" => condition(object, "Complete").is_none_or(|c| c["status"] != "True").then(|| "not Complete".into()),
        "Namespace" | "PersistentVolumeClaim" => {
            let phase = status.get("phase").and_then(Value::as_str).unwrap_or("");
            let want = if kind == "Namespace" { "Active" } else { "Bound" };
            (phase != want).then(|| format!("phase {phase:?}, not {want}"))
        }
        _ => None,
    };
    if let Some(why) = not_ready {
        return Err(why);
    }
    match condition(object, "Ready") {
        Some(c) if c["status"] != "True" => Err(format!("Ready is {}", c["status"].as_str().unwrap_or("unknown"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kstatus_rules_for_generic_and_built_in_kinds() {
        // Cases after cli-utils' status tests: caught up or not, abnormal conditions,
        // replicas, phases, Ready.
        assert!(ready("ConfigMap", &json!({"metadata": {"name": "c"}})).is_ok(), "no status: current");
        let behind = json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2}});
        assert!(ready("Widget", &behind).expect_err("behind").contains("generation 3"));
        let reconciling = json!({"status": {"conditions": [{"type": "Reconciling", "status": "True"}]}});
        assert!(ready("Widget", &reconciling).is_err());
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(ready("Widget", &not_ready), Err("Ready is False".into()));
        let deployment = |updated, available| {
            json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
                   "status": {"observedGeneration": 1, "updatedReplicas": updated, "availableReplicas": available}})
        };
        assert!(ready("Deployment", &deployment(2, 1)).is_err());
        assert!(ready("Deployment", &deployment(2, 2)).is_ok());
        assert!(ready("Namespace", &json!({"status": {"phase": "Terminating"}})).is_err());
        assert!(ready("Namespace", &json!({"status": {"phase": "Active"}})).is_ok());
        assert!(ready("Namespace", &json!({})).is_err(), "a namespace just created has no phase yet");
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-11-27T00:00:00Z"}});
        assert_eq!(ready("ConfigMap", &deleting), Err("being deleted".into()));
    }

    #[test]
    fn stated_rules_replace_kstatus_and_must_all_hold() {
        let annotated = |rules: &str, status: Value| json!({"metadata": {"generation": 2, "annotations": {READY_WHEN: rules}}, "status": status});
        let rules = r#"[{"condition": "Synced"}, {"field": "/status/phase", "equals": "Done"}]"#;
        let ok =
            json!({"phase": "Done", "conditions": [{"type": "Synced", "status": "True", "observedGeneration": 2}]});
        assert!(ready("Widget", &annotated(rules, ok)).is_ok());
        let stale =
            json!({"phase": "Done", "conditions": [{"type": "Synced", "status": "True", "observedGeneration": 1}]});
        assert!(ready("Widget", &annotated(rules, stale)).expect_err("stale").contains("generation 1"));
        let pending = json!({"phase": "Pending", "conditions": [{"type": "Synced", "status": "True"}]});
        assert!(ready("Widget", &annotated(rules, pending)).expect_err("pending").contains("\"Pending\""));
        assert!(rules_err(r#"[{"field": "status.phase", "equals": 1}]"#).contains("JSON pointer"));
        assert!(rules_err(r#"{"condition": "Ready"}"#).contains("JSON list"));
    }

    fn rules_err(annotation: &str) -> String {
        rules(annotation).expect_err("refused")
    }
}
