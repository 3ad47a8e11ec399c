//! Namespaced and cluster-scoped kinds: which is which (from discovery, when a policy
//! loads), and the API of one kind in the right place.

use std::collections::BTreeSet;

use kube::Client;
use kube::api::{Api, ApiResource};

/// A kind as objects name their own: `apiVersion` and `kind`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TypeKey {
    pub api_version: String,
    pub kind: String,
}

impl TypeKey {
    pub fn of(resource: &ApiResource) -> Self {
        TypeKey { api_version: resource.api_version.clone(), kind: resource.kind.clone() }
    }
}

/// The cluster-scoped kinds among those a policy declared; every other one is namespaced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterScoped(BTreeSet<TypeKey>);

impl ClusterScoped {
    pub fn insert(&mut self, resource: &ApiResource) {
        self.0.insert(TypeKey::of(resource));
    }

    pub fn contains(&self, resource: &ApiResource) -> bool {
        self.0.contains(&TypeKey::of(resource))
    }
}

/// The API of `resource` (an [`ApiResource`], shared or not) in `namespace`, or
/// cluster-wide when `None`. (An empty namespace is not "cluster-wide" to kube: it
/// builds `/namespaces//…`, a 404.)
pub fn api_for<K>(client: &Client, resource: &K::DynamicType, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::DynamicResourceScope>,
{
    match namespace {
        Some(ns) if !ns.is_empty() => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    }
}
