//! Where policy modules come from, and how a new one replaces the old: files
//! ([`file`](mod@file)), registries ([`image`]) and ReconcilePolicy objects ([`cluster`]). Both admit a module the same
//! way ([`admit`]) and then let the controllers catch up ([`swapped`]).

pub mod cluster;
pub mod file;
pub mod history;
pub mod image;
pub mod policy_status;
pub mod revisions;
pub mod rollout;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::crd::Reach;
use crate::kubernetes::access::{self, AccessError};
use crate::kubernetes::cache::Caches;
use crate::kubernetes::identity::ServiceAccount;
use crate::kubernetes::object::Object;
use crate::oci;
use crate::reconcile::context::Context;
use crate::reconcile::controller::Kinds;
use crate::registry::{ActingAs, Admitted, Selection};
use crate::sandbox::Policy;
use crate::signature::Trust;

/// What the policy sources share: the reconcilers' context, the parent kinds' running
/// controllers (a swap starts, stops and re-queues them), and how modules are pulled
/// and verified.
pub struct Sources {
    pub ctx: Arc<Context>,
    pub kinds: Kinds,
    pub oci: oci::Registry,
    /// Modules pulled from registries, by digest; `None` runs without (it could not
    /// be made).
    pub module_cache: Option<oci::cache::Cache>,
    /// The public keys modules are verified with, and whether they must be.
    pub trust: Trust,
    /// How often registry tags are resolved again.
    pub registry_poll: Duration,
    /// The `--policy oci://` references served from the cache because their registry
    /// is unreachable: said once when it goes, once when it is back.
    pub registry_down: Mutex<HashSet<String>>,
    /// What the administrator granted file policies beyond their parents' namespaces.
    pub reaches: Reaches,
    /// The one namespace whose ReconcilePolicies' `spec.reach` is honoured.
    pub reach_namespace: Option<String>,
    /// The service account of its namespace a ReconcilePolicy that names none acts as
    /// (`--default-service-account`); `None`: such a policy acts as the operator.
    pub default_service_account: Option<String>,
    /// The modules of recent revisions, to bring one back without its source; `None`
    /// runs without (it could not be made).
    pub revisions: Option<revisions::Store>,
    /// Revisions listed per ReconcilePolicy.
    pub revision_history: usize,
    /// Each ReconcilePolicy's revisions and rollout.
    pub lifecycles: rollout::Lifecycles,
    /// The `/openapi/v3` documents shadow decisions are checked against.
    pub schema_paths: Mutex<std::collections::BTreeSet<String>>,
}

/// The administrator's grants to file policies (`--reach`), by the name their module
/// declares. A ReconcilePolicy gets its `spec.reach` only in the namespace the
/// administrator names (`--reach-namespace`): whoever may create one in another
/// namespace must not be able to grant it more than that namespace.
pub type Reaches = BTreeMap<String, Reach>;

/// The knobs of [`Sources`] beside the context.
pub struct SourceSettings {
    /// Registries: credentials, CAs, plain-HTTP hosts.
    pub registry: oci::Settings,
    pub module_cache: Option<oci::cache::Cache>,
    pub trust: Trust,
    pub registry_poll: Duration,
    pub reaches: Reaches,
    pub reach_namespace: Option<String>,
    pub default_service_account: Option<String>,
    pub revisions: Option<revisions::Store>,
    pub revision_history: usize,
}

impl Sources {
    pub fn new(ctx: Arc<Context>, settings: SourceSettings) -> Arc<Self> {
        Arc::new(Sources {
            ctx,
            kinds: Kinds::default(),
            oci: oci::Registry::new(settings.registry),
            module_cache: settings.module_cache,
            trust: settings.trust,
            registry_poll: settings.registry_poll,
            registry_down: Mutex::default(),
            reaches: settings.reaches,
            reach_namespace: settings.reach_namespace,
            default_service_account: settings.default_service_account,
            revisions: settings.revisions,
            revision_history: settings.revision_history,
            lifecycles: rollout::Lifecycles::default(),
            schema_paths: Mutex::default(),
        })
    }

    /// Every cache the operator holds now (they come and go with policies).
    pub fn caches(&self) -> Caches {
        let mut all = vec![self.ctx.policy_cache.clone()];
        all.extend(self.kinds.health());
        all.extend(self.ctx.watches.health());
        all.extend(self.ctx.shard.health());
        all.extend(self.ctx.namespace_labels.health());
        Caches::new(all)
    }
}

/// Resolves what `policy` declares against the API server and checks the operator may
/// act on it, with what `reach` grants, and so may the service account it acts as (if
/// any): only then may it decide anything.
pub async fn admit(
    ctx: &Context,
    policy: Arc<Policy>,
    reach: &Reach,
    acting_as: Option<&ServiceAccount>,
) -> Result<Admitted, AccessError> {
    let labels = match reach.namespaces.selector {
        Some(_) => {
            access::may_read_namespaces(&ctx.client).await?;
            Some(ctx.namespace_labels.get(&ctx.client, &ctx.shutdown).await)
        }
        None => None,
    };
    let acting_as = match acting_as {
        Some(account) => {
            let client = ctx
                .identities
                .client(account)
                .map_err(|e| AccessError::CannotImpersonate { account: account.to_string(), why: e.to_string() })?;
            Some(ActingAs { account: account.clone(), client })
        }
        None => None,
    };
    let as_account = acting_as.as_ref().map(|a| (&a.account, &a.client));
    let resolved =
        access::resolve(&ctx.client, ctx.namespace.as_deref(), policy.declarations(), reach, labels, as_account)
            .await?;
    Ok(Admitted::new(policy, resolved).acting_as(acting_as))
}

/// What a ReconcilePolicy in `namespace` asking `asked` is granted: its `spec.reach` in
/// the administrator's namespace (`--reach-namespace`), nothing elsewhere, and a
/// refusal when it asks for more there.
pub fn reconcile_policy_reach(src: &Sources, namespace: &str, asked: Option<&Reach>) -> Result<Reach, AccessError> {
    match (asked, src.reach_namespace.as_deref()) {
        (None, _) => Ok(Reach::default()),
        (Some(reach), Some(allowed)) if allowed == namespace => Ok(reach.clone()),
        (Some(_), allowed) => Err(AccessError::ReachNotAllowed {
            namespace: namespace.into(),
            allowed: allowed.map(|a| format!(" {a}")).unwrap_or_else(|| ", not given to this operator".into()),
        }),
    }
}

/// The service account a ReconcilePolicy in `namespace` naming `named` acts as: the one
/// it names, else the operator's default (`--default-service-account`), else none (it
/// acts as the operator).
pub fn reconcile_policy_account(src: &Sources, namespace: &str, named: Option<&str>) -> Option<ServiceAccount> {
    let name = named.or(src.default_service_account.as_deref())?;
    Some(ServiceAccount { namespace: namespace.into(), name: name.into() })
}

/// A ReconcilePolicy decides the parents of its own namespace: a policy for a
/// cluster-scoped kind is refused there (the operator's `--policy` files serve those).
pub fn namespaced_source(admitted: Admitted) -> Result<Admitted, AccessError> {
    if admitted.resolved.parent_is_cluster_scoped() {
        return Err(AccessError::ClusterScopedPolicy { kind: admitted.resolved.parent.kind.clone() });
    }
    Ok(admitted)
}

/// After the registry changed: the controllers match what is served now, and every
/// parent of `kind` that `concerned` selects is decided again at once (not at its next
/// event). Returns how many were re-queued.
pub async fn swapped(
    src: &Arc<Sources>,
    kind: &kube::core::GroupVersionKind,
    concerned: impl Fn(&Object) -> bool,
) -> usize {
    src.kinds.sync(&src.ctx).await;
    src.kinds.requeue(kind, concerned)
}

/// The schemas shadow decisions are checked against, made again to take in the kinds
/// `admitted` (a shadow, or a rollout's new module) writes: every kind shadows declared,
/// from the API server's `/openapi/v3` (CRDs with their validation rules), or from the
/// documents shipped with the binary where the server gives none or cannot be read.
/// Built off the async runtime; one that cannot be made leaves the previous ones, and
/// says why.
pub async fn shadow_schemas(src: &Sources, admitted: &Admitted) {
    let paths = {
        let mut wanted = src.schema_paths.lock();
        let before = wanted.len();
        wanted.extend(crate::kubernetes::openapi::paths_of(admitted.policy.declarations()));
        if wanted.len() == before && src.ctx.shadows.has_schemas() {
            return;
        }
        wanted.iter().cloned().collect::<Vec<_>>()
    };
    let documents = crate::kubernetes::openapi::documents(&src.ctx.client, &paths).await.unwrap_or_else(|e| {
        tracing::warn!("shadow decisions are checked against the built-in kinds' schemas only: {e}");
        Vec::new()
    });
    let made_for = paths.clone();
    let built = tokio::task::spawn_blocking(move || {
        // Only the kinds the shadows declared are ever checked (the host refuses any
        // other before), so of the shipped documents only those of declared paths the
        // server did not give: the API server's `api/v1` replaces the shipped one.
        let served = |path: &str| documents.iter().any(|(served, _)| served == path);
        let mut schemas =
            crate::scenario::schemas::Schemas::builtin_of(|path| paths.iter().any(|p| p == path) && !served(path));
        for (path, doc) in documents {
            if let Err(e) = schemas.add_document(doc, &format!("API server {path}")) {
                tracing::warn!("shadow decisions: {e}");
            }
        }
        // The documents were rewritten here and dropped, and this blocking thread may
        // idle from now on: mimalloc gives a thread's freed pages back as that thread
        // works. An operator with a shadow and 3 PodSets: 13.3 MiB of anonymous memory
        // with this against 14.2 without (medians of 7 and 3 runs, 2026-12-01).
        crate::heap::release_freed();
        schemas
    })
    .await;
    if let Ok(schemas) = built {
        src.ctx.shadows.set_schemas(Arc::new(schemas), made_for);
    }
}

/// Whether `admitted` is the policy that decides `parent` now.
pub fn decides(ctx: &Context, admitted: &Arc<Admitted>, parent: &Object) -> bool {
    matches!(ctx.registry.select(parent, &admitted.parent_kind()), Selection::Ready(a) if Arc::ptr_eq(&a, admitted))
}
