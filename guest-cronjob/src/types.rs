//! The `CronJob` resource of the kubebuilder tutorial (`batch.tutorial.kubebuilder.io/v1`,
//! namespaced): its own group, so it never clashes with `batch/v1`'s. The policy decodes
//! spec and status with these types; native builds also derive the CRD from them
//! (`cronjob-crdgen`), so the schema cannot drift from what the policy reads.

use policy_sdk::Condition;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Runs a Job from `jobTemplate` at every time `schedule` names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    kube(
        group = "batch.tutorial.kubebuilder.io",
        version = "v1",
        kind = "CronJob",
        namespaced,
        status = "CronJobStatus",
        printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#,
        printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
        printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in Cron format (five fields, or `@hourly`, `@daily`…), in UTC; see
    /// https://en.wikipedia.org/wiki/Cron.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(length(min = 1)))]
    pub schedule: String,
    /// Optional deadline in seconds for starting the job if it misses scheduled time for
    /// any reason. Missed job executions will be counted as failed ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 0)))]
    pub starting_deadline_seconds: Option<i64>,
    /// How to treat concurrent executions of a Job.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// Tells the controller to suspend subsequent executions; it does not apply to
    /// already started executions. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The job that will be created when executing a CronJob (`batch/v1`
    /// `JobTemplateSpec`). The operator runs its pods under the `restricted` Pod
    /// Security profile.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(with = "k8s_openapi::api::batch::v1::JobTemplateSpec"))]
    pub job_template: Value,
    /// The number of successful finished jobs to retain. Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 0)))]
    pub successful_jobs_history_limit: Option<i32>,
    /// The number of failed finished jobs to retain. Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(range(min = 0)))]
    pub failed_jobs_history_limit: Option<i32>,
}

/// How to treat concurrent executions of a Job. Only one of them applies; default `Allow`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
pub enum ConcurrencyPolicy {
    /// Allows CronJobs to run concurrently.
    #[default]
    Allow,
    /// Forbids concurrent runs, skipping the next run if the previous hasn't finished yet.
    Forbid,
    /// Cancels the currently running job and replaces it with a new one.
    Replace,
}

/// The observed state of a CronJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The currently running jobs, sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<JobReference>,
    /// When the job was last successfully scheduled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// The operator's: `PolicyFailed` when the policy cannot decide (an unparsable
    /// schedule, too many missed start times).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
    /// Written by the operator: the digest of the policy that decided last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
}

/// A running Job, as `corev1.ObjectReference` names it. (The tutorial's reference also
/// carries the Job's `resourceVersion`, which changes with every status update of the
/// Job: kept, it would rewrite this status each time a pod starts or ends.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobReference {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The CRD, as YAML (what `cronjob-crdgen` prints and `manifests/crd/cronjob.yaml` holds).
///
/// Without the descriptions inside `jobTemplate`: those of `batch/v1`'s Job and Pod
/// specs (`kubectl explain jobs.spec` has them) made the CRD 558 KB, more than a
/// client-side `kubectl apply` can keep in its annotation (256 KiB); without, 203 KB.
#[cfg(not(target_arch = "wasm32"))]
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    let mut crd = policy_sdk::crd::observed(CronJob::crd());
    for version in &mut crd.spec.versions {
        let template = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("jobTemplate"));
        if let Some(template) = template {
            let description = template.description.take();
            strip_descriptions(template);
            template.description = description;
        }
    }
    Ok(format!("---\n{}", serde_yaml::to_string(&crd)?))
}

#[cfg(not(target_arch = "wasm32"))]
fn strip_descriptions(
    schema: &mut k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray;
    schema.description = None;
    for p in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        strip_descriptions(p);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(s)) => strip_descriptions(s),
        Some(JSONSchemaPropsOrArray::Schemas(all)) => all.iter_mut().for_each(strip_descriptions),
        None => {}
    }
    if let Some(extra) = schema.additional_properties.as_mut()
        && let k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(s) =
            extra
    {
        strip_descriptions(s);
    }
    for s in [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of].into_iter().flatten() {
        s.iter_mut().for_each(strip_descriptions);
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../manifests/crd/cronjob.yaml");
        let generated = super::crd_yaml().expect("CRD serializes");
        assert!(
            committed == generated,
            "manifests/crd/cronjob.yaml is out of date with guest-cronjob/src/types.rs: run `make manifests`"
        );
    }
}
