//! `policy test --schemas`, offline, as an author runs it: a decision that creates a
//! Deployment with a misspelled field, and one that creates a PodSet its CRD's CEL rule
//! refuses (the scenarios of `policy-fixtures/scenarios/`), fail with the scenario, the
//! action, the field's path and the rule named; the same decisions pass when nothing
//! checks them.

use podset_test_support as common;

/// `podset-host policy test ARGS…`, with no cluster at all.
fn policy_test(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = std::process::Command::new(common::operator_binary())
        .args(["policy", "test"])
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run podset-host policy test");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn policy_test_with_schemas_names_a_misspelled_field_and_a_broken_cel_rule() {
    let module = common::policy_dir().join("fixtures/generic-hostile.wasm");
    let scenarios = common::workspace().join("policy-fixtures/scenarios");
    let (misspelled, cel) = (scenarios.join("misspelled-field.yaml"), scenarios.join("breaks-cel-rule.yaml"));
    let crds = common::workspace().join("manifests/crd");
    let (ok, out) = policy_test(&[
        module.as_os_str(),
        misspelled.as_os_str(),
        cel.as_os_str(),
        "--schemas".as_ref(),
        crds.as_os_str(),
    ]);
    println!("{out}");
    assert!(!ok, "refused output fails the run");
    assert!(out.contains("0 passed, 2 failed"), "{out}");
    assert!(
        out.contains("FAIL ")
            && out.contains("misspelled-field.yaml")
            && out.contains("action 1 (create apps/v1 Deployment web): spec.replicass: unknown field"),
        "{out}"
    );
    assert!(
        out.contains("breaks-cel-rule.yaml")
            && out
                .contains("action 1 (create app.example.com/v1alpha1 PodSet web-copy): spec.template.spec.volumes[0]")
            && out.contains("(rule: !has(self.hostPath))"),
        "{out}"
    );
    // The built-in kinds are always checked; the CRDs only when given.
    let (ok, out) = policy_test(&[module.as_os_str(), misspelled.as_os_str(), cel.as_os_str()]);
    assert!(!ok && out.contains("1 passed, 1 failed") && out.contains("spec.replicass"), "{out}");
    let (ok, out) = policy_test(&[
        module.as_os_str(),
        misspelled.as_os_str(),
        cel.as_os_str(),
        "--schemas".as_ref(),
        "none".as_ref(),
    ]);
    assert!(ok && out.contains("2 passed, 0 failed"), "{out}");
}
