//! Policies in other languages than Rust, on their real components: they import nothing
//! but the contract, and decide the same on every fresh instance, clock and randomness
//! included (issue 42: a decision is a pure function of its recorded input, whatever
//! the language).

use podset_test_support as common;

use podset_host::contract::bindings::reconciler::{Action, Input as ReconcileInput};
use podset_host::sandbox::{Actions, ArtifactCache, Input, Limits, Policy, PolicyEngine};
use podset_host::scenario::Scenario;

/// How many fresh instances decide the same input.
const RUNS: usize = 500;

/// An engine keeping compiled modules where `make check` keeps them
/// (`PODSET_COMPILED_CACHE`): a 4 MB Go component compiles in 13 s in a debug build.
fn engine() -> PolicyEngine {
    let mut engine = PolicyEngine::new(Limits::default()).expect("engine");
    if let Some(dir) = std::env::var_os("PODSET_COMPILED_CACHE") {
        engine.keep_compiled_in(ArtifactCache::open(std::path::Path::new(&dir)).expect("the compiled-module cache"));
    }
    engine
}

/// The actions of `RUNS` decisions of `input`, each on a fresh instance: all the same.
fn same_every_time(policy: &Policy, input: &Input) -> Actions {
    let first = policy.decide(input).expect("decides").actions;
    for run in 1..RUNS {
        let again = policy.decide(input).expect("decides").actions;
        assert_eq!(again, first, "decision {run} of {RUNS} differs from the first");
    }
    first
}

/// [`same_every_time`], for an any-kind policy.
fn decide_every_time(policy: &Policy, input: &Input) -> Vec<Action> {
    let Actions::Reconcile(actions) = same_every_time(policy, input) else {
        panic!("an any-kind policy answers in its world")
    };
    actions
}

/// `module`, loaded: named `name`, and importing nothing but the contract.
fn load_twin(engine: &PolicyEngine, module: &str, name: &str) -> std::sync::Arc<Policy> {
    let policy = engine.load(&common::read_policy(module)).unwrap_or_else(|e| panic!("{module} loads: {e}"));
    assert_eq!(policy.info().name, name);
    let v = podset_host::contract::contract_version();
    for import in policy.imports() {
        assert!([format!("podset:policy/log@{v}"), format!("podset:policy/types@{v}")].contains(import), "{import}");
    }
    policy
}

/// The PodSet policy in another language, on the typed world: it imports nothing but the
/// contract, and decides its Rust twin's scale-down alike on every fresh instance, and as
/// the twin does.
fn podset_twin(module: &str, name: &str) {
    let engine = engine();
    let policy = load_twin(&engine, module, name);
    let twin = engine.load(&common::read_policy("podset.wasm")).expect("the Rust twin loads");
    let scenario = Scenario::read(&common::workspace().join("guest-podset/scenarios/scale-down-ranking.yaml"))
        .expect("the Rust twin's scenario");
    let input = scenario.input(&policy).expect("its input");
    let actions = same_every_time(&policy, &input);
    assert_eq!(actions, twin.decide(&input).expect("the twin decides").actions);
    assert!(matches!(&actions, Actions::PodSet(a) if a.len() == 5), "{actions:?}");
}

/// The Memcached policy in another language: it imports nothing but the contract, and
/// decides its Rust twin's scenario alike on every fresh instance.
fn memcached_twin(module: &str, name: &str) {
    let policy = load_twin(&engine(), module, name);
    let scenario = Scenario::read(&common::workspace().join("guest-memcached/scenarios/status-from-pods.yaml"))
        .expect("the Rust twin's scenario");
    let input = scenario.input(&policy).expect("its input");
    let actions = decide_every_time(&policy, &input);
    assert!(actions.iter().any(|a| matches!(a, Action::Apply(_))), "{actions:?}");
}

/// A fixture's input (the Memcached create scenario's), and how
/// to read the ConfigMap data it applies: the same over `RUNS` fresh instances.
fn clock_reader(policy: &Policy) -> (ReconcileInput, impl Fn(&ReconcileInput) -> serde_json::Value + '_) {
    let scenario =
        Scenario::read(&common::workspace().join("guest-memcached/scenarios/create.yaml")).expect("a scenario");
    let Input::Reconcile(input) = scenario.input(policy).expect("an input") else { panic!("any-kind input") };
    let read = |input: &ReconcileInput| -> serde_json::Value {
        let actions = decide_every_time(policy, &Input::Reconcile(input.clone()));
        let [Action::Apply(cm)] = actions.as_slice() else { panic!("one ConfigMap: {actions:?}") };
        serde_json::from_str::<serde_json::Value>(cm).expect("JSON")["data"].clone()
    };
    (input, read)
}

#[test]
fn the_typescript_memcached_imports_only_the_contract_and_decides_the_same_500_times() {
    memcached_twin("memcached-ts.wasm", "guest-memcached-ts");
}

#[test]
fn the_go_memcached_imports_only_the_contract_and_decides_the_same_500_times() {
    memcached_twin("memcached-go.wasm", "guest-memcached-go");
}

#[test]
fn the_typescript_podset_imports_only_the_contract_and_decides_as_the_rust_one_500_times() {
    podset_twin("podset-ts.wasm", "guest-podset-ts");
}

#[test]
fn the_go_podset_imports_only_the_contract_and_decides_as_the_rust_one_500_times() {
    podset_twin("podset-go.wasm", "guest-podset-go");
}

#[test]
fn a_typescript_policy_reading_the_clock_and_randomness_reads_the_same_every_time() {
    let policy = engine().load(&common::read_policy("fixtures/ts-clock-reader.wasm")).expect("the fixture loads");
    let (mut input, read) = clock_reader(&policy);
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

/// The Go runtime asks WASI for clocks, random bytes and stdio, at start-up and in every
/// decision; the component's adapter answers the same in every instance.
#[test]
fn a_go_policy_reading_the_clock_randomness_map_order_and_the_scheduler_reads_the_same_every_time() {
    let policy = engine().load(&common::read_policy("fixtures/go-clock-reader.wasm")).expect("the fixture loads");
    let (mut input, read) = clock_reader(&policy);
    input.now = 1_700_000_000_123;
    let data = read(&input);
    // The input's clock is the policy's; Go's own wall clock stands at the epoch.
    assert_eq!(data["inputNow"], "2023-11-14T22:13:20.123Z", "{data}");
    assert_eq!(data["timeNow"], "1970-01-01T00:00:00Z", "{data}");
    // The collector ran (the monotonic clock moved) and map order was shuffled, the same way each time.
    assert!(data["gcs"].as_str().and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n > 0), "{data}");
    assert_ne!(data["mapOrder"], (0..32).map(|i| i.to_string()).collect::<Vec<_>>().join(","), "{data}");
    let later = {
        input.now += 60_000;
        read(&input)
    };
    assert_eq!(later["random"], data["random"]);
    assert_eq!(later["mapOrder"], data["mapOrder"]);
}

/// `time.Sleep` in a component has nothing to wait on: the runtime says so (on the log)
/// and traps; the host reports it, and the next decision is served.
#[test]
fn a_go_policy_that_sleeps_is_contained() {
    let policy = engine().load(&common::read_policy("fixtures/go-clock-reader.wasm")).expect("the fixture loads");
    let (mut input, _) = clock_reader(&policy);
    let awake = input.clone();
    input.parent.meta.name = "sleep".into();
    let error = policy.decide(&Input::Reconcile(input)).expect_err("a sleeping policy cannot decide");
    assert_eq!(error.reason(), "PolicyTrapped", "{error}");
    policy.decide(&Input::Reconcile(awake)).expect("the next decision is served");
}
