//! {{Kind}}: a reconcile policy for podset-host.
//!
//! A `{{Kind}}` owns a ConfigMap holding `spec.data`; its status says whether the
//! ConfigMap holds it. Change `reconcile` to do what your operator does: it is a plain
//! function from what the host observed to what it should do.

use policy_sdk::conditions::{self, Condition};
use policy_sdk::{Action, Declarations, Input, Kind, PolicyError, Reconciler, Status, apply};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const {{KIND}}: Kind = Kind::new("{{group}}", "v1alpha1", "{{Kind}}");
pub const CONFIG_MAP: Kind = Kind::new("", "v1", "ConfigMap");

/// What a {{Kind}} asks for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(group = "{{group}}", version = "v1alpha1", kind = "{{Kind}}", namespaced, status = "{{Kind}}Status")
)]
#[serde(rename_all = "camelCase")]
pub struct {{Kind}}Spec {
    /// The data the owned ConfigMap holds.
    #[serde(default)]
    pub data: std::collections::BTreeMap<String, String>,
}

/// What the policy observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct {{Kind}}Status {
    /// `Ready`: the ConfigMap holds `spec.data`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub struct Policy;

impl Reconciler for Policy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        Declarations { parent: {{KIND}}.gvk(), children: vec![CONFIG_MAP.gvk()], related: Vec::new(), finalizer: None, lookups: Vec::new() }
    }

    fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
        let parent = &input.parent;
        let spec: {{Kind}}Spec = parent.spec()?;
        let current: {{Kind}}Status = parent.status()?;
        let name = format!("{}-data", parent.meta.name);
        // Re-stated every time: the host drops an apply whose fields all hold already.
        let mut actions = vec![apply(&json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name },
            "data": spec.data,
        }))?];
        let held = input.child(CONFIG_MAP, &name).map(|cm| cm.body()).transpose()?;
        let ready = held.is_some_and(|b| b.get("data").unwrap_or(&json!({})) == &json!(spec.data));
        let mut next = current.clone();
        let (reason, message) = if ready { ("Synced", "the ConfigMap holds spec.data") } else { ("Syncing", "writing the ConfigMap") };
        conditions::set(
            &mut next.conditions,
            Condition::new("Ready", ready, reason, message, input.now).generation(parent.meta.generation),
        );
        actions.extend(next.update_from(&current)?);
        Ok(actions)
    }
}

policy_sdk::export_reconciler!(Policy);

/// The CRD, as YAML (`cargo run --bin crdgen`), with the `status.observedGeneration`
/// the operator writes (GitOps tools read health from it).
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    Ok(format!("---\n{}", serde_yaml::to_string(&policy_sdk::crd::observed({{Kind}}::crd()))?))
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{input, object};

    use super::*;

    #[test]
    fn a_new_{{kind_snake}}_gets_its_config_map_and_is_not_ready_yet() {
        let parent = object({{KIND}}, "sample", json!({ "spec": { "data": { "greeting": "hello" } } }));
        let actions = Policy::reconcile(&input(parent)).expect("decides");
        let Action::Apply(cm) = &actions[0] else { panic!("applies the ConfigMap first: {actions:?}") };
        assert!(cm.contains("\"greeting\":\"hello\""), "{cm}");
        let Some(Action::UpdateStatus(status)) = actions.get(1) else { panic!("reports its status: {actions:?}") };
        assert!(status.contains("\"reason\":\"Syncing\""), "{status}");
    }
}
