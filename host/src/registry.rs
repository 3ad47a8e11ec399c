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
//! A policy in Shadow mode (a ReconcilePolicy's `spec.mode`, or `--shadow FILE`) never
//! decides: [`Registry::select`] passes it over, and [`Registry::shadows_for`] names
//! the shadows that decide beside the live policy of a parent.
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
use crate::crd::{PolicyMode, ReconcilePolicy};
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
    /// Enforce (it may decide) or Shadow (it decides beside the live policy).
    mode: PolicyMode,
    /// The last policy admitted; it keeps serving when a newer one is refused.
    serving: Option<Arc<Admitted>>,
    /// Why the current module could not be admitted, if it could not.
    error: Option<String>,
}

#[derive(Default, Clone)]
struct Named {
    entry: Entry,
    /// Parents of this namespace matching it are decided by this policy (or, for a
    /// shadow, decided beside; a shadow without a selector matches all).
    selector: Option<Selector>,
}

impl Named {
    fn shadows(&self, parent: &Object) -> bool {
        self.entry.mode == PolicyMode::Shadow && self.selector.as_ref().is_none_or(|s| s.matches(parent.labels()))
    }
}

/// Where a shadow comes from: the name its tally is reported under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShadowSource {
    /// A ReconcilePolicy in Shadow mode; its `status.shadow` reports.
    Named(PolicyRef),
    /// `--shadow FILE`: metrics and logs report.
    File(PathBuf),
}

impl std::fmt::Display for ShadowSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShadowSource::Named(key) => write!(f, "{}/{}", key.namespace.as_deref().unwrap_or_default(), key.name),
            ShadowSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A policy deciding beside a parent's live policy.
#[derive(Clone)]
pub struct Shadow {
    pub source: ShadowSource,
    pub admitted: Arc<Admitted>,
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
    /// Serves `admitted` from `file`, in `mode`; returns what it replaced.
    pub fn serve_file(&self, file: &Path, admitted: Arc<Admitted>, mode: PolicyMode) -> Option<Arc<Admitted>> {
        let mut files = self.files.write();
        let entry = files.entry(file.to_path_buf()).or_default();
        entry.error = None;
        entry.mode = mode;
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

    /// Which other file already serves `kind` in `mode` (one default policy, and one
    /// shadow, per kind).
    pub fn file_serving(&self, kind: &GroupVersionKind, mode: PolicyMode, except: &Path) -> Option<PathBuf> {
        let files = self.files.read();
        files
            .iter()
            .find(|(p, e)| {
                p.as_path() != except && e.mode == mode && e.serving.as_ref().is_some_and(|a| a.parent_kind() == *kind)
            })
            .map(|(p, _)| p.clone())
    }

    /// A ReconcilePolicy was seen with `selector` and `mode`: parents naming it wait
    /// for its module instead of failing. Returns whether the selector or the mode
    /// changed, so that the parents it may concern are decided again.
    pub fn declare(&self, key: &PolicyRef, selector: Option<&LabelSelector>, mode: PolicyMode) -> Result<bool, String> {
        let selector =
            selector.map(|s| Selector::try_from(s.clone()).map_err(|e| format!("spec.selector: {e}"))).transpose()?;
        let mut named = self.named.write();
        let n = named.entry(key.clone()).or_default();
        let changed = n.selector != selector || n.entry.mode != mode;
        n.selector = selector;
        n.entry.mode = mode;
        Ok(changed)
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

    /// Every admitted policy that may decide, from every source: the kinds these
    /// serve are the kinds reconciled. A shadow alone does not make its kind
    /// reconciled: it has no live decisions to decide beside.
    pub fn enforcing(&self) -> Vec<Arc<Admitted>> {
        let files = self.files.read();
        let named = self.named.read();
        files
            .values()
            .chain(named.values().map(|n| &n.entry))
            .filter(|e| e.mode == PolicyMode::Enforce)
            .filter_map(|e| e.serving.clone())
            .collect()
    }

    /// The shadows that decide beside the live policy of `parent`, of kind `kind`:
    /// Shadow ReconcilePolicies of its namespace whose selector matches it, and the
    /// `--shadow` file of its kind.
    pub fn shadows_for(&self, parent: &Object, kind: &GroupVersionKind) -> Vec<Shadow> {
        let mut out = Vec::new();
        {
            let named = self.named.read();
            let ns = parent.namespace();
            for (key, n) in named.iter() {
                if key.namespace == ns
                    && n.shadows(parent)
                    && let Some(a) = n.entry.serving.as_ref().filter(|a| a.parent_kind() == *kind)
                {
                    out.push(Shadow { source: ShadowSource::Named(key.clone()), admitted: a.clone() });
                }
            }
        }
        let files = self.files.read();
        for (path, e) in files.iter().filter(|(_, e)| e.mode == PolicyMode::Shadow) {
            if let Some(a) = e.serving.as_ref().filter(|a| a.parent_kind() == *kind) {
                out.push(Shadow { source: ShadowSource::File(path.clone()), admitted: a.clone() });
            }
        }
        out
    }

    /// Why default policy files are not serving, for `/readyz` (a shadow that is not
    /// loaded keeps nothing from being served).
    pub fn file_problems(&self) -> Vec<String> {
        let files = self.files.read();
        files
            .iter()
            .filter(|(_, e)| e.serving.is_none() && e.mode == PolicyMode::Enforce)
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
        // A ReconcilePolicy decides the parents of its own namespace: a cluster-scoped
        // parent is decided by a file policy, whatever its spec says.
        let namespace = parent.namespace()?;
        let name = parent.parse::<Spec>("spec").ok()??.policy_ref?.name;
        Some(ObjectRef::new(&name).within(&namespace))
    }

    /// Whether the ReconcilePolicy `key` (with its selector) is or was a candidate for `parent`.
    pub fn concerns(&self, key: &PolicyRef, parent: &Object) -> bool {
        if Self::named_by(parent).as_ref() == Some(key) {
            return true;
        }
        let named = self.named.read();
        parent.namespace() == key.namespace
            && named
                .get(key)
                .is_some_and(|n| n.shadows(parent) || n.selector.as_ref().is_some_and(|s| s.matches(parent.labels())))
    }

    /// The policy that decides for `parent`, of kind `kind`.
    pub fn select(&self, parent: &Object, kind: &GroupVersionKind) -> Selection {
        let ns = parent.namespace().unwrap_or_default();
        if let Some(key) = Self::named_by(parent) {
            let named = self.named.read();
            return match named.get(&key).map(|n| &n.entry) {
                None => Selection::Unavailable(format!("ReconcilePolicy {:?} not found in namespace {ns:?}", key.name)),
                Some(Entry { mode: PolicyMode::Shadow, .. }) => Selection::Unavailable(format!(
                    "ReconcilePolicy {:?} is in Shadow mode: it never decides; name an Enforce policy",
                    key.name
                )),
                Some(Entry { serving: Some(a), .. }) if a.parent_kind() == *kind => Selection::Ready(a.clone()),
                Some(Entry { serving: Some(a), .. }) => Selection::Unavailable(format!(
                    "ReconcilePolicy {:?} serves {}, not {}",
                    key.name,
                    kind_name(&a.parent_kind()),
                    kind_name(kind)
                )),
                Some(Entry { serving: None, mode: _, error: None }) => Selection::Loading,
                Some(Entry { serving: None, mode: _, error: Some(e) }) => {
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
                        && n.entry.mode == PolicyMode::Enforce
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
        match files
            .values()
            .filter(|e| e.mode == PolicyMode::Enforce)
            .filter_map(|e| e.serving.as_ref())
            .find(|a| a.parent_kind() == *kind)
        {
            Some(a) => Selection::Ready(a.clone()),
            None => Selection::Unavailable(format!("no policy serves {}", kind_name(kind))),
        }
    }
}
