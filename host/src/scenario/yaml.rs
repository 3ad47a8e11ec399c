//! The contract's values as YAML a person reads and writes: the records of each world
//! with fields in snake_case and variants as YAML tags; in the any-kind world, the
//! JSON strings the contract carries (an object's `body`, the payload of `!Create`,
//! `!Apply` and `!UpdateStatus`) unfolded into YAML, and folded back when read.

use serde_yaml::Value;
use serde_yaml::value::TaggedValue;

use crate::sandbox::Actions;

/// An input's `body` JSON strings as YAML, the inverse of [`embed_json`] on an input.
pub(super) fn unfold_bodies(value: Value) -> Value {
    match value {
        Value::Mapping(m) => Value::Mapping(
            m.into_iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        (Some("body"), Value::String(s)) => serde_json::from_str::<serde_json::Value>(&s)
                            .ok()
                            .and_then(|j| serde_yaml::to_value(j).ok())
                            .unwrap_or(Value::String(s)),
                        (_, v) => unfold_bodies(v),
                    };
                    (k, v)
                })
                .collect(),
        ),
        Value::Sequence(s) => Value::Sequence(s.into_iter().map(unfold_bodies).collect()),
        other => other,
    }
}

/// A PodSet input as contract 0.2.0 wrote it, in 0.3.0's terms: a pod's `node_name`
/// becomes `scheduled` (whether there was one). The fields 0.3.0 dropped (`uid`,
/// `labels`) are ignored when read, so recordings and scenarios of 0.2.0 keep working.
pub(super) fn podset_input_of_0_2(mut value: Value) -> Value {
    if let Some(Value::Sequence(pods)) = value.get_mut("pods") {
        for pod in pods.iter_mut().filter_map(Value::as_mapping_mut) {
            if !pod.contains_key("scheduled")
                && let Some(node) = pod.remove("node_name")
            {
                pod.insert("scheduled".into(), Value::Bool(!node.is_null()));
            }
        }
    }
    value
}

/// An any-kind input as contract 0.3.0 wrote it, in 0.4.0's terms: no lookups were
/// answered (0.3.0 had none), so recordings and scenarios of 0.3.0 keep working.
pub(super) fn reconcile_input_of_0_3(mut value: Value) -> Value {
    if let Some(m) = value.as_mapping_mut()
        && !m.contains_key("looked_up")
    {
        m.insert("looked_up".into(), Value::Sequence(Vec::new()));
    }
    value
}

/// The contract's JSON fields, written as YAML in a file, as the JSON strings the
/// contract carries. `payload` is true inside a tag whose payload is JSON.
pub(super) fn embed_json(value: Value, payload: bool) -> Value {
    if payload && !matches!(value, Value::String(_)) {
        return Value::String(serde_json::to_string(&value).unwrap_or_default());
    }
    match value {
        Value::Mapping(m) => Value::Mapping(
            m.into_iter()
                .map(|(k, v)| {
                    let is_body = k.as_str() == Some("body");
                    (k, embed_json(v, is_body))
                })
                .collect(),
        ),
        Value::Sequence(s) => Value::Sequence(s.into_iter().map(|v| embed_json(v, false)).collect()),
        Value::Tagged(t) => {
            let json = matches!(t.tag.to_string().trim_start_matches('!'), "Create" | "Apply" | "UpdateStatus");
            Value::Tagged(Box::new(TaggedValue { tag: t.tag, value: embed_json(t.value, json) }))
        }
        other => other,
    }
}

/// Actions as YAML a person reads: JSON strings of the any-kind world unfolded, so
/// expected and actual compare by value and diff line by line.
pub fn readable(actions: &Actions) -> Value {
    let v = match actions {
        Actions::PodSet(a) => serde_yaml::to_value(a),
        Actions::Reconcile(a) => serde_yaml::to_value(a),
    }
    .unwrap_or(Value::Null);
    unfold_json(v)
}

fn unfold_json(value: Value) -> Value {
    match value {
        Value::Sequence(s) => Value::Sequence(s.into_iter().map(unfold_json).collect()),
        Value::Mapping(m) => Value::Mapping(m.into_iter().map(|(k, v)| (k, unfold_json(v))).collect()),
        Value::Tagged(t) => {
            let json = matches!(t.tag.to_string().trim_start_matches('!'), "Create" | "Apply" | "UpdateStatus");
            let value = match (&t.value, json) {
                (Value::String(s), true) => serde_json::from_str::<serde_json::Value>(s)
                    .ok()
                    .and_then(|j| serde_yaml::to_value(j).ok())
                    .unwrap_or(t.value.clone()),
                _ => unfold_json(t.value.clone()),
            };
            Value::Tagged(Box::new(TaggedValue { tag: t.tag, value }))
        }
        other => other,
    }
}

pub fn to_yaml(v: &Value) -> String {
    serde_yaml::to_string(v).unwrap_or_else(|e| format!("<unprintable: {e}>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_json_fields_become_json_strings_and_back() {
        let file: Value = serde_yaml::from_str(
            "parent: {body: {spec: {size: 3}}}\nactions: [!Apply {kind: Deployment, spec: {replicas: 3}}, !RequeueAfter 5]",
        )
        .expect("yaml");
        let embedded = embed_json(file, false);
        let body = &embedded["parent"]["body"];
        assert_eq!(
            body.as_str().map(|s| serde_json::from_str::<serde_json::Value>(s).ok()),
            Some(Some(serde_json::json!({"spec": {"size": 3}})))
        );
        let Value::Tagged(apply) = &embedded["actions"][0] else { panic!("tagged") };
        assert!(apply.value.as_str().is_some_and(|s| s.contains("\"replicas\":3")));
        let Value::Tagged(requeue) = &embedded["actions"][1] else { panic!("tagged") };
        assert_eq!(requeue.value, Value::from(5));
        let unfolded = unfold_json(embedded["actions"].clone());
        let Value::Tagged(apply) = &unfolded[0] else { panic!("tagged") };
        assert_eq!(apply.value["spec"]["replicas"], Value::from(3));
    }
}
