//! Fair queueing: how long a new PodSet waits while the operator re-decides many
//! converged ones. A restarted operator decides every parent it lists again (as
//! controller-runtime's resync does): the new PodSet is created the moment the
//! restarted operator is ready, and timed to its first pod.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use podset_test_support as common;

use crate::peer::Peer;
use crate::sizes::CURVE_REPLICAS;
use crate::watch::T;

/// The label the new PodSet's pods carry, to watch them alone among thousands.
const FRESH: &str = "bench-fresh";

/// What [`new_parent_during_sweep`] measured.
#[derive(Clone, Copy, Debug)]
pub struct Jumped {
    /// From the new PodSet's create to its first pod's, as a watch sees them.
    pub first_pod: Duration,
    /// Reconciles the restarted operator had finished when that pod was seen, of `swept`.
    pub before: f64,
    /// The parents the sweep re-decided, and how long from /readyz until it had.
    pub swept: usize,
    pub sweep: Duration,
}

/// Restarts `op` over the `n` converged PodSets of `ns`, creates one more as soon as it
/// is ready, and times that PodSet's first pod.
pub async fn new_parent_during_sweep(client: &kube::Client, op: &mut common::Operator, ns: &str, n: usize) -> Jumped {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
    // The watch is open before the create, so that the first pod's event is not missed.
    let watching = tokio::spawn(async move {
        let config = watcher::Config::default().labels(&format!("{FRESH}=1"));
        let mut stream = std::pin::pin!(watcher(pods, config).default_backoff());
        let mut listed = Some(listed_tx);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(watcher::Event::Apply(_)) if listed.is_none() => {
                    let _ = seen_tx.send(Instant::now());
                    return;
                }
                _ => {}
            }
        }
    });
    listed_rx.await.expect("the watch of the new PodSet's pods listed");

    op.respawn();
    op.ready().await;
    let ready = Instant::now();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &Peer::PodSet.resource());
    let mut fresh = Peer::PodSet.object("fresh", CURVE_REPLICAS);
    fresh.data["spec"]["template"]["metadata"]["labels"][FRESH] = "1".into();
    let created = Instant::now();
    api.create(&PostParams::default(), &fresh).await.expect("create the new PodSet");
    let seen = tokio::time::timeout(T, seen_rx).await.expect("the new PodSet's first pod").expect("the watch");
    let before = op.sum("podset_reconciles_total", "").await;
    watching.abort();
    let swept = common::eventually("the restarted operator to decide every PodSet again", T, || async {
        let done = op.sum("podset_reconciles_total", "").await;
        (done >= n as f64).then(|| ready.elapsed())
    })
    .await;
    Jumped { first_pod: seen.duration_since(created), before, swept: n, sweep: swept }
}
