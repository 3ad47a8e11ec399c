//! Which policy decides for which parent, and swapping them while the operator runs.
//!
//! Two sources serve policies: files (one default policy per parent kind) and
//! ReconcilePolicy objects (per namespace). For a parent, in order:
//! 1. the ReconcilePolicy its `spec.policyRef.name` names (PodSet has this field; any
//!    kind may);
//! 2. a ReconcilePolicy of its namespace whose `spec.selector` matches its labels and
//!    which serves its kind — a canary (several: the first by name);
//! 3. the default policy of its kind.
//!
//! Reads take a lock just long enough to clone an `Arc`: a swap is atomic, and a
//! reconcile already running finishes with the policy it started with.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::core::{GroupVersionKind, Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;
use parking_lot::RwLock;

use crate::contract::declarations::{kind_name, to_gvk};
use crate::crd::ReconcilePolicy;
use crate::kubernetes::access::Resolved;
use crate::kubernetes::object::Object;
use crate::sandbox::Policy;

/// A policy that loaded and whose declarations resolved: ready to decide.
pub struct Admitted {
    pub policy: Arc<Policy>,
    pub resolved: Resolved,
}

impl Admitted {
    pub fn parent_kind(&self) -> GroupVersionKind {
        to_gvk(&self.policy.declarations().parent)
    }

    /// The field manager of this policy's server-side applies: one per policy name, so
    /// a new version of a policy keeps owning what the old one applied.
    pub fn field_manager(&self) -> String {
        let name: String =
            self.policy.info().name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(100).collect();
        format!("podset-host/{name}")
    }
}

pub type PolicyRef = ObjectRef<ReconcilePolicy>;

/// What a source currently offers under one name.
#[derive(Default, Clone)]
struct Entry {
    /// The last policy admitted; it keeps serving when a newer one is refused.
    serving: Option<Arc<Admitted>>,
    /// Why the current module could not be admitted, if it could not.
    error: Option<String>,
}

#[derive(Default, Clone)]
struct Named {
    entry: Entry,
    /// Parents of this namespace matching it are decided by this policy.
    selector: Option<Selector>,
}

#[derive(Default)]
pub struct Registry {
    files: RwLock<BTreeMap<PathBuf, Entry>>,
    named: RwLock<HashMap<PolicyRef, Named>>,
}

/// The outcome of choosing a parent's policy.
pub enum Selection {
    Ready(Arc<Admitted>),
    /// The named ReconcilePolicy exists and its module is being loaded: try again
    /// shortly, without alarming anyone.
    Loading,
    /// Nothing can decide; the reason is for the parent's PolicyFailed condition.
    Unavailable(String),
}

impl Registry {
    /// Serves `admitted` from `file`; returns what it replaced.
    pub fn serve_file(&self, file: &Path, admitted: Arc<Admitted>) -> Option<Arc<Admitted>> {
        let mut files = self.files.write();
        let entry = files.entry(file.to_path_buf()).or_default();
        entry.error = None;
        entry.serving.replace(admitted)
    }

    /// Records why `file`'s current content was refused; whatever served keeps serving.
    pub fn refuse_file(&self, file: &Path, error: String) {
        self.files.write().entry(file.to_path_buf()).or_default().error = Some(error);
    }

    /// Why `file`'s current content was refused, if it was.
    pub fn file_error(&self, file: &Path) -> Option<String> {
        self.files.read().get(file).and_then(|e| e.error.clone())
    }

    pub fn file_policy(&self, file: &Path) -> Option<Arc<Admitted>> {
        self.files.read().get(file).and_then(|e| e.serving.clone())
    }

    /// Which other file already serves the default policy of `kind`.
    pub fn file_serving(&self, kind: &GroupVersionKind, except: &Path) -> Option<PathBuf> {
        let files = self.files.read();
        files
            .iter()
            .find(|(p, e)| p.as_path() != except && e.serving.as_ref().is_some_and(|a| a.parent_kind() == *kind))
            .map(|(p, _)| p.clone())
    }

    /// A ReconcilePolicy was seen with `selector`: parents naming it wait for its
    /// module instead of failing.
    pub fn declare(&self, key: &PolicyRef, selector: Option<&LabelSelector>) -> Result<(), String> {
        let selector =
            selector.map(|s| Selector::try_from(s.clone()).map_err(|e| format!("spec.selector: {e}"))).transpose()?;
        self.named.write().entry(key.clone()).or_default().selector = selector;
        Ok(())
    }

    /// Serves `admitted` for `key`; returns the policy it replaced.
    pub fn serve(&self, key: &PolicyRef, admitted: Arc<Admitted>) -> Option<Arc<Admitted>> {
        let mut named = self.named.write();
        let n = named.entry(key.clone()).or_default();
        n.entry.error = None;
        n.entry.serving.replace(admitted)
    }

    /// Records that `key`'s current spec could not be admitted; whatever served keeps serving.
    pub fn refuse(&self, key: &PolicyRef, error: String) {
        self.named.write().entry(key.clone()).or_default().entry.error = Some(error);
    }

    /// The ReconcilePolicy is gone; returns what it served.
    pub fn remove(&self, key: &PolicyRef) -> Option<Arc<Admitted>> {
        self.named.write().remove(key).and_then(|n| n.entry.serving)
    }

    pub fn named_keys(&self) -> Vec<PolicyRef> {
        self.named.read().keys().cloned().collect()
    }

    pub fn serving(&self, key: &PolicyRef) -> Option<Arc<Admitted>> {
        self.named.read().get(key).and_then(|n| n.entry.serving.clone())
    }

    /// Every admitted policy, from every source.
    pub fn all(&self) -> Vec<Arc<Admitted>> {
        let files = self.files.read();
        let named = self.named.read();
        files.values().chain(named.values().map(|n| &n.entry)).filter_map(|e| e.serving.clone()).collect()
    }

    /// Why file policies are not serving, for `/readyz`.
    pub fn file_problems(&self) -> Vec<String> {
        let files = self.files.read();
        files
            .iter()
            .filter(|(_, e)| e.serving.is_none())
            .map(|(p, e)| format!("policy {}: {}", p.display(), e.error.as_deref().unwrap_or("loading")))
            .collect()
    }

    /// Whether `parent` names a ReconcilePolicy (`spec.policyRef.name`).
    pub fn named_by(parent: &Object) -> Option<PolicyRef> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            policy_ref: Option<Name>,
        }
        #[derive(serde::Deserialize)]
        struct Name {
            name: String,
        }
        let name = parent.parse::<Spec>("spec").ok()??.policy_ref?.name;
        Some(ObjectRef::new(&name).within(&parent.namespace().unwrap_or_default()))
    }

    /// Whether the ReconcilePolicy `key` (with its selector) is or was a candidate for `parent`.
    pub fn concerns(&self, key: &PolicyRef, parent: &Object) -> bool {
        if Self::named_by(parent).as_ref() == Some(key) {
            return true;
        }
        let named = self.named.read();
        parent.namespace() == key.namespace
            && named.get(key).and_then(|n| n.selector.as_ref()).is_some_and(|s| s.matches(parent.labels()))
    }

    /// The policy that decides for `parent`, of kind `kind`.
    pub fn select(&self, parent: &Object, kind: &GroupVersionKind) -> Selection {
        let ns = parent.namespace().unwrap_or_default();
        if let Some(key) = Self::named_by(parent) {
            let named = self.named.read();
            return match named.get(&key).map(|n| &n.entry) {
                None => Selection::Unavailable(format!("ReconcilePolicy {:?} not found in namespace {ns:?}", key.name)),
                Some(Entry { serving: Some(a), .. }) if a.parent_kind() == *kind => Selection::Ready(a.clone()),
                Some(Entry { serving: Some(a), .. }) => Selection::Unavailable(format!(
                    "ReconcilePolicy {:?} serves {}, not {}",
                    key.name,
                    kind_name(&a.parent_kind()),
                    kind_name(kind)
                )),
                Some(Entry { serving: None, error: None }) => Selection::Loading,
                Some(Entry { serving: None, error: Some(e) }) => {
                    Selection::Unavailable(format!("ReconcilePolicy {:?} has no usable module: {e}", key.name))
                }
            };
        }
        {
            let named = self.named.read();
            let mut canaries: Vec<(&PolicyRef, &Arc<Admitted>)> = named
                .iter()
                .filter(|(k, n)| {
                    k.namespace.as_deref() == Some(ns.as_str())
                        && n.selector.as_ref().is_some_and(|s| s.matches(parent.labels()))
                })
                .filter_map(|(k, n)| n.entry.serving.as_ref().map(|a| (k, a)))
                .filter(|(_, a)| a.parent_kind() == *kind)
                .collect();
            canaries.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            if let Some((_, a)) = canaries.first() {
                return Selection::Ready((*a).clone());
            }
        }
        let files = self.files.read();
        match files.values().filter_map(|e| e.serving.as_ref()).find(|a| a.parent_kind() == *kind) {
            Some(a) => Selection::Ready(a.clone()),
            None => Selection::Unavailable(format!("no policy serves {}", kind_name(kind))),
        }
    }
}
