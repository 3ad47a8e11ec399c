//! One reconcile, in process, against a kube client whose transport is a
//! `tower_test` mock: the exact API requests a decision turns into, with the real
//! compiled policy deciding. Pins what no cluster test can see so precisely: the
//! order of writes, the UID preconditions, and zero requests once converged. Events
//! are published off the reconcile path, so they are looked at apart from the writes.

use podset_test_support as common;
use podset_test_support::objects::{self, pods, podsets};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::Client;
use kube::api::DynamicObject;
use kube::client::Body;
use podset_host::conditions::RECONCILE_FAILED;
use podset_host::kubernetes::access::Resolved;
use podset_host::metrics::Metrics;
use podset_host::reconcile::expectations::InFlight;
use podset_host::reconcile::observe::{Marks, Observation, Observed};
use podset_host::reconcile::status::DIGEST_FIELD;
use podset_host::reconcile::terminating::HOLD;
use podset_host::reconcile::{Context, ContextSettings, act};
use podset_host::registry::Admitted;
use podset_host::sandbox::{Limits, PolicyEngine};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A request as the API server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    body: Value,
}

impl Seen {
    fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Objects the stand-in serves to a GET, by path; any other GET finds nothing (404).
/// Also the refusals (a `Status`) it answers a POST to a path with.
type Held = Arc<Mutex<HashMap<String, Value>>>;

/// An API server stand-in that answers every write the way the real one would, well
/// enough for the client: the object back, named by its path or, for generated
/// names, by a counter.
fn api_server(seen: Arc<Mutex<Vec<Seen>>>, held: Held, refused: Held) -> Client {
    let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        let mut n = 0;
        while let Some((req, respond)) = handle.next_request().await {
            n += 1;
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let mut body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().expect("log").push(Seen { method: method.clone(), path: path.clone(), body: body.clone() });
            if method == "GET" {
                let found = held.lock().expect("held").get(&path).cloned();
                let (status, body) = found.map_or_else(
                    || {
                        let gone = json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404, "message": format!("{path} not found") });
                        (StatusCode::NOT_FOUND, gone)
                    },
                    |object| (StatusCode::OK, object),
                );
                let response = Response::builder().status(status).body(Body::from(body.to_string().into_bytes()));
                respond.send_response(response.expect("response"));
                continue;
            }
            let refusal = refused.lock().expect("refused").get(&path).cloned();
            if let Some(status) = refusal.filter(|_| method == "POST") {
                let code = status["code"].as_u64().and_then(|c| u16::try_from(c).ok()).expect("a refusal's code");
                let response = Response::builder().status(code).body(Body::from(status.to_string().into_bytes()));
                respond.send_response(response.expect("response"));
                continue;
            }
            if let Some(prefix) = body["metadata"]["generateName"].as_str() {
                body["metadata"]["name"] = json!(format!("{prefix}{n:05}"));
            } else if method == "PATCH" {
                let named = path.trim_end_matches("/status").rsplit('/').next().unwrap_or_default();
                body["metadata"]["name"] = json!(named);
                // A merge patch's null removes the key: it is not in the object sent back.
                if let Some(annotations) = body["metadata"]["annotations"].as_object_mut() {
                    annotations.retain(|_, v| !v.is_null());
                }
            }
            body["metadata"]["uid"] = json!(format!("uid-{n}"));
            body["metadata"]["resourceVersion"] = json!(format!("{}", 100 + n));
            let status = if method == "POST" { StatusCode::CREATED } else { StatusCode::OK };
            let response = Response::builder().status(status).body(Body::from(body.to_string().into_bytes()));
            respond.send_response(response.expect("response"));
        }
    });
    Client::new(svc, "default")
}

/// PodSet `web` at resourceVersion 7, its status recording `digest` when given.
fn podset(replicas: i32, mut status: Value, digest: Option<&str>) -> DynamicObject {
    let mut p = objects::podset(replicas);
    if let Some(d) = digest {
        status[DIGEST_FIELD] = json!(d);
    }
    p.data["status"] = status;
    p
}

/// A pod of `web`, scheduled, running and ready.
fn pod(name: &str) -> DynamicObject {
    let mut p = objects::pod(name, "Running");
    p.data = json!({ "spec": { "nodeName": "n1" }, "status": { "phase": "Running",
        "conditions": [{ "type": "Ready", "status": "True" }] } });
    p
}

struct Rig {
    ctx: Arc<Context>,
    admitted: Admitted,
    seen: Arc<Mutex<Vec<Seen>>>,
    held: Held,
    refused: Held,
}

impl Rig {
    fn new() -> Rig {
        Rig::serving("podset.wasm")
    }

    /// A rig whose policy is `module` of the policy directory (its `resolved` is the
    /// PodSet one's: a test of another kind replaces it).
    fn serving(module: &str) -> Rig {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (held, refused) = (Held::default(), Held::default());
        let client = api_server(seen.clone(), held.clone(), refused.clone());
        let engine = Arc::new(PolicyEngine::new(Limits::default()).expect("engine"));
        let policy = engine.load(&common::read_policy(module)).expect("policy");
        let settings = ContextSettings {
            ledger: None,
            namespace: None,
            resync: Duration::from_secs(300),
            finalizer_timeout: Duration::from_secs(300),
            concurrency: 1,
            debounce: Duration::ZERO,
            metrics: Arc::new(Metrics::default()),
            leadership: podset_host::kubernetes::leader::Leadership::alone(),
            shard: podset_host::kubernetes::shard::Shard::all(),
            recorder: None,
            identities: Default::default(),
        };
        let ctx = Context::new(client, engine, settings, CancellationToken::new()).expect("a context");
        let resolved = Resolved {
            parent: podsets(),
            children: vec![pods()],
            related: Vec::new(),
            lookups: Vec::new(),
            finalizer: None,
            cluster_scoped: Default::default(),
            reach: Default::default(),
            namespace_labels: None,
        };
        Rig { ctx, admitted: Admitted::new(policy, resolved), seen, held, refused }
    }

    fn digest(&self) -> String {
        self.admitted.policy.digest().to_string()
    }

    async fn act(&self, parent: DynamicObject, children: Vec<DynamicObject>) -> Vec<Seen> {
        self.decide(parent, children, false).await
    }

    /// Decides and acts for `parent` with `children` observed; `redecision`: decided
    /// before at its generation. The requests the API server saw, Events aside.
    async fn decide(&self, parent: DynamicObject, children: Vec<DynamicObject>, redecision: bool) -> Vec<Seen> {
        let (result, seen) = self.attempt(parent, children, redecision).await;
        result.expect("reconcile");
        seen
    }

    /// [`Rig::decide`], the reconcile's result returned.
    async fn attempt(
        &self,
        parent: DynamicObject,
        children: Vec<DynamicObject>,
        redecision: bool,
    ) -> (podset_host::reconcile::Result<Duration>, Vec<Seen>) {
        self.seen.lock().expect("log").clear();
        let observed = Observed {
            parent: Arc::new(parent.into()),
            parent_resource: Arc::new(podsets()),
            children: children
                .into_iter()
                .map(|o| Observation { resource: Arc::new(pods()), object: Arc::new(o.into()) })
                .collect(),
            related: Vec::new(),
            looked_up: Vec::new(),
            answerer: Default::default(),
            in_flight: InFlight::default(),
            now: 1_700_000_000_000,
            pod_security: Default::default(),
            redecision,
        };
        let result = act(&self.ctx, &self.admitted, observed).await;
        (result, self.seen.lock().expect("log").iter().filter(|s| s.path != EVENTS).cloned().collect())
    }

    /// The Events published since the last `act`, once there are `n` of them.
    async fn events(&self, n: usize) -> Vec<Seen> {
        common::eventually(&format!("{n} Events published"), Duration::from_secs(10), || async {
            let events: Vec<Seen> = self.seen.lock().ok()?.iter().filter(|s| s.path == EVENTS).cloned().collect();
            (events.len() >= n).then_some(events)
        })
        .await
    }
}

const PODSET: &str = "/apis/app.example.com/v1alpha1/namespaces/ns/podsets/web";
const PODS: &str = "/api/v1/namespaces/ns/pods";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

#[tokio::test]
async fn scaling_up_from_nothing_is_the_pods_and_one_event_naming_them_then_one_status() {
    let rig = Rig::new();
    let seen = rig.act(podset(2, json!({}), None), Vec::new()).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    // No write to the PodSet yet: its status would name none of the pods, and the
    // decision that observes them writes it.
    assert_eq!(lines, [format!("POST {PODS}"), format!("POST {PODS}")]);
    let created = &seen[0].body;
    assert_eq!(created["metadata"]["generateName"], json!("web-"));
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], json!("uid-web"));
    assert_eq!(created["spec"]["securityContext"]["runAsNonRoot"], json!(true));
    // One Event for both pods, about the PodSet, naming them.
    rig.events(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = rig.events(1).await;
    assert_eq!(events.len(), 1, "{:?}", events.iter().map(|e| &e.body["note"]).collect::<Vec<_>>());
    let event = &events[0].body;
    assert_eq!((&event["reason"], &event["regarding"]["name"]), (&json!("SuccessfulCreate"), &json!("web")));
    assert!(event.get("related").is_none_or(Value::is_null), "{event}");
    let note = event["note"].as_str().unwrap_or_default();
    let named: Vec<&str> = note.strip_prefix("Created 2 pods: ").unwrap_or_default().split(", ").collect();
    assert!(named.len() == 2 && named[0] != named[1] && named.iter().all(|n| n.starts_with("web-")), "{note}");

    // The pods observed: one write to the PodSet, its status, recording the digest.
    let seen = rig.act(podset(2, json!({}), None), vec![pod("web-a"), pod("web-b")]).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("PUT {PODSET}/status")]);
    let status = &seen[0];
    assert_eq!(status.body["status"]["observedGeneration"], json!(2));
    assert_eq!(status.body["status"]["podNames"], json!(["web-a", "web-b"]));
    assert_eq!(status.body["status"][DIGEST_FIELD], json!(rig.digest()));
    // Conditional on the version the decision was made from.
    assert_eq!(status.body["metadata"]["resourceVersion"], json!("7"));
}

#[tokio::test]
async fn a_converged_podset_costs_no_request_at_all() {
    let rig = Rig::new();
    let pods = vec![pod("web-a"), pod("web-b")];
    // The first pass writes the status the policy derives; the second sees it written.
    let first = rig.act(podset(2, json!({}), Some(&rig.digest())), pods.clone()).await;
    let status = first.iter().find(|s| s.path.ends_with("/status")).expect("a status write").body["status"].clone();
    let again = rig.act(podset(2, status, Some(&rig.digest())), pods).await;
    assert!(again.is_empty(), "converged, yet: {:?}", again.iter().map(Seen::line).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_new_policy_alone_is_one_status_write_and_an_old_annotation_is_removed() {
    let rig = Rig::new();
    let pods = vec![pod("web-a"), pod("web-b")];
    let first = rig.act(podset(2, json!({}), Some("sha256:old")), pods.clone()).await;
    let status = first.iter().find(|s| s.path.ends_with("/status")).expect("a status write").body["status"].clone();
    let mut converged = podset(2, status.clone(), Some("sha256:old"));
    let swapped = rig.act(converged.clone(), pods.clone()).await;
    let lines: Vec<String> = swapped.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("PUT {PODSET}/status")]);
    let mut expected = status;
    expected[DIGEST_FIELD] = json!(rig.digest());
    assert_eq!(swapped[0].body["status"], expected, "only the digest changed");
    // The status alone, conditional on the version decided from: the server keeps the rest.
    assert_eq!(swapped[0].body["metadata"]["resourceVersion"], json!("7"));
    assert!(swapped[0].body.get("spec").is_none(), "{:?}", swapped[0].body);

    // An object from an operator that recorded the digest in an annotation.
    let legacy = podset_host::reconcile::execute::LEGACY_DIGEST_ANNOTATION;
    converged.data["status"][DIGEST_FIELD] = json!(rig.digest());
    converged.metadata.annotations = Some([(legacy.to_string(), "sha256:old".to_string())].into());
    let seen = rig.act(converged, pods).await;
    // (What follows it is not checked here: the stand-in answers a patch with the
    // patch, not the whole object.)
    assert_eq!(seen[0].line(), format!("PATCH {PODSET}"));
    assert_eq!(seen[0].body["metadata"], json!({ "annotations": { legacy: null } }));
}

#[tokio::test]
async fn scaling_down_deletes_with_uid_preconditions() {
    let rig = Rig::new();
    let seen = rig.act(podset(1, json!({}), Some(&rig.digest())), vec![pod("web-a"), pod("web-b"), pod("web-c")]).await;
    let deletes: Vec<&Seen> = seen.iter().filter(|s| s.method == "DELETE").collect();
    assert_eq!(deletes.len(), 2);
    for d in deletes {
        let name = d.path.rsplit('/').next().expect("name");
        assert_eq!(d.body["preconditions"]["uid"], json!(format!("uid-{name}")), "{d:?}");
    }
    assert!(seen.last().is_some_and(|s| s.path.ends_with("/status")), "the status goes last");
}

#[tokio::test]
async fn a_redecision_writes_no_child_for_a_parent_the_api_server_holds_no_more() {
    let rig = Rig::new();
    // The PodSet was deleted (its pods being collected) and its watch event not yet seen:
    // a re-decision from the cache sees two of its three pods gone.
    let cached = podset(3, json!({}), Some(&rig.digest()));
    let seen = rig.decide(cached.clone(), vec![pod("web-a")], true).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("GET {PODSET}")], "read, nothing written");

    // Recreated under its name: another object (UID) at another version.
    let mut recreated = serde_json::to_value(&cached).expect("json");
    recreated["metadata"]["uid"] = json!("uid-web-2");
    recreated["metadata"]["resourceVersion"] = json!("9");
    rig.held.lock().expect("held").insert(PODSET.into(), recreated);
    let seen = rig.decide(cached.clone(), vec![pod("web-a")], true).await;
    assert_eq!(seen.iter().map(Seen::line).collect::<Vec<_>>(), [format!("GET {PODSET}")]);
    // Each said so: a reconcile cut short by a conflict, to run again soon.
    assert_eq!(deferred(&rig.ctx.metrics, "conflict"), 2.0);

    // Held as cached: the pods are replaced, after the one read.
    rig.held.lock().expect("held").insert(PODSET.into(), serde_json::to_value(&cached).expect("json"));
    let seen = rig.decide(cached.clone(), vec![pod("web-a")], true).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("GET {PODSET}"), format!("POST {PODS}"), format!("POST {PODS}")]);

    // A re-decision that writes no child reads nothing, and a first decision never reads.
    rig.held.lock().expect("held").clear();
    let seen = rig.decide(cached.clone(), vec![pod("web-a"), pod("web-b"), pod("web-c")], true).await;
    assert!(seen.iter().all(|s| s.method != "GET"), "{:?}", seen.iter().map(Seen::line).collect::<Vec<_>>());
    let seen = rig.decide(cached, vec![pod("web-a")], false).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("POST {PODS}"), format!("POST {PODS}")]);
    assert_eq!(deferred(&rig.ctx.metrics, "conflict"), 2.0, "the decisions that wrote were not cut short");
}

/// The API server's refusal of a create in `ns`: being deleted (`terminating`), or over
/// its quota.
/// Reconciles cut short for `reason`, as counted in `metrics`.
fn deferred(metrics: &Metrics, reason: &str) -> f64 {
    common::sum_metric(&metrics.encode(), "podset_reconciles_deferred_total", &format!(r#"reason="{reason}""#))
}

fn forbidden(ns: &str, terminating: bool) -> Value {
    let (message, causes) = if terminating {
        let message = format!("unable to create new content in namespace {ns} because it is being terminated");
        (
            message.clone(),
            json!([{ "reason": "NamespaceTerminating", "message": message, "field": "metadata.namespace" }]),
        )
    } else {
        ("exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2".to_string(), json!([]))
    };
    json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": format!("pods is forbidden: {message}"), "details": { "kind": "pods", "causes": causes } })
}

#[tokio::test]
async fn a_create_refused_because_the_parents_namespace_goes_is_no_failure() {
    let rig = Rig::new();
    rig.refused.lock().expect("refused").insert(PODS.into(), forbidden("ns", true));
    let (result, seen) = rig.attempt(podset(2, json!({}), Some(&rig.digest())), Vec::new(), false).await;
    // The first create of the slow start, refused; no condition written on the parent.
    assert_eq!(seen.iter().map(Seen::line).collect::<Vec<_>>(), [format!("POST {PODS}")]);
    let again = result.expect("not a failure");
    assert!(again <= HOLD, "decided again once the hold ends, not at the resync: {again:?}");

    // Another parent there, decided within the hold: its create is not sent.
    let mut other = podset(2, json!({}), Some(&rig.digest()));
    other.metadata.name = Some("db".into());
    other.metadata.uid = Some("uid-db".into());
    let (result, seen) = rig.attempt(other.clone(), Vec::new(), false).await;
    assert_eq!(seen.iter().map(Seen::line).collect::<Vec<_>>(), Vec::<String>::new(), "nothing sent");
    let again = result.expect("not a failure");
    assert!(again <= HOLD, "{again:?}");
    assert_eq!(deferred(&rig.ctx.metrics, "terminating"), 2.0);

    // The hold ended, the namespace made again: the create is sent, and made.
    tokio::time::sleep(again).await;
    rig.refused.lock().expect("refused").clear();
    let (result, seen) = rig.attempt(other, Vec::new(), false).await;
    assert_eq!(seen.first().map(Seen::line), Some(format!("POST {PODS}")), "{seen:?}");
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_create_refused_for_another_reason_is_a_failure() {
    let rig = Rig::new();
    rig.refused.lock().expect("refused").insert(PODS.into(), forbidden("ns", false));
    let (result, seen) = rig.attempt(podset(2, json!({}), Some(&rig.digest())), Vec::new(), false).await;
    // Condition, Events, error.
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines, [format!("POST {PODS}"), format!("PUT {PODSET}/status")]);
    let conditions = seen[1].body["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let failed = conditions.iter().find(|c| c["type"] == json!(RECONCILE_FAILED)).expect("the condition");
    assert_eq!(failed["reason"], json!("FailedCreate"), "{failed:?}");
    assert!(result.is_err_and(|e| e.metric_label() == "FailedCreate"));
    let events = rig.events(2).await;
    let mut reasons: Vec<&str> = events.iter().map(|e| e.body["reason"].as_str().unwrap_or_default()).collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["FailedCreate", "ReconcileFailed"]);
    let notes: Vec<&str> = events.iter().map(|e| e.body["note"].as_str().unwrap_or_default()).collect();
    assert!(notes.iter().all(|n| n.contains("exceeded quota")), "{notes:?}");
    assert_eq!(deferred(&rig.ctx.metrics, "terminating"), 0.0);
}

/// The Reloader policy (contract 0.4 lookups) against caches holding a Deployment
/// `web` in `ns` that mounts ConfigMap `web-config` and reads Secret `web-credentials`.
mod lookups {
    use std::collections::BTreeMap;

    use kube::api::ApiResource;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher::Event;
    use podset_host::contract::bindings::{GroupVersionKind, LookupKind};
    use podset_host::kubernetes::object::Object;
    use podset_host::kubernetes::watches::{Scope, Watched};
    use podset_host::reconcile::decide::{self, Witnesses};
    use podset_host::reconcile::expectations::Expectations;
    use podset_host::reconcile::lookups::LookupIndex;
    use podset_host::reconcile::observe::{self, Caches};

    use super::*;

    fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
        let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version,
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    fn reloads() -> ApiResource {
        resource("reloader.example.com", "v1alpha1", "ConfigReload", "configreloads")
    }

    fn lookup_kind(r: &ApiResource, patch: bool) -> (ApiResource, LookupKind) {
        let kind = GroupVersionKind { group: r.group.clone(), version: r.version.clone(), kind: r.kind.clone() };
        (r.clone(), LookupKind { kind, patch })
    }

    /// Someone else's objects, as the unmanaged watches hold them.
    struct Unmanaged(BTreeMap<String, Arc<Watched>>);

    impl Caches for Unmanaged {
        fn children(&self, _: &ApiResource) -> Option<&Arc<Watched>> {
            None
        }
        fn unmanaged(&self, r: &ApiResource) -> Option<&Arc<Watched>> {
            self.0.get(&r.plural)
        }
    }

    fn object(r: &ApiResource, name: &str, data: Value) -> Object {
        let mut o = DynamicObject::new(name, r).within("ns");
        o.metadata.uid = Some(format!("uid-{name}"));
        o.data = data;
        o.into()
    }

    struct ReloaderRig {
        ctx: Arc<Context>,
        admitted: Admitted,
        seen: Arc<Mutex<Vec<Seen>>>,
        caches: Unmanaged,
        memory: Arc<LookupIndex>,
    }

    impl ReloaderRig {
        fn new() -> Self {
            let rig = Rig::serving("reloader.wasm");
            let policy = rig.admitted.policy;
            let (deployments, configmaps) = (objects::deployments(), objects::configmaps());
            let secrets = resource("", "v1", "Secret", "secrets");
            let resolved = Resolved {
                parent: reloads(),
                children: Vec::new(),
                related: Vec::new(),
                lookups: vec![
                    lookup_kind(&deployments, true),
                    lookup_kind(&configmaps, false),
                    lookup_kind(&secrets, false),
                ],
                finalizer: None,
                cluster_scoped: Default::default(),
                reach: Default::default(),
                namespace_labels: None,
            };
            let mut caches = BTreeMap::new();
            for r in [&deployments, &configmaps, &secrets] {
                caches.insert(r.plural.clone(), Arc::new(Watched::new(r, Scope::Unmanaged)));
            }
            let caches = Unmanaged(caches);
            let web = json!({ "spec": { "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": {
                    "volumes": [{ "name": "config", "configMap": { "name": "web-config" } }],
                    "containers": [{ "name": "web", "image": "busybox:1.35",
                                     "envFrom": [{ "secretRef": { "name": "web-credentials" } }] }] } } } });
            caches.0["deployments"].store.apply(Event::Apply(object(&deployments, "web", web)));
            caches.0["secrets"].store.apply(Event::Apply(object(
                &secrets,
                "web-credentials",
                json!({ "data": { "password": "aHVudGVyMg==" } }),
            )));
            let memory = Arc::new(LookupIndex::default());
            ReloaderRig { ctx: rig.ctx, admitted: Admitted::new(policy, resolved), seen: rig.seen, caches, memory }
        }

        fn set_config(&self, greeting: &str) -> Object {
            let cm = object(&objects::configmaps(), "web-config", json!({ "data": { "greeting": greeting } }));
            self.caches.0["configmaps"].store.apply(Event::Apply(cm.clone()));
            cm
        }

        fn parent(&self, status: Value) -> Arc<Object> {
            let mut p = DynamicObject::new("web", &reloads()).within("ns");
            p.metadata.uid = Some("uid-reload".into());
            p.metadata.generation = Some(1);
            p.metadata.resource_version = Some("7".into());
            p.data = json!({ "spec": { "deployment": "web" }, "status": status });
            Arc::new(p.into())
        }

        fn observe(&self, parent: Arc<Object>) -> Observed {
            let (resolved, memory) = (&self.admitted.resolved, Some(self.memory.clone()));
            observe::gather(
                parent,
                &Arc::new(reloads()),
                resolved,
                &self.caches,
                &Expectations::default(),
                memory,
                Marks::Granted,
            )
        }

        /// How many calls the policy took, and its plan's status.
        async fn decide(&self, status: Value) -> (usize, Option<Value>) {
            let mut observed = self.observe(self.parent(status));
            let decided = decide::decide(&self.ctx.engine, &self.admitted, &mut observed, Witnesses::default())
                .await
                .unwrap_or_else(|_| panic!("decides"));
            (decided.spent.len(), decided.plan.status)
        }
    }

    #[tokio::test]
    async fn a_chain_of_lookups_takes_three_calls_once_and_one_after() {
        let rig = ReloaderRig::new();
        rig.set_config("hello");
        // Nothing answered: the Deployment, then what it mounts, then the decision.
        let (calls, status) = rig.decide(json!({})).await;
        assert_eq!(calls, 3);
        let status = status.expect("first sight records the hash");
        assert_eq!(status["watching"], json!(["ConfigMap/web-config", "Secret/web-credentials"]));
        // The same parent again: answered before the call.
        let (calls, _) = rig.decide(status.clone()).await;
        assert_eq!(calls, 1);
        assert_eq!(rig.memory.len(), 1);
    }

    #[tokio::test]
    async fn a_changed_config_map_reaches_its_parent_and_patches_only_the_deployment() {
        let rig = ReloaderRig::new();
        rig.set_config("hello");
        let (_, status) = rig.decide(json!({})).await;
        let first = status.expect("a status");

        let changed = rig.set_config("hello, world");
        let parent = ObjectRef::from_obj_with(rig.parent(json!({})).as_ref(), Arc::new(reloads()));
        assert_eq!(rig.memory.parents_of(&objects::configmaps(), &changed), [parent], "routed to the one parent");
        let unrelated = object(&objects::configmaps(), "other", json!({}));
        assert!(rig.memory.parents_of(&objects::configmaps(), &unrelated).is_empty());

        rig.seen.lock().expect("log").clear();
        let observed = rig.observe(rig.parent(first.clone()));
        act(&rig.ctx, &rig.admitted, observed).await.expect("reconcile");
        let seen: Vec<Seen> = rig.seen.lock().expect("log").iter().filter(|s| s.path != EVENTS).cloned().collect();
        let lines: Vec<String> = seen.iter().map(Seen::line).collect();
        let web = "/apis/apps/v1/namespaces/ns/deployments/web";
        let reload = "/apis/reloader.example.com/v1alpha1/namespaces/ns/configreloads/web";
        assert_eq!(lines, [format!("PATCH {web}"), format!("PUT {reload}/status")]);
        let patch = &seen[0].body;
        let annotations = &patch["spec"]["template"]["metadata"]["annotations"];
        let hash = annotations["reloader.example.com/config-hash"].as_str().expect("the new hash");
        assert_ne!(Some(hash), first["configHash"].as_str());
        assert_eq!(patch["metadata"].get("ownerReferences"), None, "never owned");
        assert_eq!(patch["spec"]["template"].get("spec"), None, "no pod spec");
        assert_eq!(seen[1].body["status"]["reloads"], json!(1));
    }
}
