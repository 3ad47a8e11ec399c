//! The shipped manifests are valid for a real API server (server-side dry run), and
//! the CRD's schema rejects invalid PodSets with its own message.

use podset_test_support as common;

use std::path::PathBuf;

use kube::api::{Api, PostParams};
use podset_host::crd::PodSet;

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests")
}

#[tokio::test]
async fn manifests_pass_a_server_side_dry_run() {
    // The deployment's namespace must exist for a dry run of the objects in it.
    let (ok, out) = common::kubectl(&["create", "namespace", "podset-system"]);
    assert!(ok || out.contains("AlreadyExists"), "{out}");
    for file in [
        "crd/podset-host.yaml",
        "crd/memcached.yaml",
        "crd/tenant.yaml",
        "crd/cronjob.yaml",
        "rbac.yaml",
        "deployment.yaml",
        "samples/app_v1alpha1_podset.yaml",
        "samples/cache_v1alpha1_memcached.yaml",
        "samples/tenant.yaml",
        "samples/cronjob.yaml",
    ] {
        let path = manifests().join(file).to_string_lossy().into_owned();
        // --force-conflicts: the deploy test, running beside this one, may own the
        // Deployment's image (`kubectl set image`); who owns a field is not what this checks.
        let mut args = vec!["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", &path];
        if file.starts_with("samples/") {
            args.extend(["-n", "default"]);
        }
        let (ok, out) = common::kubectl(&args);
        assert!(ok, "server-side dry run of manifests/{file} failed:\n{out}");
    }

    // The whole kustomization as `make deploy` applies it to this cluster (image and
    // watched namespace set).
    let out = std::process::Command::new(common::workspace().join("hack/deploy.sh"))
        .arg("render")
        .env("KUBECONFIG", common::kubeconfig_path())
        .env("IMAGE", "registry.example/podset-host:test")
        .output()
        .expect("hack/deploy.sh render");
    let rendered = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "hack/deploy.sh render failed:\n{}", String::from_utf8_lossy(&out.stderr));
    for expected in
        ["binaryData:", "kind: Deployment", "kind: PodDisruptionBudget", "registry.example/podset-host:test"]
    {
        assert!(rendered.contains(expected), "the rendered kustomization lacks {expected}:\n{rendered}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out_file = dir.path().join("rendered.yaml");
    std::fs::write(&out_file, &rendered).expect("write rendered");
    // --force-conflicts, as above: the deploy test may own the Deployment's image.
    let rendered_file = out_file.to_string_lossy();
    let (ok, out) =
        common::kubectl(&["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", &rendered_file]);
    assert!(ok, "server-side dry run of the kustomization failed:\n{out}");
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

#[tokio::test]
async fn the_operator_works_with_the_shipped_least_privilege_rbac() {
    let client = common::client().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = common::service_account_kubeconfig(&client, dir.path()).await;

    let ns = common::namespace(&client, "rbac").await;
    let op = common::Operator::start_with(&ns, &common::policy_dir().join("podset.wasm"), &kubeconfig).await;
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    podsets.create(&PostParams::default(), &common::podset("web", 2)).await.expect("create PodSet");
    common::eventually("web to converge under the ServiceAccount", std::time::Duration::from_secs(30), || async {
        let names = common::active_pods(&pods, "web").await;
        let st = podsets.get("web").await.ok()?.status?;
        (names.len() == 2 && st.pod_names == names && st.available_replicas == 2).then_some(())
    })
    .await;
    podsets
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    common::eventually("web to scale down", std::time::Duration::from_secs(30), || async {
        (common::active_pods(&pods, "web").await.len() == 1).then_some(())
    })
    .await;
    let log = std::fs::read_to_string(&op.log).expect("operator log");
    assert!(!log.to_lowercase().contains("forbidden"), "the operator was refused something:\n{log}");
    common::delete_namespace(&client, &ns).await;
}

/// The built-in kinds' schemas `policy test` checks against are the cluster's own
/// (`podset-host reference schemas` writes them from it).
#[tokio::test]
async fn the_shipped_schemas_are_the_api_servers() {
    let client = common::client().await;
    let documents = podset_host::author::schemas::builtin_from_cluster(&client).await.expect("the cluster's documents");
    for (path, text) in documents {
        let shipped = podset_host::scenario::schemas::builtin_document(&path).expect("shipped");
        assert!(
            shipped == text,
            "host/src/scenario/builtin/{} is not the API server's {path}: run `podset-host reference schemas` against \
             the embedded cluster and commit the result",
            podset_host::author::schemas::builtin_file(&path)
        );
    }
}
