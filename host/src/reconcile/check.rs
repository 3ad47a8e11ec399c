//! Checks a plan against the parent it was made for, before anything touches the
//! cluster. A decision is applied whole or not at all: one bad action rejects it, so a
//! policy cannot half-succeed at something it should not do.
//!
//! What is refused whatever a policy believes: kinds it did not declare, namespaces
//! other than its parent's beyond those the administrator granted
//! ([`crate::crd::Reach`]), children the parent does not control, owner references and
//! the host's labels set by the policy, names and labels Kubernetes would refuse, and
//! pods or pod templates that weaken the restricted security context. What the host
//! adds: the namespace (a namespaced parent's), the controller owner reference (or,
//! where one cannot point, the host's mark: [`crate::kubernetes::mark`]), the
//! managed-by label and the restricted defaults.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

use super::keys::ChildKey;
use super::lookups::{self, LookupError};
use super::observe::Observed;
use super::plan::{Checked, Child, Doomed, Note, Plan};
use super::restrict::{self, Weakening};
use super::syntax::{condition_reason, dns1123_subdomain, label_value, qualified_name};
use super::waves;
use crate::contract::bindings::reconciler::Lookup;
use crate::kubernetes::access::Resolved;
use crate::kubernetes::mark::{self, MANAGED_BY, MANAGED_BY_LABEL, Mark};
use crate::kubernetes::namespaces;
use crate::kubernetes::object::Object;

/// Shortest and longest requeue honoured.
const MIN_REQUEUE: Duration = Duration::from_millis(100);
const MAX_REQUEUE: Duration = Duration::from_secs(3600);
/// Longest Event message accepted (the API server's own limit is 1 KiB for a note).
const MAX_EVENT_MESSAGE: usize = 1024;

/// Why a decision was refused. Every variant names what it refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    #[error("{what} is not a JSON object")]
    NotAnObject { what: String },
    #[error("{what} is not valid: {error}")]
    Malformed { what: String, error: String },
    #[error("{kind} is not a kind this policy declared as a child")]
    UndeclaredKind { kind: String },
    #[error("{key}: namespace {namespace:?} is not the parent's namespace {parent:?}")]
    OtherNamespace { key: Box<ChildKey>, namespace: String, parent: String },
    #[error("{key}: {kind} is cluster-scoped, so it has no metadata.namespace")]
    ClusterScopedNamespace { key: Box<ChildKey>, kind: String },
    #[error("{key}: the parent is cluster-scoped, so a namespaced child names its metadata.namespace")]
    NamespaceRequired { key: Box<ChildKey> },
    #[error(
        "{key}: the policy may not write in namespace {namespace:?} (reach.namespaces: granted {granted}; selected {selected}; owned namespaces {owned})"
    )]
    NotReachable { key: Box<ChildKey>, namespace: String, granted: String, selected: String, owned: String },
    #[error("{key} names children in {count} namespaces; contract 0.3 keys carry no namespace, so it cannot say which")]
    Ambiguous { key: Box<ChildKey>, count: usize },
    #[error("{key} is not a child this parent controls")]
    NotOwned { key: Box<ChildKey> },
    #[error(
        "{key}: the parent is being deleted without the host's teardown finalizer, so a child where no owner reference can point would outlive it"
    )]
    Unguarded { key: Box<ChildKey> },
    #[error(
        "{key}: a namespaced parent's policy patches objects of its own namespace; a cluster-scoped kind needs the administrator's grant (reach.clusterKinds)"
    )]
    NotGranted { key: Box<ChildKey> },
    #[error("{what} {value:?}: {why}")]
    InvalidSyntax { what: String, value: String, why: String },
    #[error("{what} is set by the host, not by policies")]
    Reserved { what: String },
    #[error("{child}: {weakening}")]
    Weakened { child: String, weakening: Weakening },
    #[error("spec.template: {weakening}")]
    InvalidTemplate { weakening: Weakening },
    #[error(
        "asked to create {asked} pods, but spec.replicas={replicas} with {active} active and {creating} being created allows {allowed}"
    )]
    TooManyPods { asked: usize, replicas: i32, active: usize, creating: usize, allowed: usize },
    #[error("status: {0}")]
    InvalidStatus(String),
    #[error("finalize-done while the parent is not being deleted")]
    NotDeleting,
    #[error("finalize-done, but the policy declares no finalizer")]
    NoFinalizer,
    #[error("event: {0}")]
    InvalidEvent(String),
    #[error("{0}")]
    Lookup(#[from] LookupError),
    #[error("{calls} calls in one reconcile and the last still named lookups it had no answer to: {missing}")]
    LookupsUnstable { calls: usize, missing: String },
    #[error("{key}: a patch changes only an object this decision looked up, and it did not look this one up")]
    NotLookedUp { key: Box<ChildKey> },
    #[error("{key}: {kind} is neither a child kind nor a lookup kind declared with patch")]
    NotPatchable { key: Box<ChildKey>, kind: String },
    #[error(
        "{key}: a patch may not carry a pod spec ({field}): the restricted profile is the host's to set on what it creates"
    )]
    PatchesPodSpec { key: Box<ChildKey>, field: String },
}

impl Rejection {
    /// After `calls` calls of one reconcile, the last still named `missing` unanswered.
    pub fn lookups_unstable(calls: usize, missing: &[Lookup]) -> Self {
        let missing = missing.iter().map(lookups::describe).collect::<Vec<_>>().join(", ");
        Rejection::LookupsUnstable { calls, missing }
    }

    /// The `PolicyFailed` reason: a PodSet template the restricted profile refuses is
    /// the object's fault, everything else the decision's.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::InvalidTemplate { .. } => "InvalidTemplate",
            Rejection::LookupsUnstable { .. } => "LookupsUnstable",
            _ => "InvalidDecision",
        }
    }

    /// A bounded label for the failures metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Rejection::NotAnObject { .. } | Rejection::Malformed { .. } => "Malformed",
            Rejection::UndeclaredKind { .. } => "UndeclaredKind",
            Rejection::OtherNamespace { .. }
            | Rejection::ClusterScopedNamespace { .. }
            | Rejection::NamespaceRequired { .. } => "OtherNamespace",
            Rejection::NotReachable { .. } => "NotReachable",
            Rejection::Ambiguous { .. } => "Ambiguous",
            Rejection::NotOwned { .. } => "NotOwned",
            Rejection::NotGranted { .. } => "NotGranted",
            Rejection::Unguarded { .. } => "Unguarded",
            Rejection::InvalidSyntax { .. } => "InvalidSyntax",
            Rejection::Reserved { .. } => "Reserved",
            Rejection::Weakened { .. } => "WeakenedSecurityContext",
            Rejection::InvalidTemplate { .. } => "InvalidTemplate",
            Rejection::TooManyPods { .. } => "TooManyPods",
            Rejection::InvalidStatus(_) => "InvalidStatus",
            Rejection::NotDeleting | Rejection::NoFinalizer => "InvalidFinalize",
            Rejection::InvalidEvent(_) => "InvalidEvent",
            Rejection::Lookup(e) => e.metric_label(),
            Rejection::LookupsUnstable { .. } => "LookupsUnstable",
            Rejection::NotLookedUp { .. } | Rejection::NotPatchable { .. } => "NotPatchable",
            Rejection::PatchesPodSpec { .. } => "PatchesPodSpec",
        }
    }
}

/// Checks `plan` for the parent in `observed`, whose policy declared `resolved`.
pub fn check(plan: Plan, observed: &Observed, resolved: &Resolved) -> Result<Checked, Rejection> {
    let parent = Parent::of(observed, resolved, &plan);
    let mut out = Checked::default();
    for object in plan.creates {
        out.creates.push(child(object, Mode::Create, &parent, resolved)?);
    }
    for object in plan.applies {
        if !is_child_kind(&object, resolved) && is_lookup_kind(&object, resolved) {
            out.patches.extend(patch(object, observed, resolved)?);
            continue;
        }
        let c = child(object, Mode::Apply, &parent, resolved)?;
        // An apply that changes nothing still costs a write request and the API
        // server's work on it: skip it.
        let holds = observed.child(&c.key()).is_some_and(|seen| already_holds(&c.object, &seen.object));
        if !holds {
            out.applies.push(c);
        }
    }
    for key in plan.deletes {
        let key = locate(key, observed, resolved)?;
        let seen = observed.child(&key).ok_or_else(|| Rejection::NotOwned { key: Box::new(key.clone()) })?;
        if !out.deletes.iter().any(|d| d.key == key) {
            let uid = seen.object.uid().unwrap_or_default();
            out.deletes.push(Doomed { resource: seen.resource.clone(), key, uid });
        }
    }
    if let Some(status) = plan.status {
        if !status.is_object() {
            return Err(Rejection::InvalidStatus("the status must be a JSON object".into()));
        }
        out.status = Some(status);
    }
    out.fold_status = plan.fold_status;
    for note in plan.events {
        out.events.push(event(note, observed, resolved)?);
    }
    out.requeue = plan.requeue_ms.map(|ms| Duration::from_millis(ms.into()).clamp(MIN_REQUEUE, MAX_REQUEUE));
    if plan.finalize {
        if resolved.finalizer.is_none() {
            return Err(Rejection::NoFinalizer);
        }
        if observed.parent.metadata.deletion_timestamp.is_none() {
            return Err(Rejection::NotDeleting);
        }
        out.finalize = true;
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Apply,
}

/// What every child gets from its parent.
struct Parent {
    /// "" for a cluster-scoped parent.
    namespace: String,
    owner: OwnerReference,
    /// For a child an owner reference cannot point from.
    mark: Mark,
    /// Being deleted without the host's teardown finalizer: nothing would delete a
    /// marked child made now.
    unguarded: bool,
    /// The parent's own namespaces, when the grant includes them: the `v1 Namespace`
    /// children it has or this decision creates or applies (they are created first,
    /// see execute.rs).
    owned_namespaces: BTreeSet<String>,
}

/// The kind of the objects that are namespaces.
fn is_namespace(api_version: &str, kind: &str) -> bool {
    api_version == "v1" && kind == "Namespace"
}

impl Parent {
    fn of(observed: &Observed, resolved: &Resolved, plan: &Plan) -> Self {
        let p = &observed.parent;
        let r = &observed.parent_resource;
        let owner = OwnerReference {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: p.name_any(),
            uid: p.uid().unwrap_or_default(),
            controller: Some(true),
            // Foreground deletion of the parent waits for its children.
            block_owner_deletion: Some(true),
        };
        let mark = Mark::for_parent(r, p);
        let mut owned_namespaces = BTreeSet::new();
        if resolved.reach.namespaces.owned {
            let seen = observed.children.iter().filter(|c| is_namespace(&c.resource.api_version, &c.resource.kind));
            owned_namespaces.extend(seen.map(|c| c.object.name_any()));
            let str_of = |o: &Value, field: &str| o.get(field).and_then(Value::as_str).map(String::from);
            for o in plan.creates.iter().chain(&plan.applies) {
                if is_namespace(&str_of(o, "apiVersion").unwrap_or_default(), &str_of(o, "kind").unwrap_or_default()) {
                    owned_namespaces.extend(o.get("metadata").and_then(|m| str_of(m, "name")));
                }
            }
        }
        let unguarded =
            p.metadata.deletion_timestamp.is_some() && !p.finalizers().iter().any(|f| f == waves::TEARDOWN_FINALIZER);
        Parent { namespace: p.namespace().unwrap_or_default(), owner, mark, unguarded, owned_namespaces }
    }

    /// Whether an owner reference can tie a child in `namespace` ("" when
    /// cluster-scoped) to this parent: a cluster-scoped parent owns anything; a
    /// namespaced one only what is in its namespace.
    fn can_own(&self, namespace: &str) -> bool {
        self.namespace.is_empty() || self.namespace == namespace
    }
}

/// The key a policy named (contract 0.3 keys carry no namespace) as the child it
/// means: a cluster-scoped kind's has none, a namespaced parent's children are in its
/// namespace, and the namespaced child of a parent whose children may be elsewhere is
/// the one of its children with that kind and name (refused when several namespaces
/// hold one).
pub fn locate(key: ChildKey, observed: &Observed, resolved: &Resolved) -> Result<ChildKey, Rejection> {
    let declared = child_resource(resolved, &key);
    if declared.is_some_and(|r| resolved.is_cluster_scoped(r)) {
        return Ok(ChildKey { namespace: String::new(), ..key });
    }
    let cluster_parent = resolved.parent_is_cluster_scoped();
    if !cluster_parent && !resolved.reach.grants_namespaces() {
        return Ok(ChildKey { namespace: observed.namespace(), ..key });
    }
    let mut namespaces: Vec<String> = observed
        .children
        .iter()
        .filter(|c| {
            c.resource.api_version == key.api_version && c.resource.kind == key.kind && c.object.name_any() == key.name
        })
        .map(|c| c.object.namespace().unwrap_or_default())
        .collect();
    match namespaces.len() {
        0 if !cluster_parent => Ok(ChildKey { namespace: observed.namespace(), ..key }),
        0 => Err(Rejection::NotOwned { key: Box::new(key) }),
        1 => Ok(ChildKey { namespace: namespaces.remove(0), ..key }),
        count => Err(Rejection::Ambiguous { key: Box::new(key), count }),
    }
}

fn child(object: Value, mode: Mode, parent: &Parent, resolved: &Resolved) -> Result<Child, Rejection> {
    let what = if mode == Mode::Create { "created child" } else { "applied child" };
    if !object.is_object() {
        return Err(Rejection::NotAnObject { what: what.into() });
    }
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let resource = resolved
        .children
        .iter()
        .find(|r| r.api_version == api_version && r.kind == kind)
        .ok_or_else(|| Rejection::UndeclaredKind { kind: format!("{api_version} {kind}") })?;
    let mut obj: DynamicObject = serde_json::from_value(object)
        .map_err(|e| Rejection::Malformed { what: format!("{what} {kind}"), error: e.to_string() })?;
    let meta = &mut obj.metadata;
    let name = match (mode, &meta.name, &meta.generate_name) {
        (_, Some(n), _) => {
            syntax("name", n, dns1123_subdomain(n, 253))?;
            n.clone()
        }
        (Mode::Create, None, Some(prefix)) => {
            // The API server appends 5 characters to a generateName prefix.
            let base = prefix.strip_suffix('-').unwrap_or(prefix);
            syntax("generateName", prefix, dns1123_subdomain(base, 253 - 6))?;
            String::new()
        }
        (Mode::Create, None, None) => {
            return Err(Rejection::Malformed {
                what: format!("{what} {kind}"),
                error: "no metadata.name or metadata.generateName".into(),
            });
        }
        (Mode::Apply, None, _) => {
            return Err(Rejection::Malformed { what: format!("{what} {kind}"), error: "no metadata.name".into() });
        }
    };
    let asked = meta.namespace.clone().filter(|ns| !ns.is_empty());
    let key = ChildKey::new(resource, asked.as_deref().unwrap_or_default(), &name);
    meta.namespace = placed(&key, asked, resolved.is_cluster_scoped(resource), parent, resolved)?;
    let key = ChildKey::new(resource, meta.namespace.as_deref().unwrap_or_default(), &name);
    if meta.owner_references.as_ref().is_some_and(|o| !o.is_empty()) {
        return Err(Rejection::Reserved { what: format!("{key}: metadata.ownerReferences") });
    }
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    if labels.get(MANAGED_BY_LABEL).is_some_and(|v| v != MANAGED_BY) {
        return Err(Rejection::Reserved { what: format!("{key}: label {MANAGED_BY_LABEL}") });
    }
    let marks = labels.keys().chain(meta.annotations.iter().flatten().map(|(k, _)| k));
    if let Some(k) = marks.into_iter().find(|k| mark::is_reserved(k)) {
        return Err(Rejection::Reserved { what: format!("{key}: {k}") });
    }
    for (k, v) in labels.iter() {
        syntax("label key", k, qualified_name(k))?;
        syntax(&format!("label {k}"), v, label_value(v))?;
    }
    for k in meta.annotations.iter().flatten().map(|(k, _)| k) {
        syntax("annotation key", k, qualified_name(k))?;
    }
    if let Some(annotations) = &meta.annotations
        && let Err((key, why)) = waves::check_annotations(annotations)
    {
        return Err(Rejection::InvalidSyntax {
            what: format!("{key}: annotation {key}"),
            value: annotations[&key].clone(),
            why,
        });
    }
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    if parent.can_own(&key.namespace) {
        meta.owner_references = Some(vec![parent.owner.clone()]);
    } else if parent.unguarded {
        return Err(Rejection::Unguarded { key: Box::new(key) });
    } else {
        parent.mark.write(meta);
    }
    let own = obj.metadata.annotations.as_ref().map(|a| serde_json::to_value(a).unwrap_or_default());
    restrict::with_annotations(&mut obj.data, own.as_ref(), resolved.reach.pod_security)
        .map_err(|weakening| Rejection::Weakened { child: key.to_string(), weakening })?;
    Ok(Child { resource: Arc::new(resource.clone()), object: obj })
}

fn kind_of(object: &Value) -> (&str, &str) {
    let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or_default();
    (field("apiVersion"), field("kind"))
}

fn is_child_kind(object: &Value, resolved: &Resolved) -> bool {
    let (api_version, kind) = kind_of(object);
    resolved.children.iter().any(|r| r.api_version == api_version && r.kind == kind)
}

fn is_lookup_kind(object: &Value, resolved: &Resolved) -> bool {
    let (api_version, kind) = kind_of(object);
    resolved.lookups.iter().any(|(r, _)| r.api_version == api_version && r.kind == kind)
}

/// An apply of a looked-up object, not a child: the fields it sets, written as the
/// policy's, on an object this decision looked up, of a lookup kind declared with
/// `patch`. Nothing that would make it the parent's (owner references, the host's
/// label, finalizers), and no pod spec. `None` when every field already holds.
fn patch(object: Value, observed: &Observed, resolved: &Resolved) -> Result<Option<Child>, Rejection> {
    let (api_version, kind) = kind_of(&object);
    let (api_version, kind) = (api_version.to_string(), kind.to_string());
    let Some((resource, declared)) =
        resolved.lookups.iter().find(|(r, _)| r.api_version == api_version && r.kind == kind)
    else {
        return Err(Rejection::UndeclaredKind { kind: format!("{api_version} {kind}") });
    };
    let mut obj: DynamicObject = serde_json::from_value(object)
        .map_err(|e| Rejection::Malformed { what: format!("patched {kind}"), error: e.to_string() })?;
    let meta = &mut obj.metadata;
    let Some(name) = meta.name.clone() else {
        return Err(Rejection::Malformed { what: format!("patched {kind}"), error: "no metadata.name".into() });
    };
    syntax("name", &name, dns1123_subdomain(&name, 253))?;
    let asked = meta.namespace.clone().filter(|ns| !ns.is_empty());
    let namespace = match (resolved.is_cluster_scoped(resource), asked) {
        (true, _) => None,
        (false, Some(ns)) => Some(ns),
        (false, None) => Some(observed.namespace()).filter(|ns| !ns.is_empty()),
    };
    meta.namespace = namespace.clone();
    let key = ChildKey::new(resource, namespace.as_deref().unwrap_or_default(), &name);
    if !declared.patch {
        return Err(Rejection::NotPatchable { key: Box::new(key), kind });
    }
    if meta.owner_references.as_ref().is_some_and(|o| !o.is_empty()) {
        return Err(Rejection::Reserved { what: format!("{key}: metadata.ownerReferences") });
    }
    if meta.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(Rejection::Reserved { what: format!("{key}: metadata.finalizers of an object it does not own") });
    }
    let reserved = meta.labels.iter().flatten().chain(meta.annotations.iter().flatten()).map(|(k, _)| k);
    if let Some(k) = reserved.into_iter().find(|k| *k == MANAGED_BY_LABEL || mark::is_reserved(k)) {
        return Err(Rejection::Reserved { what: format!("{key}: {k}") });
    }
    // A namespaced parent reaches its own namespace; a cluster-scoped object only with
    // the administrator's grant of the kind (a Namespace's labels are its Pod Security).
    let granted = resolved.reach.cluster_kinds.iter().any(|g| g.kind == kind && g.group == resource.group);
    if resolved.is_cluster_scoped(resource) && !resolved.parent_is_cluster_scoped() && !granted {
        return Err(Rejection::NotGranted { key: Box::new(key) });
    }
    for (k, v) in meta.labels.iter().flatten() {
        syntax("label key", k, qualified_name(k))?;
        syntax(&format!("label {k}"), v, label_value(v))?;
    }
    for k in meta.annotations.iter().flatten().map(|(k, _)| k) {
        syntax("annotation key", k, qualified_name(k))?;
    }
    if let Some(at) = restrict::pods_in(&obj.data).first() {
        return Err(Rejection::PatchesPodSpec { key: Box::new(key), field: restrict::PodAt::dotted(&at.spec) });
    }
    let seen = observed
        .looked_up
        .iter()
        .flat_map(|a| &a.objects)
        .find(|o| o.resource.api_version == api_version && o.resource.kind == kind && key.names(&o.object))
        .ok_or_else(|| Rejection::NotLookedUp { key: Box::new(key.clone()) })?;
    // The host's children are changed by their own parent's decisions, never patched.
    if seen.object.labels().get(MANAGED_BY_LABEL).is_some_and(|v| v == MANAGED_BY) {
        return Err(Rejection::Reserved { what: format!("{key}: a child the host made ({MANAGED_BY_LABEL})") });
    }
    if already_holds(&obj, &seen.object) {
        return Ok(None);
    }
    Ok(Some(Child { resource: seen.resource.clone(), object: obj }))
}

/// Where a child goes: a cluster-scoped kind nowhere; a namespaced parent's child in the
/// parent's namespace (the default); elsewhere, in the namespace it names, if the
/// administrator's reach grants it (a cluster-scoped parent's must name one).
fn placed(
    key: &ChildKey,
    asked: Option<String>,
    cluster_kind: bool,
    parent: &Parent,
    resolved: &Resolved,
) -> Result<Option<String>, Rejection> {
    if cluster_kind {
        return match asked {
            Some(_) => Err(Rejection::ClusterScopedNamespace { key: Box::new(key.clone()), kind: key.kind.clone() }),
            None => Ok(None),
        };
    }
    let ns = match asked {
        None if !parent.namespace.is_empty() => return Ok(Some(parent.namespace.clone())),
        None => return Err(Rejection::NamespaceRequired { key: Box::new(key.clone()) }),
        Some(ns) if ns == parent.namespace => return Ok(Some(ns)),
        Some(ns) => ns,
    };
    let reach = &resolved.reach.namespaces;
    if resolved.grants(&ns) || (reach.owned && parent.owned_namespaces.contains(&ns)) {
        return Ok(Some(ns));
    }
    if !parent.namespace.is_empty() && !resolved.reach.grants_namespaces() {
        return Err(Rejection::OtherNamespace {
            key: Box::new(key.clone()),
            namespace: ns,
            parent: parent.namespace.clone(),
        });
    }
    let list = |names: &mut dyn Iterator<Item = &String>| {
        let all: Vec<&str> = names.map(String::as_str).collect();
        if all.is_empty() { "none".to_string() } else { all.join(", ") }
    };
    Err(Rejection::NotReachable {
        key: Box::new(key.clone()),
        namespace: ns,
        granted: list(&mut reach.names.iter()),
        selected: reach.selector.as_ref().map_or_else(|| "none".into(), namespaces::describe),
        owned: if reach.owned { list(&mut parent.owned_namespaces.iter()) } else { "not granted".into() },
    })
}

fn syntax(what: &str, value: &str, result: Result<(), String>) -> Result<(), Rejection> {
    result.map_err(|why| Rejection::InvalidSyntax { what: what.into(), value: value.into(), why })
}

fn event(mut note: Note, observed: &Observed, resolved: &Resolved) -> Result<Note, Rejection> {
    condition_reason(&note.reason)
        .map_err(|why| Rejection::InvalidEvent(format!("reason {:?}: {why}", note.reason)))?;
    if note.message.len() > MAX_EVENT_MESSAGE {
        return Err(Rejection::InvalidEvent(format!(
            "message is {} bytes, over {MAX_EVENT_MESSAGE}",
            note.message.len()
        )));
    }
    if let Some(key) = note.regarding.take() {
        let key = locate(key, observed, resolved)?;
        if observed.child(&key).is_none() {
            return Err(Rejection::NotOwned { key: Box::new(key) });
        }
        note.regarding = Some(key);
    }
    Ok(note)
}

/// Whether every field `desired` sets already holds in `current`: the data (spec, …)
/// as a JSON subset, and the labels and annotations. Only the top-level fields
/// `desired` sets are parsed out of the cached object.
pub fn already_holds(desired: &DynamicObject, current: &Object) -> bool {
    let subset = |want: &Option<BTreeMap<String, String>>, have: &Option<BTreeMap<String, String>>| {
        want.iter().flatten().all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    subset(&desired.metadata.labels, &current.metadata.labels)
        && subset(&desired.metadata.annotations, &current.metadata.annotations)
        && desired.data.as_object().is_some_and(|want| {
            want.iter().all(|(k, v)| {
                let have = current.field(k).and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
                have.is_some_and(|h| json_subset(v, &h))
            })
        })
}

/// `want` ⊆ `have`: objects by key, lists element by element (same length: a list
/// is owned whole), scalars by equality.
fn json_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| h.get(k).is_some_and(|hv| json_subset(v, hv))),
        (Value::Array(w), Value::Array(h)) => w.len() == h.len() && w.iter().zip(h).all(|(a, b)| json_subset(a, b)),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (w, h) => w == h,
    }
}

/// The resource a child key names, among the declared children.
pub fn child_resource<'a>(resolved: &'a Resolved, key: &ChildKey) -> Option<&'a ApiResource> {
    resolved.children.iter().find(|r| r.api_version == key.api_version && r.kind == key.kind)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reconcile::observe::fixtures::{configmap, deployments, observed, pod, pods, podset, resolved};

    fn plan_creating(object: Value) -> Plan {
        Plan { creates: vec![object], ..Plan::default() }
    }

    #[test]
    fn a_child_gets_the_namespace_the_controller_reference_and_the_host_label() {
        let o = observed(podset(1), Vec::new());
        let checked = check(plan_creating(configmap("web-cm", json!({}))), &o, &resolved(None)).expect("passes");
        let child = &checked.creates[0].object;
        assert_eq!(child.metadata.namespace.as_deref(), Some("ns"));
        let owner = &child.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("PodSet", "uid-web", Some(true)));
        assert_eq!(child.metadata.labels.as_ref().expect("labels")[MANAGED_BY_LABEL], MANAGED_BY);
    }

    #[test]
    fn what_a_policy_may_not_do_is_refused_before_any_call() {
        let o = observed(podset(1), vec![(pods(), pod("web-a", "Running"))]);
        let r = resolved(None);
        let refused = |plan: Plan| check(plan, &o, &r).expect_err("refused");
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s" } });
        assert!(matches!(refused(plan_creating(secret)), Rejection::UndeclaredKind { .. }));
        let elsewhere = configmap("web-cm", json!({ "namespace": "kube-system" }));
        assert!(matches!(refused(plan_creating(elsewhere)), Rejection::OtherNamespace { .. }));
        let owned = configmap(
            "web-cm",
            json!({ "ownerReferences": [{ "apiVersion": "v1", "kind": "X", "name": "x", "uid": "u" }] }),
        );
        assert!(matches!(refused(plan_creating(owned)), Rejection::Reserved { .. }));
        let foreign = ChildKey::of("v1", "ConfigMap", "ns", "not-mine");
        assert!(matches!(refused(Plan { deletes: vec![foreign], ..Plan::default() }), Rejection::NotOwned { .. }));
        let bad_name = configmap("Web_CM", json!({}));
        assert!(matches!(refused(plan_creating(bad_name)), Rejection::InvalidSyntax { .. }));
        let bad_label = configmap("web-cm", json!({ "labels": { "tier": "not valid!" } }));
        assert!(matches!(refused(plan_creating(bad_label)), Rejection::InvalidSyntax { .. }));
        let privileged = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web" },
            "spec": { "template": { "spec": { "containers": [{ "name": "c", "securityContext": { "privileged": true } }] } } }
        });
        let e = refused(Plan { applies: vec![privileged], ..Plan::default() });
        assert!(matches!(&e, Rejection::Weakened { .. }) && e.to_string().contains("privileged"), "{e}");
        assert!(matches!(refused(Plan { status: Some(json!([1])), ..Plan::default() }), Rejection::InvalidStatus(_)));
        assert!(matches!(refused(Plan { finalize: true, ..Plan::default() }), Rejection::NoFinalizer));
        let r = resolved(Some("example.com/cleanup"));
        assert!(matches!(check(Plan { finalize: true, ..Plan::default() }, &o, &r), Err(Rejection::NotDeleting)));
        let shouting = Note { warning: false, reason: "not camel".into(), message: String::new(), regarding: None };
        assert!(matches!(refused(Plan { events: vec![shouting], ..Plan::default() }), Rejection::InvalidEvent(_)));
    }

    #[test]
    fn deletes_carry_the_uid_and_an_apply_that_changes_nothing_is_dropped() {
        let mut deployment = DynamicObject::new("web", &deployments()).within("ns");
        deployment.metadata.uid = Some("uid-dep".into());
        deployment.metadata.labels = Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into());
        deployment.metadata.owner_references = pod("x", "Running").metadata.owner_references;
        deployment.data = json!({ "spec": { "replicas": 3, "template": { "spec": { "containers": [{
            "name": "m", "image": "memcached:1.6.18", "imagePullPolicy": "IfNotPresent",
            "securityContext": { "allowPrivilegeEscalation": false, "privileged": false, "runAsNonRoot": true,
                                 "capabilities": { "drop": ["ALL"] } } }],
            "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } } } } },
            "status": { "readyReplicas": 3 } });
        let o = observed(podset(1), vec![(pods(), pod("web-a", "Running")), (deployments(), deployment)]);
        let same = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web" },
            "spec": { "replicas": 3, "template": { "spec": { "containers": [{ "name": "m", "image": "memcached:1.6.18" }] } } } });
        let mut scaled = same.clone();
        scaled["spec"]["replicas"] = json!(5);
        let web_a = ChildKey::of("v1", "Pod", "ns", "web-a");
        let plan = Plan { applies: vec![same, scaled], deletes: vec![web_a.clone(), web_a], ..Plan::default() };
        let checked = check(plan, &o, &resolved(None)).expect("passes");
        assert_eq!(checked.applies.len(), 1, "only the apply that changes something");
        assert_eq!(checked.applies[0].object.data["spec"]["replicas"], json!(5));
        assert_eq!(checked.deletes.len(), 1, "a child is deleted once");
        assert_eq!(checked.deletes[0].uid, "uid-web-a");
    }

    #[test]
    fn a_looked_up_object_is_patched_as_it_is_never_owned_and_only_if_looked_up() {
        use crate::contract::bindings::LookupKind;
        use crate::contract::bindings::reconciler::{Lookup, LookupMatch};
        use crate::contract::declarations::to_wit;
        use crate::reconcile::lookups::LookedUp;
        use crate::reconcile::observe::Observation;
        use podset_test_support::objects::configmaps;

        let mut r = resolved(None);
        r.children = vec![pods()];
        let kind_of =
            |res: &ApiResource| to_wit(&kube::core::GroupVersionKind::gvk(&res.group, &res.version, &res.kind));
        r.lookups = vec![
            (deployments(), LookupKind { kind: kind_of(&deployments()), patch: true }),
            (configmaps(), LookupKind { kind: kind_of(&configmaps()), patch: false }),
        ];
        // Someone else's Deployment, found by a lookup, and one of their ConfigMaps.
        let mut app = DynamicObject::new("app", &deployments()).within("ns");
        app.data = json!({ "spec": { "template": { "metadata": { "annotations": { "hash": "old" } } } } });
        let settings = DynamicObject::new("settings", &configmaps()).within("ns");
        let mut o = observed(podset(1), Vec::new());
        for (res, obj) in [(deployments(), app), (configmaps(), settings)] {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let lookup = Lookup { kind: kind_of(&res), namespace: String::new(), match_: LookupMatch::Name(name) };
            let seen = Observation { resource: Arc::new(res), object: Arc::new(obj.into()) };
            o.looked_up.push(LookedUp { lookup, objects: vec![seen] });
        }
        let patch = |name: &str, hash: &str| {
            json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name },
                    "spec": { "template": { "metadata": { "annotations": { "hash": hash } } } } })
        };
        let checked = check(Plan { applies: vec![patch("app", "new")], ..Plan::default() }, &o, &r).expect("passes");
        assert!(checked.applies.is_empty(), "not a child");
        let patched = &checked.patches[0].object;
        assert_eq!(patched.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(patched.metadata.owner_references, None, "never owned");
        assert_eq!(patched.metadata.labels, None, "not the host's");
        let unchanged = check(Plan { applies: vec![patch("app", "old")], ..Plan::default() }, &o, &r).expect("passes");
        assert!(unchanged.patches.is_empty(), "every field already holds");

        let refused =
            |object: Value| check(Plan { applies: vec![object], ..Plan::default() }, &o, &r).expect_err("refused");
        assert!(matches!(refused(patch("other", "new")), Rejection::NotLookedUp { .. }), "not looked up");
        let mut pod_spec = patch("app", "new");
        pod_spec["spec"]["template"]["spec"] = json!({ "containers": [{ "name": "c", "image": "evil" }] });
        let e = refused(pod_spec);
        assert!(matches!(&e, Rejection::PatchesPodSpec { .. }) && e.to_string().contains("spec.template.spec"), "{e}");
        let mut owned = patch("app", "new");
        owned["metadata"]["ownerReferences"] = json!([{ "apiVersion": "v1", "kind": "X", "name": "x", "uid": "u" }]);
        assert!(matches!(refused(owned), Rejection::Reserved { .. }));
        let mut labelled = patch("app", "new");
        labelled["metadata"]["labels"] = json!({ MANAGED_BY_LABEL: MANAGED_BY });
        assert!(matches!(refused(labelled), Rejection::Reserved { .. }), "adopting it into the host's watch");
        let mut marked = patch("app", "new");
        marked["metadata"]["labels"] = json!({ crate::kubernetes::mark::PARENT_UID_LABEL: "uid-web" });
        assert!(matches!(refused(marked), Rejection::Reserved { .. }), "making it a marked child");
        let read_only =
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "settings" }, "data": {} });
        assert!(matches!(refused(read_only), Rejection::NotPatchable { .. }), "declared without patch");
    }

    #[test]
    fn a_cluster_scoped_object_needs_a_grant_and_a_hosts_child_is_never_patched() {
        use crate::contract::bindings::LookupKind;
        use crate::contract::bindings::reconciler::{Lookup, LookupMatch};
        use crate::contract::declarations::to_wit;
        use crate::crd::{GroupKind, Reach};
        use crate::reconcile::lookups::LookedUp;
        use crate::reconcile::observe::Observation;
        use k8s_openapi::api::core::v1::Namespace;

        let namespaces = ApiResource::erase::<Namespace>(&());
        let kind_of =
            |res: &ApiResource| to_wit(&kube::core::GroupVersionKind::gvk(&res.group, &res.version, &res.kind));
        let mut r = resolved(None);
        r.children = vec![pods()];
        r.cluster_scoped.insert(&namespaces);
        r.lookups = vec![
            (namespaces.clone(), LookupKind { kind: kind_of(&namespaces), patch: true }),
            (deployments(), LookupKind { kind: kind_of(&deployments()), patch: true }),
        ];
        let mut made = DynamicObject::new("made", &deployments()).within("ns");
        made.metadata.labels = Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into());
        let mut o = observed(podset(1), Vec::new());
        for (res, obj) in [(namespaces.clone(), DynamicObject::new("team-a", &namespaces)), (deployments(), made)] {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let lookup = Lookup { kind: kind_of(&res), namespace: String::new(), match_: LookupMatch::Name(name) };
            let seen = Observation { resource: Arc::new(res), object: Arc::new(obj.into()) };
            o.looked_up.push(LookedUp { lookup, objects: vec![seen] });
        }
        let privileged = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "team-a",
            "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } });
        let plan = || Plan { applies: vec![privileged.clone()], ..Plan::default() };
        let e = check(plan(), &o, &r).expect_err("a namespaced parent's policy, no grant");
        assert!(matches!(e, Rejection::NotGranted { .. }), "{e}");
        r.reach = Reach {
            cluster_kinds: vec![GroupKind { group: String::new(), kind: "Namespace".into() }],
            ..Reach::default()
        };
        assert_eq!(check(plan(), &o, &r).expect("granted").patches.len(), 1);

        let child = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "made",
            "annotations": { "a": "b" } } });
        let e = check(Plan { applies: vec![child], ..Plan::default() }, &o, &r).expect_err("the host's child");
        assert!(matches!(e, Rejection::Reserved { .. }), "{e}");
    }

    #[test]
    fn requeues_are_clamped() {
        let o = observed(podset(1), Vec::new());
        let c = check(Plan { requeue_ms: Some(1), ..Plan::default() }, &o, &resolved(None)).expect("passes");
        assert_eq!(c.requeue, Some(MIN_REQUEUE));
    }

    /// A cluster-scoped `Tenant` that owns a `v1 Namespace` and ConfigMaps, with `reach`.
    mod cluster_scoped {
        use k8s_openapi::api::core::v1::Namespace;

        use super::*;
        use crate::crd::{GroupKind, NamespaceReach, Reach};
        use crate::kubernetes::scope::ClusterScoped;
        use crate::reconcile::observe::Observation;
        use podset_test_support::objects::{configmaps, tenants};

        fn namespaces() -> ApiResource {
            ApiResource::erase::<Namespace>(&())
        }

        fn resolved(owned: bool, names: &[&str]) -> Resolved {
            let mut cluster_scoped = ClusterScoped::default();
            cluster_scoped.insert(&tenants());
            cluster_scoped.insert(&namespaces());
            Resolved {
                parent: tenants(),
                children: vec![namespaces(), configmaps()],
                related: Vec::new(),
                lookups: Vec::new(),
                finalizer: None,
                cluster_scoped,
                reach: Reach {
                    cluster_kinds: vec![GroupKind { group: String::new(), kind: "Namespace".into() }],
                    namespaces: NamespaceReach {
                        names: names.iter().map(|n| n.to_string()).collect(),
                        owned,
                        ..NamespaceReach::default()
                    },
                    ..Reach::default()
                },
                namespace_labels: None,
            }
        }

        /// Tenant `acme`, with the children given as (resource, namespace, name).
        fn tenant(children: &[(ApiResource, &str, &str)]) -> Observed {
            let mut parent = DynamicObject::new("acme", &tenants());
            parent.metadata.uid = Some("uid-acme".into());
            let mut o = observed(podset(1), Vec::new());
            o.parent = Arc::new(parent.into());
            o.parent_resource = Arc::new(tenants());
            o.children = children
                .iter()
                .map(|(r, ns, name)| {
                    let mut child = DynamicObject::new(name, r);
                    child.metadata.namespace = Some(ns.to_string()).filter(|n| !n.is_empty());
                    child.metadata.uid = Some(format!("uid-{name}"));
                    Observation { resource: Arc::new(r.clone()), object: Arc::new(child.into()) }
                })
                .collect();
            o
        }

        fn namespace(name: &str) -> Value {
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } })
        }

        #[test]
        fn its_namespace_has_no_namespace_and_is_owned_by_reference() {
            let checked = check(plan_creating(namespace("acme")), &tenant(&[]), &resolved(true, &[])).expect("passes");
            let ns = &checked.creates[0];
            assert_eq!(ns.object.metadata.namespace, None);
            assert_eq!(ns.key(), ChildKey::of("v1", "Namespace", "", "acme"));
            let owner = &ns.object.metadata.owner_references.as_ref().expect("owner")[0];
            assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Tenant", "uid-acme"));
            let placed = namespace("acme");
            let mut elsewhere = placed.clone();
            elsewhere["metadata"]["namespace"] = json!("default");
            let e = check(plan_creating(elsewhere), &tenant(&[]), &resolved(true, &[])).expect_err("refused");
            assert!(matches!(e, Rejection::ClusterScopedNamespace { .. }), "{e}");
        }

        #[test]
        fn namespaced_children_go_only_where_the_reach_grants() {
            let r = resolved(true, &["shared"]);
            let quota = |ns: Option<&str>| configmap("quota", ns.map_or(json!({}), |ns| json!({ "namespace": ns })));
            // Its own namespace, whether already there or made by the same decision.
            let has_acme = tenant(&[(namespaces(), "", "acme")]);
            let checked = check(plan_creating(quota(Some("acme"))), &has_acme, &r).expect("an owned namespace");
            assert_eq!(checked.creates[0].key(), ChildKey::of("v1", "ConfigMap", "acme", "quota"));
            let both = Plan { creates: vec![quota(Some("acme")), namespace("acme")], ..Plan::default() };
            assert!(check(both, &tenant(&[]), &r).is_ok(), "a namespace created in the same decision");
            assert!(check(plan_creating(quota(Some("shared"))), &tenant(&[]), &r).is_ok(), "a namespace by name");

            let refused = |plan: Plan, r: &Resolved| check(plan, &has_acme, r).expect_err("refused");
            let e = refused(plan_creating(quota(Some("kube-system"))), &r);
            assert!(matches!(&e, Rejection::NotReachable { namespace, .. } if namespace == "kube-system"), "{e}");
            assert!(e.to_string().contains("granted shared; selected none; owned namespaces acme"), "{e}");
            let e = refused(plan_creating(quota(Some("acme"))), &resolved(false, &[]));
            assert!(e.to_string().contains("owned namespaces not granted"), "{e}");
            let e = refused(plan_creating(quota(None)), &r);
            assert!(matches!(e, Rejection::NamespaceRequired { .. }), "{e}");
        }

        #[test]
        fn a_key_without_a_namespace_names_the_one_child_of_that_name() {
            let r = resolved(true, &["shared"]);
            let cm = ChildKey::of("v1", "ConfigMap", "", "quota");
            let one = tenant(&[(configmaps(), "acme", "quota"), (configmaps(), "acme", "other")]);
            let checked = check(Plan { deletes: vec![cm.clone()], ..Plan::default() }, &one, &r).expect("passes");
            assert_eq!(checked.deletes[0].key, ChildKey::of("v1", "ConfigMap", "acme", "quota"));
            assert_eq!(checked.deletes[0].uid, "uid-quota");
            let ns = ChildKey::of("v1", "Namespace", "", "acme");
            let owns_ns = tenant(&[(namespaces(), "", "acme")]);
            let checked = check(Plan { deletes: vec![ns], ..Plan::default() }, &owns_ns, &r).expect("passes");
            assert_eq!(checked.deletes[0].key.namespace, "", "a cluster-scoped child");

            let two = tenant(&[(configmaps(), "acme", "quota"), (configmaps(), "shared", "quota")]);
            let e = check(Plan { deletes: vec![cm.clone()], ..Plan::default() }, &two, &r).expect_err("refused");
            assert!(matches!(e, Rejection::Ambiguous { count: 2, .. }), "{e}");
            let none = tenant(&[]);
            let e = check(Plan { deletes: vec![cm], ..Plan::default() }, &none, &r).expect_err("refused");
            assert!(matches!(e, Rejection::NotOwned { .. }), "{e}");
        }
    }

    /// A namespaced PodSet granted the namespace `shared` and the kind `v1 Namespace`.
    mod beyond_its_namespace {
        use k8s_openapi::api::core::v1::Namespace;

        use super::*;
        use crate::crd::{GroupKind, NamespaceReach, Reach};
        use crate::kubernetes::mark::{PARENT_ANNOTATION, PARENT_UID_LABEL};
        use crate::reconcile::observe::Observation;

        fn granted() -> Resolved {
            let namespaces = ApiResource::erase::<Namespace>(&());
            let mut r = resolved(None);
            r.children.push(namespaces.clone());
            r.cluster_scoped.insert(&namespaces);
            r.reach = Reach {
                cluster_kinds: vec![GroupKind { group: String::new(), kind: "Namespace".into() }],
                namespaces: NamespaceReach { names: vec!["shared".into()], ..NamespaceReach::default() },
                ..Reach::default()
            };
            r
        }

        fn marked(child: &Child) -> (Option<&str>, Option<&str>) {
            let meta = &child.object.metadata;
            (
                meta.labels.as_ref().and_then(|l| l.get(PARENT_UID_LABEL)).map(String::as_str),
                meta.annotations.as_ref().and_then(|a| a.get(PARENT_ANNOTATION)).map(String::as_str),
            )
        }

        #[test]
        fn a_child_in_a_granted_namespace_carries_the_hosts_mark_not_an_owner_reference() {
            let o = observed(podset(1), Vec::new());
            let elsewhere = configmap("web-cm", json!({ "namespace": "shared" }));
            let checked = check(plan_creating(elsewhere), &o, &granted()).expect("granted");
            let child = &checked.creates[0];
            assert_eq!(child.key(), ChildKey::of("v1", "ConfigMap", "shared", "web-cm"));
            assert_eq!(child.object.metadata.owner_references, None, "the GC would delete it at once");
            let parent = format!("{} PodSet ns/web", podset_test_support::objects::podsets().api_version);
            assert_eq!(marked(child), (Some("uid-web"), Some(parent.as_str())));

            // In its own namespace: an owner reference, as always.
            let home = check(plan_creating(configmap("web-cm", json!({}))), &o, &granted()).expect("home");
            assert!(home.creates[0].object.metadata.owner_references.is_some());
            assert_eq!(marked(&home.creates[0]), (None, None));

            // A cluster-scoped child of a namespaced parent: marked too.
            let ns = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "web-space" } });
            let checked = check(plan_creating(ns), &o, &granted()).expect("granted kind");
            assert_eq!(checked.creates[0].object.metadata.owner_references, None);
            assert_eq!(marked(&checked.creates[0]).0, Some("uid-web"));
        }

        #[test]
        fn a_parent_being_deleted_makes_a_marked_child_only_while_the_teardown_holds_it() {
            use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
            let deleting = |finalizers: Vec<String>| {
                let mut ps = podset(1);
                ps.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
                ps.metadata.finalizers = Some(finalizers);
                observed(ps, Vec::new())
            };
            let elsewhere = || plan_creating(configmap("web-cm", json!({ "namespace": "shared" })));
            let e = check(elsewhere(), &deleting(vec!["app.example.com/cleanup".into()]), &granted())
                .expect_err("nothing would delete it");
            assert!(matches!(e, Rejection::Unguarded { .. }), "{e}");
            let held = deleting(vec![waves::TEARDOWN_FINALIZER.into()]);
            assert!(check(elsewhere(), &held, &granted()).is_ok(), "the teardown will");
            let home = plan_creating(configmap("web-cm", json!({})));
            assert!(check(home, &deleting(Vec::new()), &granted()).is_ok(), "the GC will, by its owner reference");
        }

        #[test]
        fn elsewhere_is_refused_and_the_mark_is_the_hosts_to_write() {
            let o = observed(podset(1), Vec::new());
            let e = check(plan_creating(configmap("web-cm", json!({ "namespace": "kube-system" }))), &o, &granted())
                .expect_err("not granted");
            assert!(matches!(&e, Rejection::NotReachable { namespace, .. } if namespace == "kube-system"), "{e}");
            assert!(e.to_string().contains("granted shared; selected none; owned namespaces not granted"), "{e}");
            let forged = configmap("web-cm", json!({ "labels": { PARENT_UID_LABEL: "someone-else" } }));
            assert!(matches!(check(plan_creating(forged), &o, &granted()), Err(Rejection::Reserved { .. })));
            let forged = configmap("web-cm", json!({ "annotations": { PARENT_ANNOTATION: "v1 Secret x/y" } }));
            assert!(matches!(check(plan_creating(forged), &o, &granted()), Err(Rejection::Reserved { .. })));
        }

        #[test]
        fn a_key_without_a_namespace_finds_the_child_elsewhere() {
            let mut cm = configmap("web-cm", json!({ "namespace": "shared" }));
            cm["metadata"]["uid"] = json!("uid-cm");
            let child: DynamicObject = serde_json::from_value(cm).expect("a ConfigMap");
            let mut o = observed(podset(1), Vec::new());
            o.children.push(Observation {
                resource: Arc::new(podset_test_support::objects::configmaps()),
                object: Arc::new(child.into()),
            });
            let key = ChildKey::of("v1", "ConfigMap", "", "web-cm");
            let checked = check(Plan { deletes: vec![key], ..Plan::default() }, &o, &granted()).expect("found");
            assert_eq!(checked.deletes[0].key, ChildKey::of("v1", "ConfigMap", "shared", "web-cm"));
            assert_eq!(checked.deletes[0].uid, "uid-cm");
            let absent = ChildKey::of("v1", "ConfigMap", "", "gone");
            let e = check(Plan { deletes: vec![absent], ..Plan::default() }, &o, &granted()).expect_err("absent");
            assert!(matches!(&e, Rejection::NotOwned { key } if key.namespace == "ns"), "{e}");
        }
    }
}
