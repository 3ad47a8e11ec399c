//! Properties of the PodSet policy's decision over random inputs — pods in every
//! phase, ready or not, terminating or not, work in flight, any replica count — run
//! natively and on the compiled `.wasm`, which must agree action for action.

use podset_test_support as common;

use std::collections::HashSet;
use std::sync::Arc;

use podset_host::contract::bindings::podset::{Action, InFlight, Input, Pod, PodPhase, Podset, PodsetStatus};
use podset_host::contract::bindings::{ConditionStatus, KeyValue};
use podset_host::sandbox::{Actions, Input as PolicyInput, Limits, Policy, PolicyEngine, native};
use proptest::prelude::*;

fn phase() -> impl Strategy<Value = PodPhase> {
    prop_oneof![
        Just(PodPhase::Pending),
        Just(PodPhase::Running),
        Just(PodPhase::Succeeded),
        Just(PodPhase::Failed),
        Just(PodPhase::Unknown),
    ]
}

fn pods() -> impl Strategy<Value = Vec<Pod>> {
    prop::collection::vec((phase(), any::<bool>(), prop::bool::weighted(0.2), any::<bool>(), 0..5i32), 0..14).prop_map(
        |specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (phase, ready, deleting, scheduled, restarts))| Pod {
                    name: format!("web-{i:02}"),
                    phase,
                    ready: ready && phase == PodPhase::Running,
                    deleting,
                    scheduled,
                    created_at: 1_700_000_000_000 + i as i64 * 1000,
                    restart_count: restarts,
                })
                .collect()
        },
    )
}

fn input() -> impl Strategy<Value = Input> {
    (pods(), 0..12i32, 0..4u32, prop::collection::vec(any::<bool>(), 14), 1..5i64).prop_map(
        |(pods, replicas, creations, marks, generation)| {
            // In-flight deletions name pods the host deleted and has not seen go yet.
            let deletions = pods
                .iter()
                .zip(&marks)
                .filter(|(p, m)| **m && !p.deleting)
                .map(|(p, _)| p.name.clone())
                .take(3)
                .collect();
            Input {
                podset: Podset {
                    name: "web".into(),
                    namespace: "ns".into(),
                    uid: "uid-web".into(),
                    generation,
                    labels: vec![KeyValue { key: "tier".into(), value: "web".into() }],
                    replicas,
                    status: PodsetStatus {
                        pod_names: Vec::new(),
                        available_replicas: 0,
                        observed_generation: 0,
                        conditions: Vec::new(),
                    },
                },
                pods,
                in_flight: InFlight { creations, deletions },
                now: 1_700_000_100_000,
            }
        },
    )
}

fn is_active(p: &Pod) -> bool {
    matches!(p.phase, PodPhase::Pending | PodPhase::Running) && !p.deleting
}

/// Every property, for one input and the actions decided for it.
fn check(input: &Input, actions: &[Action]) -> Result<(), TestCaseError> {
    let active: Vec<&Pod> = input.pods.iter().filter(|p| is_active(p)).collect();
    let going: HashSet<&str> = input.in_flight.deletions.iter().map(String::as_str).collect();
    let staying = active.iter().filter(|p| !going.contains(p.name.as_str())).count();
    let expected = staying + input.in_flight.creations as usize;
    let desired = input.podset.replicas as usize;
    let creates = actions.iter().filter(|a| matches!(a, Action::CreatePod(_))).count();
    let deletes: Vec<&String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod(n) => Some(n),
            _ => None,
        })
        .collect();
    // Never more creates than needed, counting in-flight work.
    prop_assert!(creates <= desired.saturating_sub(expected), "{creates} creates, {expected} expected of {desired}");
    // Never deletes a pod that is not its own, nor one already going.
    for d in &deletes {
        let pod = input.pods.iter().find(|p| &&p.name == d);
        prop_assert!(pod.is_some_and(is_active), "deletes {d}, which is not an active pod of its own");
        prop_assert!(!going.contains(d.as_str()), "deletes {d} again");
    }
    // Never more deletes than the surplus.
    prop_assert!(
        deletes.len() <= expected.saturating_sub(desired),
        "{} deletes for a surplus of {}",
        deletes.len(),
        expected.saturating_sub(desired)
    );
    prop_assert!(creates == 0 || deletes.is_empty(), "creates and deletes in one decision");
    // The status is consistent with the input it was decided from: it names the
    // active pods that stay, neither those going nor those this decision deletes.
    let stay: Vec<&&Pod> =
        active.iter().filter(|p| !going.contains(p.name.as_str()) && !deletes.contains(&&p.name)).collect();
    for a in actions {
        if let Action::UpdateStatus(s) = a {
            let mut names: Vec<String> = stay.iter().map(|p| p.name.clone()).collect();
            names.sort();
            prop_assert_eq!(&s.pod_names, &names);
            prop_assert_eq!(s.available_replicas as usize, stay.iter().filter(|p| p.ready).count());
            prop_assert_eq!(s.observed_generation, input.podset.generation);
            let available = s.conditions.iter().find(|c| c.type_ == "Available").map(|c| c.status);
            let enough = s.available_replicas >= input.podset.replicas;
            prop_assert_eq!(available, Some(if enough { ConditionStatus::True } else { ConditionStatus::False }));
        }
    }
    Ok(())
}

fn wasm_policy() -> Arc<Policy> {
    static ENGINE: std::sync::OnceLock<(Arc<PolicyEngine>, Arc<Policy>)> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let engine = Arc::new(PolicyEngine::new(Limits::default()).expect("engine"));
            let policy = engine.load(&common::read_policy("podset.wasm")).expect("podset.wasm loads");
            (engine, policy)
        })
        .1
        .clone()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_decision_keeps_every_property_natively_and_in_wasm(input in input()) {
        let Actions::PodSet(native) = native::decide(&input).map_err(|e| TestCaseError::fail(e.to_string()))?.actions else {
            return Err(TestCaseError::fail("the native PodSet policy answers in its world"));
        };
        let policy = wasm_policy();
        let Actions::PodSet(wasm) = policy.decide(&PolicyInput::PodSet(input.clone())).map_err(|e| TestCaseError::fail(e.to_string()))?.actions else {
            return Err(TestCaseError::fail("a PodSet policy answers in its world"));
        };
        check(&input, &wasm)?;
        // The .wasm and the native build decide the same, action for action.
        prop_assert_eq!(native, wasm);
    }
}
