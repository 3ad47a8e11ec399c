//! Registration of the simulated Node and its Ready heartbeat.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::json;
use tracing::{info, warn};

/// The label that selects, and the taint that reserves, the simulated node.
pub const SIMULATED: &str = "podset.dev/simulated";

/// Keeps the Node registered and Ready for as long as it runs. Errors are logged and retried
/// on the next tick: the apiserver may come and go, and someone may delete the Node.
/// `tainted`: whether only pods that tolerate [`SIMULATED`] may land here (with a real node
/// beside it), or every pod (the only node).
pub async fn heartbeat(client: Client, name: String, interval: Duration, tainted: bool) {
    let api: Api<Node> = Api::all(client);
    let mut registered = false;
    loop {
        let beaten = if registered { beat(&api, &name, tainted).await } else { register(&api, &name, tainted).await };
        match beaten {
            Ok(()) if !registered => {
                info!(node = %name, "node registered and Ready");
                registered = true;
            }
            Ok(()) => {}
            Err(e) => {
                warn!(node = %name, error = %e, "node heartbeat failed; retrying");
                registered = false;
            }
        }
        // Retry quickly until the first success so pods are not bound to a missing node for long.
        tokio::time::sleep(if registered { interval } else { Duration::from_secs(1) }).await;
    }
}

async fn beat(api: &Api<Node>, name: &str, tainted: bool) -> Result<(), Error> {
    match patch_status(api, name).await {
        Err(Error::Api(s)) if s.is_not_found() => {
            create(api, name, tainted).await?;
            patch_status(api, name).await
        }
        other => other,
    }
}

/// The first beat also sets the taints on a Node that outlived an earlier simulator (the
/// control plane keeps its objects across restarts; one started with the real node beside
/// it, the other without).
async fn register(api: &Api<Node>, name: &str, tainted: bool) -> Result<(), Error> {
    beat(api, name, tainted).await?;
    let patch = json!({ "spec": { "taints": taints(tainted) } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop)
}

/// Only pods that ask for a simulated node (a toleration and the label) land on a tainted
/// one; every other pod goes to a real node.
fn taints(tainted: bool) -> Option<Vec<Taint>> {
    tainted.then(|| {
        vec![Taint {
            key: SIMULATED.to_owned(),
            value: Some("true".to_owned()),
            effect: "NoSchedule".to_owned(),
            ..Default::default()
        }]
    })
}

async fn create(api: &Api<Node>, name: &str, tainted: bool) -> Result<(), Error> {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                [
                    ("kubernetes.io/hostname".to_owned(), name.to_owned()),
                    ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                    (SIMULATED.to_owned(), "true".to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec { taints: taints(tainted), ..Default::default() }),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &node).await {
        // Another simulator instance (or a restart race) created it first: fine.
        Err(Error::Api(s)) if s.is_already_exists() => Ok(()),
        other => other.map(drop),
    }
}

/// The status a kubelet would post: capacity, addresses and a fresh Ready condition.
/// A merge patch replaces the condition list wholesale, which is what we want: we own it.
async fn patch_status(api: &Api<Node>, name: &str) -> Result<(), Error> {
    let now = Time(Timestamp::now());
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({
            "type": type_, "status": status, "reason": reason,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    // Room for `make bench`'s largest curve point, 20 000 PodSets × 2 pods: at 10 000
    // pods its last 30 000 stayed Pending (2026-11-29).
    let resources = json!({ "cpu": "16", "memory": "64Gi", "pods": "100000", "ephemeral-storage": "100Gi" });
    let patch = json!({
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "addresses": [
                { "type": "InternalIP", "address": "127.0.0.1" },
                { "type": "Hostname", "address": name },
            ],
            "conditions": [
                condition("Ready", "True", "KubeletReady"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop)
}
