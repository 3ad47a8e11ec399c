//! Which namespaces this operator serves: all of them (or the one `--namespace`
//! names), or, as one shard of several operator Deployments, those whose labels match
//! `--namespace-selector`. Each shard elects its own leader on its own Lease, so
//! reconciling scales out with no coordinator: the namespaces' labels are the
//! partition, and moving a namespace between shards is relabelling it.
//!
//! A shard filters rather than scoping its watches, because the API server cannot
//! select objects by their namespace's labels: the caches still hold every
//! namespace, and what a shard does not serve it never reconciles or writes to.
//! Cluster-scoped parents belong to no namespace and so to no shard: an unsharded
//! operator serves them, and among shards the one started with
//! `--cluster-scoped-parents` (one shard of the set; two would both reconcile them).
//! That shard writes their children wherever they were granted, in namespaces that
//! may carry another shard's label: a shard partitions the parents it reconciles.

use std::collections::HashSet;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use sha2::{Digest, Sha256};

use super::cache::{CacheHealth, reflected};

/// The namespaces served. Cheap to clone.
#[derive(Clone)]
pub struct Shard(Option<Selected>);

#[derive(Clone)]
struct Selected {
    selector: String,
    /// This shard also serves the cluster-scoped parents.
    cluster_scoped: bool,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    health: CacheHealth,
}

impl Shard {
    /// Every namespace in the operator's scope.
    pub fn all() -> Self {
        Shard(None)
    }

    /// The namespaces whose labels match `selector` (a label selector, as
    /// `kubectl get -l` takes it), and the changes to that set as they happen. The
    /// stream must be polled for the shard to learn anything.
    /// `cluster_scoped`: this shard also serves the parents of cluster-scoped kinds.
    pub fn selected(
        client: &Client,
        selector: &str,
        cluster_scoped: bool,
    ) -> (Self, impl Stream<Item = Change> + Send + use<>) {
        let writer = reflector::store::Writer::default();
        let namespaces = writer.as_reader();
        let health = CacheHealth::new(format!("namespaces matching {selector}"));
        // Metadata only: labels are all a shard reads of a namespace.
        let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
        let events = reflected(api, watcher::Config::default().labels(selector), writer, health.clone());
        let selected =
            Selected { selector: selector.to_string(), cluster_scoped, namespaces: namespaces.clone(), health };
        let shard = Shard(Some(selected));
        (shard, changes(events, namespaces))
    }

    /// Whether objects in `namespace` are this operator's to reconcile. Only
    /// meaningful once [`Shard::synced`]: before, a sharded operator serves nothing.
    pub fn serves(&self, namespace: Option<&str>) -> bool {
        match (&self.0, namespace) {
            (None, _) => true,
            (Some(s), None) => s.cluster_scoped,
            (Some(s), Some(ns)) => s.namespaces.get(&ObjectRef::new(ns)).is_some(),
        }
    }

    /// Resolves once the served namespaces are known (at once when unsharded).
    pub async fn synced(&self) {
        if let Some(s) = &self.0 {
            s.health.synced().await;
        }
    }

    /// The namespace cache's health, for `/readyz`; `None` when unsharded.
    pub fn health(&self) -> Option<CacheHealth> {
        self.0.as_ref().map(|s| s.health.clone())
    }

    /// The selector, when sharded.
    pub fn selector(&self) -> Option<&str> {
        self.0.as_ref().map(|s| s.selector.as_str())
    }
}

/// A change to the namespaces a shard serves.
#[derive(Debug, PartialEq)]
pub struct Change {
    /// A namespace that joined the selection: its parents need a reconcile, as no
    /// change to them will bring them.
    pub joined: Option<String>,
    /// How many namespaces are served now.
    pub served: usize,
}

/// The changes to the selection. A relist after a broken watch brings every
/// namespace again; only those not selected before have joined.
fn changes(
    events: impl Stream<Item = watcher::Result<Event<PartialObjectMeta<Namespace>>>> + Send,
    store: Store<PartialObjectMeta<Namespace>>,
) -> impl Stream<Item = Change> + Send {
    let mut known = HashSet::new();
    events.filter_map(move |ev| {
        let joined = match ev {
            Ok(Event::Apply(ns) | Event::InitApply(ns)) => known.insert(ns.name_any()).then(|| ns.name_any()),
            Ok(Event::Delete(ns)) => {
                known.remove(&ns.name_any());
                None
            }
            // Those that left the selection while the watch was down are gone from the store.
            Ok(Event::InitDone) => {
                let present: HashSet<String> = store.state().iter().map(|ns| ns.name_any()).collect();
                known.retain(|n| present.contains(n));
                None
            }
            Ok(Event::Init) | Err(_) => return std::future::ready(None),
        };
        std::future::ready(Some(Change { joined, served: known.len() }))
    })
}

/// The Lease a shard elects its leader on when none is named: readable, and distinct
/// for distinct selectors (two shards sharing a Lease would leave one of them
/// without a leader, silently).
pub fn lease_name(base: &str, selector: &str) -> String {
    let readable: String = selector
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let hash = Sha256::digest(selector.as_bytes());
    let suffix: String = hash.iter().take(3).map(|b| format!("{b:02x}")).collect();
    // A Lease name is a DNS subdomain: at most 253 characters.
    let readable: String = readable.chars().take(200).collect();
    format!("{base}-{readable}-{suffix}").replace("--", "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::WatchStreamExt;

    #[test]
    fn a_shard_lease_name_is_readable_valid_and_distinct_per_selector() {
        let a = lease_name("podset-host", "shard=a");
        assert!(a.starts_with("podset-host-shard-a-"), "{a}");
        assert_ne!(a, lease_name("podset-host", "shard!=a"), "selectors that read alike get distinct Leases");
        assert_eq!(a, lease_name("podset-host", "shard=a"), "stable across replicas");
        for selector in ["Team In (A,B)", "!legacy", &"x".repeat(400)] {
            let name = lease_name("podset-host", selector);
            assert!(name.len() <= 253, "{name}");
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{name}");
            assert!(!name.ends_with('-') && !name.contains("--"), "{name}");
        }
    }

    #[test]
    fn cluster_scoped_parents_are_served_unsharded_and_by_the_one_shard_given_them() {
        let shard = |cluster_scoped: bool| {
            let (namespaces, _) = reflector::store::<PartialObjectMeta<Namespace>>();
            let health = CacheHealth::new("test");
            Shard(Some(Selected { selector: "shard=a".into(), cluster_scoped, namespaces, health }))
        };
        assert!(Shard::all().serves(None));
        assert!(!shard(false).serves(None), "a shard without --cluster-scoped-parents");
        assert!(shard(true).serves(None), "the shard with it");
        assert!(!shard(true).serves(Some("not-selected")), "and still only its namespaces' parents");
    }

    #[tokio::test]
    async fn only_namespaces_new_to_the_selection_join_it() {
        let ns = |name: &str| {
            let mut m = PartialObjectMeta::<Namespace>::default();
            m.metadata.name = Some(name.into());
            m
        };
        let (store, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
        let events = [
            Event::Init,
            Event::InitApply(ns("a")),
            Event::InitApply(ns("b")),
            Event::InitDone,
            Event::Apply(ns("a")), // relabelled, still selected: no news
            Event::Delete(ns("b")),
            Event::Apply(ns("b")), // selected again
            // A relist after an error: `c` is new, `a` is not, `b` left meanwhile...
            Event::Init,
            Event::InitApply(ns("a")),
            Event::InitApply(ns("c")),
            Event::InitDone,
            Event::Apply(ns("b")), // ...and came back
        ];
        // Reflected as the operator does, so the store is in step with the events.
        let reflected = futures::stream::iter(events.map(Ok)).reflect(writer);
        let joined: Vec<String> = changes(reflected, store).filter_map(|c| async { c.joined }).collect().await;
        assert_eq!(joined, ["a", "b", "b", "c", "b"].map(String::from).to_vec());
    }
}
