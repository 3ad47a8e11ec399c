//! The caches reconciles read from, and whether they can be trusted.
//!
//! A reconcile that counts children from a cache must not act before that cache has
//! listed once: an empty pod cache after a restart reads as "no pods" and creates a
//! second set (the Kubernetes replication manager learned this in 2015, PR 10147).
//! kube-runtime's `Controller` waits only for its own main store, so every cache here
//! carries a [`CacheHealth`] and a reconcile waits until all of its caches are synced.
//!
//! kube-runtime's watcher resumes a broken watch from its last resourceVersion and
//! emits nothing when it succeeds, so nobody could tell a healed cache from a stale
//! one. [`relisting`] instead starts a fresh list after any error: the cache
//! is stale from the error until that list completes (the reflector swaps the new list
//! in whole), and then provably current.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as new_watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{info, warn};

/// Where one cache stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// Never listed yet; `last_error` says why, when listing failed.
    Listing { last_error: Option<String> },
    /// Listed, and the watch is healthy.
    Synced,
    /// The watch broke; the cache holds the last list until a new one completes.
    Stale { error: String },
}

/// The health of one cache, shared by its watch stream (the writer) and by whoever
/// must not act on it before it is synced.
#[derive(Clone)]
pub struct CacheHealth {
    /// What the cache holds, e.g. `pods` or `podsets.app.example.com`.
    name: Arc<str>,
    state: Arc<watch::Sender<CacheState>>,
    /// How many objects the cache holds, as its writer last counted them.
    objects: Arc<AtomicUsize>,
}

impl CacheHealth {
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        let (tx, _) = watch::channel(CacheState::Listing { last_error: None });
        CacheHealth { name: name.into(), state: Arc::new(tx), objects: Arc::default() }
    }

    /// The health of the cache of `K`, named after its resource (`plural.group`).
    pub fn of<K: Resource<DynamicType = ()>>() -> Self {
        Self::for_resource(&K::plural(&()), &K::group(&()))
    }

    pub fn for_resource(plural: &str, group: &str) -> Self {
        Self::new(resource_name(plural, group))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn state(&self) -> CacheState {
        self.state.borrow().clone()
    }

    /// How many objects the cache holds.
    pub fn objects(&self) -> usize {
        self.objects.load(Ordering::Relaxed)
    }

    /// The cache's writer counted `n` objects in it (after each watch event: O(1)).
    pub(super) fn holds(&self, n: usize) {
        self.objects.store(n, Ordering::Relaxed);
    }

    pub fn is_synced(&self) -> bool {
        *self.state.borrow() == CacheState::Synced
    }

    /// Resolves once the cache is synced (at once if it is).
    pub async fn synced(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we wait.
        let _ = rx.wait_for(|s| *s == CacheState::Synced).await;
    }

    fn set(&self, next: CacheState) {
        let changed = self.state.send_if_modified(|s| {
            if *s == next {
                return false;
            }
            *s = next.clone();
            true
        });
        // Logged on transitions only: a watch retrying with backoff against an API
        // server that is down would otherwise log the same line every few seconds.
        if changed {
            match &next {
                CacheState::Synced => info!(cache = %self.name, "cache synced"),
                CacheState::Listing { last_error: Some(e) } => warn!(cache = %self.name, "cannot list: {e}; retrying"),
                CacheState::Stale { error } => {
                    warn!(cache = %self.name, "watch failed: {error}; not acting on this cache until it has listed again")
                }
                CacheState::Listing { last_error: None } => {}
            }
        }
    }

    fn failed(&self, error: &watcher::Error) {
        let message = explain(&self.name, error);
        let next = match self.state() {
            CacheState::Listing { .. } => CacheState::Listing { last_error: Some(message) },
            CacheState::Synced | CacheState::Stale { .. } => CacheState::Stale { error: message },
        };
        self.set(next);
    }
}

impl fmt::Display for CacheHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state() {
            CacheState::Synced => write!(f, "{}: synced", self.name),
            CacheState::Listing { last_error: None } => write!(f, "{}: listing", self.name),
            CacheState::Listing { last_error: Some(e) } => write!(f, "{}: not listed yet: {e}", self.name),
            CacheState::Stale { error } => write!(f, "{}: stale, listing again: {error}", self.name),
        }
    }
}

/// A watch error in words an operator can act on. A 404 on the list means the API
/// server does not serve the resource at all: its CRD is missing.
fn explain(name: &str, error: &watcher::Error) -> String {
    if let watcher::Error::InitialListFailed(kube::Error::Api(s)) = error
        && s.code == 404
    {
        return format!(
            "the API server does not serve {name}: is its CustomResourceDefinition installed? (`make install`)"
        );
    }
    error.to_string()
}

/// A resource as caches are named after it: `plural.group`, or `plural` for the core group.
pub fn resource_name(plural: &str, group: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

/// The set of caches one reconcile reads from.
#[derive(Clone, Default)]
pub struct Caches(Vec<CacheHealth>);

impl Caches {
    pub fn new(caches: impl IntoIterator<Item = CacheHealth>) -> Self {
        Caches(caches.into_iter().collect())
    }

    pub fn all_synced(&self) -> bool {
        self.0.iter().all(CacheHealth::is_synced)
    }

    /// Resolves once every cache is synced at the same moment.
    pub async fn synced(&self) {
        while !self.all_synced() {
            for c in &self.0 {
                c.synced().await;
            }
        }
    }

    /// How many caches (each fed by one watch).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each cache's name and how many objects it holds.
    pub fn sizes(&self) -> impl Iterator<Item = (&str, usize)> {
        self.0.iter().map(|c| (c.name(), c.objects()))
    }

    /// One line per cache that is not synced; empty when all are.
    pub fn problems(&self) -> Vec<String> {
        self.0.iter().filter(|c| !c.is_synced()).map(ToString::to_string).collect()
    }
}

/// A watch of `api` that lists afresh after every error (see the module docs) and
/// backs off between attempts. Objects come [`prune`]d: every cache is fed by it.
pub fn relisting<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
{
    let fresh = move || new_watcher(api.clone(), config.clone()).boxed();
    let first = fresh();
    futures::stream::unfold((first, fresh), |(mut inner, fresh)| async move {
        let item = inner.next().await?;
        if item.is_err() {
            // Drop the watcher that failed: the next poll starts from a full list.
            inner = fresh();
        }
        Some((item, (inner, fresh)))
    })
    .default_backoff()
    .modify(|o| prune(o.meta_mut()))
}

/// Keeps `health` in step with a watch stream whose events have already been applied
/// to their store (`listed` tells which item completes a list): `Synced` must only be
/// seen once the complete list is in the store, so a reconcile woken by it reads that
/// list and not the store before it.
pub fn track<T>(
    events: impl Stream<Item = watcher::Result<T>> + Send,
    health: CacheHealth,
    listed: impl Fn(&T) -> bool + Send,
) -> impl Stream<Item = watcher::Result<T>> + Send {
    events.inspect(move |item| match item {
        Ok(t) if listed(t) => health.set(CacheState::Synced),
        Err(e) => health.failed(e),
        Ok(_) => {}
    })
}

/// The cache of `api` in a kube-runtime store: [`relisting`], reflected into
/// `writer`, then [`track`]ed.
pub fn reflected<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    health: CacheHealth,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let store = writer.as_reader();
    let counted = health.clone();
    let events = relisting(api, config).reflect(writer).inspect(move |_| counted.holds(store.len()));
    track(events, health, |e| matches!(e, Event::InitDone))
}

/// Drops what no reconcile reads and what makes cached objects large: kubectl's copy
/// of the last applied object, and the server's field-management bookkeeping (already
/// skipped while reading an [`Object`](super::object::Object); typed kinds still carry it).
pub fn prune(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cache_is_synced_only_between_a_complete_list_and_the_next_error() {
        let h = CacheHealth::new("pods");
        let caches = Caches::new([h.clone()]);
        assert!(!caches.all_synced());
        h.failed(&watcher::Error::NoResourceVersion);
        assert!(matches!(h.state(), CacheState::Listing { last_error: Some(_) }));
        h.set(CacheState::Synced);
        caches.synced().await;
        h.failed(&watcher::Error::NoResourceVersion);
        assert!(matches!(h.state(), CacheState::Stale { .. }));
        assert_eq!(caches.problems().len(), 1);
        assert!(caches.problems()[0].starts_with("pods: stale"), "{:?}", caches.problems());
        let waiter = tokio::spawn({
            let caches = caches.clone();
            async move { caches.synced().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a reconcile must wait while a cache is stale");
        h.set(CacheState::Synced);
        waiter.await.expect("waiter");
    }

    #[test]
    fn a_missing_crd_is_named() {
        let status =
            kube::core::Status::failure("the server could not find the requested resource", "NotFound").with_code(404);
        let e = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        let text = explain("podsets.app.example.com", &e);
        assert!(text.contains("podsets.app.example.com") && text.contains("CustomResourceDefinition"), "{text}");
    }

    #[test]
    fn cached_objects_lose_managed_fields_and_the_last_applied_copy() {
        let mut o = ObjectMeta {
            managed_fields: Some(vec![Default::default()]),
            annotations: Some(
                [("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{}".to_string())].into(),
            ),
            ..ObjectMeta::default()
        };
        prune(&mut o);
        assert!(o.managed_fields.is_none() && o.annotations.is_none());
    }
}
