//! Who reconciles a round's objects, and the writes the API server counted for it.

use std::collections::HashMap;

use kube::Client;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use podset_test_support as common;
use serde_json::json;

/// The kind of a round's objects, and so the controller that reconciles them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Peer {
    ReplicaSet,
    PodSet,
    /// PodSets reconciled by operator-sdk's PodSet tutorial operator (hack/peers/).
    Tutorial,
    /// Memcacheds reconciled by the operator serving guest-memcached.
    Memcached,
    /// Memcacheds reconciled by operator-sdk's Go Memcached sample (hack/peers/).
    MemcachedSample,
}

impl Peer {
    pub fn resource(self) -> ApiResource {
        match self {
            Peer::ReplicaSet => ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "ReplicaSet")),
            Peer::PodSet | Peer::Tutorial => {
                ApiResource::from_gvk(&GroupVersionKind::gvk("app.example.com", "v1alpha1", "PodSet"))
            }
            Peer::Memcached | Peer::MemcachedSample => {
                ApiResource::from_gvk(&GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"))
            }
        }
    }

    /// The objects whose status says a round's object has settled: the object itself,
    /// or for a Memcached its Deployment (of the same name, for both operators). The two
    /// Memcached operators' statuses say different things (the sample's `Available` is
    /// True once the Deployment has the size, before a pod runs; ours once the pods
    /// are ready), so their rounds are judged by the Deployment, as a user's
    /// `kubectl rollout status` would, and by `Available` beside it ([`Peer::says_available`]).
    pub fn settles_on(self) -> ApiResource {
        match self {
            Peer::Memcached | Peer::MemcachedSample => {
                ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
            }
            _ => self.resource(),
        }
    }

    /// The field of the status that lists the object's pods, for the kinds whose status
    /// has one that a peer's lacks: ours lists a Memcached's pods in `nodes`, as the
    /// seed's Memcached did; the Memcached sample's status has no such list.
    pub fn listed_pods(self) -> Option<&'static str> {
        match self {
            Peer::Memcached | Peer::MemcachedSample => Some("nodes"),
            _ => None,
        }
    }

    /// The patch that sets an object's replicas.
    pub fn scale_patch(self, replicas: i32) -> serde_json::Value {
        match self {
            Peer::Memcached | Peer::MemcachedSample => json!({ "spec": { "size": replicas } }),
            _ => json!({ "spec": { "replicas": replicas } }),
        }
    }

    /// Whether a round's objects must also say `Available=True` to have converged.
    pub fn says_available(self) -> bool {
        matches!(self, Peer::Memcached | Peer::MemcachedSample)
    }

    /// The object, with the pod template every peer runs (on the simulated node).
    pub fn object(self, name: &str, replicas: i32) -> DynamicObject {
        if self.says_available() {
            return common::memcached(name, replicas);
        }
        let ps = common::podset(name, replicas);
        let mut template = serde_json::to_value(ps.spec.template).expect("template");
        let value = match self {
            Peer::PodSet | Peer::Tutorial => json!({
                "apiVersion": "app.example.com/v1alpha1", "kind": "PodSet",
                "metadata": { "name": name },
                "spec": { "replicas": replicas, "template": template }
            }),
            Peer::ReplicaSet => {
                template["metadata"]["labels"]["bench-rs"] = json!(name);
                // The security context the operator gives a PodSet's pods, which the
                // namespace's restricted Pod Security admission requires of these too.
                if let Some(spec) = template.get_mut("spec") {
                    podset_host::reconcile::restrict::pod_spec("spec", spec, Default::default())
                        .expect("the template is restricted");
                }
                json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": { "name": name },
                    "spec": { "replicas": replicas, "selector": { "matchLabels": { "bench-rs": name } }, "template": template }
                })
            }
            Peer::Memcached | Peer::MemcachedSample => unreachable!("returned above"),
        };
        serde_json::from_value(value).expect("object")
    }

    /// Whether `o`'s status says it has exactly `replicas`, all available, for its
    /// current spec. The tutorial's status has no `observedGeneration` (its `Status().Update`
    /// drops what its Go type lacks), and counts a Pending pod as available: its rounds
    /// wait for the pods to be ready too ([`Peer::counts_pending`]).
    ///
    /// For a Memcached, `o` is its Deployment ([`Peer::settles_on`]): the Deployment
    /// controller has seen its spec, which asks for `replicas`, and that many pods are
    /// ready, none more.
    pub fn settled(self, o: &DynamicObject, replicas: i64) -> bool {
        let st = &o.data["status"];
        let current = self == Peer::Tutorial || st["observedGeneration"].as_i64() == o.metadata.generation;
        let count = match self {
            Peer::ReplicaSet => st["replicas"].as_i64(),
            Peer::PodSet | Peer::Tutorial => st["podNames"].as_array().map(|a| a.len() as i64),
            Peer::Memcached | Peer::MemcachedSample => {
                let asked = o.data["spec"]["replicas"].as_i64();
                let ready = st["readyReplicas"].as_i64();
                return current && asked == Some(replicas) && ready == Some(replicas) && st["replicas"] == replicas;
            }
        };
        current && count == Some(replicas) && st["availableReplicas"].as_i64() == Some(replicas)
    }

    /// Whether a Memcached's status says `Available=True`.
    pub fn available(o: &DynamicObject) -> bool {
        o.data["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Available" && c["status"] == "True"))
    }

    /// Whether the status counts pods that are not ready yet (the tutorial's Pending
    /// ones), so that an object has converged only once its pods are ready as well.
    pub fn counts_pending(self) -> bool {
        self == Peer::Tutorial
    }

    /// The object a pod of this peer belongs to, read from its name, where the peer
    /// names its pods after their object: the tutorial's are `<object>-pod<suffix>`.
    pub fn owner_of(self, pod: &str) -> Option<&str> {
        match self {
            Peer::Tutorial => pod.rsplit_once("-pod").map(|(object, _)| object),
            _ => None,
        }
    }

    /// The resources whose writes are the controller's own (not the scheduler's
    /// bindings, not the node's pod status).
    pub fn writes(self) -> [(&'static str, &'static str); 4] {
        let (child, parent) = match self {
            Peer::ReplicaSet => ("pods", "replicasets"),
            Peer::PodSet | Peer::Tutorial => ("pods", "podsets"),
            Peer::Memcached | Peer::MemcachedSample => ("deployments", "memcacheds"),
        };
        [(child, ""), (parent, ""), (parent, "status"), ("events", "")]
    }
}

/// The API server's /metrics, as text.
pub async fn apiserver_metrics(client: &Client) -> String {
    let req = http::Request::get("/metrics").body(Vec::new()).expect("request");
    client.request_text(req).await.expect("the API server's /metrics")
}

/// The API server's own count of write requests, by (resource, subresource).
pub async fn apiserver_writes(client: &Client) -> HashMap<(String, String), f64> {
    writes_in(&apiserver_metrics(client).await)
}

/// The same, from /metrics read already.
pub fn writes_in(text: &str) -> HashMap<(String, String), f64> {
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        let label = |k: &str| {
            let from = labels.find(&format!("{k}=\""))? + k.len() + 2;
            Some(labels[from..].split('"').next()?.to_string())
        };
        let verb = label("verb").unwrap_or_default();
        if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "DELETE" | "DELETECOLLECTION") {
            continue;
        }
        let key = (label("resource").unwrap_or_default(), label("subresource").unwrap_or_default());
        *out.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// What the API server's Go runtime has allocated (bytes) and spent on garbage
/// collection (CPU seconds) since it started: with about as much CPU per object in
/// both contenders' rounds but its answers slower in ours (2026-11-30), whether each of
/// our objects costs it more allocation, and so more of the collector's time, which
/// every request then waits behind.
#[derive(Clone, Copy, Debug, Default)]
pub struct Heap {
    pub allocated: f64,
    pub gc_cpu: f64,
}

impl Heap {
    /// From the API server's /metrics text.
    pub fn of(text: &str) -> Heap {
        let value = |metric: &str| {
            text.lines().find_map(|l| l.strip_prefix(metric)?.strip_prefix(' ')?.parse::<f64>().ok()).unwrap_or(0.0)
        };
        Heap {
            allocated: value("go_memstats_alloc_bytes_total"),
            gc_cpu: value("go_cpu_classes_gc_total_cpu_seconds_total"),
        }
    }

    /// What was spent from `before` to this, per one of `objects`.
    pub fn per_object_since(&self, before: &Heap, objects: usize) -> Heap {
        let n = objects.max(1) as f64;
        Heap { allocated: (self.allocated - before.allocated) / n, gc_cpu: (self.gc_cpu - before.gc_cpu) / n }
    }
}

/// The controller's writes between `before` and `after`, in the order of [`Peer::writes`].
pub fn controller_writes(
    peer: Peer,
    before: &HashMap<(String, String), f64>,
    after: &HashMap<(String, String), f64>,
) -> [f64; 4] {
    peer.writes().map(|(r, s)| {
        let k = (r.to_string(), s.to_string());
        after.get(&k).unwrap_or(&0.0) - before.get(&k).unwrap_or(&0.0)
    })
}

/// Who reconciles a round's objects.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Who {
    ReplicaSet,
    /// The operator, guest-podset in the sandbox.
    Wasm,
    /// The same operator build, guest-podset linked in natively.
    Native,
    /// The operator, guest-podset in the sandbox, with a shadow of the same module.
    Shadowed,
}

impl Who {
    pub fn peer(self) -> Peer {
        match self {
            Who::ReplicaSet => Peer::ReplicaSet,
            Who::Wasm | Who::Native | Who::Shadowed => Peer::PodSet,
        }
    }
}
