//! What a reconcile reads from the operator's caches: the caches of a parent kind's
//! children, related and looked-up kinds, and an object read from one.

use std::sync::Arc;

use kube::api::ApiResource;

use super::keys::ChildKey;
use crate::kubernetes::object::Object;
use crate::kubernetes::watches::Watched;

/// A child or related object together with the resource it was read from (list
/// items carry no kind).
#[derive(Clone, Debug)]
pub struct Observation {
    pub resource: Arc<ApiResource>,
    pub object: Arc<Object>,
}

impl Observation {
    /// The key naming this object.
    pub fn key(&self) -> ChildKey {
        ChildKey::of_meta(&self.resource, &self.object.metadata)
    }
}

/// The caches a reconcile reads, by the resource they hold.
pub trait Caches {
    /// The children cache of `resource`, or `None` when it is not watched.
    fn children(&self, resource: &ApiResource) -> Option<&Arc<Watched>>;
    /// The cache of the objects of `resource` the host does not manage. Related and
    /// looked-up objects are read from it and from the children cache of their kind.
    fn unmanaged(&self, resource: &ApiResource) -> Option<&Arc<Watched>>;
}
