//! A running parent kind: its parents' cache, the caches of its children and related
//! objects, and the channel that re-queues its parents.

use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::Context;
use super::lookups::LookupIndex;
use super::urgency::{Decided, Urgency};
use crate::kubernetes::access::Resolved;
use crate::kubernetes::cache::{CacheHealth, Caches};
use crate::kubernetes::object::Object;
use crate::kubernetes::watches::{Route, Scope, WatchGuard, Watched};

/// What a reconcile of one parent kind shares.
pub struct KindContext {
    pub ctx: Arc<Context>,
    pub kind: Arc<KindState>,
}

/// A running parent kind: its parents' cache, its caches of children and related
/// objects, and the channel that re-queues its parents.
pub struct KindState {
    pub resource: Arc<ApiResource>,
    pub gvk: GroupVersionKind,
    pub parents: Store<Object>,
    pub health: CacheHealth,
    pub(super) requeue: UnboundedSender<ObjectRef<Object>>,
    pub(super) guards: Vec<WatchGuard>,
    pub(super) routes: Vec<(Arc<Watched>, Arc<Route>)>,
    /// What each parent's last decision looked up (contract 0.4).
    pub lookups: Arc<LookupIndex>,
    /// The generation each parent was last decided at: whether a reconcile is new work.
    pub decided: Arc<Decided>,
    /// The kind's children as its controller watches them, policy or not: what a
    /// teardown reads (reconcile::waves).
    pub teardown: Resolved,
    /// No policy serves the kind: only parents awaiting the host's teardown are acted on.
    pub teardown_only: bool,
}

impl Drop for KindState {
    fn drop(&mut self) {
        for (watched, route) in &self.routes {
            watched.remove_route(route);
        }
    }
}

impl KindState {
    /// Every cache a reconcile of this kind may read, for the sync gate.
    pub fn caches_for(&self, children: &[ApiResource], related: &[ApiResource]) -> Caches {
        let watched = |scope: Scope, r: &ApiResource| {
            self.guards
                .iter()
                .find(|g| g.watched.scope == scope && same(&g.watched.resource, r))
                .map(|g| g.watched.health.clone())
        };
        let mut all = vec![self.health.clone()];
        all.extend(children.iter().filter_map(|r| watched(Scope::Children, r)));
        all.extend(related.iter().flat_map(|r| [watched(Scope::Children, r), watched(Scope::Unmanaged, r)]).flatten());
        Caches::new(all)
    }

    pub fn requeue(&self, parent: &Object) {
        let _ = self.requeue.unbounded_send(ObjectRef::from_obj_with(parent, self.resource.clone()));
    }

    /// How urgent a reconcile of the parent `key` names is, as its cached copy says
    /// (routine when it is gone: the reconcile only finds it gone).
    pub fn urgency(&self, key: &ObjectRef<Object>) -> Urgency {
        self.parents.get(key).map_or(Urgency::Routine, |p| self.decided.urgency(&p))
    }

    fn find(&self, scope: Scope, resource: &ApiResource) -> Option<&Arc<Watched>> {
        self.guards.iter().find(|g| g.watched.scope == scope && same(&g.watched.resource, resource)).map(|g| &g.watched)
    }
}

impl super::observe::Caches for KindState {
    fn children(&self, resource: &ApiResource) -> Option<&Arc<Watched>> {
        self.find(Scope::Children, resource)
    }

    fn unmanaged(&self, resource: &ApiResource) -> Option<&Arc<Watched>> {
        self.find(Scope::Unmanaged, resource)
    }
}

fn same(a: &ApiResource, b: &ApiResource) -> bool {
    a.api_version == b.api_version && a.plural == b.plural
}
