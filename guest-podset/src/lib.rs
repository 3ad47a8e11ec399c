//! The default PodSet reconcile policy.
//!
//! It keeps `spec.replicas` active pods (Pending or Running, not terminating), scales
//! down in ReplicaSet order, and reports status only when it changed. The decision is a
//! pure function of the input the host sends (see `wit/policy.wit`); `decide.rs` holds
//! it, this file only wires it to the component's exports.

wit_bindgen::generate!({
    path: "../wit",
    world: "podset-policy",
    // Status is compared with the current one so a converged PodSet yields no actions.
    additional_derives: [PartialEq],
});

pub mod decide;

use exports::podset::policy::identity::Guest as Identity;
use exports::podset::policy::podset::{Action, Guest, Input};
use podset::policy::log::{Level, log};
use podset::policy::types::{Declarations, GroupVersionKind, PolicyError, PolicyInfo};

struct PodSetPolicy;

impl Identity for PodSetPolicy {
    fn info() -> PolicyInfo {
        let kind = |group: &str, version: &str, kind: &str| GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        };
        PolicyInfo {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            contract: policy_sdk::contract_version(),
            declares: Declarations {
                parent: kind("app.example.com", "v1alpha1", "PodSet"),
                children: vec![kind("", "v1", "Pod")],
                related: Vec::new(),
                finalizer: None,
                lookups: Vec::new(),
            },
        }
    }
}

impl Guest for PodSetPolicy {
    fn decide(input: Input) -> Result<Vec<Action>, PolicyError> {
        // A panic aborts the instance; route its message to the host's log first so the
        // operator's PolicyFailed report says what went wrong, not just "unreachable".
        std::panic::set_hook(Box::new(|info| log(Level::Error, &info.to_string())));
        let actions = decide::decide(&input)?;
        if !actions.is_empty() {
            log(
                Level::Debug,
                &format!("{}/{}: {} action(s)", input.podset.namespace, input.podset.name, actions.len()),
            );
        }
        Ok(actions)
    }
}

// Only the wasm32 build exports: component export names (`podset:policy/policy@…`)
// are not valid symbols for a native shared library, and native builds are for tests.
#[cfg(target_arch = "wasm32")]
export!(PodSetPolicy);
