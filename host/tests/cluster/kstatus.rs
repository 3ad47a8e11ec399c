//! Health as GitOps tools read it: kstatus (`sigs.k8s.io/cli-utils`, what Flux and kpt
//! use), computed by cli-utils itself (hack/go-tool.sh kstatus) on the shipped parent kinds as
//! the API server holds them. Just created: InProgress (the schema defaults
//! `status.observedGeneration` to 0); converging: InProgress (`Reconciling`); converged:
//! Current; its policy failing: Failed (`Stalled`); deleted and held by a finalizer:
//! Terminating. Memcached and Netperf are also seen converging and a CronJob failing
//! here; the kinds' own walkthroughs check Current and Failed where they reach them
//! (memcached.rs, netperf.rs, cronjob.rs, tenant.rs, reloader.rs).

use podset_test_support as common;

use std::time::Duration;

use common::kstatus::{self, Verdict};
use common::{Env, eventually};
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// A finalizer no controller removes: the test holds the object in Terminating with it.
const HOLD: &str = "test.podset.dev/hold";

struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    spec: Value,
}

impl Kind {
    fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: format!("{}/{}", self.group, self.version),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }
}

/// Every parent kind the project ships, each with a spec its schema accepts.
fn kinds() -> Vec<Kind> {
    let k = |group, version, kind, plural, namespaced, spec| Kind { group, version, kind, plural, namespaced, spec };
    vec![
        k("app.example.com", "v1alpha1", "PodSet", "podsets", true, json!({ "replicas": 1 })),
        k("cache.example.com", "v1alpha1", "Memcached", "memcacheds", true, json!({ "size": 1 })),
        k("app.example.com", "v1alpha1", "Netperf", "netperfs", true, json!({})),
        k(
            "batch.tutorial.kubebuilder.io",
            "v1",
            "CronJob",
            "cronjobs",
            true,
            json!({ "schedule": "@hourly", "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never", "containers": [{ "name": "c", "image": "busybox" }] } } } } }),
        ),
        k("tenancy.example.com", "v1alpha1", "Tenant", "tenants", false, json!({ "group": "team-kstatus" })),
        k("reloader.example.com", "v1alpha1", "ConfigReload", "configreloads", true, json!({ "deployment": "web" })),
    ]
}

/// The object as the API server holds it now, and kstatus of that same JSON.
fn read(kind: &Kind, ns: &str, name: &str) -> (Value, Verdict) {
    // Qualified: `cronjobs` alone is batch/v1's.
    let resource = format!("{}.{}", kind.plural, kind.group);
    let mut args = vec!["get", resource.as_str(), name, "-o", "json"];
    if kind.namespaced {
        args.extend(["-n", ns]);
    }
    let (ok, out) = common::kubectl(&args);
    assert!(ok, "kubectl get {resource} {name}: {out}");
    let object = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
    (object, kstatus::of_json(&out))
}

fn verdict(kind: &Kind, ns: &str, name: &str) -> Verdict {
    read(kind, ns, name).1
}

#[tokio::test]
async fn every_parent_kind_reads_in_progress_just_created_and_terminating_while_a_finalizer_holds_it() {
    let client = common::client().await;
    // No operator serves this namespace: what is read is the API server's alone.
    let ns = common::namespace(&client, "kstatus-kinds").await;
    for kind in kinds() {
        let name = format!("ks-{}", kind.plural);
        let api: Api<DynamicObject> = if kind.namespaced {
            Api::namespaced_with(client.clone(), &ns, &kind.resource())
        } else {
            Api::all_with(client.clone(), &kind.resource())
        };
        let mut object = DynamicObject::new(&name, &kind.resource());
        object.metadata.finalizers = Some(vec![HOLD.into()]);
        object.data = json!({ "spec": kind.spec });
        api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create {}: {e}", kind.kind));

        let created = verdict(&kind, &ns, &name);
        assert_eq!(created.status, "InProgress", "{} just created: {created:?}", kind.kind);
        assert!(created.message.contains("latest observed generation is 0"), "{}: {created:?}", kind.kind);

        api.delete(&name, &DeleteParams::default()).await.expect("delete");
        let deleted = verdict(&kind, &ns, &name);
        assert_eq!(deleted.status, "Terminating", "{} held by a finalizer: {deleted:?}", kind.kind);
        println!("{:<13} just created: {:<11} deleted, held: {}", kind.kind, created.status, deleted.status);

        let release = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
        api.patch(&name, &PatchParams::default(), &release).await.expect("remove the finalizer");
        eventually(&format!("{} {name} gone", kind.kind), T, || async {
            api.get_opt(&name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    common::delete_namespace(&client, &ns).await;
}

/// The reason and message of `object`'s `Reconciling` condition, if it has one.
fn reconciling(object: &Value) -> Option<(String, String)> {
    let c = object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Reconciling")?;
    Some((c["reason"].as_str()?.to_string(), c["message"].as_str()?.to_string()))
}

#[tokio::test]
async fn a_podset_reads_in_progress_while_converging_current_once_converged_and_failed_while_its_policy_fails() {
    let env = Env::new("kstatus-ps").await;
    let podsets = kinds().into_iter().next().expect("PodSet");

    // Converged: both pods ready on the simulated node.
    env.create("ready", 2).await;
    env.converged("ready", 2).await;
    let (object, current) = eventually("ready to read Current", T, || async {
        Some(read(&podsets, &env.ns, "ready")).filter(|(_, v)| v.status == "Current")
    })
    .await;
    assert_eq!(reconciling(&object), None, "no Reconciling once converged");

    // A spec change: Current again once the new generation is observed and converged.
    env.scale("ready", 3).await;
    env.converged("ready", 3).await;
    eventually("ready to read Current at generation 2", T, || async {
        let (object, v) = read(&podsets, &env.ns, "ready");
        (object["status"]["observedGeneration"] == 2 && v.status == "Current").then_some(())
    })
    .await;

    // Converging: pods that no node can take stay Pending.
    let mut pending = common::podset("pending", 2);
    if let Some(spec) = pending.spec.template.as_mut().and_then(|t| t.spec.as_mut()) {
        spec.node_selector = Some([("kstatus.podset.dev/no-such-node".to_string(), "true".to_string())].into());
    }
    env.podsets.create(&PostParams::default(), &pending).await.expect("create PodSet");
    let converging = eventually("pending to read InProgress with its pods", T, || async {
        let (object, v) = read(&podsets, &env.ns, "pending");
        let r = reconciling(&object)?;
        (v.status == "InProgress" && r.0 == "ChildrenNotReady").then_some((v, r))
    })
    .await;
    let (said, (_, message)) = &converging;
    assert!(message.starts_with("2 of 2 children not ready: Pod pending-"), "{converging:?}");
    assert_eq!(&said.message, message, "kstatus reads the Reconciling condition");
    println!("PodSet converged: {current:?}; converging: {converging:?}");

    // What the caches hold, as /metrics says: this namespace's 5 pods (3 ready, 2
    // Pending) and 2 PodSets.
    let cached = eventually("the caches to hold 5 pods and 2 PodSets", T, || async {
        let text = env.op.metrics().await;
        let pods = common::sum_metric(&text, "podset_cached_objects", r#"cache="pods""#);
        let parents = common::sum_metric(&text, "podset_cached_objects", r#"cache="podsets.app.example.com""#);
        (pods == 5.0 && parents == 2.0).then_some((pods, parents))
    })
    .await;
    println!("cached objects (pods, PodSets): {cached:?}");

    // Its policy failing: a module that panics at every decision serves the PodSets of
    // a second namespace.
    let failing = Env::with_policy("kstatus-fail", &common::policy_dir().join("fixtures/panic.wasm")).await;
    failing.create("doomed", 1).await;
    let failed = eventually("doomed to read Failed", T, || async {
        Some(verdict(&podsets, &failing.ns, "doomed")).filter(|v| v.status == "Failed")
    })
    .await;
    assert!(!failed.message.is_empty(), "kstatus says why: {failed:?}");
    assert_eq!(failing.op.sum("podset_parents_failing", "").await, 1.0, "the metric counts the failing parent");
    assert_eq!(env.op.sum("podset_parents_failing", "").await, 0.0);
    let resident = env.op.sum("podset_resident_memory_bytes", "").await;
    assert!(resident > 1e6, "the operator's resident set, read at the scrape: {resident}");
    println!("PodSet whose policy panics: {failed:?}");
}

/// Creates `spec` as a `kind` named `name` in `ns`.
async fn create(client: &kube::Client, kind: &Kind, ns: &str, name: &str, spec: Value) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &kind.resource());
    let mut object = DynamicObject::new(name, &kind.resource());
    object.data = json!({ "spec": spec });
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create {} {name}: {e}", kind.kind));
}

/// Waits until `name` has been observed at its generation (so "just created" is past)
/// and kstatus reads `status` of it, with `Reconciling` for `reason` when one is given;
/// returns that verdict and the object's `Reconciling`.
async fn settles_at(
    kind: &Kind,
    ns: &str,
    name: &str,
    status: &str,
    reason: Option<&str>,
) -> (Verdict, Option<(String, String)>) {
    let what = format!("{} {name} to read {status} once observed, Reconciling for {reason:?}", kind.kind);
    eventually(&what, T, || async {
        let (object, v) = read(kind, ns, name);
        let observed = object["status"]["observedGeneration"] == object["metadata"]["generation"];
        let why = reconciling(&object);
        let because = reason.is_none_or(|r| why.as_ref().is_some_and(|(got, _)| got == r));
        (observed && v.status == status && because).then_some((v, why))
    })
    .await
}

#[tokio::test]
async fn memcached_and_netperf_read_in_progress_while_a_child_cannot_settle_and_a_refused_cronjob_reads_failed() {
    let client = common::client().await;
    let [_, memcached, netperf, cronjob, ..] = &kinds()[..] else { panic!("the shipped kinds") };
    let dir = common::policy_dir();

    // Memcached converging: its namespace's ResourceQuota admits no pod, so its
    // Deployment never becomes Available.
    let starved = common::namespace(&client, "kstatus-starved").await;
    let quota =
        serde_json::from_value(json!({ "metadata": { "name": "no-pods" }, "spec": { "hard": { "pods": "0" } } }))
            .expect("a ResourceQuota");
    Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(client.clone(), &starved)
        .create(&PostParams::default(), &quota)
        .await
        .expect("create the ResourceQuota");
    let memcached_op =
        common::Operator::start_serving(&starved, &[&dir.join("memcached.wasm")], &common::kubeconfig_path()).await;
    create(&client, memcached, &starved, "starved", json!({ "size": 1 })).await;
    let (said, why) = settles_at(memcached, &starved, "starved", "InProgress", Some("ChildrenNotReady")).await;
    let (reason, message) = why.unwrap_or_else(|| panic!("Memcached starved has no Reconciling: {said:?}"));
    assert_eq!(reason, "ChildrenNotReady", "{message}");
    assert_eq!(message, "1 of 1 children not ready: Deployment starved");
    assert_eq!(said.message, message, "kstatus reads the Reconciling condition");
    println!("Memcached, no pods allowed: {said:?}");

    // Netperf converging: its server pinned to a node that does not exist stays
    // Pending; a refused CronJob schedule, which the schema lets through, is Failed.
    let ns = common::namespace(&client, "kstatus-stuck").await;
    let op = common::Operator::start_serving(
        &ns,
        &[&dir.join("netperf.wasm"), &dir.join("cronjob.wasm")],
        &common::kubeconfig_path(),
    )
    .await;
    create(&client, netperf, &ns, "stranded", json!({ "serverNode": "kstatus-no-such-node" })).await;
    let (said, why) = settles_at(netperf, &ns, "stranded", "InProgress", Some("ChildrenNotReady")).await;
    let (_, message) = why.unwrap_or_else(|| panic!("Netperf stranded has no Reconciling: {said:?}"));
    assert!(message.ends_with("Pod stranded-server"), "{message}");
    println!("Netperf, server on no node: {said:?}");

    let mut spec = cronjob.spec.clone();
    spec["schedule"] = json!("every full moon");
    create(&client, cronjob, &ns, "lunar", spec).await;
    let (said, _) = settles_at(cronjob, &ns, "lunar", "Failed", None).await;
    assert!(said.message.contains("every full moon"), "kstatus says which schedule: {said:?}");
    println!("CronJob, refused schedule: {said:?}");

    drop((memcached_op, op));
    common::delete_namespace(&client, &starved).await;
    common::delete_namespace(&client, &ns).await;
}
