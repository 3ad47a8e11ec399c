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
//! A ReconcilePolicy rolling out a new module (`spec.rollout`) has two: the revision
//! serving, and the candidate. In a shadow step the candidate decides beside the
//! serving revision ([`Registry::shadows_for`]); in a share step it decides for the
//! parents whose UID hashes into its share ([`share_of`]), the others staying where
//! they were. A parent that names the ReconcilePolicy while it has no serving revision
//! (its first module) gets the candidate at once: there is nothing to fall back to.
//!
//! Reads take a lock just long enough to clone an `Arc`: a swap is atomic, and a
//! reconcile already running finishes with the policy it started with.

pub mod outcomes;

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
use crate::kubernetes::identity::ServiceAccount;
use crate::kubernetes::object::Object;
use crate::sandbox::Policy;

/// A policy that loaded and whose declarations resolved: ready to decide.
pub struct Admitted {
    pub policy: Arc<Policy>,
    pub resolved: Resolved,
    /// What became of its decisions (a rollout's gates read them).
    pub outcomes: outcomes::Outcomes,
    /// The service account its children are written as; `None`: the operator's identity.
    pub acting_as: Option<ActingAs>,
}

/// A service account a policy acts as, and the client impersonating it.
#[derive(Clone)]
pub struct ActingAs {
    pub account: ServiceAccount,
    pub client: kube::Client,
}

impl Admitted {
    pub fn new(policy: Arc<Policy>, resolved: Resolved) -> Self {
        Admitted { policy, resolved, outcomes: outcomes::Outcomes::default(), acting_as: None }
    }

    /// Acting as `acting_as` (`None`: as the operator).
    pub fn acting_as(self, acting_as: Option<ActingAs>) -> Self {
        Admitted { acting_as, ..self }
    }

    /// The client its children are written with: the one acting as its service account,
    /// else the operator's own.
    pub fn writer<'a>(&'a self, own: &'a kube::Client) -> &'a kube::Client {
        self.acting_as.as_ref().map_or(own, |a| &a.client)
    }

    /// The service account it acts as, if any.
    pub fn account(&self) -> Option<&ServiceAccount> {
        self.acting_as.as_ref().map(|a| &a.account)
    }

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
    /// A file's revisions: how many modules of another digest it served, this one included.
    revision: u64,
}

#[derive(Default, Clone)]
struct Named {
    entry: Entry,
    /// Parents of this namespace matching it are decided by this policy (or, for a
    /// shadow, decided beside; a shadow without a selector matches all).
    selector: Option<Selector>,
    /// The module being rolled out, and its step.
    candidate: Option<Candidate>,
}

impl Named {
    fn shadows(&self, parent: &Object) -> bool {
        self.entry.mode == PolicyMode::Shadow && self.selector.as_ref().is_none_or(|s| s.matches(parent.labels()))
    }

    fn selects(&self, parent: &Object) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(parent.labels()))
    }

    /// The candidate, when `parent` (of `kind`) is in its share.
    fn candidate_for(&self, parent: &Object, kind: &GroupVersionKind) -> Option<Arc<Admitted>> {
        let c = self.candidate.as_ref()?;
        (c.step.includes(parent) && c.admitted.parent_kind() == *kind).then(|| c.admitted.clone())
    }

    /// The candidate, when it is in a shadow step and shadows `parent` (of `kind`).
    fn shadow_candidate(&self, kind: &GroupVersionKind) -> Option<Arc<Admitted>> {
        let c = self.candidate.as_ref()?;
        (c.step == Step::Shadow && c.admitted.parent_kind() == *kind).then(|| c.admitted.clone())
    }
}

/// A module being rolled out beside a ReconcilePolicy's serving revision.
#[derive(Clone)]
pub struct Candidate {
    pub admitted: Arc<Admitted>,
    pub step: Step,
}

/// What a candidate does in its current step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// It decides beside the serving revision for every parent, and never acts.
    Shadow,
    /// It decides for the parents in this share, in percent (1 to 100).
    Share(u8),
}

impl Step {
    /// Whether the candidate decides for `parent` in this step.
    pub fn includes(&self, parent: &Object) -> bool {
        match self {
            Step::Shadow => false,
            Step::Share(percent) => share_of(parent) < u32::from(*percent) * 100,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Shadow => write!(f, "a shadow of the serving revision"),
            Step::Share(p) => write!(f, "{p}% of the parents"),
        }
    }
}

/// Where `parent` falls among the parents, 0 to 9999: from its UID, so a parent keeps
/// its place across decisions, replicas and restarts, and a growing share only adds
/// parents.
pub fn share_of(parent: &Object) -> u32 {
    use sha2::Digest as _;
    let uid = parent.metadata.uid.as_deref().unwrap_or_default();
    let hash = sha2::Sha256::digest(uid.as_bytes());
    let first = u64::from_be_bytes([hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7]]);
    (first % 10_000) as u32
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
        if entry.serving.as_ref().is_none_or(|a| a.policy.digest() != admitted.policy.digest()) {
            entry.revision += 1;
        }
        entry.serving.replace(admitted)
    }

    /// The revision `file` serves: 1 for its first module, one more for each module of
    /// another digest since the operator started (0 before any).
    pub fn file_revision(&self, file: &Path) -> u64 {
        self.files.read().get(file).map_or(0, |e| e.revision)
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

    /// Serves `admitted` for `key`, at once, for every parent: any rollout under way
    /// ends. Returns the policy it replaced.
    pub fn serve(&self, key: &PolicyRef, admitted: Arc<Admitted>) -> Option<Arc<Admitted>> {
        let mut named = self.named.write();
        let n = named.entry(key.clone()).or_default();
        n.entry.error = None;
        n.candidate = None;
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

    /// The module `key` is rolling out, and its step.
    pub fn candidate(&self, key: &PolicyRef) -> Option<Candidate> {
        self.named.read().get(key).and_then(|n| n.candidate.clone())
    }

    /// Rolls out `admitted` for `key` beside its serving revision, from `step`;
    /// returns the candidate it replaced (a newer module superseding one mid-rollout).
    pub fn roll_out(&self, key: &PolicyRef, admitted: Arc<Admitted>, step: Step) -> Option<Arc<Admitted>> {
        let mut named = self.named.write();
        let n = named.entry(key.clone()).or_default();
        n.entry.error = None;
        n.candidate.replace(Candidate { admitted, step }).map(|c| c.admitted)
    }

    /// Moves `key`'s candidate to `step`; false when it has none (or another one).
    pub fn step(&self, key: &PolicyRef, admitted: &Arc<Admitted>, step: Step) -> bool {
        let mut named = self.named.write();
        match named.get_mut(key).and_then(|n| n.candidate.as_mut()) {
            Some(c) if Arc::ptr_eq(&c.admitted, admitted) => {
                c.step = step;
                true
            }
            _ => false,
        }
    }

    /// Stops rolling out `key`'s candidate (an abort): every parent is back where it
    /// was. Returns it.
    pub fn drop_candidate(&self, key: &PolicyRef) -> Option<Arc<Admitted>> {
        self.named.write().get_mut(key).and_then(|n| n.candidate.take()).map(|c| c.admitted)
    }

    /// The candidate `admitted` becomes `key`'s serving revision (its rollout
    /// completed); returns the revision it replaced. Nothing changes when the
    /// candidate is another one by now.
    pub fn promote(&self, key: &PolicyRef, admitted: &Arc<Admitted>) -> Option<Arc<Admitted>> {
        let mut named = self.named.write();
        let n = named.get_mut(key)?;
        if !n.candidate.as_ref().is_some_and(|c| Arc::ptr_eq(&c.admitted, admitted)) {
            return None;
        }
        let c = n.candidate.take()?;
        n.entry.serving.replace(c.admitted)
    }

    /// Every admitted policy that may decide, from every source: the kinds these
    /// serve are the kinds reconciled. A shadow alone does not make its kind
    /// reconciled: it has no live decisions to decide beside.
    pub fn enforcing(&self) -> Vec<Arc<Admitted>> {
        let files = self.files.read();
        let named = self.named.read();
        let candidates = named.values().filter_map(|n| n.candidate.as_ref()).map(|c| c.admitted.clone());
        files
            .values()
            .chain(named.values().map(|n| &n.entry))
            .filter(|e| e.mode == PolicyMode::Enforce)
            .filter_map(|e| e.serving.clone())
            .chain(candidates)
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
                if key.namespace != ns {
                    continue;
                }
                if n.shadows(parent)
                    && let Some(a) = n.entry.serving.as_ref().filter(|a| a.parent_kind() == *kind)
                {
                    out.push(Shadow { source: ShadowSource::Named(key.clone()), admitted: a.clone() });
                }
                // A rollout's shadow step, beside whatever decides the parents the
                // policy selects now: its serving revision, or for its first module
                // the policy that decided them before. A parent that names it while it
                // has no serving revision is decided by the candidate itself.
                let naming = Self::named_by(parent).as_ref() == Some(key);
                let decides = (naming && n.entry.serving.is_some())
                    || (!naming && n.entry.mode == PolicyMode::Enforce && n.selects(parent));
                if decides && let Some(a) = n.shadow_candidate(kind) {
                    out.push(Shadow { source: ShadowSource::Named(key.clone()), admitted: a });
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
            let Some(n) = named.get(&key) else {
                return Selection::Unavailable(format!("ReconcilePolicy {:?} not found in namespace {ns:?}", key.name));
            };
            if n.entry.mode == PolicyMode::Enforce
                && let Some(a) = n.candidate_for(parent, kind)
            {
                return Selection::Ready(a);
            }
            // Its first module, being rolled out: nothing else can decide for a parent
            // that names it.
            if n.entry.serving.is_none()
                && let Some(c) = n.candidate.as_ref().filter(|c| c.admitted.parent_kind() == *kind)
            {
                return Selection::Ready(c.admitted.clone());
            }
            return match &n.entry {
                Entry { mode: PolicyMode::Shadow, .. } => Selection::Unavailable(format!(
                    "ReconcilePolicy {:?} is in Shadow mode: it never decides; name an Enforce policy",
                    key.name
                )),
                Entry { serving: Some(a), .. } if a.parent_kind() == *kind => Selection::Ready(a.clone()),
                Entry { serving: Some(a), .. } => Selection::Unavailable(format!(
                    "ReconcilePolicy {:?} serves {}, not {}",
                    key.name,
                    kind_name(&a.parent_kind()),
                    kind_name(kind)
                )),
                Entry { serving: None, error: None, .. } => Selection::Loading,
                Entry { serving: None, error: Some(e), .. } => {
                    Selection::Unavailable(format!("ReconcilePolicy {:?} has no usable module: {e}", key.name))
                }
            };
        }
        {
            let named = self.named.read();
            let mut canaries: Vec<(&PolicyRef, &Named)> = named
                .iter()
                .filter(|(k, n)| {
                    k.namespace.as_deref() == Some(ns.as_str())
                        && n.entry.mode == PolicyMode::Enforce
                        && n.selects(parent)
                })
                .collect();
            canaries.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            // The first canary that decides it: with its candidate when the parent is
            // in the candidate's share, else with its serving revision; one with
            // neither for this parent (its first module in a shadow step, or the parent
            // outside the share) leaves it to the next, and to the default.
            for (_, n) in canaries {
                if let Some(a) = n.candidate_for(parent, kind) {
                    return Selection::Ready(a);
                }
                if let Some(a) = n.entry.serving.as_ref().filter(|a| a.parent_kind() == *kind) {
                    return Selection::Ready(a.clone());
                }
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
