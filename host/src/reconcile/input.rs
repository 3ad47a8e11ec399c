//! What the policy is told: the PodSet, the pods it controls, and what is in flight.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as K8sCondition;
use kube::ResourceExt;

use super::pods;
use super::validate::HOST_CONDITIONS;
use crate::crd::PodSet;
use crate::policy::{Condition, ConditionStatus, InFlight, Input, KeyValue, Podset, PodsetStatus};

pub fn build(podset: &PodSet, owned: &[&Pod], in_flight: InFlight) -> Input {
    let status = podset.status.clone().unwrap_or_default();
    Input {
        podset: Podset {
            name: podset.name_any(),
            namespace: podset.namespace().unwrap_or_default(),
            uid: podset.uid().unwrap_or_default(),
            generation: podset.metadata.generation.unwrap_or(0),
            labels: podset.labels().iter().map(|(k, v)| KeyValue { key: k.clone(), value: v.clone() }).collect(),
            replicas: podset.spec.replicas,
            status: PodsetStatus {
                pod_names: status.pod_names,
                available_replicas: status.available_replicas,
                observed_generation: status.observed_generation.unwrap_or(0),
                // The policy sees (and may replace) only its own conditions.
                conditions: status
                    .conditions
                    .iter()
                    .filter(|c| !HOST_CONDITIONS.contains(&c.type_.as_str()))
                    .map(to_policy_condition)
                    .collect(),
            },
        },
        pods: owned.iter().map(|p| pods::to_policy(p)).collect(),
        in_flight,
        now: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
    }
}

fn to_policy_condition(c: &K8sCondition) -> Condition {
    Condition {
        type_: c.type_.clone(),
        status: match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        },
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

pub fn status_str(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}
