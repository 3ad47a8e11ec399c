//! A decision's output against the schemas of the kinds it writes: what
//! `policy test --schemas`, `policy replay --schemas` and a shadow's decisions report.
//! The any-kind world's bodies are checked (a create whole, an apply as the partial
//! object it is, a status against the parent kind's status schema); the PodSet world's
//! typed actions are the host's to turn into objects, and are not.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use super::schemas::{Gvk, Schemas, Violation};
use crate::contract::bindings::reconciler::Action;
use crate::sandbox::{Actions, Input};

/// One action the schemas refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Its place in the decision, from 1.
    pub action: usize,
    /// `create apps/v1 Deployment web`, `update-status`.
    pub what: String,
    pub violations: Vec<Violation>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "action {} ({}): {v}", self.action, self.what)?;
        }
        Ok(())
    }
}

/// What a check of a decision found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub refused: Vec<Refused>,
    /// The kinds written that no schema was known for: not checked.
    pub unknown: BTreeSet<String>,
}

/// Checks the bodies of `actions`, decided on `input`, against `schemas`.
pub fn check(schemas: &Schemas, input: &Input, actions: &Actions) -> Checked {
    let mut out = Checked::default();
    let (Input::Reconcile(input), Actions::Reconcile(actions)) = (input, actions) else { return out };
    let k = &input.parent.kind;
    let parent = Gvk { group: k.group.clone(), version: k.version.clone(), kind: k.kind.clone() };
    for (i, action) in actions.iter().enumerate() {
        let (verb, body, partial) = match action {
            Action::Create(body) => ("create", body, false),
            Action::Apply(body) => ("apply", body, true),
            Action::UpdateStatus(body) => ("update-status", body, false),
            _ => continue,
        };
        // A body that is not JSON is the host's to refuse, with its own message.
        let Ok(value) = serde_json::from_str::<Value>(body) else { continue };
        let (what, violations) = if verb == "update-status" {
            let what = format!("update-status of {parent}");
            match schemas.check_status(&parent, &value) {
                Some(v) => (what, v),
                None => {
                    out.unknown.insert(format!("{parent} status"));
                    continue;
                }
            }
        } else {
            let gvk = Gvk::of(&value);
            let name = value
                .pointer("/metadata/name")
                .or_else(|| value.pointer("/metadata/generateName"))
                .and_then(Value::as_str)
                .unwrap_or("(no name)");
            let what = match &gvk {
                Some(g) => format!("{verb} {g} {name}"),
                None => format!("{verb} {name}"),
            };
            match schemas.check(&value, partial) {
                Some(v) => (what, v),
                None => {
                    out.unknown
                        .insert(gvk.map_or_else(|| "an object without apiVersion or kind".into(), |g| g.to_string()));
                    continue;
                }
            }
        };
        if !violations.is_empty() {
            out.refused.push(Refused { action: i + 1, what, violations });
        }
    }
    out
}
