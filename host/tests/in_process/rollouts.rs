//! Which policy decides which parent while a ReconcilePolicy rolls out a new module,
//! with the real compiled policies in the registry: a shadow step decides nothing, a
//! share step takes the parents whose UIDs hash into it (and keeps them as it grows), an
//! abort gives every parent back, and a first module has nothing to fall back to for
//! the parents that name it.

use podset_test_support as common;
use podset_test_support::objects::{pods, podset, podsets};

use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use podset_host::contract::declarations::podset_kind;
use podset_host::crd::PolicyMode;
use podset_host::kubernetes::access::Resolved;
use podset_host::kubernetes::object::Object;
use podset_host::registry::{Admitted, PolicyRef, Registry, Selection, Step, share_of};
use podset_host::sandbox::{Limits, PolicyEngine};

fn admitted(engine: &PolicyEngine, module: &str) -> Arc<Admitted> {
    let policy = engine.load(&common::read_policy(module)).expect("policy");
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
    Arc::new(Admitted::new(policy, resolved))
}

/// PodSet `name` in `ns`, with UID `uid` and the label `track: canary`.
fn parent(name: &str, uid: &str) -> Object {
    naming(name, uid, None)
}

/// The same, naming the ReconcilePolicy `policy` in `spec.policyRef`.
fn naming(name: &str, uid: &str, policy: Option<&str>) -> Object {
    let mut p: DynamicObject = podset(1);
    if let Some(policy) = policy {
        p.data["spec"]["policyRef"] = serde_json::json!({ "name": policy });
    }
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.metadata.uid = Some(uid.into());
    p.metadata.labels = Some([("track".to_string(), "canary".to_string())].into());
    serde_json::from_value(serde_json::to_value(p).expect("json")).expect("an object")
}

fn decider(r: &Registry, p: &Object) -> Option<String> {
    match r.select(p, &podset_kind()) {
        Selection::Ready(a) => Some(a.policy.label().to_string()),
        _ => None,
    }
}

#[test]
fn shares_grow_by_uid_and_an_abort_gives_every_parent_back() {
    let engine = PolicyEngine::new(Limits::default()).expect("engine");
    let (stable, candidate) = (admitted(&engine, "podset.wasm"), admitted(&engine, "fixtures/canary.wasm"));
    let (stable_label, candidate_label) = (stable.policy.label().to_string(), candidate.policy.label().to_string());
    let registry = Registry::default();
    let key: PolicyRef = ObjectRef::new("rp").within("ns");
    let selector =
        serde_json::from_value(serde_json::json!({ "matchLabels": { "track": "canary" } })).expect("selector");
    registry.declare(&key, Some(&selector), PolicyMode::Enforce).expect("declared");
    registry.serve(&key, stable.clone());
    let parents: Vec<Object> = (0..400).map(|i| parent(&format!("p{i}"), &format!("uid-{i}"))).collect();

    // Shadow: the serving revision decides every parent, the candidate shadows them all.
    registry.roll_out(&key, candidate.clone(), Step::Shadow);
    for p in &parents {
        assert_eq!(decider(&registry, p).as_deref(), Some(stable_label.as_str()));
        let shadows = registry.shadows_for(p, &podset_kind());
        assert_eq!(shadows.len(), 1, "the candidate shadows {p:?}");
        assert!(Arc::ptr_eq(&shadows[0].admitted, &candidate));
    }

    // 10 %, then 50 %: about that share, by UID, and a parent once taken stays taken.
    let mut taken_before = std::collections::HashSet::new();
    for percent in [10u8, 50, 100] {
        assert!(registry.step(&key, &candidate, Step::Share(percent)));
        let taken: std::collections::HashSet<String> = parents
            .iter()
            .filter(|p| decider(&registry, p).as_deref() == Some(candidate_label.as_str()))
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect();
        let share = taken.len() * 100 / parents.len();
        assert!(share.abs_diff(usize::from(percent)) <= 6, "{percent}%: {} of {}", taken.len(), parents.len());
        assert!(taken_before.is_subset(&taken), "a growing share keeps the parents it had");
        for p in &parents {
            let in_share = share_of(p) < u32::from(percent) * 100;
            assert_eq!(in_share, taken.contains(p.metadata.uid.as_deref().unwrap_or_default()));
            assert!(registry.shadows_for(p, &podset_kind()).is_empty(), "no shadow after the shadow step");
        }
        taken_before = taken;
    }

    // Abort: everyone is back on the serving revision at once.
    assert!(registry.step(&key, &candidate, Step::Share(50)));
    let dropped = registry.drop_candidate(&key).expect("a candidate");
    assert!(Arc::ptr_eq(&dropped, &candidate));
    assert!(parents.iter().all(|p| decider(&registry, p).as_deref() == Some(stable_label.as_str())));

    // Completed: the candidate is the serving revision.
    registry.roll_out(&key, candidate.clone(), Step::Share(100));
    let replaced = registry.promote(&key, &candidate).expect("the old revision");
    assert!(Arc::ptr_eq(&replaced, &stable));
    assert!(registry.candidate(&key).is_none());
    assert!(parents.iter().all(|p| decider(&registry, p).as_deref() == Some(candidate_label.as_str())));
}

#[test]
fn a_first_module_rolls_out_against_the_default_and_serves_those_that_name_it() {
    let engine = PolicyEngine::new(Limits::default()).expect("engine");
    let (default, first) = (admitted(&engine, "podset.wasm"), admitted(&engine, "fixtures/canary.wasm"));
    let registry = Registry::default();
    registry.serve_file(std::path::Path::new("podset.wasm"), default.clone(), PolicyMode::Enforce);
    let key: PolicyRef = ObjectRef::new("rp").within("ns");
    let selector =
        serde_json::from_value(serde_json::json!({ "matchLabels": { "track": "canary" } })).expect("selector");
    registry.declare(&key, Some(&selector), PolicyMode::Enforce).expect("declared");
    registry.roll_out(&key, first.clone(), Step::Shadow);

    // Selected by label: the default decides, and the first module shadows it.
    let selected = parent("a", "uid-a");
    assert!(matches!(registry.select(&selected, &podset_kind()), Selection::Ready(a) if Arc::ptr_eq(&a, &default)));
    let shadows = registry.shadows_for(&selected, &podset_kind());
    assert!(shadows.len() == 1 && Arc::ptr_eq(&shadows[0].admitted, &first));

    // Naming it: nothing else may decide, so the first module does, and shadows nothing.
    let named = naming("b", "uid-b", Some("rp"));
    assert!(matches!(registry.select(&named, &podset_kind()), Selection::Ready(a) if Arc::ptr_eq(&a, &first)));
    assert!(registry.shadows_for(&named, &podset_kind()).is_empty());

    // In a share step, the share moves from the default to the first module.
    assert!(registry.step(&key, &first, Step::Share(100)));
    assert!(matches!(registry.select(&selected, &podset_kind()), Selection::Ready(a) if Arc::ptr_eq(&a, &first)));
}
