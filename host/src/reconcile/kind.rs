//! A running parent kind: its parents' cache, the caches of its children and related
//! objects, and the channel that re-queues its parents.

use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use super::burst::InFlight;
use super::context::Context;
use super::lookups::LookupIndex;
use super::turns::{Decided, Turns};
use crate::kubernetes::access::Resolved;
use crate::kubernetes::cache::{CacheHealth, Caches};
use crate::kubernetes::object::Object;
use crate::kubernetes::watches::{Route, Scope, WatchGuard, Watched};

/// What a reconcile of one parent kind shares.
pub struct KindContext {
    pub ctx: Arc<Context>,
    pub kind: Arc<KindState>,
    /// Reconciles of this kind that may run at once (`--concurrency`), handed out in
    /// the order they were asked for, new work first: see [`KindContext::new`].
    pub turns: Turns,
    /// Cancelled when this kind's controller stops: a reconcile still waiting for its
    /// turn then gives it up, so that the stop does not wait for every queued parent.
    pub stop: CancellationToken,
    /// Reconciles of this kind started and not finished: the heap is given back when a
    /// burst of them has drained.
    pub in_flight: InFlight,
}

impl KindContext {
    /// kube-runtime's controller runs every reconcile it is given at once (its own
    /// limit is off); each then waits here for a turn, first come first served among
    /// the new ones, then among the re-decisions ([`super::turns`]).
    ///
    /// With kube-runtime's limit, the reconciles due while every slot was taken waited
    /// in a hash set and the next was taken from it in hash order: under load a parent
    /// could wait behind any number of parents queued after it. Measured in `make
    /// bench` (200 PodSets × 5 created at once, 8 slots): a PodSet's first decision
    /// came at 3.4 s at the median and 7.4 s for the last, behind 374 re-decisions of
    /// PodSets whose pods were changing; the last PodSets converged 1.2× later than the
    /// ReplicaSet controller's, whose work queue is first in, first out. tokio's
    /// semaphore is fair: a turn goes to the longest waiter.
    pub fn new(ctx: Arc<Context>, kind: Arc<KindState>, stop: CancellationToken) -> Self {
        // 0 is no limit, as it was for kube-runtime's.
        let turns = match ctx.concurrency {
            0 => tokio::sync::Semaphore::MAX_PERMITS,
            n => usize::from(n),
        };
        let turns = Turns::new(turns);
        KindContext { ctx, kind, turns, stop, in_flight: InFlight::default() }
    }
}

/// A running parent kind: its parents' cache, its caches of children and related
/// objects, and the channel that re-queues its parents.
pub struct KindState {
    pub resource: ApiResource,
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
