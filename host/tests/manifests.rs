//! The shipped manifests are valid for a real API server (server-side dry run), and
//! the CRD's schema rejects invalid PodSets with its own message.

mod common;

use std::path::PathBuf;
use std::process::Command;

use kube::api::{Api, PostParams};
use podset_host::crd::PodSet;

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests")
}

fn kubectl(args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .expect("kubectl runs (hack/deps.sh installs it)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test]
async fn manifests_pass_a_server_side_dry_run() {
    // The deployment's namespace must exist for a dry run of the objects in it.
    let (ok, out) = kubectl(&["create", "namespace", "podset-system"]);
    assert!(ok || out.contains("AlreadyExists"), "{out}");
    for file in ["crd.yaml", "rbac.yaml", "deployment.yaml", "samples/app_v1alpha1_podset.yaml"] {
        let path = manifests().join(file).to_string_lossy().into_owned();
        let (ok, out) = kubectl(&["apply", "--server-side", "--dry-run=server", "-n", "default", "-f", &path]);
        assert!(ok, "server-side dry run of manifests/{file} failed:\n{out}");
    }
}

#[tokio::test]
async fn the_schema_rejects_invalid_podsets_with_its_message() {
    let client = common::client().await;
    let ns = common::namespace(&client, "schema").await;
    let api: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    for (replicas, bound) in [(0, "greater than or equal to 1"), (11, "less than or equal to 10")] {
        let err = api.create(&PostParams::default(), &common::podset("bad", replicas)).await.expect_err("rejected");
        match err {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert!(s.message.contains("spec.replicas") && s.message.contains(bound), "{}", s.message);
            }
            other => panic!("expected a 422 from the API server, got {other}"),
        }
    }
    api.create(&PostParams::default(), &common::podset("good", 10)).await.expect("10 is allowed");
    common::delete_namespace(&client, &ns).await;
}
