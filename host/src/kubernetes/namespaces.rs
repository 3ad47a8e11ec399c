//! The labels of every namespace, for policies granted the namespaces a label selector
//! matches (`reach.namespaces.selector`): one metadata-only watch, started the first
//! time a policy with such a grant loads and shared by all of them.

use std::fmt;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{PartialObjectMeta, Selector, SelectorExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use super::cache::{CacheHealth, reflected};

/// What the namespaces' labels are now. Cheap to clone.
#[derive(Clone)]
pub struct NamespaceLabels {
    store: Store<PartialObjectMeta<Namespace>>,
    health: CacheHealth,
}

impl fmt::Debug for NamespaceLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NamespaceLabels({} namespaces)", self.store.state().len())
    }
}

impl NamespaceLabels {
    /// Starts the watch; it stops at `shutdown`.
    fn start(client: &Client, shutdown: CancellationToken) -> Self {
        let writer = reflector::store::Writer::default();
        let store = writer.as_reader();
        let health = CacheHealth::new("namespaces (reach.namespaces.selector)");
        let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
        let events = reflected(api, watcher::Config::default(), writer, health.clone());
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    next = events.next() => if next.is_none() { return },
                }
            }
        });
        NamespaceLabels { store, health }
    }

    /// The namespaces as `namespaces` lists them (for tests and tools).
    pub fn of(namespaces: impl IntoIterator<Item = Namespace>) -> Self {
        let mut writer = reflector::store::Writer::default();
        for ns in namespaces {
            let meta = PartialObjectMeta::<Namespace> { metadata: ns.metadata, ..Default::default() };
            writer.apply_watcher_event(&watcher::Event::Apply(meta));
        }
        let health = CacheHealth::new("namespaces");
        NamespaceLabels { store: writer.as_reader(), health }
    }

    /// Resolves once the first list is in.
    pub async fn synced(&self) {
        self.health.synced().await;
    }

    /// Whether `namespace` exists and its labels match `selector`.
    pub fn selects(&self, selector: &LabelSelector, namespace: &str) -> bool {
        let Ok(selector) = Selector::try_from(selector.clone()) else { return false };
        let Some(ns) = self.store.get(&ObjectRef::new(namespace)) else { return false };
        selector.matches(&ns.metadata.labels.clone().unwrap_or_default())
    }

    pub fn health(&self) -> CacheHealth {
        self.health.clone()
    }
}

/// The one watch of namespaces' labels, started on first use.
#[derive(Default)]
pub struct SharedNamespaceLabels(OnceCell<NamespaceLabels>);

impl SharedNamespaceLabels {
    /// The watch, started now if it was not, once its first list is in.
    pub async fn get(&self, client: &Client, shutdown: &CancellationToken) -> NamespaceLabels {
        let labels = self.0.get_or_init(|| async { NamespaceLabels::start(client, shutdown.clone()) }).await.clone();
        tokio::select! {
            _ = labels.synced() => {}
            _ = shutdown.cancelled() => {}
        }
        labels
    }

    /// Its health, for `/readyz`, once started.
    pub fn health(&self) -> Option<CacheHealth> {
        self.0.get().map(NamespaceLabels::health)
    }
}

/// A label selector's labels as `kubectl get -l` shows them, for messages.
pub fn describe(selector: &LabelSelector) -> String {
    match Selector::try_from(selector.clone()) {
        Ok(s) if s.selects_all() => "every namespace".into(),
        Ok(s) => s.to_string(),
        Err(e) => format!("an invalid selector ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn namespace(name: &str, pairs: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels(pairs)), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn a_selector_selects_existing_namespaces_by_their_labels() {
        let all = NamespaceLabels::of([namespace("team-a", &[("tier", "apps")]), namespace("kube-system", &[])]);
        let apps = LabelSelector { match_labels: Some(labels(&[("tier", "apps")])), ..Default::default() };
        assert!(all.selects(&apps, "team-a"));
        assert!(!all.selects(&apps, "kube-system"));
        assert!(!all.selects(&LabelSelector::default(), "absent"), "a namespace that does not exist");
        assert!(all.selects(&LabelSelector::default(), "kube-system"), "an empty selector selects all");
        assert_eq!(describe(&apps), "tier=apps");
        assert_eq!(describe(&LabelSelector::default()), "every namespace");
    }
}
