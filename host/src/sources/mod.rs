//! Where policy modules come from, and how a new one replaces the old.

pub mod cluster;
pub mod file;

use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

use crate::crd::PodSet;
use crate::reconcile::Context;

/// Re-queues every PodSet `uses` selects, so the new policy re-decides them now
/// rather than at their next event. Returns how many.
pub fn requeue_matching(
    ctx: &Context,
    requeue: &UnboundedSender<ObjectRef<PodSet>>,
    uses: impl Fn(&PodSet) -> bool,
) -> usize {
    let mut n = 0;
    for ps in ctx.podsets.state() {
        if uses(&ps) && requeue.unbounded_send(ObjectRef::from_obj(ps.as_ref())).is_ok() {
            n += 1;
        }
    }
    n
}
