//! The host's marks on the children it makes: the managed-by label on every one, and
//! the parent's mark on a child that an owner reference cannot tie to its parent: a child
//! in another namespace than its namespaced parent's, or a cluster-scoped child of a
//! namespaced parent. The garbage collector resolves a namespaced owner in the child's
//! own namespace (and deletes a child whose owner it cannot find there), so such a child
//! carries instead the parent's UID in a label (an index, and `kubectl get -l`) and its
//! name in an annotation; the host deletes it when the parent goes (its teardown
//! finalizer, reconcile/waves.rs).
//!
//! A mark is weaker than an owner reference, which the garbage collector confines to
//! the child's namespace: whoever may write an object anywhere may put a mark on it. So
//! a reconcile sees a marked child only when the mark names the parent exactly and the
//! child is where the policy's grant reaches (reconcile/observe.rs), a policy can
//! neither write nor patch a mark (reconcile/check.rs), and a look-alike without one is
//! never the parent's child.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;

use super::object::Object;

/// The label the host puts on every child it creates, so that child watches list
/// only the host's children, not every object of the kind in the cluster.
pub const MANAGED_BY_LABEL: &str = "podset.dev/managed-by";
pub const MANAGED_BY: &str = "podset-host";

/// The label holding the parent's UID.
pub const PARENT_UID_LABEL: &str = "podset.dev/parent-uid";

/// The annotation naming the parent: `API_VERSION KIND NAMESPACE/NAME`.
pub const PARENT_ANNOTATION: &str = "podset.dev/parent";

/// The parent a child is marked with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Mark {
    /// The mark of `parent`, an object of `resource`.
    pub fn for_parent(resource: &ApiResource, parent: &Object) -> Mark {
        Mark {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            namespace: parent.metadata.namespace.clone().unwrap_or_default(),
            name: parent.metadata.name.clone().unwrap_or_default(),
            uid: parent.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// Puts the mark (and the host's managed-by label) on `meta`.
    pub fn write(&self, meta: &mut ObjectMeta) {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(PARENT_UID_LABEL.into(), self.uid.clone());
        labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
        let annotation = format!("{} {} {}/{}", self.api_version, self.kind, self.namespace, self.name);
        meta.annotations.get_or_insert_with(BTreeMap::new).insert(PARENT_ANNOTATION.into(), annotation);
    }

    /// The mark on `meta`, when it carries a whole one.
    pub fn of(meta: &ObjectMeta) -> Option<Mark> {
        let uid = marked_uid(meta)?;
        let annotation = meta.annotations.as_ref()?.get(PARENT_ANNOTATION)?;
        let mut parts = annotation.split(' ');
        let (api_version, kind, place) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (namespace, name) = place.split_once('/')?;
        Some(Mark {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        })
    }
}

/// The parent UID a marked object carries: the label, with the annotation and the
/// host's managed-by label beside it.
pub fn marked_uid(meta: &ObjectMeta) -> Option<&str> {
    let labels = meta.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY) {
        return None;
    }
    meta.annotations.as_ref()?.get(PARENT_ANNOTATION)?;
    labels.get(PARENT_UID_LABEL).map(String::as_str).filter(|uid| !uid.is_empty())
}

/// Whether `meta` names a controller by an owner reference (which the garbage
/// collector follows, and which wins over a mark).
pub fn has_controller_reference(meta: &ObjectMeta) -> bool {
    meta.owner_references.iter().flatten().any(|r| r.controller == Some(true))
}

/// Whether `key` is a label or annotation only the host writes.
pub fn is_reserved(key: &str) -> bool {
    key == PARENT_UID_LABEL || key == PARENT_ANNOTATION
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark() -> Mark {
        Mark {
            api_version: "podset.dev/v1alpha1".into(),
            kind: "PodSet".into(),
            namespace: "team-a".into(),
            name: "web".into(),
            uid: "1234".into(),
        }
    }

    #[test]
    fn a_written_mark_reads_back_and_a_partial_one_does_not() {
        let mut meta = ObjectMeta::default();
        mark().write(&mut meta);
        assert_eq!(Mark::of(&meta), Some(mark()));
        assert_eq!(
            meta.annotations.as_ref().expect("annotated")[PARENT_ANNOTATION],
            "podset.dev/v1alpha1 PodSet team-a/web"
        );

        let mut no_host_label = meta.clone();
        no_host_label.labels.as_mut().expect("labels").remove(MANAGED_BY_LABEL);
        assert_eq!(Mark::of(&no_host_label), None, "a look-alike without the host's label");
        let mut no_annotation = meta.clone();
        no_annotation.annotations = None;
        assert_eq!(marked_uid(&no_annotation), None);
        let mut garbled = meta;
        garbled.annotations.as_mut().expect("annotated").insert(PARENT_ANNOTATION.into(), "PodSet web".into());
        assert_eq!(Mark::of(&garbled), None);
    }
}
