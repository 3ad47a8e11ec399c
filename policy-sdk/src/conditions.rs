//! Status conditions as the Kubernetes API conventions want them (`metav1.Condition`):
//! one per type, and `lastTransitionTime` moves only when the status does — else every
//! reconcile would rewrite the status.

use serde::{Deserialize, Serialize};

/// `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Available`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason for the last transition.
    pub reason: String,
    /// A human-readable message (may be empty).
    pub message: String,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
    /// The `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(with = "i64"))]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition as of `now` (milliseconds, `input.now`).
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>, now: i64) -> Self {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: crate::time::rfc3339(now),
            observed_generation: None,
        }
    }

    pub fn generation(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Puts `new` into `conditions` in place of any condition of its type, keeping the old
/// `lastTransitionTime` when the status did not change. The list stays sorted by type.
pub fn set(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(old) = conditions.iter().find(|c| c.type_ == new.type_ && c.status == new.status) {
        new.last_transition_time = old.last_transition_time.clone();
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_the_status_does() {
        let mut list = vec![Condition::new("Available", false, "Creating", "", 1_000)];
        set(&mut list, Condition::new("Available", false, "Scaling", "2 of 3", 9_000));
        assert_eq!(list[0].last_transition_time, crate::time::rfc3339(1_000));
        assert_eq!(list[0].reason, "Scaling");
        set(&mut list, Condition::new("Available", true, "Ready", "", 20_000));
        assert_eq!(list[0].last_transition_time, crate::time::rfc3339(20_000));
        set(&mut list, Condition::new("Degraded", false, "Fine", "", 20_000));
        assert_eq!(list.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["Available", "Degraded"]);
    }
}
