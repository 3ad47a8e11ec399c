//! Policies in other languages than Rust, on their real components: they import nothing
//! but the contract, and decide the same on every fresh instance, clock and randomness
//! included (issue 42: a decision is a pure function of its recorded input, whatever
//! the language).

use podset_test_support as common;

use podset_host::contract::bindings::reconciler::{Action, Input as ReconcileInput};
use podset_host::sandbox::{Actions, Input, Limits, PolicyEngine};
use podset_host::scenario::Scenario;

/// How many fresh instances decide the same input.
const RUNS: usize = 500;

fn engine() -> PolicyEngine {
    PolicyEngine::new(Limits::default()).expect("engine")
}

/// The actions of `RUNS` decisions of `input`, each on a fresh instance: all the same.
fn decide_every_time(policy: &podset_host::sandbox::Policy, input: &Input) -> Vec<Action> {
    let first = policy.decide(input).expect("decides").actions;
    for run in 1..RUNS {
        let again = policy.decide(input).expect("decides").actions;
        assert_eq!(again, first, "decision {run} of {RUNS} differs from the first");
    }
    let Actions::Reconcile(actions) = first else { panic!("an any-kind policy answers in its world") };
    actions
}

#[test]
fn the_typescript_memcached_imports_only_the_contract_and_decides_the_same_500_times() {
    let policy = engine().load(&common::read_policy("memcached-ts.wasm")).expect("the TypeScript Memcached loads");
    assert_eq!(policy.info().name, "guest-memcached-ts");
    let v = podset_host::contract::contract_version();
    for import in policy.imports() {
        assert!([format!("podset:policy/log@{v}"), format!("podset:policy/types@{v}")].contains(import), "{import}");
    }
    let scenario = Scenario::read(&common::workspace().join("guest-memcached/scenarios/status-from-pods.yaml"))
        .expect("the Rust twin's scenario");
    let input = scenario.input(&policy).expect("its input");
    let actions = decide_every_time(&policy, &input);
    assert!(actions.iter().any(|a| matches!(a, Action::Apply(_))), "{actions:?}");
}

#[test]
fn a_typescript_policy_reading_the_clock_and_randomness_reads_the_same_every_time() {
    let policy = engine().load(&common::read_policy("fixtures/ts-clock-reader.wasm")).expect("the fixture loads");
    let scenario =
        Scenario::read(&common::workspace().join("guest-memcached/scenarios/create.yaml")).expect("a scenario");
    let Input::Reconcile(mut input) = scenario.input(&policy).expect("an input") else { panic!("any-kind input") };
    let read = |input: &ReconcileInput| -> serde_json::Value {
        let actions = decide_every_time(&policy, &Input::Reconcile(input.clone()));
        let [Action::Apply(cm)] = actions.as_slice() else { panic!("one ConfigMap: {actions:?}") };
        serde_json::from_str::<serde_json::Value>(cm).expect("JSON")["data"].clone()
    };
    input.now = 1_700_000_000_123;
    let data = read(&input);
    // The clock is the input's: Date.now() and new Date() read it.
    assert_eq!(data["dateNow"], "1700000000123", "{data}");
    assert_eq!(data["newDate"], "2023-11-14T22:13:20.123Z", "{data}");
    assert_eq!(data["inputNow"], "1700000000123", "{data}");
    // Randomness is fixed in the module (QuickJS seeds it when the component is built).
    assert!(data["random"].as_str().and_then(|r| r.parse::<f64>().ok()).is_some_and(|r| (0.0..1.0).contains(&r)));
    // Another input time, another clock; the same random draw.
    input.now += 60_000;
    let later = read(&input);
    assert_eq!(later["dateNow"], "1700000060123");
    assert_eq!(later["random"], data["random"]);
}
