//! The test control plane: its kubeconfig, a client, namespaces, credentials.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// This repository's root (test-support's parent).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test control plane's kubeconfig (`make test` starts it and sets this). The
/// integration tests never fall back to KUBECONFIG: they must not touch a real cluster.
pub fn kubeconfig_path() -> PathBuf {
    let path = std::env::var_os("PODSET_TEST_KUBECONFIG").map(PathBuf::from).unwrap_or_else(|| {
        panic!("PODSET_TEST_KUBECONFIG is not set: run `make test`, or `CLUSTER_DIR=.cluster-test hack/cluster.sh up` and export PODSET_TEST_KUBECONFIG=.cluster-test/kubeconfig")
    });
    assert!(path.is_file(), "PODSET_TEST_KUBECONFIG={} does not exist: is the test control plane up?", path.display());
    path
}

/// Writes a kubeconfig for `server` that authenticates with `token` and trusts the
/// test cluster's CA.
pub fn write_kubeconfig(path: &std::path::Path, server: &str, token: &str) {
    write_kubeconfig_in(path, server, token, "default");
}

/// As [`write_kubeconfig`], with `namespace` as the context's (a ServiceAccount's own,
/// as in a pod).
pub fn write_kubeconfig_in(path: &std::path::Path, server: &str, token: &str, namespace: &str) {
    let ca = cluster_dir().join("certs/ca.crt");
    let ca = ca.display();
    let yaml = format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: c, cluster: {{server: '{server}', certificate-authority: '{ca}'}}}}]\n\
         users: [{{name: u, user: {{token: '{token}'}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u, namespace: '{namespace}'}}}}]\ncurrent-context: c\n"
    );
    std::fs::write(path, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

pub async fn client() -> Client {
    let path = kubeconfig_path();
    let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("kubeconfig is usable");
    let server = config.cluster_url.clone();
    let client = Client::try_from(config).expect("client");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!(
            "the test control plane at {server} (from {}) does not answer ({e}): run `make test` or `hack/cluster.sh up`",
            path.display()
        ),
        Err(_) => panic!("the test control plane at {server} (from {}) did not answer in 10 s", path.display()),
    }
}

/// The Pod Security Admission labels every test namespace carries: pods that the
/// restricted profile forbids are refused by the API server, as on a hardened cluster.
pub const RESTRICTED: [(&str, &str); 2] =
    [("pod-security.kubernetes.io/enforce", "restricted"), ("pod-security.kubernetes.io/enforce-version", "latest")];

/// `spec` (a pod spec) with the security context the operator gives its own pods, so
/// that a pod a test creates by hand is admitted in a [`RESTRICTED`] namespace.
pub fn restricted(mut spec: serde_json::Value) -> serde_json::Value {
    podset_host::reconcile::restrict::pod_spec("spec", &mut spec, Default::default())
        .expect("a pod spec the restricted profile admits");
    spec
}

/// A fresh namespace per test, so tests run in parallel without seeing each other. It
/// enforces the restricted Pod Security Standard, and is returned once its `default`
/// ServiceAccount exists: until the controller manager has made it, the ServiceAccount
/// admission plugin refuses every pod. Kubernetes' own e2e framework waits the same way,
/// up to 2 minutes: right after an API server restart (the fault suite's) the controller
/// manager's informers sat in client-go's backoff for ~70 s before they saw new namespaces.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    namespace_labelled(client, prefix, &RESTRICTED).await
}

/// [`namespace`] with other labels: none, for a namespace where the operator's own
/// checks are all that stands between a policy and its pods (most namespaces of most
/// clusters carry no Pod Security labels).
pub async fn namespace_labelled(client: &Client, prefix: &str, labels: &[(&str, &str)]) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let name = format!("{prefix}-{}-{:x}{}", std::process::id(), nanos, N.fetch_add(1, Ordering::Relaxed));
    let labels: serde_json::Map<String, serde_json::Value> =
        labels.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
    let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name, "labels": labels } }))
        .expect("namespace");
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while accounts.get_opt("default").await.ok().flatten().is_none() {
        assert!(std::time::Instant::now() < deadline, "namespace {name} got no default ServiceAccount in 120 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    name
}

pub async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(name, &DeleteParams::default()).await;
}

/// The test cluster's API server, e.g. `https://127.0.0.1:6443`.
pub fn api_server_url() -> String {
    let admin = Kubeconfig::read_from(kubeconfig_path()).expect("kubeconfig");
    admin.clusters[0].cluster.as_ref().and_then(|c| c.server.clone()).expect("server")
}

/// The state dir of the test cluster (`$CLUSTER_DIR`): the kubeconfig's directory.
pub fn cluster_dir() -> PathBuf {
    kubeconfig_path().parent().map(Path::to_path_buf).unwrap_or_default()
}

/// A value of the cluster's `env` file (what `hack/cluster.sh up` wrote), e.g. `AUDIT_LOG`.
pub fn cluster_env(key: &str) -> Option<String> {
    let env = std::fs::read_to_string(cluster_dir().join("env")).ok()?;
    env.lines().find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

/// Runs `body` in a namespace of its own, and deletes the namespace afterwards even when the
/// body panics (the panic is then re-raised).
pub async fn with_namespace<F, Fut>(prefix: &str, body: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()>,
{
    let client = client().await;
    let name = namespace(&client, prefix).await;
    let outcome = AssertUnwindSafe(body(client.clone(), name.clone())).catch_unwind().await;
    delete_namespace(&client, &name).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// `kubectl` against the test cluster: (success, stdout + stderr).
pub fn kubectl(args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .expect("kubectl runs (hack/deps.sh installs it)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// A kubeconfig for the shipped ServiceAccount (manifests/rbac.yaml applied for real,
/// a TokenRequest as the kubelet would mount it), written into `dir`.
pub async fn service_account_kubeconfig(client: &Client, dir: &std::path::Path) -> PathBuf {
    service_account_kubeconfig_at(client, dir, None).await
}

/// As [`service_account_kubeconfig`], for the API server at `server` (another instance,
/// or a proxy) instead of the test cluster's.
pub async fn service_account_kubeconfig_at(client: &Client, dir: &std::path::Path, server: Option<&str>) -> PathBuf {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let run = |args: &[&str]| {
        let out = Command::new("kubectl").args(args).env("KUBECONFIG", kubeconfig_path()).output().expect("kubectl");
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let (ok, out) = run(&["create", "namespace", "podset-system"]);
    assert!(ok || out.contains("AlreadyExists"), "{out}");
    let rbac = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/rbac.yaml");
    let (ok, out) = run(&["apply", "--server-side", "--force-conflicts", "-f", &rbac.to_string_lossy()]);
    assert!(ok, "{out}");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "podset-system");
    let request = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let issued: TokenRequest =
        sas.create_subresource("token", "podset-host", &PostParams::default(), &request).await.expect("TokenRequest");
    let token = issued.status.expect("a token was issued").token;
    let server = server.map(String::from).unwrap_or_else(api_server_url);
    let path = dir.join("operator.kubeconfig");
    write_kubeconfig_in(&path, &server, token.trim(), "podset-system");
    path
}
