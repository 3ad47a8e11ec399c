//! Resolving what a policy declares against the API server, when it loads: which
//! resource serves each kind (discovery), that every kind is namespaced, and that
//! the operator's own identity may do what the policy needs (SelfSubjectAccessReview).
//! A policy that would fail at its first write is refused before it decides anything.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, ApiResource, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};

use crate::contract::bindings::{Declarations, RelatedKind};
use crate::contract::declarations::{kind_name, to_gvk};

/// A policy's declarations with the resource serving each kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub parent: ApiResource,
    pub children: Vec<ApiResource>,
    pub related: Vec<(ApiResource, RelatedKind)>,
    pub finalizer: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("the API server does not serve {kind}: is its CustomResourceDefinition installed?")]
    NotServed { kind: String },

    #[error("{kind} is cluster-scoped; policies reconcile and own namespaced objects only")]
    ClusterScoped { kind: String },

    #[error("the operator may not {verb} {resource}{where_}: grant it in the operator's RBAC (manifests/rbac.yaml)")]
    Forbidden { verb: String, resource: String, where_: String },

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
            AccessError::ClusterScoped { .. } => "ClusterScopedKind",
            AccessError::Forbidden { .. } => "Forbidden",
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

/// Resolves `d` and checks the operator may act on it in `namespace` (all when `None`).
pub async fn resolve(client: &Client, namespace: Option<&str>, d: &Declarations) -> Result<Resolved, AccessError> {
    let resolved = discover_all(client, d).await?;
    for (verb, resource, sub) in needs(&resolved) {
        allowed(client, namespace, verb, resource, sub).await?;
    }
    Ok(resolved)
}

/// Resolves what `d` declares to the API server's resources, without checking what
/// this identity may do with them (for a reader such as `policy record`).
pub async fn discover_all(client: &Client, d: &Declarations) -> Result<Resolved, AccessError> {
    let parent = discover(client, &to_gvk(&d.parent)).await?;
    let mut children = Vec::new();
    for c in &d.children {
        children.push(discover(client, &to_gvk(c)).await?);
    }
    let mut related = Vec::new();
    for r in &d.related {
        related.push((discover(client, &to_gvk(&r.kind)).await?, r.clone()));
    }
    Ok(Resolved { parent, children, related, finalizer: d.finalizer.clone() })
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
    needs
}

async fn discover(client: &Client, gvk: &GroupVersionKind) -> Result<ApiResource, AccessError> {
    match discovery::pinned_kind(client, gvk).await {
        Ok((_, caps)) if caps.scope == Scope::Cluster => Err(AccessError::ClusterScoped { kind: kind_name(gvk) }),
        Ok((ar, _)) => Ok(ar),
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
