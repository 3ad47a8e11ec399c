//! The `Netperf` resource (`app.example.com/v1alpha1`). The policy decodes its spec
//! and status with these types; native builds also derive the CRD from them
//! (`netperf-crdgen`), so the schema cannot drift from what the policy reads.

use policy_sdk::Condition;
use serde::{Deserialize, Serialize};

/// A TCP throughput test between a server pod and a client pod.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(
        group = "app.example.com",
        version = "v1alpha1",
        kind = "Netperf",
        namespaced,
        status = "NetperfStatus",
        printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.status","description":"Initial, Server, Test, Done or Error"}"#,
        printcolumn = r#"{"name":"Speed","type":"integer","jsonPath":".status.speedBitsPerSec","description":"Measured throughput, bits per second"}"#,
        printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".status.policyDigest","description":"Digest of the policy that decided last"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NetperfSpec {
    /// The node the server pod runs on; the scheduler places it when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_node: Option<String>,
    /// The node the client pod runs on; the scheduler places it when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_node: Option<String>,
    /// How long the client sends, in seconds.
    #[serde(default = "default_duration")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 1, max = 60)))]
    pub duration: i32,
}

fn default_duration() -> i32 {
    10
}

/// Where a test is. Each phase's step is taken once; the status is the only memory
/// the policy has between calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
pub enum Phase {
    /// Nothing done yet.
    #[default]
    Initial,
    /// The server pod was created; waiting for it to serve.
    Server,
    /// The client pod was created; waiting for its result.
    Test,
    /// Measured: `speedBitsPerSec` holds the result, the pods are gone.
    Done,
    /// Failed: `message` says why, the pods are gone.
    Error,
}

impl Phase {
    pub fn finished(self) -> bool {
        matches!(self, Phase::Done | Phase::Error)
    }
}

/// The test's state and result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetperfStatus {
    /// The phase (named `status` as in the operator this reproduces).
    #[serde(default)]
    pub status: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_pod: Option<String>,
    /// The TCP throughput the receiver measured, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_bits_per_sec: Option<i64>,
    /// Why the test failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `Complete`: True once Done or Error (reason `Measured` or why it failed).
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

/// The CRD, as YAML (what `netperf-crdgen` prints and `manifests/crd/netperf.yaml` holds).
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    Ok(format!("---\n{}", serde_yaml::to_string(&policy_sdk::crd::observed(Netperf::crd()))?))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd/netperf.yaml");
        let generated = super::crd_yaml().expect("CRD serializes");
        assert!(
            committed == generated,
            "manifests/crd/netperf.yaml is out of date with guest-netperf/src/types.rs: run `make manifests`"
        );
    }
}
