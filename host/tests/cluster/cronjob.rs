//! The CronJob policy as the kubebuilder tutorial's user runs it: the sample applied with
//! kubectl, Jobs every minute run to completion by the real Job controller and kubelet,
//! the history limit honoured, and deletion. Under the shipped least-privilege RBAC,
//! with a shadow of the same module and every decision recorded and replayed.

use podset_test_support as common;

use std::time::Duration;

use common::{eventually, objects};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams};
use kube::core::DynamicObject;

/// A minute for the schedule, and the Job's own run on the real node.
const T: Duration = Duration::from_secs(150);
const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

/// The CronJob's Jobs, by name (which is by scheduled time): name, scheduled-at, complete.
async fn runs(jobs: &Api<Job>) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = jobs
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| {
            let at = j.metadata.annotations.as_ref()?.get(SCHEDULED_AT)?.clone();
            let complete = j
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"));
            Some((j.metadata.name?, at, complete))
        })
        .collect();
    out.sort();
    out
}

fn seconds(rfc3339: &str) -> i64 {
    let t: Time = serde_json::from_value(serde_json::Value::String(rfc3339.into())).expect("an RFC 3339 time");
    t.0.as_second()
}

#[tokio::test]
async fn the_kubebuilder_sample_runs_a_job_each_minute_keeps_its_history_and_replays_exactly() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    let ns = common::namespace(&client, "cronjob").await;
    let dir = common::policy_dir();
    let module = dir.join("cronjob.wasm");
    let record = tempfile::tempdir().expect("tempdir");
    let sa = tempfile::tempdir().expect("tempdir");
    let kubeconfig = common::service_account_kubeconfig(&client, sa.path()).await;
    let mut op = common::Operator::spawn_with_args(
        &ns,
        &[&module],
        &kubeconfig,
        &["--record-dir", &record.path().to_string_lossy()],
    );
    op.ready().await;
    common::publish_shadow(&client, &ns, "shadow", "shadow-module", &common::read_policy("cronjob.wasm"), None).await;
    common::policy_loaded(&client, &ns, "shadow", &op).await;

    // As the tutorial: kubectl apply the sample; then keep one successful Job.
    let sample = common::workspace().join("manifests/samples/cronjob.yaml");
    let (ok, out) = common::kubectl(&["apply", "-n", &ns, "-f", &sample.to_string_lossy()]);
    assert!(ok, "kubectl apply: {out}");
    let limit = r#"{"spec":{"successfulJobsHistoryLimit":1}}"#;
    let (ok, out) = common::kubectl(&[
        "patch",
        "-n",
        &ns,
        "cronjobs.batch.tutorial.kubebuilder.io",
        "cronjob-sample",
        "--type",
        "merge",
        "-p",
        limit,
    ]);
    assert!(ok, "kubectl patch: {out}");
    let cronjobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &objects::cronjobs());
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let cronjob = cronjobs.get("cronjob-sample").await.expect("the CronJob");
    let uid = cronjob.metadata.uid.clone().expect("uid");

    // The first run: a Job named by its scheduled minute, run to completion.
    let (name, at, _) = eventually("the first Job to complete", T, || async {
        runs(&jobs).await.into_iter().find(|(_, _, complete)| *complete)
    })
    .await;
    let scheduled = seconds(&at);
    assert_eq!(scheduled % 60, 0, "scheduled on a minute: {at}");
    assert_eq!(name, format!("cronjob-sample-{scheduled}"));
    let job = jobs.get(&name).await.expect("the Job");
    let owner = &job.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("CronJob", uid.as_str(), Some(true)));
    let template = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("a pod template");
    let container = &template.containers[0];
    assert_eq!(container.image.as_deref(), Some("busybox:1.35"));
    assert_eq!(
        container.security_context.as_ref().and_then(|s| s.allow_privilege_escalation),
        Some(false),
        "run restricted"
    );

    // The status: nothing active once it completed, and the time it was scheduled for.
    eventually("the status to show the completed run", T, || async {
        let status = cronjobs.get("cronjob-sample").await.ok()?.data["status"].clone();
        let active = status["active"].as_array().map_or(0, Vec::len);
        let last = status["lastScheduleTime"].as_str().map(seconds)?;
        (active == 0 && last >= scheduled).then_some(())
    })
    .await;
    common::kstatus::reads("cronjob-sample", "Current", T, || async { cronjobs.get("cronjob-sample").await.ok() })
        .await;

    // The next minute's run; once it completed, the first goes (a history of one), and
    // its pods with it.
    let second = eventually("a second Job to complete and the first to go", T, || async {
        let all = runs(&jobs).await;
        match &all[..] {
            [(next, _, true)] if *next != name => Some(next.clone()),
            _ => None,
        }
    })
    .await;
    assert!(second > name, "{second} is the later run");
    eventually("the first Job's pods to go with it", T, || async {
        let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"));
        pods.list(&lp).await.ok()?.items.is_empty().then_some(())
    })
    .await;

    // kubectl delete: the garbage collector removes its Jobs.
    cronjobs.delete("cronjob-sample", &DeleteParams::default()).await.expect("delete");
    eventually("its Jobs to be garbage-collected", T, || async {
        jobs.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await;

    // A shadow of the same module agreed on every decision, and every recorded decision
    // replays the same: the schedule is read against the input's clock, never the
    // policy's own.
    let st = common::shadow_settled(&client, &ns, "shadow", &op).await;
    assert_eq!((st.agreed, st.differed, st.failed, st.dropped), (st.decisions, 0, 0, 0), "{st:#?}");
    assert!(op.terminate(Duration::from_secs(10)), "the operator stops cleanly (log: {})", op.log.display());
    let recorded = record.path().join("CronJob.batch.tutorial.kubebuilder.io").join(&ns);
    let n = common::replays_exactly(&module, &recorded);
    assert!(n >= 4, "a decision per run at least: {n}");
    println!("CronJob: runs {name} and {second}; {n} decisions shadowed and replayed, all agree");
    common::delete_namespace(&client, &ns).await;
}
