//! The Helm chart (charts/podset-host/), with helm itself (built from the Go module
//! proxy by hack/go-tool.sh): it lints, it renders what the kustomize manifests
//! (`make deploy`) apply, object for object, and the API server accepts what it renders
//! (a server-side dry run). Installed, upgraded and uninstalled for real in deploy.rs,
//! after the image that test builds.

use podset_test_support as common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{cluster_dir, kubeconfig_path, workspace};
use serde::Deserialize;
use serde_json::Value;

/// `helm ARGS` against the test cluster: (success, stdout, stderr).
pub fn helm(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(common::go_tools::go_tool("helm", "PODSET_HELM"))
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        // helm's own state (repositories, cache) out of the user's home.
        .env("HELM_CACHE_HOME", cluster_dir().join("helm/cache"))
        .env("HELM_CONFIG_HOME", cluster_dir().join("helm/config"))
        .env("HELM_DATA_HOME", cluster_dir().join("helm/data"))
        .current_dir(workspace())
        .output()
        .expect("helm runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The objects of a multi-document YAML stream, by (kind, namespace, name).
fn objects(yaml: &str) -> BTreeMap<(String, String, String), Value> {
    let mut out = BTreeMap::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v = Value::deserialize(doc).expect("a YAML document");
        if v.is_null() {
            continue;
        }
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        out.insert((s("/kind"), s("/metadata/namespace"), s("/metadata/name")), v);
    }
    out
}

/// What the two may differ in: labels and annotations (Helm's, and the CRDs' keep),
/// and the selector labels (the chart's also name the release).
fn comparable(mut v: Value) -> Value {
    for p in ["/metadata", "/spec/template/metadata"] {
        if let Some(Value::Object(m)) = v.pointer_mut(p) {
            m.remove("labels");
            m.remove("annotations");
        }
    }
    if let Some(Value::Object(spec)) = v.pointer_mut("/spec")
        && spec.get("selector").is_some_and(|s| s.get("matchLabels").is_some())
    {
        spec.remove("selector");
    }
    v
}

/// The chart rendered as release `podset-host` in `podset-system` with `extra` values.
fn render(extra: &[&str]) -> String {
    let mut args =
        vec!["template", "podset-host", "charts/podset-host", "-n", "podset-system", "--kube-version", "1.34.4"];
    args.extend(extra);
    let (ok, out, err) = helm(&args);
    assert!(ok, "helm template: {err}");
    out
}

#[test]
fn the_chart_lints_and_renders_what_the_manifests_apply() {
    let (ok, out, err) = helm(&["lint", "--strict", "charts/podset-host"]);
    assert!(ok, "helm lint: {out}{err}");

    // The CRDs it carries are manifests/crd/, byte for byte (files/crd is a link to it:
    // this fails if it ever becomes a stale copy).
    let root = workspace();
    for entry in std::fs::read_dir(root.join("manifests/crd")).expect("manifests/crd") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name");
        let copy = root.join("charts/podset-host/files/crd").join(name);
        assert!(
            std::fs::read(&copy).ok() == std::fs::read(&path).ok(),
            "{} differs from {}: charts/podset-host/files/crd should link to manifests/crd",
            copy.display(),
            path.display()
        );
    }

    // kustomize's manifests as `make deploy` applies them (default image, every namespace).
    let render_script = Command::new(root.join("hack/deploy.sh"))
        .arg("render")
        .env("CLUSTER_DIR", cluster_dir())
        .env_remove("IMAGE")
        .env_remove("IMG")
        .env_remove("REGISTRY_AUTH")
        .env_remove("WATCH_NAMESPACE")
        .output()
        .expect("hack/deploy.sh runs");
    assert!(
        render_script.status.success(),
        "hack/deploy.sh render: {}",
        String::from_utf8_lossy(&render_script.stderr)
    );
    let kustomized = objects(&String::from_utf8_lossy(&render_script.stdout));
    let charted = objects(&render(&[]));
    let mut compared = 0;
    for (key, object) in &kustomized {
        // The policy ConfigMaps and the namespace are not the chart's: the release's
        // namespace is made by helm (--create-namespace), the modules are given to it.
        if ["ConfigMap", "Namespace"].contains(&key.0.as_str()) {
            continue;
        }
        let ours = charted.get(key).unwrap_or_else(|| panic!("the chart does not render {key:?}"));
        assert_eq!(comparable(ours.clone()), comparable(object.clone()), "{key:?} differs from manifests/");
        compared += 1;
    }
    assert!(compared >= 15, "compared {compared} objects");
    let extra: Vec<_> = charted.keys().filter(|k| !kustomized.contains_key(*k)).collect();
    let metrics = ("Service".to_string(), "podset-system".to_string(), "podset-host-metrics".to_string());
    assert_eq!(extra, [&metrics], "the chart adds only the metrics Service by default");

    // The optional parts render: a ServiceMonitor, a NetworkPolicy, trusted keys.
    let all = objects(&render(&[
        "--set",
        "serviceMonitor.enabled=true,networkPolicy.enabled=true,requireSignatures=true,crds.enabled=false",
        "--set-string",
        "trustedKeys.team\\.pub=-----BEGIN PUBLIC KEY-----",
    ]));
    let kinds: Vec<&str> = all.keys().map(|k| k.0.as_str()).collect();
    for kind in ["ServiceMonitor", "NetworkPolicy", "ConfigMap"] {
        assert!(kinds.contains(&kind), "{kind} rendered: {kinds:?}");
    }
    assert!(!kinds.contains(&"CustomResourceDefinition"), "crds.enabled=false leaves the CRDs out");
    let deployment = &all[&("Deployment".into(), "podset-system".into(), "podset-host".into())];
    let args = deployment.pointer("/spec/template/spec/containers/0/args").expect("args").to_string();
    assert!(args.contains("\"--trusted-key\",\"/trusted-keys\"") && args.contains("--require-signatures"), "{args}");
}

#[tokio::test]
async fn the_api_server_accepts_what_the_chart_renders() {
    let client = common::client().await;
    let ns = common::namespace(&client, "chart-dry-run").await;
    // The CRDs are the cluster's already; everything else as a release in `ns` would make it.
    let (ok, out, err) = helm(&[
        "template",
        "dry-run",
        "charts/podset-host",
        "-n",
        &ns,
        "--kube-version",
        "1.34.4",
        "--set",
        "crds.enabled=false,networkPolicy.enabled=true",
    ]);
    assert!(ok, "helm template: {err}");
    let manifest = std::env::temp_dir().join(format!("{ns}.yaml"));
    std::fs::write(&manifest, out).expect("write the manifest");
    let file = manifest.to_string_lossy().to_string();
    let (ok, applied) = common::kubectl(&["apply", "--server-side", "--dry-run=server", "-n", &ns, "-f", &file]);
    assert!(ok, "the API server refused the chart's objects:\n{applied}");
    assert!(applied.contains("deployment.apps/dry-run serverside-applied (server dry run)"), "{applied}");
    let _ = std::fs::remove_file(&manifest);
    common::delete_namespace(&client, &ns).await;
}
