//! The `Tenant` resource (`tenancy.example.com/v1alpha1`, cluster-scoped). The policy
//! decodes its spec and status with these types; native builds also derive the CRD
//! from them (`tenant-crdgen`), so the schema cannot drift from what the policy reads.

use policy_sdk::Condition;
use serde::{Deserialize, Serialize};

/// A team's namespace: named after the Tenant, restricted, with a quota, default
/// limits, the team's group as editors and no traffic but what the team allows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(
        group = "tenancy.example.com",
        version = "v1alpha1",
        kind = "Tenant",
        status = "TenantStatus",
        printcolumn = r#"{"name":"Namespace","type":"string","jsonPath":".status.namespace","description":"The tenant's namespace"}"#,
        printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpec {
    /// The group (as the API server's authenticator names it) bound to the `edit`
    /// ClusterRole in the tenant's namespace.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(length(min = 1, max = 253)))]
    pub group: String,
    /// What the namespace may hold in total.
    #[serde(default)]
    pub quota: Quota,
}

/// The ResourceQuota's `hard` limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Quota {
    /// `requests.cpu` and `limits.cpu`, a Kubernetes quantity.
    pub cpu: String,
    /// `requests.memory` and `limits.memory`, a Kubernetes quantity.
    pub memory: String,
    /// Pods at most.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 0, max = 10000)))]
    pub pods: i32,
}

impl Default for Quota {
    fn default() -> Self {
        Quota { cpu: "4".into(), memory: "8Gi".into(), pods: 20 }
    }
}

/// What the policy observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// The tenant's namespace, once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The objects in place, as `Kind/name`, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready: Vec<String>,
    /// `Ready`: the namespace is active and everything in it is in place.
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

/// The CRD, as YAML (what `tenant-crdgen` prints and `manifests/crd/tenant.yaml` holds).
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    Ok(format!("---\n{}", serde_yaml::to_string(&policy_sdk::crd::observed(Tenant::crd()))?))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd/tenant.yaml");
        let generated = super::crd_yaml().expect("CRD serializes");
        assert!(
            committed == generated,
            "manifests/crd/tenant.yaml is out of date with guest-tenant/src/types.rs: run `make manifests`"
        );
    }
}
