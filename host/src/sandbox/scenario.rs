//! Scenario files: one policy input and the decision expected for it, run against the
//! compiled module (`podset-host policy test`). The input and actions are the WIT
//! records of the policy's world, with fields in snake_case and variants as YAML tags.
//! In the any-kind world every JSON string of the contract (an object's `body`, the
//! payload of `!Create`, `!Apply` and `!UpdateStatus`) is written as YAML instead, and
//! expected JSON compares by value, not by text.
//!
//! ```yaml
//! name: scale from zero
//! input: { podset: {...}, pods: [...], in_flight: {...}, now: 0 }
//! expect:
//!   actions: [...]          # the exact list, in order
//!   # or: error: PolicyRefused   (the expected Error::reason())
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;
use serde_yaml::value::TaggedValue;
use similar::TextDiff;

use super::{Actions, Error, Input, Policy};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    input: Value,
    expect: Expect,
}

/// Exactly one of the two.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// The exact action list.
    #[serde(default)]
    actions: Option<Value>,
    /// The reason of the expected failure (see `Error::reason`).
    #[serde(default)]
    error: Option<String>,
}

/// Why a scenario did not pass.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("cannot read scenario {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("scenario {path} is not valid: {source}")]
    Parse { path: PathBuf, source: serde_yaml::Error },
    #[error("scenario {path}: `expect` needs exactly one of `actions` and `error`")]
    Ambiguous { path: PathBuf },
    #[error("the scenario's input is not an input of the policy's world: {0}")]
    Input(serde_yaml::Error),
    #[error("the scenario's expected actions are not actions of the policy's world: {0}")]
    Actions(serde_yaml::Error),
    #[error("expected error {expected}, got actions:\n{actual}")]
    UnexpectedSuccess { expected: String, actual: String },
    #[error("expected actions, got error {reason}: {error}")]
    UnexpectedError { reason: &'static str, error: Error },
    #[error("expected error {expected}, got error {reason}: {error}")]
    WrongError { expected: String, reason: &'static str, error: Error },
    #[error("actions differ (- expected, + actual):\n{diff}")]
    Mismatch { diff: String },
}

impl Scenario {
    pub fn read(path: &Path) -> Result<Self, Failure> {
        let text = std::fs::read_to_string(path).map_err(|source| Failure::Read { path: path.into(), source })?;
        let s: Scenario = serde_yaml::from_str(&text).map_err(|source| Failure::Parse { path: path.into(), source })?;
        if s.expect.actions.is_some() == s.expect.error.is_some() {
            return Err(Failure::Ambiguous { path: path.into() });
        }
        Ok(s)
    }

    /// The scenario's input in `policy`'s world.
    pub fn input(&self, policy: &Policy) -> Result<Input, Failure> {
        input_for(policy, self.input.clone())
    }

    /// Runs the scenario once against `policy`.
    pub fn check(&self, policy: &Policy) -> Result<(), Failure> {
        let input = self.input(policy)?;
        match (&self.expect.actions, &self.expect.error, policy.decide(&input)) {
            (Some(expected), _, Ok(decision)) => {
                let expected = readable(&expected_actions(policy, expected.clone())?);
                let actual = readable(&decision.actions);
                if expected == actual {
                    return Ok(());
                }
                Err(Failure::Mismatch { diff: diff(&to_yaml(&expected), &to_yaml(&actual)) })
            }
            (Some(_), _, Err(error)) => Err(Failure::UnexpectedError { reason: error.reason(), error }),
            (None, expected, Ok(decision)) => Err(Failure::UnexpectedSuccess {
                expected: expected.clone().unwrap_or_default(),
                actual: to_yaml(&readable(&decision.actions)),
            }),
            (None, Some(expected), Err(error)) if error.reason() == expected => Ok(()),
            (None, expected, Err(error)) => Err(Failure::WrongError {
                expected: expected.clone().unwrap_or_default(),
                reason: error.reason(),
                error,
            }),
        }
    }
}

/// Reads `value` (an input file's YAML) as an input of `policy`'s world.
pub fn input_for(policy: &Policy, value: Value) -> Result<Input, Failure> {
    if policy.is_podset_world() {
        serde_yaml::from_value(value).map(Input::PodSet).map_err(Failure::Input)
    } else {
        serde_yaml::from_value(embed_json(value, false)).map(Input::Reconcile).map_err(Failure::Input)
    }
}

fn expected_actions(policy: &Policy, value: Value) -> Result<Actions, Failure> {
    if policy.is_podset_world() {
        serde_yaml::from_value(value).map(Actions::PodSet).map_err(Failure::Actions)
    } else {
        serde_yaml::from_value(embed_json(value, false)).map(Actions::Reconcile).map_err(Failure::Actions)
    }
}

/// The contract's JSON fields, written as YAML in a file, as the JSON strings the
/// contract carries. `payload` is true inside a tag whose payload is JSON.
fn embed_json(value: Value, payload: bool) -> Value {
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

fn diff(expected: &str, actual: &str) -> String {
    TextDiff::from_lines(expected, actual).unified_diff().context_radius(3).header("expected", "actual").to_string()
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
