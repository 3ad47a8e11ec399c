//! The keys the reconciler files its work under: a parent, and one of its children.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;

use crate::kubernetes::object::Object;

/// The parent's key: its kind, namespace and name.
pub type ParentRef = ObjectRef<Object>;

/// Names one child: its kind, namespace and name. A namespaced parent's children are in
/// its namespace unless the administrator granted others; a cluster-scoped parent's are
/// cluster-scoped or in namespaces it was granted, so the namespace is part of the key
/// ("" for a cluster-scoped kind).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ChildKey {
    pub fn new(resource: &ApiResource, namespace: &str, name: &str) -> Self {
        ChildKey {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of the object of `resource` with this `metadata` (its namespace and name).
    pub fn of_meta(resource: &ApiResource, meta: &ObjectMeta) -> Self {
        ChildKey::new(resource, meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
    }

    /// The key of a child of `kind` (`apiVersion`, `kind`) named `name` in `namespace`.
    pub fn of(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        ChildKey { api_version: api_version.into(), kind: kind.into(), namespace: namespace.into(), name: name.into() }
    }

    /// Whether `obj` is the object this key names.
    pub fn names(&self, obj: &Object) -> bool {
        obj.metadata.name.as_deref() == Some(self.name.as_str())
            && obj.metadata.namespace.as_deref().unwrap_or_default() == self.namespace
    }
}

impl std::fmt::Display for ChildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}
