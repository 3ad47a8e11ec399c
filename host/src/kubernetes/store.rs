//! The cache of one watched kind of children or related objects, indexed by
//! controller UID (an owner reference's, or the host's mark): a reconcile reads a parent's children in time proportional to
//! their number, not to every object of the kind (kube-runtime's `Store` has no
//! secondary index).
//!
//! It follows the reflector's semantics: a (re)list is buffered and swapped in whole
//! at `InitDone`, so readers never see half a list.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use parking_lot::RwLock;

use super::mark::marked_uid;
use super::object::Object;

/// `(namespace, name)`.
pub type Key = (String, String);

#[derive(Default)]
struct Objects {
    by_key: HashMap<Key, Arc<Object>>,
    by_controller: HashMap<String, BTreeSet<Key>>,
    /// A list in progress: swapped in at `InitDone`.
    listing: Option<HashMap<Key, Arc<Object>>>,
    /// When the list in progress started, and when the last complete one did.
    list_started: Option<Instant>,
    listed: Option<Instant>,
}

impl Objects {
    fn insert(&mut self, obj: Arc<Object>) {
        let key = key_of(&obj);
        if let Some(old) = self.by_key.insert(key.clone(), obj.clone()) {
            self.unindex(&key, &old);
        }
        if let Some(uid) = controller_uid(&obj) {
            self.by_controller.entry(uid.to_string()).or_default().insert(key);
        }
    }

    fn remove(&mut self, key: &Key) -> Option<Arc<Object>> {
        let old = self.by_key.remove(key)?;
        self.unindex(key, &old);
        Some(old)
    }

    fn unindex(&mut self, key: &Key, old: &Object) {
        if let Some(uid) = controller_uid(old)
            && let Some(keys) = self.by_controller.get_mut(uid)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_controller.remove(uid);
            }
        }
    }
}

#[derive(Default)]
pub struct ObjectStore {
    inner: RwLock<Objects>,
}

impl ObjectStore {
    /// Applies one watch event. Returns the objects it touched, each with whether it is
    /// gone, including those that vanished while the watch was broken (found missing
    /// when a relist completes), so their parents can be told.
    pub fn apply(&self, event: Event<Object>) -> Vec<(Arc<Object>, bool)> {
        let mut inner = self.inner.write();
        match event {
            Event::Init => {
                inner.listing = Some(HashMap::new());
                inner.list_started = Some(Instant::now());
                Vec::new()
            }
            Event::InitApply(obj) => {
                let obj = Arc::new(obj);
                inner.listing.get_or_insert_default().insert(key_of(&obj), obj);
                Vec::new()
            }
            Event::InitDone => {
                inner.listed = inner.list_started.take();
                let listed = inner.listing.take().unwrap_or_default();
                let gone: Vec<Key> = inner.by_key.keys().filter(|k| !listed.contains_key(*k)).cloned().collect();
                let mut touched: Vec<(Arc<Object>, bool)> =
                    gone.iter().filter_map(|k| inner.remove(k)).map(|o| (o, true)).collect();
                for obj in listed.into_values() {
                    // Unchanged objects need no one's attention.
                    let unchanged = inner.by_key.get(&key_of(&obj)).is_some_and(|old| same_version(old, &obj));
                    if !unchanged {
                        touched.push((obj.clone(), false));
                    }
                    inner.insert(obj);
                }
                touched
            }
            Event::Apply(obj) => {
                let obj = Arc::new(obj);
                inner.insert(obj.clone());
                vec![(obj, false)]
            }
            Event::Delete(obj) => {
                let key = key_of(&obj);
                inner.remove(&key);
                vec![(Arc::new(obj), true)]
            }
        }
    }

    /// When the last complete list of this store started: every write the API server
    /// had made by then is in it.
    pub fn listed_at(&self) -> Option<Instant> {
        self.inner.read().listed
    }

    /// The objects whose controller (owner reference or the host's mark) is `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<Object>> {
        let inner = self.inner.read();
        let Some(keys) = inner.by_controller.get(uid) else { return Vec::new() };
        keys.iter().filter_map(|k| inner.by_key.get(k).cloned()).collect()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Object>> {
        self.inner.read().by_key.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// Objects in `namespace` that `keep` accepts.
    pub fn in_namespace(&self, namespace: &str, keep: impl Fn(&Object) -> bool) -> Vec<Arc<Object>> {
        let inner = self.inner.read();
        inner.by_key.iter().filter(|((ns, _), o)| ns == namespace && keep(o)).map(|(_, o)| o.clone()).collect()
    }

    /// Objects in any namespace that `keep` accepts.
    pub fn matching(&self, keep: impl Fn(&Object) -> bool) -> Vec<Arc<Object>> {
        self.inner.read().by_key.values().filter(|o| keep(o)).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub fn key_of(obj: &Object) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The UID of `obj`'s controller: its controller owner reference's, or else the
/// parent's the host marked it with ([`super::mark`]).
pub fn controller_uid(obj: &Object) -> Option<&str> {
    let owner = obj.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    owner.map(|r| r.uid.as_str()).or_else(|| marked_uid(&obj.metadata))
}

fn same_version(a: &Object, b: &Object) -> bool {
    a.metadata.resource_version.is_some() && a.metadata.resource_version == b.metadata.resource_version
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::mark::Mark;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::{ApiResource, DynamicObject};

    fn pod(name: &str, owner: Option<&str>, rv: &str) -> Object {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let mut o = DynamicObject::new(name, &ar).within("ns");
        o.metadata.resource_version = Some(rv.into());
        o.metadata.owner_references = owner
            .map(|uid| vec![OwnerReference { controller: Some(true), uid: uid.into(), ..OwnerReference::default() }]);
        Object::from(o)
    }

    fn names(objs: Vec<Arc<Object>>) -> Vec<String> {
        let mut n: Vec<String> = objs.iter().map(|o| o.name_any()).collect();
        n.sort();
        n
    }

    #[test]
    fn children_are_found_by_their_controller_uid() {
        let s = ObjectStore::default();
        s.apply(Event::Apply(pod("a", Some("p1"), "1")));
        s.apply(Event::Apply(pod("b", Some("p1"), "1")));
        s.apply(Event::Apply(pod("c", Some("p2"), "1")));
        s.apply(Event::Apply(pod("d", None, "1")));
        assert_eq!(names(s.controlled_by("p1")), ["a", "b"]);
        // Adopted by another controller: the index follows.
        s.apply(Event::Apply(pod("b", Some("p2"), "2")));
        assert_eq!(names(s.controlled_by("p1")), ["a"]);
        assert_eq!(names(s.controlled_by("p2")), ["b", "c"]);
        s.apply(Event::Delete(pod("c", Some("p2"), "3")));
        assert_eq!(names(s.controlled_by("p2")), ["b"]);
    }

    #[test]
    fn a_child_in_another_namespace_is_found_by_the_hosts_mark_and_a_look_alike_is_not() {
        let s = ObjectStore::default();
        let mark = Mark {
            api_version: "podset.dev/v1alpha1".into(),
            kind: "PodSet".into(),
            namespace: "team-a".into(),
            name: "web".into(),
            uid: "p1".into(),
        };
        let mut marked = pod("elsewhere", None, "1");
        mark.write(&mut marked.metadata);
        s.apply(Event::Apply(marked.clone()));
        let mut look_alike = pod("look-alike", None, "1");
        look_alike.metadata.labels = Some([(crate::kubernetes::mark::PARENT_UID_LABEL.into(), "p1".into())].into());
        s.apply(Event::Apply(look_alike));
        assert_eq!(names(s.controlled_by("p1")), ["elsewhere"]);
        // An owner reference wins over a mark: the garbage collector follows it.
        let mut both = marked;
        both.metadata.owner_references =
            Some(vec![OwnerReference { controller: Some(true), uid: "p2".into(), ..OwnerReference::default() }]);
        s.apply(Event::Apply(both));
        assert!(s.controlled_by("p1").is_empty());
        assert_eq!(names(s.controlled_by("p2")), ["elsewhere"]);
    }

    #[test]
    fn a_relist_is_swapped_in_whole_and_reports_what_changed_or_vanished() {
        let s = ObjectStore::default();
        s.apply(Event::Apply(pod("a", Some("p1"), "1")));
        s.apply(Event::Apply(pod("b", Some("p1"), "1")));
        s.apply(Event::Init);
        s.apply(Event::InitApply(pod("a", Some("p1"), "1")));
        s.apply(Event::InitApply(pod("c", Some("p1"), "5")));
        assert_eq!(names(s.controlled_by("p1")), ["a", "b"], "readers see the old list until the new one is whole");
        let touched = s.apply(Event::InitDone);
        let gone: Vec<bool> = touched.iter().map(|(_, g)| *g).collect();
        assert_eq!(
            names(touched.into_iter().map(|(o, _)| o).collect()),
            ["b", "c"],
            "b vanished, c is new, a is unchanged"
        );
        assert_eq!(gone, [true, false]);
        assert_eq!(names(s.controlled_by("p1")), ["a", "c"]);
    }
}
