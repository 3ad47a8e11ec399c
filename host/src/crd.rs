//! The custom resources, as Rust types: the single source of the CRD YAML
//! (`podset-host crd`, `make manifests`; a test fails when manifests/crd.yaml drifts).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::core::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every resource here.
pub const GROUP: &str = "app.example.com";

/// A set of identical pods kept at `spec.replicas` by a reconcile policy.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "PodSet",
    namespaced,
    shortname = "ps",
    status = "PodSetStatus",
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","description":"Pods requested"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas","description":"Active pods that are ready"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".status.policyDigest","description":"Digest of the policy that decided last"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodSetSpec {
    /// Number of pods to keep active (Pending or Running, not terminating).
    #[schemars(range(min = 1, max = 10))]
    pub replicas: i32,

    /// Template of the pods. Without one, pods run busybox `sleep 3600`. Whatever the
    /// template says, pods get the PodSet's selector label, an owner reference, and the
    /// restricted security context.
    // Absent rather than null (never serialized as null): schema of the inner type, so
    // the published OpenAPI keeps its type and `kubectl explain` can describe it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PodTemplateSpec")]
    pub template: Option<PodTemplateSpec>,

    /// The ReconcilePolicy (same namespace) that decides for this PodSet. Without it,
    /// the operator's default policy decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PolicyRef")]
    pub policy_ref: Option<PolicyRef>,
}

/// Names a ReconcilePolicy in the PodSet's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PolicyRef {
    /// Name of the ReconcilePolicy.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Observed state, written by the operator.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetStatus {
    /// Names of the active pods, sorted.
    #[serde(default)]
    pub pod_names: Vec<String>,

    /// Active pods whose Ready condition is True.
    #[serde(default)]
    pub available_replicas: i32,

    /// The `metadata.generation` the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub observed_generation: Option<i64>,

    /// `Available` (from the policy) and `PolicyFailed` (from the operator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// `sha256:<hex>` of the policy module that made the last decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub policy_digest: Option<String>,
}

/// A reconcile policy module published in the cluster: the Wasm component is the
/// `binaryData` entry of a ConfigMap, pinned by its digest. PodSets select it with
/// `spec.policyRef.name`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "ReconcilePolicy",
    namespaced,
    shortname = "rpol",
    status = "ReconcilePolicyStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Loaded","type":"string","jsonPath":".status.loadedDigest","description":"Digest of the module serving"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicySpec {
    /// Where the module is: a key of a ConfigMap's `binaryData` in this namespace.
    pub config_map_ref: ConfigMapKeyRef,
    /// The module's digest, `sha256:<64 hex>`. A module with another digest is refused,
    /// so what runs is exactly what was reviewed.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub sha256: String,
}

/// A key of a ConfigMap in the policy's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The `binaryData` key holding the module.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// Written by the operator.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicyStatus {
    /// Digest of the module serving now: the last one that loaded, even when a newer
    /// one was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub loaded_digest: Option<String>,
    /// The `metadata.generation` last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub observed_generation: Option<i64>,
    /// `Ready` (a module is serving) and `Failed` (the current spec could not be loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Every CRD this operator serves, as one multi-document YAML.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in [PodSet::crd(), ReconcilePolicy::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd.yaml");
        let generated = crds_yaml().expect("CRDs serialize");
        assert!(
            committed == generated,
            "manifests/crd.yaml is out of date with host/src/crd.rs: run `make manifests` and commit the result"
        );
    }

    #[test]
    fn replicas_schema_is_bounded_like_the_seeds() {
        let crd = serde_json::to_value(PodSet::crd()).expect("CRD serializes");
        let replicas =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
        assert_eq!(replicas["minimum"].as_f64(), Some(1.0));
        assert_eq!(replicas["maximum"].as_f64(), Some(10.0));
        assert!(crd["spec"]["versions"][0]["subresources"]["status"].is_object());
    }
}
