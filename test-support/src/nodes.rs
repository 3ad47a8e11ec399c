//! The cluster's nodes: the simulated one (for scale) and, where tests need it, a
//! real one.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::poll::eventually_ok;

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
    require_node(client, "podset.dev/simulated=true", "a Ready node registered by podset-node-sim").await
}
