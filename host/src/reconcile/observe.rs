//! What a reconcile observes: the parent, the children it controls and the related
//! objects its policy selects (from the caches), and the work in flight.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;

pub use super::caches::{Caches, Observation};
use super::expectations::{Expectations, InFlight, Seen};
use super::keys::{ChildKey, ParentRef};
use super::lookups::{self, Answerer, LookedUp, LookupError, LookupIndex};
use crate::contract::bindings::reconciler::Lookup;
use crate::contract::declarations::{matches, related_selector};
use crate::kubernetes::access::Resolved;
use crate::kubernetes::mark::{Mark, has_controller_reference};
use crate::kubernetes::object::Object;
use crate::sandbox::Actions;

/// Everything one decision is made from.
#[derive(Clone, Debug)]
pub struct Observed {
    pub parent: Arc<Object>,
    pub parent_resource: Arc<ApiResource>,
    pub children: Vec<Observation>,
    pub related: Vec<Observation>,
    /// Answers to lookups: first those the parent's last decision named, then those
    /// each call of this reconcile named ([`super::decide`]).
    pub looked_up: Vec<LookedUp>,
    /// Where further answers come from.
    pub answerer: Answerer,
    pub in_flight: InFlight,
    /// Milliseconds since the Unix epoch.
    pub now: i64,
    /// The Pod Security level the deciding policy's pods are held to (its reach).
    pub pod_security: crate::crd::PodSecurity,
    /// Decided before at its generation: a re-decision (a resync, a child's change), not
    /// the parent's own event. The parents' cache may then lag behind the children's, and
    /// the host confirms the parent with the API server before it writes a child
    /// ([`super::execute`]).
    pub redecision: bool,
}

impl Observed {
    pub fn parent_ref(&self) -> ParentRef {
        ObjectRef::from_obj_with(self.parent.as_ref(), self.parent_resource.clone())
    }

    /// The parent as Events reference it.
    pub fn parent_object_reference(&self) -> ObjectReference {
        reference_of(&self.parent, &self.parent_resource)
    }

    /// The child of `key`, if the parent controls one.
    pub fn child(&self, key: &ChildKey) -> Option<&Observation> {
        find(&self.children, key)
    }

    /// The namespace of the parent: "" when it is cluster-scoped.
    pub fn namespace(&self) -> String {
        self.parent.namespace().unwrap_or_default()
    }

    /// The lookups `actions` name that have no answer here: a call that names any is
    /// not acted on, but answered ([`Observed::answer`]) and made again.
    pub fn unanswered(&self, actions: &Actions) -> Vec<Lookup> {
        lookups::unanswered(&lookups::named_lookups(actions), &self.looked_up).into_iter().cloned().collect()
    }

    /// Answers `missing` from the caches, for the next call.
    pub fn answer(&mut self, missing: &[Lookup]) -> Result<(), LookupError> {
        for lookup in missing {
            let answer = self.answerer.answer(lookup)?;
            self.looked_up.push(answer);
        }
        Ok(())
    }
}

/// Which of a parent's marked children ([`crate::kubernetes::mark`]) are observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marks {
    /// Those where the policy's grant reaches: a decision sees no child its policy could
    /// not have written, whoever marked it.
    Granted,
    /// Every one whose mark names the parent exactly: the host's teardown deletes what
    /// the parent made wherever it is, and `policy record` reads what the operator could.
    Any,
}

/// Gathers what `parent` looks like now, for the policy `resolved` describes. With a
/// `memory` of lookups, the ones this parent's last decision named are answered.
pub fn gather(
    parent: Arc<Object>,
    parent_resource: &Arc<ApiResource>,
    resolved: &Resolved,
    caches: &impl Caches,
    expectations: &Expectations,
    memory: Option<Arc<LookupIndex>>,
    marks: Marks,
) -> Observed {
    let uid = parent.uid().unwrap_or_default();
    let ns = parent.namespace().unwrap_or_default();
    let cluster_parent = resolved.parent_is_cluster_scoped();
    let parent_ref = ObjectRef::from_obj_with(parent.as_ref(), parent_resource.clone());
    // The children are read with the expectations held: a watch event settles an entry
    // only once its store holds the child, so no child can be missing from both. (Read
    // one after the other, a reconcile under load missed three pods whose events came
    // between the two reads and created them again: 13 pods for 10, fault suite,
    // 2026-11-27.)
    let mut children = Vec::new();
    let in_flight = expectations.in_flight(
        &parent_ref,
        || {
            for resource in &resolved.children {
                let Some(cache) = caches.children(resource) else { continue };
                children.extend(
                    cache
                        .store
                        .controlled_by(&uid)
                        .into_iter()
                        .map(|object| Observation { resource: cache.resource.clone(), object }),
                );
            }
            marked(&mut children, &Mark::for_parent(parent_resource, &parent), resolved, marks);
            children.iter().map(|c| (c.key(), Seen::of(Some(c.object.as_ref())))).collect()
        },
        |key| {
            let resource = resolved.children.iter().find(|r| r.api_version == key.api_version && r.kind == key.kind)?;
            caches.children(resource)?.store.listed_at()
        },
    );
    let mut related = Vec::new();
    for (resource, kind) in &resolved.related {
        let Some(selector) = related_selector(kind, parent.as_ref()) else { continue };
        for cache in [caches.children(resource), caches.unmanaged(resource)].into_iter().flatten() {
            let selected = |o: &Object| matches(&selector, o.labels());
            // A namespaced parent reads its own namespace; a cluster-scoped one every
            // namespace, and cluster-scoped objects are in none.
            let hits = if resolved.is_cluster_scoped(resource) {
                cache.store.in_namespace("", selected)
            } else if cluster_parent {
                cache.store.matching(selected)
            } else {
                cache.store.in_namespace(&ns, selected)
            };
            related.extend(hits.into_iter().map(|object| Observation { resource: cache.resource.clone(), object }));
        }
    }
    let mut answerer = Answerer::new(&parent, parent_ref, resolved, caches);
    if let Some(memory) = memory {
        answerer = answerer.remembering(memory);
    }
    let looked_up = answerer.remembered();
    Observed {
        parent,
        parent_resource: parent_resource.clone(),
        children,
        related,
        looked_up,
        answerer,
        in_flight,
        now: now_millis(),
        pod_security: resolved.reach.pod_security,
        redecision: false,
    }
}

fn find<'a>(observations: &'a [Observation], key: &ChildKey) -> Option<&'a Observation> {
    observations
        .iter()
        .find(|c| c.resource.api_version == key.api_version && c.resource.kind == key.kind && key.names(&c.object))
}

/// Keeps, of the children found by their controller UID, those with an owner reference
/// and those whose mark names `mark` exactly and, with [`Marks::Granted`], are where the
/// grant reaches: a namespace it names or selects, one of the parent's own Namespace
/// children (`owned`), or a cluster-scoped kind it was granted (checked at load).
fn marked(children: &mut Vec<Observation>, mark: &Mark, resolved: &Resolved, marks: Marks) {
    let referenced = |c: &Observation| has_controller_reference(&c.object.metadata);
    children.retain(|c| referenced(c) || Mark::of(&c.object.metadata).as_ref() == Some(mark));
    if marks == Marks::Any {
        return;
    }
    let owned: BTreeSet<String> = if resolved.reach.namespaces.owned {
        let namespaces = children.iter().filter(|c| c.resource.api_version == "v1" && c.resource.kind == "Namespace");
        namespaces.map(|c| c.object.name_any()).collect()
    } else {
        BTreeSet::new()
    };
    children.retain(|c| {
        let at = c.object.namespace().unwrap_or_default();
        referenced(c)
            || if at.is_empty() {
                resolved.is_cluster_scoped(&c.resource)
            } else {
                at == mark.namespace || resolved.grants(&at) || owned.contains(&at)
            }
    });
}

/// `obj` as Events reference it.
pub fn reference_of(obj: &Object, resource: &ApiResource) -> ObjectReference {
    ObjectReference {
        api_version: Some(resource.api_version.clone()),
        kind: Some(resource.kind.clone()),
        namespace: obj.namespace(),
        name: Some(obj.name_any()),
        uid: obj.uid(),
        ..ObjectReference::default()
    }
}

pub fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Observed states for unit tests, built the way the caches hold them.
#[cfg(test)]
pub mod fixtures {
    use std::sync::Arc;

    use kube::api::{ApiResource, DynamicObject};

    use super::{InFlight, Observation, Observed};
    use crate::kubernetes::access::Resolved;
    pub use podset_test_support::objects::{configmap, deployments, pod, pods, podset, podsets};

    pub fn observed(parent: DynamicObject, children: Vec<(ApiResource, DynamicObject)>) -> Observed {
        Observed {
            parent_resource: Arc::new(podsets()),
            parent: Arc::new(parent.into()),
            children: children
                .into_iter()
                .map(|(r, o)| Observation { resource: Arc::new(r), object: Arc::new(o.into()) })
                .collect(),
            related: Vec::new(),
            looked_up: Vec::new(),
            answerer: Default::default(),
            in_flight: InFlight::default(),
            now: 1_700_000_000_000,
            pod_security: Default::default(),
            redecision: false,
        }
    }

    /// What a policy reconciling PodSets with pod, Deployment and ConfigMap children resolves to.
    pub fn resolved(finalizer: Option<&str>) -> Resolved {
        Resolved {
            parent: podsets(),
            children: vec![pods(), deployments(), podset_test_support::objects::configmaps()],
            related: Vec::new(),
            lookups: Vec::new(),
            finalizer: finalizer.map(String::from),
            cluster_scoped: Default::default(),
            reach: Default::default(),
            namespace_labels: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;

    use super::fixtures::{pod, pods, podset, podsets};
    use super::*;
    use crate::contract::bindings::{LabelRequirement, RelatedKind, SelectorValue};
    use crate::kubernetes::mark::{MANAGED_BY, MANAGED_BY_LABEL};
    use crate::kubernetes::watches::{Scope, Watched};

    struct TwoCaches {
        children: Arc<Watched>,
        unmanaged: Arc<Watched>,
    }

    impl Caches for TwoCaches {
        fn children(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
            Some(&self.children)
        }
        fn unmanaged(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
            Some(&self.unmanaged)
        }
    }

    fn labelled(name: &str, labels: &[(&str, &str)]) -> Object {
        let mut p = pod(name, "Running");
        p.metadata.owner_references = None;
        p.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        p.into()
    }

    #[test]
    fn related_objects_come_from_the_managed_and_the_unmanaged_cache_each_once() {
        let caches = TwoCaches {
            children: Arc::new(Watched::new(&pods(), Scope::Children)),
            unmanaged: Arc::new(Watched::new(&pods(), Scope::Unmanaged)),
        };
        // A pod the host made for some parent (in the children watch), one made by
        // someone else (the unmanaged watch), and one that the selector does not pick.
        let mut managed: Object = pod("made-here", "Running").into();
        managed.metadata.labels = Some(
            [("tier".to_string(), "web".to_string()), (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into(),
        );
        caches.children.store.apply(Event::Apply(managed));
        caches.unmanaged.store.apply(Event::Apply(labelled("made-elsewhere", &[("tier", "web")])));
        caches.unmanaged.store.apply(Event::Apply(labelled("other", &[("tier", "db")])));
        let mut resolved = super::fixtures::resolved(None);
        resolved.children = Vec::new();
        let related = RelatedKind {
            kind: crate::contract::declarations::to_wit(&crate::contract::declarations::pod_kind()),
            selector: vec![LabelRequirement { key: "tier".into(), value: SelectorValue::Exact("web".into()) }],
        };
        resolved.related = vec![(pods(), related)];
        let parent = Arc::new(Object::from(podset(1)));
        let observed =
            gather(parent, &Arc::new(podsets()), &resolved, &caches, &Expectations::default(), None, Marks::Granted);
        let mut names: Vec<String> = observed.related.iter().map(|r| r.object.name_any()).collect();
        names.sort();
        assert_eq!(names, ["made-elsewhere", "made-here"]);
    }

    #[test]
    fn a_marked_child_is_seen_where_the_grant_reaches_and_only_with_the_parents_exact_mark() {
        use crate::crd::{NamespaceReach, Reach};
        use crate::kubernetes::mark::Mark;

        let cms = podset_test_support::objects::configmaps();
        let caches = TwoCaches {
            children: Arc::new(Watched::new(&cms, Scope::Children)),
            unmanaged: Arc::new(Watched::new(&cms, Scope::Unmanaged)),
        };
        let parent = Arc::new(Object::from(podset(1)));
        let mark = Mark::for_parent(&podsets(), &parent);
        let put = |name: &str, ns: &str, mark: &Mark| {
            let mut cm = kube::api::DynamicObject::new(name, &cms).within(ns);
            mark.write(&mut cm.metadata);
            caches.children.store.apply(Event::Apply(cm.into()));
        };
        put("granted", "shared", &mark);
        put("not-granted", "kube-system", &mark);
        // The parent's UID, another parent's name: forged.
        put("forged", "shared", &Mark { name: "someone-else".into(), ..mark.clone() });
        let mut resolved = super::fixtures::resolved(None);
        resolved.children = vec![cms.clone()];
        resolved.reach = Reach {
            namespaces: NamespaceReach { names: vec!["shared".into()], ..Default::default() },
            ..Default::default()
        };
        let names = |resolved: &Resolved, marks: Marks| {
            let o =
                gather(parent.clone(), &Arc::new(podsets()), resolved, &caches, &Expectations::default(), None, marks);
            let mut n: Vec<String> = o.children.iter().map(|c| c.object.name_any()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&resolved, Marks::Granted), ["granted"]);
        assert_eq!(
            names(&resolved, Marks::Any),
            ["granted", "not-granted"],
            "the teardown reaches what the parent made"
        );
        resolved.reach = Reach::default();
        assert!(names(&resolved, Marks::Granted).is_empty(), "a grant withdrawn hides what it allowed");
    }
}
