//! Waiting for what a round waits for: objects settled and pods ready (watched), pods
//! gone.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use podset_test_support as common;

use crate::peer::Peer;

/// How long anything is waited for.
pub const T: Duration = Duration::from_secs(600);

/// Waits until every object in `api` is settled at `replicas`; each one's time from `since`.
pub async fn settle(
    peer: Peer,
    api: &Api<DynamicObject>,
    n: usize,
    replicas: i64,
    since: Instant,
) -> HashMap<String, Duration> {
    let what = format!("{peer:?}: every object settled at {replicas}");
    until_all(api, n, since, &what, |o| peer.settled(o, replicas)).await
}

/// When each of `n` pods of `ns` was first seen ready and not terminating, from `since`.
pub async fn pods_ready(client: &Client, ns: &str, n: usize, since: Instant) -> HashMap<String, Duration> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ready = |p: &Pod| p.metadata.deletion_timestamp.is_none() && common::is_ready(p);
    until_all(&pods, n, since, &format!("{n} pods of {ns} ready"), ready).await
}

/// Waits until `ns` holds no more than `n` pods: those a scale down marked for deletion
/// are gone. A list every 200 ms, between the phases, where nothing is measured.
pub async fn pods_gone(client: &Client, ns: &str, n: usize) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    common::eventually_ok(&format!("no more than {n} pods in {ns}"), T, || async {
        let left = pods.list_metadata(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
        if left <= n { Ok(()) } else { Err(format!("{left} pods left")) }
    })
    .await;
}

/// Watches `api` until `n` of its objects have met `done`; each one's first time from
/// `since`, by name. A watch, not a list in a loop: listing every object ten times a
/// second cost the API server (and this process, on the same two cores) a share of
/// what is measured, and timed each object to the nearest poll only.
pub async fn until_all<K>(
    api: &Api<K>,
    n: usize,
    since: Instant,
    what: &str,
    done: impl Fn(&K) -> bool,
) -> HashMap<String, Duration>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut at: HashMap<String, Duration> = HashMap::new();
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    // More objects take longer: 20 ms each beyond T (5 000 PodSets of 2 pods converged
    // in 72-97 s on 2026-11-29; 20 000 have 1 000 s).
    let within = T + Duration::from_millis(20) * u32::try_from(n).unwrap_or(u32::MAX);
    let deadline = tokio::time::Instant::from_std(since + within);
    while at.len() < n {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(o))) if done(&o) => {
                at.entry(o.name_any()).or_insert_with(|| since.elapsed());
            }
            // A watch error is retried by the watcher (with backoff); its objects come again.
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch for {what} ended"),
            Err(_) => panic!("{what}: {} of {n} after {within:?}", at.len()),
        }
    }
    at
}

/// Counts the changes of the status of `api`'s objects while it runs, and those that
/// moved nothing but `listed` (a list the status keeps, such as its pods' names): what
/// a status written more often than a peer's says that the peer's does not.
pub struct StatusChanges {
    task: tokio::task::JoinHandle<()>,
    counts: std::sync::Arc<parking_lot::Mutex<(u64, u64)>>,
}

impl StatusChanges {
    pub fn watch(api: Api<DynamicObject>, listed: &'static str) -> StatusChanges {
        let counts = std::sync::Arc::new(parking_lot::Mutex::new((0, 0)));
        let seen = counts.clone();
        let task = tokio::spawn(async move {
            let mut last: HashMap<String, serde_json::Value> = HashMap::new();
            let stream = watcher(api, watcher::Config::default()).default_backoff().applied_objects();
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(o) = event else { continue };
                let status = o.data.get("status").cloned().unwrap_or_default();
                let before = last.insert(o.name_any(), status.clone()).unwrap_or_default();
                if before == status {
                    continue;
                }
                let without = |mut s: serde_json::Value| {
                    if let Some(m) = s.as_object_mut() {
                        m.remove(listed);
                    }
                    s
                };
                let mut counts = seen.lock();
                counts.0 += 1;
                if without(before) == without(status) {
                    counts.1 += 1;
                }
            }
        });
        StatusChanges { task, counts }
    }

    /// Stops watching: the changes seen, and those of the list alone, per object of `n`.
    pub fn stop(self, n: usize) -> (f64, f64) {
        self.task.abort();
        let (all, listed) = *self.counts.lock();
        (all as f64 / n as f64, listed as f64 / n as f64)
    }
}
