//! The keys the reconciler files its work under: a parent, and one of its children.

use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;

use crate::kubernetes::object::Object;

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
