//! Where policy modules come from, and how a new one replaces the old: files
//! ([`file`]), registries ([`image`]) and ReconcilePolicy objects ([`cluster`]). Both admit a module the same
//! way ([`admit`]) and then let the controllers catch up ([`swapped`]).

pub mod cluster;
pub mod file;
pub mod image;

use std::sync::Arc;

use crate::context::Context;
use crate::kubernetes::access::{self, AccessError};
use crate::registry::{Admitted, Selection};
use crate::sandbox::Policy;

/// Resolves what `policy` declares against the API server and checks the operator may
/// act on it: only then may it decide anything.
pub async fn admit(ctx: &Context, policy: Arc<Policy>) -> Result<Admitted, AccessError> {
    let resolved = access::resolve(&ctx.client, ctx.namespace.as_deref(), policy.declarations()).await?;
    Ok(Admitted { policy, resolved })
}

/// After the registry changed: the controllers match what is served now, and every
/// parent of `kind` that `concerned` selects is decided again at once (not at its next
/// event). Returns how many were re-queued.
pub async fn swapped(
    ctx: &Arc<Context>,
    kind: &kube::core::GroupVersionKind,
    concerned: impl Fn(&crate::kubernetes::object::Object) -> bool,
) -> usize {
    ctx.kinds.sync(ctx).await;
    ctx.kinds.requeue(kind, concerned)
}

/// Whether `admitted` is the policy that decides `parent` now.
pub fn decides(ctx: &Context, admitted: &Arc<Admitted>, parent: &crate::kubernetes::object::Object) -> bool {
    matches!(ctx.registry.select(parent, &admitted.parent_kind()), Selection::Ready(a) if Arc::ptr_eq(&a, admitted))
}
