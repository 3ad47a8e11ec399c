//! Shared plumbing for the control-plane tests: the client, per-test namespaces, bounded polling.

use std::fmt::Debug;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub const KUBECONFIG_VAR: &str = "PODSET_TEST_KUBECONFIG";

const HOW_TO: &str = "these tests need a running control plane: run `make test`, or \
     `hack/cluster.sh up` and then `PODSET_TEST_KUBECONFIG=$PWD/.cluster/kubeconfig cargo test -p podset-node-sim`";

/// A client for the test cluster. Panics (never skips) when there is none: a silently skipped
/// integration test reads as a passing one.
pub async fn client() -> Client {
    let path = std::env::var_os(KUBECONFIG_VAR).unwrap_or_else(|| panic!("{KUBECONFIG_VAR} is not set; {HOW_TO}"));
    let kubeconfig =
        Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("cannot read {KUBECONFIG_VAR}={path:?}: {e}; {HOW_TO}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("bad kubeconfig {path:?}: {e}; {HOW_TO}"));
    let server = config.cluster_url.clone();
    let client = Client::try_from(config).expect("building the client");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("apiserver {server} (from {path:?}) is unreachable: {e}; {HOW_TO}"),
        Err(_) => panic!("apiserver {server} (from {path:?}) did not answer in 10 s; {HOW_TO}"),
    }
}

/// A fresh namespace name, unique across tests and runs.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{}-{:x}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), nanos)
}

/// Runs `body` in a namespace of its own, and deletes the namespace afterwards even when the
/// body panics (the panic is then re-raised). The namespace controller cleans up its content.
pub async fn with_namespace<F, Fut>(prefix: &str, body: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()>,
{
    let client = client().await;
    let name = unique_name(prefix);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, ..Default::default() };
    namespaces.create(&PostParams::default(), &ns).await.unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    let outcome = AssertUnwindSafe(body(client, name.clone())).catch_unwind().await;
    if let Err(e) = namespaces.delete(&name, &DeleteParams::default()).await {
        eprintln!("warning: deleting namespace {name}: {e}");
    }
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Polls `probe` every 200 ms until it returns `Ok`, or panics after `timeout` with the last
/// `Err` it saw, so a failure says what the cluster looked like rather than just "timed out".
pub async fn eventually<T, E, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    E: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last observation: {last:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits for the node simulator's Node to be Ready, so a failure of the pod tests points at a
/// missing simulator instead of at a pod that "never became Running".
pub async fn require_sim_node(client: &Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(
        Duration::from_secs(15),
        "a Ready node registered by podset-node-sim (is it running? see `hack/cluster.sh status`)",
        || async {
            let list = nodes
                .list(&ListParams::default().labels("podset.dev/simulated=true"))
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .into_iter()
                .find(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .and_then(|n| n.metadata.name)
                .ok_or_else(|| "no Ready simulated node".to_owned())
        },
    )
    .await
}
