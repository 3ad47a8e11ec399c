//! `podset-host policy record`: one live object's input, read from a cluster through
//! the operator's own observe code with no operator running, decided by a module and
//! written as a scenario file, redacted as `--record-dir` redacts. A production object
//! becomes a test case.
//!
//! Each kind the module declares is listed once in the object's namespace and put in a
//! cache of the operator's kind, so [`observe::gather`] finds the children and related
//! objects exactly as a reconcile would; a namespaced parent's children elsewhere (the
//! host's mark) are listed too, by its UID, where the reader may list them. Nothing is
//! in flight: no operator is running.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};

use super::expectations::Expectations;
use super::lookups::MAX_CALLS;
use super::observe::{self, Caches, Marks};
use super::record::redact;
use super::translate::input_for;
use crate::contract::declarations::{kind_name, to_gvk};
use crate::kubernetes::access::{AccessError, discover_all};
use crate::kubernetes::mark::PARENT_UID_LABEL;
use crate::kubernetes::object::Object;
use crate::kubernetes::scope::api_for;
use crate::kubernetes::watches::{Scope, Watched};
use crate::sandbox::Policy;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{module} decides {decides}, not {asked}")]
    OtherKind { module: String, decides: String, asked: String },
    #[error("{0}")]
    Access(#[from] AccessError),
    /// `object` is `namespace/name`, or the name of a cluster-scoped object.
    #[error("{kind} {object} not found")]
    NotFound { kind: String, object: String },
    #[error("{kind} is namespaced: name the object as NAMESPACE/NAME")]
    NamespaceRequired { kind: String },
    #[error("{kind} is cluster-scoped: name the object as NAME, without a namespace")]
    ClusterScoped { kind: String },
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("building the input: {0}")]
    Input(#[from] super::check::Rejection),
}

/// Whether `asked` names the kind of `resource` the way kubectl does: `Kind`, `kind`,
/// `Kind.group`, the plural, or `plural.group`.
pub fn names_kind(asked: &str, resource: &ApiResource) -> bool {
    let asked = asked.to_ascii_lowercase();
    let (kind, plural) = (resource.kind.to_ascii_lowercase(), resource.plural.to_ascii_lowercase());
    let group = resource.group.to_ascii_lowercase();
    [kind.clone(), plural.clone(), format!("{kind}.{group}"), format!("{plural}.{group}")].contains(&asked)
}

/// One cache per declared resource, holding what was listed.
struct Listed(HashMap<String, Arc<Watched>>);

impl Caches for Listed {
    fn children(&self, resource: &ApiResource) -> Option<&Arc<Watched>> {
        self.0.get(&key(resource))
    }
    fn unmanaged(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
        // Everything listed is in the one cache above: counted once.
        None
    }
}

fn key(r: &ApiResource) -> String {
    format!("{}/{}", r.api_version, r.plural)
}

/// The scenario file for `kind` `namespace`/`name` as `policy` would decide it now.
pub async fn snapshot(
    client: &Client,
    policy: &Policy,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<String, SnapshotError> {
    let resolved = discover_all(client, policy.declarations()).await?;
    if !names_kind(kind, &resolved.parent) {
        return Err(SnapshotError::OtherKind {
            module: policy.label().into(),
            decides: kind_name(&to_gvk(&policy.declarations().parent)),
            asked: kind.into(),
        });
    }
    // A cluster-scoped parent's children may be anywhere: every kind is listed whole.
    let cluster_parent = resolved.parent_is_cluster_scoped();
    match (cluster_parent, namespace.is_empty()) {
        (true, false) => return Err(SnapshotError::ClusterScoped { kind: kind.into() }),
        (false, true) => return Err(SnapshotError::NamespaceRequired { kind: kind.into() }),
        _ => {}
    }
    // How messages name it: NAMESPACE/NAME, or NAME alone for a cluster-scoped kind.
    let object = if cluster_parent { name.to_string() } else { format!("{namespace}/{name}") };
    let at = |resource: &ApiResource| (!cluster_parent && !resolved.is_cluster_scoped(resource)).then_some(namespace);
    let parents: Api<DynamicObject> = api_for(client, &resolved.parent, at(&resolved.parent));
    let Some(parent) = parents.get_opt(name).await? else {
        return Err(SnapshotError::NotFound { kind: kind.into(), object });
    };
    let mut listed = Listed(HashMap::new());
    let resources = resolved
        .children
        .iter()
        .chain(resolved.related.iter().map(|(r, _)| r))
        .chain(resolved.lookups.iter().map(|(r, _)| r));
    for resource in resources {
        if listed.0.contains_key(&key(resource)) {
            continue;
        }
        let cache = Watched::new(resource, Scope::Children);
        let api: Api<DynamicObject> = api_for(client, resource, at(resource));
        for object in api.list(&ListParams::default()).await?.items {
            cache.store.apply(Event::Apply(Object::from(object)));
        }
        if at(resource).is_some() && resolved.children.contains(resource) {
            for object in marked_elsewhere(client, resource, namespace, parent.uid().as_deref()).await? {
                cache.store.apply(Event::Apply(Object::from(object)));
            }
        }
        listed.0.insert(key(resource), Arc::new(cache));
    }
    let parent = Arc::new(Object::from(parent));
    let mut observed = observe::gather(
        parent.clone(),
        &Arc::new(resolved.parent.clone()),
        &resolved,
        &listed,
        &Expectations::default(),
        None,
        Marks::Any,
    );
    // As a reconcile does: while the decision names lookups it had no answer to, answer
    // them from what was listed and call again. The file holds the last call.
    let mut calls = 0;
    let (mut input, decision) = loop {
        let input = input_for(policy, &observed)?;
        let decision = policy.decide(&input);
        calls += 1;
        let missing = decision.as_ref().map(|d| observed.unanswered(&d.actions)).unwrap_or_default();
        if missing.is_empty() || calls >= MAX_CALLS {
            break (input, decision);
        }
        observed.answer(&missing).map_err(super::check::Rejection::from)?;
    };
    redact(&mut input);
    let title = format!(
        "{} {} (resourceVersion {}) by {}",
        resolved.parent.kind,
        object,
        parent.resource_version().unwrap_or_default(),
        policy.label()
    );
    let outcome = decision.as_ref().map(|d| &d.actions).map_err(|e| e.reason());
    Ok(crate::scenario::write(&title, &policy.digest().to_string(), &input, outcome))
}

/// The children of `resource` the host marked as the parent `uid`'s, outside its
/// `namespace`: nothing when the reader may not list them cluster-wide.
async fn marked_elsewhere(
    client: &Client,
    resource: &ApiResource,
    namespace: &str,
    uid: Option<&str>,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let Some(uid) = uid else { return Ok(Vec::new()) };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let marked = ListParams::default().labels(&format!("{PARENT_UID_LABEL}={uid}"));
    match api.list(&marked).await {
        Ok(list) => Ok(list.items.into_iter().filter(|o| o.namespace().as_deref() != Some(namespace)).collect()),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(
                "cannot list {} cluster-wide ({}): children of this parent in other namespaces are left out of the input",
                resource.plural,
                s.message
            );
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_kubectl_names_them() {
        let r = ApiResource::erase::<crate::crd::PodSet>(&());
        for ok in ["PodSet", "podset", "podsets", "PodSet.app.example.com", "podsets.app.example.com"] {
            assert!(names_kind(ok, &r), "{ok}");
        }
        for no in ["Pod", "pods", "PodSet.apps", "memcacheds"] {
            assert!(!names_kind(no, &r), "{no}");
        }
    }
}
