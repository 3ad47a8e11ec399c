//! Health as GitOps tools read it: kstatus (`sigs.k8s.io/cli-utils`, what Flux and kpt
//! use), computed by cli-utils itself (hack/go-tool.sh kstatus) on the shipped parent kinds as
//! the API server holds them. Just created: InProgress (the schema defaults
//! `status.observedGeneration` to 0); converging: InProgress (`Reconciling`); converged:
//! Current; its policy failing: Failed (`Stalled`); deleted and held by a finalizer:
//! Terminating. The kinds' own walkthroughs check Current and Failed where they reach
//! them (memcached.rs, netperf.rs, cronjob.rs, tenant.rs, reloader.rs).

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
