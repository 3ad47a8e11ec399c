//! The watches of children and related kinds, started and stopped as policies that
//! declare them come and go, shared by every parent kind that reads them.
//!
//! A watch is held by [`WatchGuard`]s: the first guard starts it, the last one dropped
//! stops it. Each watch tells the parent controllers that route through it which
//! parents an event concerns: the controller of a child (owner reference or the host's mark), the parents whose
//! related-object selectors match, or the parents that looked the object up.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use kube::api::{Api, ApiResource};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use super::cache::{CacheHealth, relisting, track};
use super::mark::{MANAGED_BY, MANAGED_BY_LABEL, Mark};
use super::object::Object;
use super::scope::api_for;
use super::store::ObjectStore;
use crate::contract::bindings::RelatedKind;
use crate::contract::declarations::{matches, related_selector};

/// Which objects of a kind a watch holds.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Scope {
    /// Children: only objects carrying [`MANAGED_BY_LABEL`].
    Children,
    /// Every object not carrying [`MANAGED_BY_LABEL`]: with the `Children` watch of the
    /// same kind, every object in the operator's namespaces, each held once. Related
    /// objects are read from both, so a kind that is one policy's children and
    /// another's related objects (pods, typically) is not cached twice.
    Unmanaged,
}

/// Where a change to a watched object is sent: the parent controller of `parent`'s kind.
pub struct Route {
    pub parent: Arc<ApiResource>,
    /// A namespaced parent's children and related objects are in its namespace; a
    /// cluster-scoped parent's anywhere.
    pub parent_namespaced: bool,
    /// Changes the controller may gather for a while (a pod starting, becoming ready).
    pub notify: UnboundedSender<ObjectRef<Object>>,
    /// Changes it acts on at once: a child terminating or gone.
    pub at_once: UnboundedSender<ObjectRef<Object>>,
    pub via: Via,
}

/// Told of every event on a child: its parent, the child, its resource, and whether
/// it is gone.
pub type ChildSeen = Box<dyn Fn(&ObjectRef<Object>, &Object, &ApiResource, bool) + Send + Sync>;

/// The parents whose lookups a changed object (of a resource) concerns.
pub type LookedUpBy = Arc<dyn Fn(&ApiResource, &Object) -> Vec<ObjectRef<Object>> + Send + Sync>;

pub enum Via {
    /// A child concerns the parent named by its controller owner reference.
    Controller { on_child: ChildSeen },
    /// A related object concerns every parent (in `parents`) one of whose `selectors`
    /// it matches.
    Related { parents: Store<Object>, selectors: Vec<RelatedKind> },
    /// A looked-up object concerns the parents whose last decision named it, or whose
    /// label lookup it matches.
    Lookup { parents: LookedUpBy },
}

/// One watched kind: its store, its health, and who to tell about changes.
pub struct Watched {
    pub resource: Arc<ApiResource>,
    pub scope: Scope,
    pub store: ObjectStore,
    pub health: CacheHealth,
    routes: RwLock<Vec<Arc<Route>>>,
}

impl Watched {
    /// An empty cache of `resource` in `scope`, not yet fed by a watch.
    pub fn new(resource: &ApiResource, scope: Scope) -> Self {
        Watched {
            resource: Arc::new(resource.clone()),
            scope,
            store: ObjectStore::default(),
            health: match scope {
                Scope::Children => CacheHealth::for_resource(&resource.plural, &resource.group),
                // Its own name, so that the two watches of one kind are told apart: in
                // /metrics one series each (`podset_cached_objects` read 0 pods for 5 000
                // cached when both were `pods` and the unmanaged watch's came last), in
                // /readyz and in the log.
                Scope::Unmanaged => CacheHealth::new(format!(
                    "{} (unmanaged)",
                    super::cache::resource_name(&resource.plural, &resource.group)
                )),
            },
            routes: RwLock::default(),
        }
    }

    pub fn add_route(&self, route: Arc<Route>) {
        self.routes.write().push(route);
    }

    pub fn remove_route(&self, route: &Arc<Route>) {
        self.routes.write().retain(|r| !Arc::ptr_eq(r, route));
    }

    /// Sends each parent `obj` concerns to its controller.
    fn notify(&self, obj: &Object, gone: bool) {
        let ns = obj.namespace().unwrap_or_default();
        for route in self.routes.read().iter() {
            match &route.via {
                Via::Controller { on_child } => {
                    if let Some(parent) = controller_of(obj, route) {
                        on_child(&parent, obj, &self.resource, gone);
                        // A terminating child is no longer counted: the parent's status
                        // changes now, with nothing to gather (a scale-down's deletes
                        // were all sent by one decision).
                        let ending = gone || obj.metadata.deletion_timestamp.is_some();
                        let _ = if ending { &route.at_once } else { &route.notify }.unbounded_send(parent);
                    }
                }
                Via::Lookup { parents } => {
                    for parent in parents(&self.resource, obj) {
                        let _ = route.notify.unbounded_send(parent);
                    }
                }
                Via::Related { parents, selectors } => {
                    let near = |p: &Object| !route.parent_namespaced || p.namespace().as_deref() == Some(ns.as_str());
                    for parent in parents.state().iter().filter(|p| near(p)) {
                        let hit = selectors
                            .iter()
                            .filter_map(|s| related_selector(s, parent.as_ref()))
                            .any(|sel| matches(&sel, obj.labels()));
                        if hit {
                            let _ = route
                                .notify
                                .unbounded_send(ObjectRef::from_obj_with(parent.as_ref(), route.parent.clone()));
                        }
                    }
                }
            }
        }
    }
}

/// The parent of `route`'s kind that controls `obj`: by its controller owner reference
/// (a namespaced parent is in the child's namespace), or else by the host's mark, which
/// names the parent's namespace.
fn controller_of(obj: &Object, route: &Route) -> Option<ObjectRef<Object>> {
    let of_route = |api_version: &str, kind: &str| kind == route.parent.kind && api_version == route.parent.api_version;
    let within = |parent: ObjectRef<Object>, ns: &str| if route.parent_namespaced { parent.within(ns) } else { parent };
    if let Some(owner) = obj.owner_references().iter().find(|r| r.controller == Some(true)) {
        let parent = ObjectRef::new_with(&owner.name, route.parent.clone());
        return of_route(&owner.api_version, &owner.kind)
            .then(|| within(parent, obj.namespace().as_deref().unwrap_or_default()));
    }
    let mark = Mark::of(&obj.metadata).filter(|m| of_route(&m.api_version, &m.kind))?;
    Some(within(ObjectRef::new_with(&mark.name, route.parent.clone()), &mark.namespace))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct WatchKey {
    api_version: String,
    plural: String,
    scope: Scope,
}

struct Entry {
    watched: Weak<Watched>,
    users: usize,
    stop: CancellationToken,
}

/// Every child and related watch of the operator.
pub struct Watches {
    client: Client,
    namespace: Option<String>,
    entries: Mutex<HashMap<WatchKey, Entry>>,
    /// Cancelled at shutdown: stops every watch.
    shutdown: CancellationToken,
}

/// Holds a watch open; dropping the last guard of a watch stops it.
pub struct WatchGuard {
    watches: Arc<Watches>,
    key: WatchKey,
    pub watched: Arc<Watched>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let mut entries = self.watches.entries.lock();
        if let Some(e) = entries.get_mut(&self.key) {
            e.users = e.users.saturating_sub(1);
            if e.users == 0 {
                e.stop.cancel();
                entries.remove(&self.key);
                tracing::info!(kind = %self.key.plural, "no policy reads this kind any more; watch stopped");
            }
        }
    }
}

impl Watches {
    pub fn new(client: Client, namespace: Option<String>, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Watches { client, namespace, entries: Mutex::default(), shutdown })
    }

    /// A guard on the watch of `resource` (a cluster-scoped kind when `cluster_scoped`)
    /// in `scope`, starting it if nobody holds it.
    pub fn acquire(self: &Arc<Self>, resource: &ApiResource, scope: Scope, cluster_scoped: bool) -> WatchGuard {
        let key = WatchKey { api_version: resource.api_version.clone(), plural: resource.plural.clone(), scope };
        let mut entries = self.entries.lock();
        if let Some(e) = entries.get_mut(&key)
            && let Some(watched) = e.watched.upgrade()
        {
            e.users += 1;
            return WatchGuard { watches: self.clone(), key, watched };
        }
        let watched = Arc::new(Watched::new(resource, scope));
        let stop = self.shutdown.child_token();
        tokio::spawn(run(self.api(&watched.resource, cluster_scoped), scope, watched.clone(), stop.clone()));
        tracing::info!(kind = %resource.plural, ?scope, "watch started");
        entries.insert(key.clone(), Entry { watched: Arc::downgrade(&watched), users: 1, stop });
        WatchGuard { watches: self.clone(), key, watched }
    }

    /// The health of every watch, for `/readyz`.
    pub fn health(&self) -> Vec<CacheHealth> {
        self.entries.lock().values().filter_map(|e| e.watched.upgrade()).map(|w| w.health.clone()).collect()
    }

    fn api(&self, resource: &Arc<ApiResource>, cluster_scoped: bool) -> Api<Object> {
        let namespace = if cluster_scoped { None } else { self.namespace.as_deref() };
        api_for(&self.client, resource, namespace)
    }
}

async fn run(api: Api<Object>, scope: Scope, watched: Arc<Watched>, stop: CancellationToken) {
    let config = match scope {
        Scope::Children => watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")),
        Scope::Unmanaged => watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}!={MANAGED_BY}")),
    };
    let store_events = {
        let watched = watched.clone();
        relisting(api, config).map(move |item| {
            item.map(|event| {
                let listed = matches!(event, watcher::Event::InitDone);
                for (obj, gone) in watched.store.apply(event) {
                    watched.notify(&obj, gone);
                }
                watched.health.holds(watched.store.len());
                listed
            })
        })
    };
    let mut events = std::pin::pin!(track(store_events, watched.health.clone(), |listed| *listed));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => if next.is_none() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc::{UnboundedReceiver, unbounded};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use kube::api::DynamicObject;

    use super::*;

    /// A children watch of `resource` routing to controllers of `parent`: what it
    /// gathers, and what it sends at once.
    fn routed(
        parent: &ApiResource,
        resource: &ApiResource,
        parent_namespaced: bool,
    ) -> (Watched, UnboundedReceiver<ObjectRef<Object>>, UnboundedReceiver<ObjectRef<Object>>) {
        let watched = Watched::new(resource, Scope::Children);
        let (notify, gathered) = unbounded();
        let (at_once, now) = unbounded();
        let on_child: ChildSeen = Box::new(|_, _, _, _| {});
        watched.add_route(Arc::new(Route {
            parent: Arc::new(parent.clone()),
            parent_namespaced,
            notify,
            at_once,
            via: Via::Controller { on_child },
        }));
        (watched, gathered, now)
    }

    #[test]
    fn the_two_watches_of_a_kind_are_told_apart_by_name() {
        let pods = ApiResource::erase::<Pod>(&());
        let (children, unmanaged) = (Watched::new(&pods, Scope::Children), Watched::new(&pods, Scope::Unmanaged));
        assert_eq!((children.health.name(), unmanaged.health.name()), ("pods", "pods (unmanaged)"));
    }

    #[test]
    fn a_child_terminating_or_gone_reaches_its_controller_at_once_and_the_rest_after_a_while() {
        let parent = ApiResource::erase::<crate::crd::PodSet>(&());
        let pods = ApiResource::erase::<Pod>(&());
        let (watched, mut gathered, mut now) = routed(&parent, &pods, true);
        let mut pod = DynamicObject::new("web-a", &pods).within("ns");
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: parent.api_version.clone(),
            kind: parent.kind.clone(),
            name: "web".into(),
            uid: "uid-web".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let web = ObjectRef::new_with("web", Arc::new(parent)).within("ns");

        watched.notify(&pod.clone().into(), false);
        assert_eq!(gathered.try_recv().ok(), Some(web.clone()), "a running child's change is gathered");
        assert!(now.try_recv().is_err(), "nothing at once");

        watched.notify(&pod.clone().into(), true);
        assert_eq!(now.try_recv().ok(), Some(web.clone()), "gone");
        pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        watched.notify(&pod.into(), false);
        assert_eq!(now.try_recv().ok(), Some(web), "terminating");
        assert!(gathered.try_recv().is_err(), "neither was gathered");
    }

    #[test]
    fn a_child_anywhere_reaches_its_cluster_scoped_parent() {
        let parent = podset_test_support::objects::tenants();
        let configmaps = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let (watched, mut gathered, _now) = routed(&parent, &configmaps, false);
        let owner = OwnerReference {
            api_version: parent.api_version.clone(),
            kind: parent.kind.clone(),
            name: "acme".into(),
            uid: "uid-acme".into(),
            controller: Some(true),
            ..Default::default()
        };
        for ns in ["acme", "shared"] {
            let mut cm = DynamicObject::new("quota", &configmaps).within(ns);
            cm.metadata.owner_references = Some(vec![owner.clone()]);
            watched.notify(&cm.into(), false);
            let to = gathered.try_recv().expect("routed");
            assert_eq!(
                to,
                ObjectRef::new_with("acme", Arc::new(parent.clone())),
                "from {ns}: the parent has no namespace"
            );
        }
    }

    #[test]
    fn a_marked_child_reaches_its_parent_in_the_namespace_the_mark_names() {
        let parent = ApiResource::erase::<crate::crd::PodSet>(&());
        let configmaps = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let (watched, mut gathered, _now) = routed(&parent, &configmaps, true);
        let mark = Mark {
            api_version: parent.api_version.clone(),
            kind: parent.kind.clone(),
            namespace: "team-a".into(),
            name: "web".into(),
            uid: "uid-web".into(),
        };
        let mut cm = DynamicObject::new("web-config", &configmaps).within("shared");
        mark.write(&mut cm.metadata);
        watched.notify(&cm.clone().into(), false);
        assert_eq!(
            gathered.try_recv().ok(),
            Some(ObjectRef::new_with("web", Arc::new(parent.clone())).within("team-a"))
        );
        let other_kind = Mark { kind: "Memcached".into(), ..mark };
        other_kind.write(&mut cm.metadata);
        watched.notify(&cm.into(), false);
        assert!(gathered.try_recv().is_err(), "another kind's child");
    }
}
