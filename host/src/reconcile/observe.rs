//! What a reconcile observes: the parent, the children it controls and the related
//! objects its policy selects (from the caches), and the work in flight.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;

use super::expectations::{Expectations, Seen};
use crate::contract::declarations::{matches, related_selector};
use crate::kubernetes::access::Resolved;
use crate::kubernetes::object::Object;
use crate::kubernetes::watches::Watched;

/// The parent's key: its kind, namespace and name.
pub type ParentRef = ObjectRef<Object>;

/// Names one child: its kind and name (children share the parent's namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildKey {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl ChildKey {
    pub fn new(resource: &ApiResource, name: &str) -> Self {
        ChildKey { api_version: resource.api_version.clone(), kind: resource.kind.clone(), name: name.into() }
    }
}

impl std::fmt::Display for ChildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// A child or related object together with the resource it was read from (list
/// items carry no kind).
#[derive(Clone, Debug)]
pub struct Observation {
    pub resource: Arc<ApiResource>,
    pub object: Arc<Object>,
}

/// Work issued to the API server and not yet seen in the caches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InFlight {
    pub creations: Vec<ChildKey>,
    pub deletions: Vec<ChildKey>,
}

/// Everything one decision is made from.
#[derive(Clone, Debug)]
pub struct Observed {
    pub parent: Arc<Object>,
    pub parent_resource: ApiResource,
    pub children: Vec<Observation>,
    pub related: Vec<Observation>,
    pub in_flight: InFlight,
    /// Milliseconds since the Unix epoch.
    pub now: i64,
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
        self.children.iter().find(|c| {
            c.resource.api_version == key.api_version && c.resource.kind == key.kind && c.object.name_any() == key.name
        })
    }
}

/// The caches a reconcile reads, by the resource they hold.
pub trait Caches {
    /// The children cache of `resource`, or `None` when it is not watched.
    fn children(&self, resource: &ApiResource) -> Option<&Watched>;
    /// The cache of the objects of `resource` the host does not manage. Related
    /// objects are read from it and from the children cache of their kind.
    fn unmanaged(&self, resource: &ApiResource) -> Option<&Watched>;
}

/// Gathers what `parent` looks like now, for the policy `resolved` describes.
pub fn gather(
    parent: Arc<Object>,
    parent_resource: &ApiResource,
    resolved: &Resolved,
    caches: &impl Caches,
    expectations: &Expectations,
) -> Observed {
    let uid = parent.uid().unwrap_or_default();
    let ns = parent.namespace().unwrap_or_default();
    let mut children = Vec::new();
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
    let mut related = Vec::new();
    for (resource, kind) in &resolved.related {
        let Some(selector) = related_selector(kind, parent.as_ref()) else { continue };
        for cache in [caches.children(resource), caches.unmanaged(resource)].into_iter().flatten() {
            let hits = cache.store.in_namespace(&ns, |o| matches(&selector, o.labels()));
            related.extend(hits.into_iter().map(|object| Observation { resource: cache.resource.clone(), object }));
        }
    }
    let parent_ref = ObjectRef::from_obj_with(parent.as_ref(), parent_resource.clone());
    let in_flight = expectations.in_flight(&parent_ref, |key| {
        let child = children.iter().find(|c| {
            c.resource.kind == key.kind && c.resource.api_version == key.api_version && c.object.name_any() == key.name
        });
        Seen::of(child.map(|c| c.object.as_ref()))
    });
    Observed { parent, parent_resource: parent_resource.clone(), children, related, in_flight, now: now_millis() }
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

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::{ApiResource, DynamicObject};
    use serde_json::{Value, json};

    use super::{InFlight, Observation, Observed};
    use crate::kubernetes::access::Resolved;

    pub fn podsets() -> ApiResource {
        ApiResource::erase::<crate::crd::PodSet>(&())
    }

    pub fn pods() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&())
    }

    pub fn deployments() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&())
    }

    /// A PodSet `web` in namespace `ns`, generation 2.
    pub fn podset(replicas: i32) -> DynamicObject {
        let mut p = DynamicObject::new("web", &podsets()).within("ns");
        p.metadata.uid = Some("uid-web".into());
        p.metadata.generation = Some(2);
        p.metadata.resource_version = Some("7".into());
        p.data = json!({ "spec": { "replicas": replicas } });
        p
    }

    /// A pod `name` the PodSet controls, in `phase`.
    pub fn pod(name: &str, phase: &str) -> DynamicObject {
        let mut p = DynamicObject::new(name, &pods()).within("ns");
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "app.example.com/v1alpha1".into(),
            kind: "PodSet".into(),
            name: "web".into(),
            uid: "uid-web".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        p.data = json!({ "spec": { "containers": [] }, "status": { "phase": phase } });
        p
    }

    pub fn observed(parent: DynamicObject, children: Vec<(ApiResource, DynamicObject)>) -> Observed {
        Observed {
            parent_resource: podsets(),
            parent: Arc::new(parent.into()),
            children: children
                .into_iter()
                .map(|(r, o)| Observation { resource: Arc::new(r), object: Arc::new(o.into()) })
                .collect(),
            related: Vec::new(),
            in_flight: InFlight::default(),
            now: 1_700_000_000_000,
        }
    }

    /// What a policy reconciling PodSets with pod, Deployment and ConfigMap children resolves to.
    pub fn resolved(finalizer: Option<&str>) -> Resolved {
        Resolved {
            parent: podsets(),
            children: vec![pods(), deployments(), ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())],
            related: Vec::new(),
            finalizer: finalizer.map(String::from),
        }
    }

    pub fn configmap(name: &str, extra: Value) -> Value {
        let mut v =
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "a": "b" } });
        if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;

    use super::fixtures::{pod, pods, podset, podsets};
    use super::*;
    use crate::contract::bindings::{LabelRequirement, RelatedKind, SelectorValue};
    use crate::kubernetes::watches::{MANAGED_BY, MANAGED_BY_LABEL, Scope};

    struct TwoCaches {
        children: Watched,
        unmanaged: Watched,
    }

    impl Caches for TwoCaches {
        fn children(&self, _: &ApiResource) -> Option<&Watched> {
            Some(&self.children)
        }
        fn unmanaged(&self, _: &ApiResource) -> Option<&Watched> {
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
            children: Watched::new(&pods(), Scope::Children),
            unmanaged: Watched::new(&pods(), Scope::Unmanaged),
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
        let observed = gather(parent, &podsets(), &resolved, &caches, &Expectations::default());
        let mut names: Vec<String> = observed.related.iter().map(|r| r.object.name_any()).collect();
        names.sort();
        assert_eq!(names, ["made-elsewhere", "made-here"]);
    }
}
