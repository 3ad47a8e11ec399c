//! Lookups (contract 0.4): objects a decision reads that it could not declare
//! statically, named by the decision itself (`look-up` actions) and answered from the
//! caches of the kinds it declared in `declarations.lookups`.
//!
//! A call that names a lookup with no answer in its input is not acted on: the host
//! answers and calls again (see [`decide`](super::decide)). What the last final call of
//! a parent named is remembered here, for two uses: answered before the next call (so a
//! policy whose lookups do not change is called once per reconcile), and routed (a
//! change to a looked-up object re-queues exactly the parents whose last decision named
//! it, [`LookupIndex::parents_of`]).
//!
//! Why a decision that names its lookups rather than a second export that lists them
//! first: the recorded input of one call stays self-contained (one scenario file, one
//! call, no cluster on replay), a lookup can follow an earlier answer (the ConfigMaps a
//! looked-up Deployment mounts), and in steady state a reconcile costs one
//! instantiation, as in contract 0.3, where a second export would cost two every time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::ApiResource;
use parking_lot::Mutex;

use super::caches::{Caches, Observation};
use super::keys::ParentRef;
use crate::contract::bindings::reconciler::{self, Lookup, LookupMatch};
use crate::contract::declarations::{kind_name, to_gvk};
use crate::kubernetes::access::Resolved;
use crate::kubernetes::object::Object;
use crate::kubernetes::watches::Watched;
use crate::sandbox::Actions;

/// Calls of one reconcile at most, as Crossplane's function runner allows: a policy
/// that follows a chain (a Deployment, then what it mounts) needs three on its first
/// reconcile.
pub const MAX_CALLS: usize = 5;

/// A lookup the host refuses to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("{kind} is not a kind this policy declared in declarations.lookups")]
    Undeclared { kind: String },
    #[error("lookup of {lookup}: {why}")]
    NotReadable { lookup: String, why: String },
}

impl LookupError {
    /// A bounded label for the failures metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LookupError::Undeclared { .. } => "UndeclaredLookup",
            LookupError::NotReadable { .. } => "NotReadable",
        }
    }
}

/// The lookups a decision named, in its order (the PodSet world names none).
pub fn named_lookups(actions: &Actions) -> Vec<Lookup> {
    match actions {
        Actions::PodSet(_) => Vec::new(),
        Actions::Reconcile(actions) => actions
            .iter()
            .filter_map(|a| match a {
                reconciler::Action::LookUp(l) => Some(l.clone()),
                _ => None,
            })
            .collect(),
    }
}

/// One lookup and what the host found for it, as a decision reads it.
#[derive(Clone, Debug)]
pub struct LookedUp {
    pub lookup: Lookup,
    /// Sorted by namespace and name.
    pub objects: Vec<Observation>,
}

/// A lookup resolved against the declarations: which resource, which namespace ("" for
/// a cluster-scoped kind), which objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    resource: ResourceKey,
    namespace: String,
    by: By,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum By {
    Name(String),
    Labels(BTreeMap<String, String>),
}

/// A resource, as the index keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ResourceKey {
    api_version: String,
    plural: String,
}

impl ResourceKey {
    fn of(r: &ApiResource) -> Self {
        ResourceKey { api_version: r.api_version.clone(), plural: r.plural.clone() }
    }
}

/// One object of a looked-up kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ObjectKey {
    resource: ResourceKey,
    namespace: String,
    name: String,
}

/// Answers lookups for one parent from the caches of its policy's lookup kinds, and
/// remembers (for the live decision only) what the final call named.
#[derive(Clone, Default)]
pub struct Answerer {
    parent: Option<ParentRef>,
    /// "" for a cluster-scoped parent.
    parent_namespace: String,
    cluster_parent: bool,
    kinds: Vec<KindCaches>,
    memory: Option<Arc<LookupIndex>>,
}

#[derive(Clone)]
struct KindCaches {
    resource: Arc<ApiResource>,
    cluster_scoped: bool,
    /// The kind's caches: the host's own objects and the rest (each object in one).
    caches: Vec<Arc<Watched>>,
}

impl fmt::Debug for Answerer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.resource.kind.as_str()).collect();
        f.debug_struct("Answerer").field("parent", &self.parent).field("kinds", &kinds).finish_non_exhaustive()
    }
}

impl Answerer {
    /// Answers for `parent` (of `parent_ref`) from `caches`, for the lookup kinds `resolved` declares.
    pub fn new(parent: &Object, parent_ref: ParentRef, resolved: &Resolved, caches: &impl Caches) -> Self {
        let kinds = resolved
            .lookups
            .iter()
            .map(|(resource, _)| KindCaches {
                resource: Arc::new(resource.clone()),
                cluster_scoped: resolved.is_cluster_scoped(resource),
                caches: [caches.children(resource), caches.unmanaged(resource)]
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect(),
            })
            .collect();
        Answerer {
            parent: Some(parent_ref),
            parent_namespace: parent.namespace().unwrap_or_default(),
            cluster_parent: resolved.parent_is_cluster_scoped(),
            kinds,
            memory: None,
        }
    }

    /// The same, remembering the final lookups of each live decision in `memory`.
    pub fn remembering(mut self, memory: Arc<LookupIndex>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// What this parent's last decision named, answered now; lookups that no longer
    /// resolve (the policy changed) are left for the decision to name again.
    pub fn remembered(&self) -> Vec<LookedUp> {
        let (Some(memory), Some(parent)) = (&self.memory, &self.parent) else { return Vec::new() };
        memory.remembered(parent).into_iter().filter_map(|l| self.answer(&l).ok()).collect()
    }

    /// Where `lookup` reads, or why it may not.
    fn target(&self, lookup: &Lookup) -> Result<(Target, &KindCaches), LookupError> {
        let gvk = to_gvk(&lookup.kind);
        let kind = self
            .kinds
            .iter()
            .find(|k| k.resource.api_version == gvk.api_version() && k.resource.kind == gvk.kind)
            .ok_or_else(|| LookupError::Undeclared { kind: kind_name(&gvk) })?;
        let refuse = |why: String| LookupError::NotReadable { lookup: describe(lookup), why };
        let namespace = match (kind.cluster_scoped, lookup.namespace.as_str(), self.cluster_parent) {
            (true, "", _) => String::new(),
            (true, ns, _) => return Err(refuse(format!("{} is cluster-scoped, not in namespace {ns:?}", gvk.kind))),
            (false, "", false) => self.parent_namespace.clone(),
            (false, "", true) => {
                return Err(refuse("the parent is cluster-scoped: name the namespace to read".into()));
            }
            (false, ns, false) if ns != self.parent_namespace => {
                return Err(refuse(format!(
                    "a namespaced parent reads its own namespace {:?}, not {ns:?}",
                    self.parent_namespace
                )));
            }
            (false, ns, _) => ns.to_string(),
        };
        let by = match &lookup.match_ {
            LookupMatch::Name(name) if name.is_empty() => return Err(refuse("the name is empty".into())),
            LookupMatch::Name(name) => By::Name(name.clone()),
            LookupMatch::Labels(labels) if labels.is_empty() => {
                return Err(refuse("an empty label selector selects nothing".into()));
            }
            LookupMatch::Labels(labels) => {
                By::Labels(labels.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect())
            }
        };
        Ok((Target { resource: ResourceKey::of(&kind.resource), namespace, by }, kind))
    }

    /// What the caches hold for `lookup` now.
    pub fn answer(&self, lookup: &Lookup) -> Result<LookedUp, LookupError> {
        let (target, kind) = self.target(lookup)?;
        let mut objects: Vec<Observation> = Vec::new();
        for cache in &kind.caches {
            let found = match &target.by {
                By::Name(name) => cache.store.get(&target.namespace, name).into_iter().collect(),
                By::Labels(selector) => cache.store.in_namespace(&target.namespace, |o| selects(selector, o)),
            };
            objects.extend(found.into_iter().map(|object| Observation { resource: kind.resource.clone(), object }));
        }
        objects.sort_by(|a, b| {
            (a.object.metadata.namespace.as_deref(), a.object.metadata.name.as_deref())
                .cmp(&(b.object.metadata.namespace.as_deref(), b.object.metadata.name.as_deref()))
        });
        Ok(LookedUp { lookup: lookup.clone(), objects })
    }

    /// Keeps what the final call of a live decision named, with what answered it, so
    /// that the next reconcile is pre-answered and a change to any of it re-queues
    /// this parent.
    pub fn remember(&self, named: &[Lookup], answers: &[LookedUp]) {
        let (Some(memory), Some(parent)) = (&self.memory, &self.parent) else { return };
        let mut targets = Vec::new();
        let mut objects = Vec::new();
        for lookup in named {
            let Ok((target, _)) = self.target(lookup) else { continue };
            if let Some(answer) = answers.iter().find(|a| a.lookup == *lookup) {
                objects.extend(answer.objects.iter().map(|o| ObjectKey {
                    resource: target.resource.clone(),
                    namespace: o.object.namespace().unwrap_or_default(),
                    name: o.object.name_any(),
                }));
            }
            targets.push(target);
        }
        memory.remember(parent, named.to_vec(), targets, objects);
    }
}

fn selects(selector: &BTreeMap<String, String>, o: &Object) -> bool {
    let labels = o.labels();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// A lookup as messages name it: `v1 ConfigMap web-config` or `v1 Secret tier=web`.
pub fn describe(lookup: &Lookup) -> String {
    let what = match &lookup.match_ {
        LookupMatch::Name(n) => n.clone(),
        LookupMatch::Labels(l) => l.iter().map(|kv| format!("{}={}", kv.key, kv.value)).collect::<Vec<_>>().join(","),
    };
    let at = if lookup.namespace.is_empty() { String::new() } else { format!(" in {}", lookup.namespace) };
    format!("{} {what}{at}", kind_name(&to_gvk(&lookup.kind)))
}

/// Every parent's last lookups, by parent and by what they read: the routing of a
/// looked-up kind's watch events.
#[derive(Default)]
pub struct LookupIndex {
    inner: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    by_parent: HashMap<ParentRef, Remembered>,
    /// Objects named, or found by a selector: a change to one (even one that makes it
    /// stop matching) concerns these parents.
    by_object: HashMap<ObjectKey, HashSet<ParentRef>>,
    /// Label lookups by resource: an object that starts to match concerns their parents.
    by_labels: HashMap<ResourceKey, HashMap<ParentRef, Vec<Selector>>>,
}

/// A label lookup: in this namespace ("" for a cluster-scoped kind), these labels.
type Selector = (String, BTreeMap<String, String>);

struct Remembered {
    lookups: Vec<Lookup>,
    keys: Vec<ObjectKey>,
    label_kinds: Vec<ResourceKey>,
}

impl LookupIndex {
    fn remember(&self, parent: &ParentRef, lookups: Vec<Lookup>, targets: Vec<Target>, found: Vec<ObjectKey>) {
        let mut index = self.inner.lock();
        index.drop_parent(parent);
        // A decision that named nothing (every decision of a kind without lookups) leaves
        // no entry: an empty one per parent, its key a whole `ObjectRef`, held 0.6 MB of
        // a 29.5 MB heap at 1000 PodSets × 5 (heaptrack, 2026-11-30).
        if lookups.is_empty() {
            return;
        }
        let mut keys = found;
        let mut label_kinds = Vec::new();
        for target in targets {
            match target.by {
                By::Name(name) => keys.push(ObjectKey { resource: target.resource, namespace: target.namespace, name }),
                By::Labels(selector) => {
                    let by_parent = index.by_labels.entry(target.resource.clone()).or_default();
                    by_parent.entry(parent.clone()).or_default().push((target.namespace, selector));
                    label_kinds.push(target.resource);
                }
            }
        }
        for key in &keys {
            index.by_object.entry(key.clone()).or_default().insert(parent.clone());
        }
        index.by_parent.insert(parent.clone(), Remembered { lookups, keys, label_kinds });
    }

    /// The parent is gone: nothing it read concerns it any more.
    pub fn forget(&self, parent: &ParentRef) {
        self.inner.lock().drop_parent(parent);
    }

    fn remembered(&self, parent: &ParentRef) -> Vec<Lookup> {
        self.inner.lock().by_parent.get(parent).map(|r| r.lookups.clone()).unwrap_or_default()
    }

    /// The parents a change to `obj` (of `resource`) concerns: those whose last
    /// decision named it or found it, and those whose label lookup it matches now.
    pub fn parents_of(&self, resource: &ApiResource, obj: &Object) -> Vec<ParentRef> {
        let index = self.inner.lock();
        let rk = ResourceKey::of(resource);
        let namespace = obj.namespace().unwrap_or_default();
        let key = ObjectKey { resource: rk.clone(), namespace: namespace.clone(), name: obj.name_any() };
        let mut parents: HashSet<ParentRef> = index.by_object.get(&key).cloned().unwrap_or_default();
        if let Some(by_parent) = index.by_labels.get(&rk) {
            for (parent, selectors) in by_parent {
                if selectors.iter().any(|(ns, sel)| *ns == namespace && selects(sel, obj)) {
                    parents.insert(parent.clone());
                }
            }
        }
        parents.into_iter().collect()
    }

    /// How many parents have lookups remembered (for tests and logs).
    pub fn len(&self) -> usize {
        self.inner.lock().by_parent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Index {
    fn drop_parent(&mut self, parent: &ParentRef) {
        let Some(old) = self.by_parent.remove(parent) else { return };
        for key in old.keys {
            if let Some(parents) = self.by_object.get_mut(&key) {
                parents.remove(parent);
                if parents.is_empty() {
                    self.by_object.remove(&key);
                }
            }
        }
        for rk in old.label_kinds {
            if let Some(by_parent) = self.by_labels.get_mut(&rk) {
                by_parent.remove(parent);
                if by_parent.is_empty() {
                    self.by_labels.remove(&rk);
                }
            }
        }
    }
}

/// The lookups `actions` name that `answers` do not answer.
pub fn unanswered<'a>(named: &'a [Lookup], answers: &[LookedUp]) -> Vec<&'a Lookup> {
    named.iter().filter(|l| !answers.iter().any(|a| a.lookup == **l)).collect()
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::contract::bindings::{GroupVersionKind, KeyValue, LookupKind};
    use crate::kubernetes::access::Resolved;
    use crate::kubernetes::watches::Scope;
    use podset_test_support::objects::{configmaps, podset, podsets};

    struct OneCache(Arc<Watched>);

    impl Caches for OneCache {
        fn children(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
            None
        }
        fn unmanaged(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
            Some(&self.0)
        }
    }

    fn configmap(ns: &str, name: &str, labels: &[(&str, &str)]) -> Object {
        let mut cm = DynamicObject::new(name, &configmaps()).within(ns);
        cm.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        cm.data = json!({"data": {"k": name}});
        cm.into()
    }

    fn by_name(name: &str, namespace: &str) -> Lookup {
        Lookup {
            kind: GroupVersionKind { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() },
            namespace: namespace.into(),
            match_: LookupMatch::Name(name.into()),
        }
    }

    fn by_labels(labels: &[(&str, &str)]) -> Lookup {
        let labels = labels.iter().map(|(k, v)| KeyValue { key: k.to_string(), value: v.to_string() }).collect();
        Lookup { match_: LookupMatch::Labels(labels), ..by_name("", "") }
    }

    /// The PodSet `web` in `ns` looking up ConfigMaps, from a cache holding `objects`.
    fn answerer(objects: Vec<Object>, memory: &Arc<LookupIndex>) -> (Answerer, ParentRef) {
        let cache = Arc::new(Watched::new(&configmaps(), Scope::Unmanaged));
        for o in objects {
            cache.store.apply(Event::Apply(o));
        }
        let kind = GroupVersionKind { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
        let resolved = Resolved {
            parent: podsets(),
            children: Vec::new(),
            related: Vec::new(),
            lookups: vec![(configmaps(), LookupKind { kind, patch: false })],
            finalizer: None,
            cluster_scoped: Default::default(),
            reach: Default::default(),
            namespace_labels: None,
        };
        let parent: Object = podset(1).into();
        let parent_ref = ObjectRef::from_obj_with(&parent, Arc::new(podsets()));
        let a = Answerer::new(&parent, parent_ref.clone(), &resolved, &OneCache(cache)).remembering(memory.clone());
        (a, parent_ref)
    }

    fn names(answer: &LookedUp) -> Vec<String> {
        answer.objects.iter().map(|o| o.object.name_any()).collect()
    }

    #[test]
    fn answers_come_from_the_parents_namespace_sorted_and_empty_when_nothing_is_there() {
        let memory = Arc::new(LookupIndex::default());
        let objects = vec![
            configmap("ns", "b", &[("tier", "web")]),
            configmap("ns", "a", &[("tier", "web")]),
            configmap("other", "c", &[("tier", "web")]),
        ];
        let (a, _) = answerer(objects, &memory);
        assert_eq!(names(&a.answer(&by_name("a", "")).expect("answer")), ["a"]);
        assert_eq!(names(&a.answer(&by_name("a", "ns")).expect("answer")), ["a"], "its own namespace, by name");
        assert!(a.answer(&by_name("gone", "")).expect("answer").objects.is_empty());
        assert_eq!(names(&a.answer(&by_labels(&[("tier", "web")])).expect("answer")), ["a", "b"]);
    }

    #[test]
    fn a_lookup_outside_the_declarations_or_the_parents_namespace_is_refused() {
        let memory = Arc::new(LookupIndex::default());
        let (a, _) = answerer(Vec::new(), &memory);
        let e = a.answer(&by_name("c", "other")).expect_err("another namespace");
        assert!(matches!(e, LookupError::NotReadable { .. }), "{e}");
        assert!(e.to_string().contains("reads its own namespace"), "{e}");
        let mut secret = by_name("s", "");
        secret.kind.kind = "Secret".into();
        let e = a.answer(&secret).expect_err("undeclared");
        assert!(matches!(e, LookupError::Undeclared { .. }), "{e}");
        let e = a.answer(&by_labels(&[])).expect_err("empty selector");
        assert!(matches!(e, LookupError::NotReadable { .. }), "{e}");
    }

    #[test]
    fn a_change_reaches_exactly_the_parents_whose_last_decision_read_it() {
        let memory = Arc::new(LookupIndex::default());
        let a_cm = configmap("ns", "a", &[("tier", "web")]);
        let (web, web_ref) = answerer(vec![a_cm.clone()], &memory);
        let named = [by_name("a", ""), by_labels(&[("tier", "web")])];
        let answers: Vec<LookedUp> = named.iter().map(|l| web.answer(l).expect("answer")).collect();
        web.remember(&named, &answers);
        assert_eq!(memory.len(), 1);
        let res = configmaps();

        assert_eq!(memory.parents_of(&res, &a_cm), std::slice::from_ref(&web_ref), "named");
        let newcomer = configmap("ns", "new", &[("tier", "web")]);
        assert_eq!(memory.parents_of(&res, &newcomer), std::slice::from_ref(&web_ref), "starts to match the selector");
        let elsewhere = configmap("other", "new", &[("tier", "web")]);
        assert!(memory.parents_of(&res, &elsewhere).is_empty(), "another namespace");
        let unrelated = configmap("ns", "z", &[("tier", "db")]);
        assert!(memory.parents_of(&res, &unrelated).is_empty(), "neither named nor matching");

        // The last decision named only `z`: `a` no longer concerns it.
        web.remember(&[by_name("z", "")], &[web.answer(&by_name("z", "")).expect("answer")]);
        assert!(memory.parents_of(&res, &a_cm).is_empty());
        assert_eq!(memory.parents_of(&res, &unrelated), std::slice::from_ref(&web_ref));
        assert_eq!(memory.remembered(&web_ref), [by_name("z", "")]);

        memory.forget(&web_ref);
        assert!(memory.parents_of(&res, &unrelated).is_empty());
        assert!(memory.is_empty());
    }

    #[test]
    fn a_decision_that_names_nothing_leaves_nothing_behind() {
        let memory = Arc::new(LookupIndex::default());
        let a_cm = configmap("ns", "a", &[("tier", "web")]);
        let (web, web_ref) = answerer(vec![a_cm.clone()], &memory);
        web.remember(&[], &[]);
        assert!(memory.is_empty(), "a parent that looks nothing up is not kept");
        let named = [by_name("a", "")];
        web.remember(&named, &[web.answer(&named[0]).expect("answer")]);
        assert_eq!(memory.len(), 1);
        // Its next decision names nothing: what the last one read no longer concerns it.
        web.remember(&[], &[]);
        assert!(memory.is_empty());
        assert!(memory.parents_of(&configmaps(), &a_cm).is_empty());
        assert!(memory.remembered(&web_ref).is_empty());
    }

    #[test]
    fn an_object_found_by_a_selector_still_routes_once_it_stops_matching() {
        let memory = Arc::new(LookupIndex::default());
        let a_cm = configmap("ns", "a", &[("tier", "web")]);
        let (web, web_ref) = answerer(vec![a_cm], &memory);
        let named = [by_labels(&[("tier", "web")])];
        web.remember(&named, &[web.answer(&named[0]).expect("answer")]);
        let relabelled = configmap("ns", "a", &[("tier", "db")]);
        assert_eq!(memory.parents_of(&configmaps(), &relabelled), [web_ref], "its answer changes: it must look again");
    }

    #[test]
    fn the_last_decisions_lookups_are_answered_before_the_next_call() {
        let memory = Arc::new(LookupIndex::default());
        let (web, _) = answerer(vec![configmap("ns", "a", &[])], &memory);
        assert!(web.remembered().is_empty(), "nothing remembered yet");
        let named = [by_name("a", "")];
        web.remember(&named, &[web.answer(&named[0]).expect("answer")]);
        let again = web.remembered();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].lookup, named[0]);
        assert_eq!(names(&again[0]), ["a"]);
        // A shadow's or `policy record`'s answerer remembers nothing.
        let (mut other, _) = answerer(Vec::new(), &memory);
        other.memory = None;
        other.remember(&[by_name("b", "")], &[]);
        assert_eq!(memory.remembered(&web.parent.clone().expect("parent")), named);
    }

    #[test]
    fn unanswered_lists_what_no_answer_covers() {
        let answered = [LookedUp { lookup: by_name("a", ""), objects: Vec::new() }];
        let named = [by_name("a", ""), by_name("b", "")];
        assert_eq!(unanswered(&named, &answered), [&named[1]]);
    }
}
