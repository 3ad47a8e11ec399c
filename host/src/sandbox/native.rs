//! Benchmark-only (`--features native-podset`): guest-podset's decision linked into
//! the host and called directly, so that `make bench` can run the same logic with and
//! without the sandbox and show what the sandbox costs. Not a product path: a native
//! policy is neither isolated, bounded nor swappable. The operator uses it only when
//! started with the hidden `--native-podset` flag, and only for the policy named
//! `guest-podset`; every other policy still runs in Wasm.
//!
//! The two sides are generated from the same WIT by different generators (wasmtime's
//! for the host, wit-bindgen's for the guest), so their types are distinct and are
//! converted field by field here, as the component ABI would lift and lower them.

use guest_podset::exports::podset::policy::podset as guest;
use guest_podset::podset::policy::types as guest_types;

use super::{Actions, Decision, Error, Result, Spent};
use crate::contract::bindings::{Condition, ConditionStatus, KeyValue, podset};

/// The policy whose decision is linked in.
pub const POLICY: &str = "guest-podset";

/// One decision by the natively linked policy, timed as [`super::Policy::decide`] times
/// a Wasm one.
pub fn decide(input: &podset::Input) -> Result<Decision> {
    let timer = Spent::start();
    let actions = guest_podset::decide::decide(&to_guest(input))
        .map_err(|e| Error::Refused { reason: e.reason, message: e.message })?;
    let actions = Actions::PodSet(actions.into_iter().map(from_guest).collect());
    Ok(Decision { actions, spent: timer.stop() })
}

/// The host's input in the guest's types.
pub fn to_guest(i: &podset::Input) -> guest::Input {
    let s = &i.podset.status;
    guest::Input {
        podset: guest::Podset {
            name: i.podset.name.clone(),
            namespace: i.podset.namespace.clone(),
            uid: i.podset.uid.clone(),
            generation: i.podset.generation,
            labels: labels_to_guest(&i.podset.labels),
            replicas: i.podset.replicas,
            status: guest::PodsetStatus {
                pod_names: s.pod_names.clone(),
                available_replicas: s.available_replicas,
                observed_generation: s.observed_generation,
                conditions: s.conditions.iter().map(condition_to_guest).collect(),
            },
        },
        pods: i.pods.iter().map(pod_to_guest).collect(),
        in_flight: guest::InFlight { creations: i.in_flight.creations, deletions: i.in_flight.deletions.clone() },
        now: i.now,
    }
}

/// A guest's action in the host's types.
pub fn from_guest(a: guest::Action) -> podset::Action {
    match a {
        guest::Action::CreatePod(c) => podset::Action::CreatePod(podset::CreatePod {
            name: match c.name {
                guest::PodName::Exact(n) => podset::PodName::Exact(n),
                guest::PodName::Prefix(p) => podset::PodName::Prefix(p),
            },
            labels: c.labels.into_iter().map(|kv| KeyValue { key: kv.key, value: kv.value }).collect(),
            annotations: c.annotations.into_iter().map(|kv| KeyValue { key: kv.key, value: kv.value }).collect(),
        }),
        guest::Action::DeletePod(name) => podset::Action::DeletePod(name),
        guest::Action::UpdateStatus(s) => podset::Action::UpdateStatus(podset::PodsetStatus {
            pod_names: s.pod_names,
            available_replicas: s.available_replicas,
            observed_generation: s.observed_generation,
            conditions: s
                .conditions
                .into_iter()
                .map(|c| Condition {
                    type_: c.type_,
                    status: match c.status {
                        guest_types::ConditionStatus::True => ConditionStatus::True,
                        guest_types::ConditionStatus::False => ConditionStatus::False,
                        guest_types::ConditionStatus::Unknown => ConditionStatus::Unknown,
                    },
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
        }),
        guest::Action::RequeueAfter(ms) => podset::Action::RequeueAfter(ms),
    }
}

fn labels_to_guest(kvs: &[KeyValue]) -> Vec<guest_types::KeyValue> {
    kvs.iter().map(|kv| guest_types::KeyValue { key: kv.key.clone(), value: kv.value.clone() }).collect()
}

fn condition_to_guest(c: &Condition) -> guest_types::Condition {
    guest_types::Condition {
        type_: c.type_.clone(),
        status: match c.status {
            ConditionStatus::True => guest_types::ConditionStatus::True,
            ConditionStatus::False => guest_types::ConditionStatus::False,
            ConditionStatus::Unknown => guest_types::ConditionStatus::Unknown,
        },
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

fn pod_to_guest(p: &podset::Pod) -> guest::Pod {
    guest::Pod {
        name: p.name.clone(),
        phase: match p.phase {
            podset::PodPhase::Pending => guest::PodPhase::Pending,
            podset::PodPhase::Running => guest::PodPhase::Running,
            podset::PodPhase::Succeeded => guest::PodPhase::Succeeded,
            podset::PodPhase::Failed => guest::PodPhase::Failed,
            podset::PodPhase::Unknown => guest::PodPhase::Unknown,
        },
        ready: p.ready,
        deleting: p.deleting,
        scheduled: p.scheduled,
        created_at: p.created_at,
        restart_count: p.restart_count,
    }
}
