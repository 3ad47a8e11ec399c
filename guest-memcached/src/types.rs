//! The `Memcached` resource (`cache.example.com/v1alpha1`). The policy decodes its
//! spec and status with these types; native builds also derive the CRD from them
//! (`memcached-crdgen`), so the schema cannot drift from what the policy reads.

use policy_sdk::Condition;
use serde::{Deserialize, Serialize};

/// A memcached cluster: a Deployment of `size` memcached pods.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(
        group = "cache.example.com",
        version = "v1alpha1",
        kind = "Memcached",
        namespaced,
        shortname = "mc",
        status = "MemcachedStatus",
        printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size","description":"Pods requested"}"#,
        printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
        printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".status.policyDigest","description":"Digest of the policy that decided last"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached pods. The operator-sdk sample's marker says at most 3, but
    /// its own walkthrough scales to 5: 5 it is.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 1, max = 5)))]
    pub size: i32,
    /// The port memcached listens on in its pods.
    #[serde(default = "default_port")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 1, max = 65535)))]
    pub container_port: i32,
}

fn default_port() -> i32 {
    11211
}

/// What the policy observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// `Available` (every pod ready), `Progressing` (a rollout or scaling under way),
    /// `Degraded` (being finalized, or the Deployment reports a failure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
    /// Names of the memcached pods, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Written by the operator: the digest of the policy that decided last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
}

/// The CRD, as YAML (what `memcached-crdgen` prints and `manifests/crd/memcached.yaml` holds).
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    Ok(format!("---\n{}", serde_yaml::to_string(&policy_sdk::crd::observed(Memcached::crd()))?))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd/memcached.yaml");
        let generated = super::crd_yaml().expect("CRD serializes");
        assert!(
            committed == generated,
            "manifests/crd/memcached.yaml is out of date with guest-memcached/src/types.rs: run `make manifests`"
        );
    }
}
