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
use similar::TextDiff;

use super::compare::{Normal, Side};
use super::schemas::Schemas;
use super::yaml::{embed_json, podset_input_of_0_2, readable, reconcile_input_of_0_3, to_yaml, unfold_bodies};
use crate::sandbox::{Actions, Error, Input, Policy};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    /// The digest of the module whose decision `expect` holds (a recorded decision).
    #[serde(default)]
    pub digest: Option<String>,
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
    #[error("the kinds' schemas refuse what it decided:\n{}", .0.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n"))]
    Schema(Vec<super::validate::Refused>),
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

    /// The expected decision, in the form [`compare`](super::compare::compare) compares.
    pub fn expected(&self, policy: &Policy) -> Result<Side, Failure> {
        match (&self.expect.actions, &self.expect.error) {
            (Some(actions), _) => {
                let parent_namespace = self.input(policy)?.parent_namespace().to_string();
                Ok(Ok(Normal::of_actions(&expected_actions(policy, actions.clone())?, &parent_namespace)))
            }
            (None, error) => Ok(Err(error.clone().unwrap_or_default())),
        }
    }

    /// Runs the scenario once against `policy`; with `schemas`, its output is checked
    /// against the schemas of the kinds it writes too.
    pub fn check(&self, policy: &Policy, schemas: Option<&Schemas>) -> Result<(), Failure> {
        let input = self.input(policy)?;
        match (&self.expect.actions, &self.expect.error, policy.decide(&input)) {
            (Some(expected), _, Ok(decision)) => {
                let expected = readable(&expected_actions(policy, expected.clone())?);
                let actual = readable(&decision.actions);
                if expected != actual {
                    return Err(Failure::Mismatch { diff: diff(&to_yaml(&expected), &to_yaml(&actual)) });
                }
                let refused = schemas.map(|s| super::validate::check(s, &input, &decision.actions).refused);
                match refused {
                    Some(refused) if !refused.is_empty() => Err(Failure::Schema(refused)),
                    _ => Ok(()),
                }
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

/// What `policy` decides for `input`, in the form [`compare`](super::compare::compare) compares.
pub fn decided(policy: &Policy, input: &Input) -> Side {
    let parent_namespace = input.parent_namespace();
    policy.decide(input).map(|d| Normal::of_actions(&d.actions, parent_namespace)).map_err(|e| e.reason().to_string())
}

/// A decision as a scenario file (`policy test` and `policy replay` read it): `input`,
/// what the policy returned as `expect`, and the module's digest.
pub fn write(name: &str, digest: &str, input: &Input, outcome: Result<&Actions, &str>) -> String {
    let input = match input {
        Input::PodSet(i) => serde_yaml::to_value(i),
        Input::Reconcile(i) => serde_yaml::to_value(i),
    }
    .map(unfold_bodies)
    .unwrap_or(Value::Null);
    let mut expect = serde_yaml::Mapping::new();
    match outcome {
        Ok(actions) => expect.insert("actions".into(), readable(actions)),
        Err(reason) => expect.insert("error".into(), reason.into()),
    };
    let mut file = serde_yaml::Mapping::new();
    file.insert("name".into(), name.into());
    file.insert("digest".into(), digest.into());
    file.insert("input".into(), input);
    file.insert("expect".into(), Value::Mapping(expect));
    to_yaml(&Value::Mapping(file))
}

/// Reads `value` (an input file's YAML) as an input of `policy`'s world.
pub fn input_for(policy: &Policy, value: Value) -> Result<Input, Failure> {
    if policy.is_podset_world() {
        serde_yaml::from_value(podset_input_of_0_2(value)).map(Input::PodSet).map_err(Failure::Input)
    } else {
        serde_yaml::from_value(embed_json(reconcile_input_of_0_3(value), false))
            .map(Input::Reconcile)
            .map_err(Failure::Input)
    }
}

fn expected_actions(policy: &Policy, value: Value) -> Result<Actions, Failure> {
    if policy.is_podset_world() {
        serde_yaml::from_value(value).map(Actions::PodSet).map_err(Failure::Actions)
    } else {
        serde_yaml::from_value(embed_json(value, false)).map(Actions::Reconcile).map_err(Failure::Actions)
    }
}

fn diff(expected: &str, actual: &str) -> String {
    TextDiff::from_lines(expected, actual).unified_diff().context_radius(3).header("expected", "actual").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, body: &str) -> crate::contract::bindings::reconciler::Object {
        use crate::contract::bindings::GroupVersionKind;
        use crate::contract::bindings::reconciler::{Object, ObjectMeta};
        Object {
            kind: GroupVersionKind { group: "cache.example.com".into(), version: "v1alpha1".into(), kind: kind.into() },
            meta: ObjectMeta {
                name: "m".into(),
                namespace: "ns".into(),
                uid: "u".into(),
                generation: 2,
                resource_version: "7".into(),
                labels: vec![],
                annotations: vec![],
                created_at: 1,
                deleting: false,
                finalizers: vec!["f".into()],
            },
            body: body.into(),
        }
    }

    #[test]
    fn a_written_scenario_reads_back_as_the_same_input_and_actions() {
        use crate::contract::bindings::GroupVersionKind;
        use crate::contract::bindings::reconciler::{Action, Answer, InFlight, Input as RInput, Lookup, LookupMatch};
        let input = Input::Reconcile(RInput {
            parent: object("Memcached", r#"{"spec":{"size":3},"status":{"nodes":["a"]}}"#),
            children: vec![object("Deployment", r#"{"spec":{"replicas":3}}"#)],
            related: vec![],
            looked_up: vec![Answer {
                lookup: Lookup {
                    kind: GroupVersionKind { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() },
                    namespace: "".into(),
                    match_: LookupMatch::Name("settings".into()),
                },
                objects: vec![object("ConfigMap", r#"{"data":{"a":"1"}}"#)],
            }],
            in_flight: InFlight { creations: vec![], deletions: vec![] },
            now: 1_700_000_000_000,
        });
        let Input::Reconcile(original) = &input else { unreachable!() };
        let actions = Actions::Reconcile(vec![
            Action::Apply(r#"{"kind":"Deployment","spec":{"replicas":3}}"#.into()),
            Action::RequeueAfter(5),
            Action::LookUp(original.looked_up[0].lookup.clone()),
        ]);
        let text = write("Memcached ns/m", "sha256:00", &input, Ok(&actions));
        assert!(text.contains("match_: !Name settings"), "a lookup reads as YAML:\n{text}");
        assert!(text.contains("size: 3"), "bodies are written as YAML:\n{text}");
        let s: Scenario = serde_yaml::from_str(&text).expect("a scenario");
        assert_eq!(s.digest.as_deref(), Some("sha256:00"));
        let back: crate::contract::bindings::reconciler::Input =
            serde_yaml::from_value(embed_json(s.input.clone(), false)).expect("input");
        assert_eq!(back.parent.meta, original.parent.meta);
        assert_eq!(back.looked_up[0].lookup, original.looked_up[0].lookup);
        assert_eq!(back.looked_up[0].objects[0].meta, original.looked_up[0].objects[0].meta);
        for (b, o) in [(&back.parent.body, &original.parent.body), (&back.children[0].body, &original.children[0].body)]
        {
            let (b, o): (serde_json::Value, serde_json::Value) =
                (serde_json::from_str(b).expect("json"), serde_json::from_str(o).expect("json"));
            assert_eq!(b, o);
        }
        let expected: Vec<Action> =
            serde_yaml::from_value(embed_json(s.expect.actions.clone().expect("actions"), false)).expect("actions");
        assert_eq!(
            crate::scenario::compare::Normal::of_actions(&Actions::Reconcile(expected), "ns"),
            crate::scenario::compare::Normal::of_actions(&actions, "ns")
        );
        let failed = write("x", "sha256:00", &input, Err("PolicyTrapped"));
        let s: Scenario = serde_yaml::from_str(&failed).expect("a scenario");
        assert_eq!(s.expect.error.as_deref(), Some("PolicyTrapped"));
    }

    #[test]
    fn a_podset_input_written_for_contract_0_2_still_reads() {
        use crate::contract::bindings::podset::Input as PInput;
        // A pod as 0.2.0 wrote it, with the `uid` and `labels` 0.3.0 dropped.
        let old = "podset: {name: web, namespace: ns, uid: u, generation: 1, labels: [], replicas: 1,\n  \
                   status: {pod_names: [], available_replicas: 0, observed_generation: 0, conditions: []}}\n\
                   pods:\n- {name: web-a, uid: a, phase: Running, ready: true, deleting: false, node_name: n1, \
                   created_at: 1000, labels: [{key: app, value: web}], restart_count: 2}\n\
                   in_flight: {creations: 0, deletions: []}\nnow: 5\n";
        let value: Value = serde_yaml::from_str(old).expect("yaml");
        let input: PInput = serde_yaml::from_value(podset_input_of_0_2(value)).expect("a 0.2.0 input reads");
        assert_eq!((input.pods[0].name.as_str(), input.pods[0].restart_count), ("web-a", 2));
        assert!(input.pods[0].scheduled, "a node name means scheduled");
        let unscheduled = old.replace("node_name: n1", "node_name: null");
        let value: Value = serde_yaml::from_str(&unscheduled).expect("yaml");
        let input: PInput = serde_yaml::from_value(podset_input_of_0_2(value)).expect("a 0.2.0 input reads");
        assert!(!input.pods[0].scheduled);
    }
}
