//! The `ConfigReload` resource (`reloader.example.com/v1alpha1`, namespaced). The policy
//! decodes its spec and status with these types; native builds also derive the CRD
//! from them (`reloader-crdgen`), so the schema cannot drift from what the policy reads.

use policy_sdk::Condition;
use serde::{Deserialize, Serialize};

/// Rolls a Deployment whenever a ConfigMap or Secret its pod template uses changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(
        group = "reloader.example.com",
        version = "v1alpha1",
        kind = "ConfigReload",
        namespaced,
        status = "ConfigReloadStatus",
        printcolumn = r#"{"name":"Deployment","type":"string","jsonPath":".spec.deployment"}"#,
        printcolumn = r#"{"name":"Reloads","type":"integer","jsonPath":".status.reloads","description":"Rolls done"}"#,
        printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReloadSpec {
    /// The name of a Deployment in the ConfigReload's namespace. Every ConfigMap and
    /// Secret its pod template mounts or reads into the environment is watched.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(length(min = 1, max = 253)))]
    pub deployment: String,
}

/// What the policy observed, and the rolls it did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigReloadStatus {
    /// The `metadata.generation` this status reflects.
    #[serde(default)]
    pub observed_generation: i64,
    /// The SHA-256 (hex) of the watched objects' contents, as last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The objects watched, as `ConfigMap/name` and `Secret/name`, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watching: Vec<String>,
    /// How many times the Deployment was rolled.
    #[serde(default)]
    pub reloads: i64,
    /// When it was last rolled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload_time: Option<String>,
    /// `Ready`: the Deployment exists and its configuration is watched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
    /// Written by the operator: the digest of the policy that decided last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
}

/// The CRD, as YAML (what `reloader-crdgen` prints and `manifests/crd/configreload.yaml` holds).
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    Ok(format!("---\n{}", serde_yaml::to_string(&policy_sdk::crd::observed(ConfigReload::crd()))?))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd/configreload.yaml");
        let generated = super::crd_yaml().expect("CRD serializes");
        assert!(
            committed == generated,
            "manifests/crd/configreload.yaml is out of date with guest-reloader/src/types.rs: run `make manifests`"
        );
    }
}
