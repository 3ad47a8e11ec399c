//! Resolving what a policy declares against the API server, when it loads: which
//! resource serves each kind and its scope (discovery), that cluster-scoped kinds are
//! used only where they can be owned and were granted ([`Reach`]), and that the
//! operator's own identity may do what the policy needs (SelfSubjectAccessReview), and
//! so may the service account the policy acts as, if any (the same review, asked as it).
//! A policy that would fail at its first write is refused before it decides anything.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, ApiResource, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};

use super::identity::ServiceAccount;
use super::namespaces::NamespaceLabels;
use super::scope::ClusterScoped;
use crate::contract::bindings::{Declarations, LookupKind, RelatedKind};
use crate::contract::declarations::{kind_name, to_gvk};
use crate::crd::{GroupKind, Reach};

/// A policy's declarations with the resource serving each kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub parent: ApiResource,
    pub children: Vec<ApiResource>,
    pub related: Vec<(ApiResource, RelatedKind)>,
    /// Kinds looked up by name or computed selector (contract 0.4).
    pub lookups: Vec<(ApiResource, LookupKind)>,
    pub finalizer: Option<String>,
    /// Which of these kinds are cluster-scoped.
    pub cluster_scoped: ClusterScoped,
    /// What the administrator granted this policy beyond its parent's namespace.
    pub reach: Reach,
    /// The namespaces' labels, when `reach` grants namespaces by selector.
    pub namespace_labels: Option<NamespaceLabels>,
}

impl Resolved {
    pub fn parent_is_cluster_scoped(&self) -> bool {
        self.cluster_scoped.contains(&self.parent)
    }

    /// Whether `resource` is a cluster-scoped kind this policy declared.
    pub fn is_cluster_scoped(&self, resource: &ApiResource) -> bool {
        self.cluster_scoped.contains(resource)
    }

    /// Whether the grant names `namespace` or selects it by its labels (the namespaces
    /// a parent owns are known per decision: reconcile/check.rs).
    pub fn grants(&self, namespace: &str) -> bool {
        let n = &self.reach.namespaces;
        let selected = || {
            let labels = self.namespace_labels.as_ref();
            n.selector.as_ref().zip(labels).is_some_and(|(s, labels)| labels.selects(s, namespace))
        };
        n.names.iter().any(|name| name == namespace) || selected()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("the API server does not serve {kind}: is its CustomResourceDefinition installed?")]
    NotServed { kind: String },

    #[error(
        "{kind} is cluster-scoped: the operator's administrator has not granted this policy to write it (reach.clusterKinds, podset-host run --reach)"
    )]
    NotGranted { kind: String },

    #[error("{kind} is cluster-scoped: an operator limited to namespace {namespace} (--namespace) cannot serve it")]
    ClusterScopedParent { kind: String, namespace: String },

    #[error(
        "{kind} is cluster-scoped: a ReconcilePolicy decides the parents of its own namespace; the operator's --policy files serve cluster-scoped kinds"
    )]
    ClusterScopedPolicy { kind: String },

    #[error(
        "the children of {parent} may go beyond its namespace (reach.namespaces): an operator limited to namespace {namespace} (--namespace) does not watch them there"
    )]
    NarrowReach { parent: String, namespace: String },

    #[error(
        "spec.reach is honoured only in the namespace the operator's administrator names (podset-host run --reach-namespace{allowed}): this ReconcilePolicy is in {namespace}"
    )]
    ReachNotAllowed { namespace: String, allowed: String },

    #[error("reach.namespaces.selector is not a label selector: {why}")]
    InvalidGrant { why: String },

    #[error("the operator may not {verb} {resource}{where_}: grant it in the operator's RBAC (manifests/rbac.yaml)")]
    Forbidden { verb: String, resource: String, where_: String },

    #[error(
        "service account {account} may not {verb} {resource}{where_}, and this policy acts as it (spec.serviceAccountName, or the operator's --default-service-account): grant it in a Role bound to it"
    )]
    ActingAsForbidden { account: String, verb: String, resource: String, where_: String },

    #[error(
        "the operator may not act as service account {account}: grant it impersonate on serviceaccounts (manifests/rbac.yaml): {why}"
    )]
    CannotImpersonate { account: String, why: String },

    #[error("the API server does not answer ({0}): is it up, and is the kubeconfig's address right?")]
    Unreachable(#[source] kube::Error),

    #[error("Kubernetes API: {0}")]
    Kube(#[source] kube::Error),
}

impl From<kube::Error> for AccessError {
    /// A request that never got an answer is told apart from one the server refused.
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Service(_) | kube::Error::HyperError(_) => AccessError::Unreachable(e),
            e => AccessError::Kube(e),
        }
    }
}

impl AccessError {
    /// A CamelCase reason for conditions and Events, and a bounded metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            AccessError::NotServed { .. } => "KindNotServed",
            AccessError::NotGranted { .. } => "NotGranted",
            AccessError::ClusterScopedParent { .. } => "ClusterScopedParent",
            AccessError::NarrowReach { .. } => "NarrowReach",
            AccessError::ReachNotAllowed { .. } => "ReachNotAllowed",
            AccessError::InvalidGrant { .. } => "InvalidGrant",
            AccessError::ClusterScopedPolicy { .. } => "ClusterScopedPolicy",
            AccessError::Forbidden { .. } => "Forbidden",
            AccessError::ActingAsForbidden { .. } => "ServiceAccountForbidden",
            AccessError::CannotImpersonate { .. } => "CannotImpersonate",
            AccessError::Unreachable(_) => "ApiUnreachable",
            AccessError::Kube(_) => "ApiError",
        }
    }

    /// Whether trying again later can succeed without changing the policy: a CRD
    /// installed or an API server back. Missing permissions need a human.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AccessError::NotServed { .. } | AccessError::Unreachable(_) | AccessError::Kube(_))
    }
}

/// Resolves `d`, checks its scopes against what `reach` grants, and checks the operator
/// may act on it in `namespace` (all when `None`). `labels` are the namespaces', for a
/// grant by selector. A policy acting as a service account (`acting_as`, with the client
/// that impersonates it) is checked as it too, in its namespace, for what the host does
/// on its behalf.
pub async fn resolve(
    client: &Client,
    namespace: Option<&str>,
    d: &Declarations,
    reach: &Reach,
    labels: Option<NamespaceLabels>,
    acting_as: Option<(&ServiceAccount, &Client)>,
) -> Result<Resolved, AccessError> {
    let mut resolved = discover_all(client, d).await?;
    resolved.reach = reach.clone();
    resolved.namespace_labels = labels;
    scopes(&resolved, namespace)?;
    // A cluster-scoped kind is checked cluster-wide, and so is every kind of a
    // cluster-scoped parent or of one granted other namespaces: its children's
    // namespaces are not known in advance.
    let wide = |resource: &ApiResource| {
        resolved.parent_is_cluster_scoped()
            || resolved.is_cluster_scoped(resource)
            || resolved.reach.grants_namespaces()
    };
    for (verb, resource, sub) in needs(&resolved) {
        allowed(client, if wide(resource) { None } else { namespace }, verb, resource, sub).await?;
    }
    if let Some((account, as_client)) = acting_as {
        for (verb, resource) in acts_for(&resolved) {
            let at = if wide(resource) { None } else { Some(account.namespace.as_str()) };
            allowed(as_client, at, verb, resource, None).await.map_err(|e| match e {
                AccessError::Forbidden { verb, resource, where_ } => {
                    AccessError::ActingAsForbidden { account: account.to_string(), verb, resource, where_ }
                }
                AccessError::Kube(kube::Error::Api(s)) if s.code == 403 => {
                    AccessError::CannotImpersonate { account: account.to_string(), why: s.message }
                }
                e => e,
            })?;
        }
    }
    Ok(resolved)
}

/// Where cluster-scoped kinds and other namespaces may appear: a cluster-scoped parent,
/// or children beyond a namespaced parent's namespace, need an operator that watches
/// every namespace; a cluster-scoped child needs the administrator's grant. Related and
/// looked-up kinds are only read, so any scope is fine.
pub fn scopes(r: &Resolved, namespace: Option<&str>) -> Result<(), AccessError> {
    let parent = r.parent_is_cluster_scoped();
    if let Some(ns) = namespace {
        if parent {
            return Err(AccessError::ClusterScopedParent { kind: r.parent.kind.clone(), namespace: ns.into() });
        }
        if r.reach.grants_namespaces() {
            return Err(AccessError::NarrowReach { parent: r.parent.kind.clone(), namespace: ns.into() });
        }
    }
    if let Some(selector) = &r.reach.namespaces.selector {
        kube::core::Selector::try_from(selector.clone())
            .map_err(|e| AccessError::InvalidGrant { why: e.to_string() })?;
    }
    for child in r.children.iter().filter(|c| r.is_cluster_scoped(c)) {
        let kind = GroupKind { group: child.group.clone(), kind: child.kind.clone() };
        if !r.reach.cluster_kinds.contains(&kind) {
            return Err(AccessError::NotGranted { kind: child.kind.clone() });
        }
    }
    Ok(())
}

/// Whether the operator may list and watch namespaces (their labels, for a grant by
/// selector): checked before waiting for that watch to list them.
pub async fn may_read_namespaces(client: &Client) -> Result<(), AccessError> {
    let namespaces = ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&());
    for verb in ["list", "watch"] {
        allowed(client, None, verb, &namespaces, None).await?;
    }
    Ok(())
}

/// Whether an operator serving `namespace` (all when `None`) may tear down parents of
/// `parent` with children of `child` (the teardown ledger's kinds, reconcile/controller.rs):
/// a cluster-scoped parent needs every namespace; it lists, watches and patches the
/// parents (the finalizer), and lists, watches and deletes the children.
pub async fn may_tear_down(
    client: &Client,
    namespace: Option<&str>,
    parent: (&ApiResource, bool),
    child: (&ApiResource, bool),
) -> Result<(), AccessError> {
    if parent.1
        && let Some(ns) = namespace
    {
        return Err(AccessError::ClusterScopedParent { kind: parent.0.kind.clone(), namespace: ns.into() });
    }
    let at = |cluster: bool| if cluster || parent.1 { None } else { namespace };
    for verb in ["list", "watch", "patch"] {
        allowed(client, at(parent.1), verb, parent.0, None).await?;
    }
    for verb in ["list", "watch", "delete"] {
        allowed(client, at(child.1), verb, child.0, None).await?;
    }
    Ok(())
}

/// Resolves what `d` declares to the API server's resources, without checking what
/// this identity may do with them (for a reader such as `policy record`).
pub async fn discover_all(client: &Client, d: &Declarations) -> Result<Resolved, AccessError> {
    let mut cluster_scoped = ClusterScoped::default();
    let mut found = |(ar, scope): (ApiResource, Scope)| {
        if scope == Scope::Cluster {
            cluster_scoped.insert(&ar);
        }
        ar
    };
    let parent = found(discover(client, &to_gvk(&d.parent)).await?);
    let mut children = Vec::new();
    for c in &d.children {
        children.push(found(discover(client, &to_gvk(c)).await?));
    }
    let mut related = Vec::new();
    for r in &d.related {
        related.push((found(discover(client, &to_gvk(&r.kind)).await?), r.clone()));
    }
    let mut lookups = Vec::new();
    for l in &d.lookups {
        lookups.push((found(discover(client, &to_gvk(&l.kind)).await?), l.clone()));
    }
    Ok(Resolved {
        parent,
        children,
        related,
        lookups,
        finalizer: d.finalizer.clone(),
        cluster_scoped,
        reach: Reach::default(),
        namespace_labels: None,
    })
}

/// The verbs the host uses on behalf of a policy.
fn needs(r: &Resolved) -> Vec<(&'static str, &ApiResource, Option<&'static str>)> {
    let mut needs = Vec::new();
    // The parent: watched, its metadata patched (the finalizer) and its status
    // replaced (a PUT of the status alone, see reconcile/status.rs).
    for verb in ["get", "list", "watch", "patch"] {
        needs.push((verb, &r.parent, None));
    }
    needs.push(("update", &r.parent, Some("status")));
    for child in &r.children {
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            needs.push((verb, child, None));
        }
    }
    for (related, _) in &r.related {
        for verb in ["get", "list", "watch"] {
            needs.push((verb, related, None));
        }
    }
    // Looked-up kinds are watched like related ones; a kind declared with `patch` is
    // also written by server-side apply.
    for (looked_up, kind) in &r.lookups {
        for verb in ["get", "list", "watch"] {
            needs.push((verb, looked_up, None));
        }
        if kind.patch {
            needs.push(("patch", looked_up, None));
        }
    }
    needs
}

/// What the host does on behalf of a policy acting as a service account, so what that
/// account must be allowed: write the children (and read one back when a create meets
/// it), read the related and looked-up objects the policy is shown, patch those of a
/// lookup kind declared with `patch`. The watches behind what it reads are the
/// operator's, shared; the parent and its status are the operator's to write.
fn acts_for(r: &Resolved) -> Vec<(&'static str, &ApiResource)> {
    let mut acts = Vec::new();
    for child in &r.children {
        for verb in ["get", "create", "patch", "delete"] {
            acts.push((verb, child));
        }
    }
    for (read, _) in &r.related {
        for verb in ["get", "list"] {
            acts.push((verb, read));
        }
    }
    for (looked_up, kind) in &r.lookups {
        for verb in ["get", "list"] {
            acts.push((verb, looked_up));
        }
        if kind.patch {
            acts.push(("patch", looked_up));
        }
    }
    acts
}

async fn discover(client: &Client, gvk: &GroupVersionKind) -> Result<(ApiResource, Scope), AccessError> {
    match discovery::pinned_kind(client, gvk).await {
        Ok((ar, caps)) => Ok((ar, caps.scope)),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(AccessError::NotServed { kind: kind_name(gvk) }),
        Err(kube::Error::Discovery(_)) => Err(AccessError::NotServed { kind: kind_name(gvk) }),
        Err(e) => Err(e.into()),
    }
}

async fn allowed(
    client: &Client,
    namespace: Option<&str>,
    verb: &str,
    resource: &ApiResource,
    subresource: Option<&str>,
) -> Result<(), AccessError> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(resource.group.clone()),
                resource: Some(resource.plural.clone()),
                subresource: subresource.map(String::from),
                verb: Some(verb.into()),
                namespace: namespace.map(String::from),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    if answer.status.is_some_and(|s| s.allowed) {
        return Ok(());
    }
    let group = if resource.group.is_empty() { String::new() } else { format!(".{}", resource.group) };
    let sub = subresource.map(|s| format!("/{s}")).unwrap_or_default();
    Err(AccessError::Forbidden {
        verb: verb.into(),
        resource: format!("{}{group}{sub}", resource.plural),
        where_: namespace.map(|ns| format!(" in namespace {ns}")).unwrap_or_else(|| " cluster-wide".into()),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use podset_test_support::objects::tenants;

    use super::*;
    use crate::crd::NamespaceReach;

    /// `parent` (cluster-scoped when `cluster_parent`) with Namespace and ConfigMap children.
    fn resolved(parent: ApiResource, cluster_parent: bool, reach: Reach) -> Resolved {
        let namespaces = ApiResource::erase::<Namespace>(&());
        let mut cluster_scoped = ClusterScoped::default();
        cluster_scoped.insert(&namespaces);
        if cluster_parent {
            cluster_scoped.insert(&parent);
        }
        Resolved {
            parent,
            children: vec![namespaces, ApiResource::erase::<ConfigMap>(&())],
            related: Vec::new(),
            lookups: Vec::new(),
            finalizer: None,
            cluster_scoped,
            reach,
            namespace_labels: None,
        }
    }

    fn namespace_kind() -> Reach {
        Reach { cluster_kinds: vec![GroupKind { group: String::new(), kind: "Namespace".into() }], ..Reach::default() }
    }

    #[test]
    fn a_cluster_scoped_child_needs_a_grant_whatever_its_parent() {
        assert!(scopes(&resolved(tenants(), true, namespace_kind()), None).is_ok());
        let e = scopes(&resolved(tenants(), true, Reach::default()), None).expect_err("not granted");
        assert!(matches!(&e, AccessError::NotGranted { kind } if kind == "Namespace"), "{e}");
        assert_eq!(e.reason(), "NotGranted");
        let other = Reach {
            cluster_kinds: vec![GroupKind { group: "rbac.authorization.k8s.io".into(), kind: "ClusterRole".into() }],
            ..Reach::default()
        };
        assert!(scopes(&resolved(tenants(), true, other), None).is_err(), "a grant of another kind");
        // A namespaced parent's cluster-scoped child carries the host's mark.
        assert!(scopes(&resolved(tenants(), false, namespace_kind()), None).is_ok(), "granted");
        let e = scopes(&resolved(tenants(), false, Reach::default()), None).expect_err("not granted");
        assert!(matches!(e, AccessError::NotGranted { .. }), "{e}");
    }

    #[test]
    fn reaching_beyond_the_parents_namespace_needs_an_operator_of_every_namespace() {
        let e = scopes(&resolved(tenants(), true, namespace_kind()), Some("team-a")).expect_err("--namespace");
        assert!(matches!(e, AccessError::ClusterScopedParent { .. }), "{e}");
        let names = Reach {
            namespaces: NamespaceReach { names: vec!["shared".into()], ..NamespaceReach::default() },
            ..Reach::default()
        };
        let mut r = resolved(tenants(), false, names);
        r.children.remove(0);
        assert!(scopes(&r, None).is_ok(), "a namespaced parent granted another namespace");
        let e = scopes(&r, Some("team-a")).expect_err("an operator of one namespace");
        assert!(matches!(e, AccessError::NarrowReach { .. }), "{e}");
        assert!(r.grants("shared") && !r.grants("team-b"));
        r.reach = Reach::default();
        assert!(scopes(&r, Some("team-a")).is_ok(), "a namespaced parent with namespaced children, as before");
    }

    #[test]
    fn a_selector_grants_the_namespaces_whose_labels_match() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
        let labelled = |name: &str, tier: &str| Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("tier".to_string(), tier.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let selector =
            LabelSelector { match_labels: Some([("tier".into(), "apps".into())].into()), ..Default::default() };
        let reach = Reach {
            namespaces: NamespaceReach { selector: Some(selector), ..NamespaceReach::default() },
            ..Reach::default()
        };
        let mut r = resolved(tenants(), false, reach);
        assert!(!r.grants("team-a"), "no labels known: nothing is granted");
        r.namespace_labels = Some(NamespaceLabels::of([labelled("team-a", "apps"), labelled("kube-system", "system")]));
        assert!(r.grants("team-a"));
        assert!(!r.grants("kube-system"));
    }
}
