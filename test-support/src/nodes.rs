//! The cluster's nodes: the simulated one (for scale) and, where tests need it, a
//! real one.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::poll::eventually_ok;

/// The label that selects, and the taint that reserves, podset-node-sim's node
/// (node-sim/src/node.rs). Pods go there only when they ask to.
pub const SIMULATED: &str = "podset.dev/simulated";

/// The label `hack/node.sh` gives the real node (kubelet and containerd).
pub const REAL: &str = "podset.dev/real";

/// A pod spec's ask for the simulated node: its label and a toleration of its taint.
/// Tests that create many pods or need scripted phases use it; pods without it run
/// for real.
pub fn on_simulated_node(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    use k8s_openapi::api::core::v1::Toleration;
    spec.node_selector.get_or_insert_default().insert(SIMULATED.into(), "true".into());
    spec.tolerations.get_or_insert_default().push(Toleration {
        key: Some(SIMULATED.into()),
        operator: Some("Equal".into()),
        value: Some("true".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    });
}

/// Waits for a Ready node with `label` (`key=value`) and returns its name, so a failure
/// of a pod test points at a missing node instead of at a pod that "never ran".
pub async fn require_node(client: &Client, label: &str, what: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    eventually_ok(what, Duration::from_secs(30), || async {
        let list = nodes.list(&ListParams::default().labels(label)).await.map_err(|e| e.to_string())?;
        list.items
            .into_iter()
            .find(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .and_then(|n| n.metadata.name)
            .ok_or_else(|| format!("no Ready node labelled {label}"))
    })
    .await
}

/// The node simulator's node (see `hack/cluster.sh status` when it is missing).
pub async fn require_sim_node(client: &Client) -> String {
    require_node(client, &format!("{SIMULATED}=true"), "a Ready node registered by podset-node-sim").await
}

/// The real node (kubelet and containerd, `hack/node.sh`). Tests that need a process to
/// run fail here, naming the node, when it is missing: they never skip.
pub async fn require_real_node(client: &Client) -> String {
    require_node(client, &format!("{REAL}=true"), "a Ready real node (hack/cluster.sh starts one unless REAL_NODE=0)")
        .await
}
