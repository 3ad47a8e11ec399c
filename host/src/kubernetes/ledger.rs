//! The teardown ledger: the parent kinds the host has put its teardown finalizer on,
//! each with its child kinds, kept in a ConfigMap in the operator's namespace. It is
//! written before the first such finalizer of a kind (and of a child kind) and read when
//! the operator starts, so that an operator started with no policy for such a kind
//! still tears its parents down (reconcile/controller.rs): a parent's deletion never
//! waits for a policy that may never load again.
//!
//! Entries are only added: each is one key of the ConfigMap, written by a merge patch,
//! so replicas and shards adding kinds at once lose none of them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use kube::discovery;
use kube::{Client, core::GroupVersionKind};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

/// The ConfigMap's name.
pub const LEDGER: &str = "podset-host-teardown";

/// A kind as the ledger keeps it: enough to watch it without asking discovery.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct LedgerKind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    #[serde(default)]
    pub cluster_scoped: bool,
}

impl LedgerKind {
    pub fn of(resource: &ApiResource, cluster_scoped: bool) -> Self {
        LedgerKind {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
            cluster_scoped,
        }
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(&self.gvk(), &self.plural)
    }

    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }

    /// `plural.group` (`core` for the core group): one key part.
    fn name(&self) -> String {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        format!("{}.{group}", self.plural)
    }
}

/// One parent kind and one of its child kinds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub parent: LedgerKind,
    pub child: LedgerKind,
}

impl Entry {
    /// Its ConfigMap key: `PARENT--CHILD`, each `plural.group` (valid key characters).
    pub fn key(&self) -> String {
        format!("{}--{}", self.parent.name(), self.child.name())
    }
}

/// The ledger of one operator.
pub struct Ledger {
    api: Api<ConfigMap>,
    namespace: String,
    /// The keys known to be written.
    known: Mutex<BTreeSet<String>>,
}

impl Ledger {
    /// The ledger in `namespace`, the operator's own.
    pub fn new(client: &Client, namespace: &str) -> Self {
        Ledger { api: Api::namespaced(client.clone(), namespace), namespace: namespace.into(), known: Mutex::default() }
    }

    /// Every entry written so far whose kinds the API server still serves (a parent kind
    /// whose CRD is gone has no parent left to tear down), each at the version the server
    /// recommends now: a CRD moved to a new version keeps its entry.
    pub async fn load(&self, client: &Client) -> Result<Vec<Entry>, kube::Error> {
        let Some(cm) = self.api.get_opt(LEDGER).await? else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (key, value) in cm.data.unwrap_or_default() {
            self.known.lock().insert(key.clone());
            match serde_json::from_str::<Entry>(&value) {
                Ok(entry) => match (served(client, &entry.parent).await, served(client, &entry.child).await) {
                    (Some(parent), Some(child)) => out.push(Entry { parent, child }),
                    _ => debug!(key, "teardown ledger: a kind no longer served"),
                },
                Err(e) => warn!(key, "teardown ledger {}/{LEDGER}: an entry that does not parse: {e}", self.namespace),
            }
        }
        Ok(out)
    }

    /// Writes the entries not known to be written, before the finalizer they stand for.
    pub async fn record(&self, entries: &[Entry]) -> Result<(), kube::Error> {
        let new: BTreeMap<String, String> = {
            let known = self.known.lock();
            entries
                .iter()
                .map(|e| (e.key(), e))
                .filter(|(key, _)| !known.contains(key))
                .map(|(key, e)| (key, serde_json::to_string(e).unwrap_or_default()))
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let patch = Patch::Merge(serde_json::json!({ "data": new }));
        match self.api.patch(LEDGER, &PatchParams::default(), &patch).await {
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let cm = ConfigMap {
                    metadata: kube::api::ObjectMeta { name: Some(LEDGER.into()), ..Default::default() },
                    data: Some(new.clone()),
                    ..Default::default()
                };
                match self.api.create(&PostParams::default(), &cm).await {
                    // Another replica made it meanwhile: add ours to it.
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        self.api.patch(LEDGER, &PatchParams::default(), &patch).await?;
                    }
                    r => {
                        r?;
                    }
                }
            }
            r => {
                r?;
            }
        }
        self.known.lock().extend(new.into_keys());
        Ok(())
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

/// `kind` at the version its group recommends now, if the server still serves it.
async fn served(client: &Client, kind: &LedgerKind) -> Option<LedgerKind> {
    let group = discovery::group(client, &kind.group).await.ok()?;
    let (resource, _) = group.recommended_kind(&kind.kind)?;
    Some(LedgerKind { version: resource.version, plural: resource.plural, ..kind.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_one_valid_configmap_key_and_reads_back() {
        let tenant = ApiResource {
            group: "tenancy.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "tenancy.example.com/v1alpha1".into(),
            kind: "Tenant".into(),
            plural: "tenants".into(),
        };
        let namespace = ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&());
        let entry = Entry { parent: LedgerKind::of(&tenant, true), child: LedgerKind::of(&namespace, true) };
        assert_eq!(entry.key(), "tenants.tenancy.example.com--namespaces.core");
        assert!(entry.key().chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)));
        let back: Entry = serde_json::from_str(&serde_json::to_string(&entry).expect("json")).expect("parses");
        assert_eq!(back, entry);
        assert_eq!(back.parent.resource(), tenant);
        assert_eq!(back.child.resource(), namespace);
    }
}
