//! Scenario files: one policy input and the decision expected for it, run against the
//! compiled module (`podset-host policy test`). The input and actions are the WIT
//! records themselves, with fields in snake_case.
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
use similar::TextDiff;

use super::bindings::{Action, Input};
use super::{Error, Policy};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    pub input: Input,
    pub expect: Expect,
}

/// Exactly one of the two.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The exact action list.
    #[serde(default)]
    pub actions: Option<Vec<Action>>,
    /// The reason of the expected failure (see `Error::reason`).
    #[serde(default)]
    pub error: Option<String>,
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

    /// Runs the scenario once against `policy`.
    pub fn check(&self, policy: &Policy) -> Result<(), Failure> {
        match (&self.expect.actions, &self.expect.error, policy.decide(&self.input)) {
            (Some(expected), _, Ok(decision)) => {
                if *expected == decision.actions {
                    return Ok(());
                }
                Err(Failure::Mismatch { diff: diff(&to_yaml(expected), &to_yaml(&decision.actions)) })
            }
            (Some(_), _, Err(error)) => Err(Failure::UnexpectedError { reason: error.reason(), error }),
            (None, expected, Ok(decision)) => Err(Failure::UnexpectedSuccess {
                expected: expected.clone().unwrap_or_default(),
                actual: to_yaml(&decision.actions),
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

pub fn to_yaml(actions: &[Action]) -> String {
    serde_yaml::to_string(actions).unwrap_or_else(|e| format!("<unprintable: {e}>"))
}

fn diff(expected: &str, actual: &str) -> String {
    TextDiff::from_lines(expected, actual).unified_diff().context_radius(3).header("expected", "actual").to_string()
}
