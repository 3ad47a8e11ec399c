//! Shared helpers for the integration tests.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use podset_host::crd::{PodSet, PodSetSpec};
use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where `hack/policy.sh --fixtures` put the compiled policies. The tests need the
/// real .wasm: missing files fail the test with instructions, never skip it.
pub fn policy_dir() -> PathBuf {
    let dir = std::env::var_os("PODSET_POLICY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/policy"));
    assert!(
        dir.join("podset.wasm").is_file() && dir.join("fixtures").is_dir(),
        "compiled policies not found in {}: run `make fixtures` (or `make test`)",
        dir.display()
    );
    dir
}

pub fn read_policy(name: &str) -> Vec<u8> {
    let path = policy_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
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

/// Writes a kubeconfig for `server` that authenticates with `token`.
pub fn write_kubeconfig(path: &std::path::Path, server: &str, token: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: c, cluster: {{server: '{server}', insecure-skip-tls-verify: true}}}}]\n\
         users: [{{name: u, user: {{token: '{token}'}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
    );
    std::fs::write(path, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

pub async fn client() -> Client {
    let path = kubeconfig_path();
    let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("kubeconfig is usable");
    let client = Client::try_from(config).expect("client");
    client.apiserver_version().await.unwrap_or_else(|e| {
        panic!(
            "the test control plane at {} does not answer ({e}): run `make test` or `hack/cluster.sh up`",
            path.display()
        )
    });
    client
}

/// A fresh namespace per test, so tests run in parallel without seeing each other.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let name = format!("{prefix}-{}-{:x}{}", std::process::id(), nanos, N.fetch_add(1, Ordering::Relaxed));
    let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).expect("namespace");
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
    name
}

pub async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(name, &DeleteParams::default()).await;
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(started.elapsed() < timeout, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn podset(name: &str, replicas: i32) -> PodSet {
    PodSet::new(name, PodSetSpec { replicas, template: None, policy_ref: None })
}

pub fn is_active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    matches!(phase, "Pending" | "Running") && p.metadata.deletion_timestamp.is_none()
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Names of the active pods PodSet `name` controls, sorted.
pub async fn active_pods(pods: &Api<Pod>, name: &str) -> Vec<String> {
    let lp = ListParams::default().labels(&format!("app.example.com/podset={name}"));
    let controlled = |p: &Pod| {
        p.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.kind == "PodSet" && r.name == name)
    };
    let mut names: Vec<String> = pods
        .list(&lp)
        .await
        .expect("list pods")
        .into_iter()
        .filter(|p| is_active(p) && controlled(p))
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// `podset-host run` as a user runs it, scoped to one namespace, on its own metrics port.
pub struct Operator {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Operator {
    pub async fn start(namespace: &str, policy: &std::path::Path) -> Operator {
        Self::start_with(namespace, policy, &kubeconfig_path()).await
    }

    /// As [`Operator::start`], with the identity of `kubeconfig`.
    pub async fn start_with(namespace: &str, policy: &std::path::Path, kubeconfig: &std::path::Path) -> Operator {
        Self::start_serving(namespace, &[policy], kubeconfig).await
    }

    /// Starts the operator with several default policies (one per kind) and waits
    /// until it is ready.
    pub async fn start_serving(
        namespace: &str,
        policies: &[&std::path::Path],
        kubeconfig: &std::path::Path,
    ) -> Operator {
        let op = Self::spawn_serving(namespace, policies, kubeconfig);
        let what = format!("the operator to serve /readyz (log: {})", op.log.display());
        eventually(&what, Duration::from_secs(30), || async {
            http_get(op.port, "/readyz").await.filter(|b| b.starts_with("ok"))
        })
        .await;
        op
    }

    /// Starts the operator without waiting for it to be ready.
    pub fn spawn(namespace: &str, policy: &std::path::Path, kubeconfig: &std::path::Path) -> Operator {
        Self::spawn_serving(namespace, &[policy], kubeconfig)
    }

    pub fn spawn_serving(namespace: &str, policies: &[&std::path::Path], kubeconfig: &std::path::Path) -> Operator {
        let port = free_port();
        let log_dir = std::env::temp_dir().join("podset-host-operator-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let log = log_dir.join(format!("{namespace}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_podset-host"))
            .args(["run", "--namespace", namespace, "--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(policies.iter().flat_map(|p| [std::ffi::OsStr::new("--policy"), p.as_os_str()]))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,podset_host=debug")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("spawn podset-host");
        Operator { child, port, log }
    }

    pub async fn metrics(&self) -> String {
        http_get(self.port, "/metrics").await.unwrap_or_else(|| panic!("no /metrics (log: {})", self.log.display()))
    }

    /// Sum of every sample of `metric` (all label sets) whose labels contain `filter`.
    pub async fn sum(&self, metric: &str, filter: &str) -> f64 {
        sum_metric(&self.metrics().await, metric, filter)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited
    /// cleanly within `timeout`.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let started = Instant::now();
        while started.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sum_metric(text: &str, metric: &str, filter: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(metric) && l.contains(filter))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A minimal HTTP/1.0 GET on loopback; `None` when nothing answers.
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).await.ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
}

/// A test's world: its own namespace and an operator scoped to it.
pub struct Env {
    pub client: Client,
    pub ns: String,
    pub podsets: Api<PodSet>,
    pub pods: Api<Pod>,
    pub op: Operator,
}

/// How long a PodSet may take to converge in a test.
pub const CONVERGE: Duration = Duration::from_secs(60);

impl Env {
    /// An operator with the default policy, `target/policy/podset.wasm`.
    pub async fn new(prefix: &str) -> Env {
        Self::with_policy(prefix, &policy_dir().join("podset.wasm")).await
    }

    pub async fn with_policy(prefix: &str, policy: &std::path::Path) -> Env {
        let client = client().await;
        let ns = namespace(&client, prefix).await;
        let op = Operator::start(&ns, policy).await;
        Env {
            podsets: Api::namespaced(client.clone(), &ns),
            pods: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            op,
        }
    }

    pub async fn create(&self, name: &str, replicas: i32) {
        self.create_with(name, replicas, None).await
    }

    /// A PodSet decided by ReconcilePolicy `policy` (or the default policy).
    pub async fn create_with(&self, name: &str, replicas: i32, policy: Option<&str>) {
        let mut ps = podset(name, replicas);
        ps.spec.policy_ref = policy.map(|p| podset_host::crd::PolicyRef { name: p.into() });
        self.podsets.create(&PostParams::default(), &ps).await.expect("create PodSet");
    }

    pub async fn scale(&self, name: &str, replicas: i32) {
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        self.podsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
    }

    /// Waits until PodSet `name` has exactly `n` active pods, all ready, its status says
    /// so, and (when given) the policy with `digest` decided it; returns the pod names.
    pub async fn converged_by(&self, name: &str, n: usize, digest: Option<&str>) -> Vec<String> {
        let by = digest.map(|d| format!(" decided by {d}")).unwrap_or_default();
        let what = format!("{name} to converge on {n} ready pods{by} (operator log: {})", self.op.log.display());
        eventually(&what, CONVERGE, || async {
            let names = active_pods(&self.pods, name).await;
            let ps = self.podsets.get(name).await.ok()?;
            let st = ps.status.clone()?;
            let decided = digest.is_none_or(|d| decided_by(&ps, d));
            (names.len() == n && st.pod_names == names && st.available_replicas == n as i32 && decided).then_some(names)
        })
        .await
    }

    pub async fn converged(&self, name: &str, n: usize) -> Vec<String> {
        self.converged_by(name, n, None).await
    }

    pub async fn cleanup(self) {
        delete_namespace(&self.client, &self.ns).await;
    }
}

/// `Some` once `count` PodSets have `ready` available pods and were decided by `digest`.
pub async fn all_decided_by(podsets: &Api<PodSet>, count: usize, digest: &str, ready: i32) -> Option<()> {
    let all = podsets.list(&ListParams::default()).await.ok()?;
    let done = all
        .items
        .iter()
        .filter(|p| p.status.as_ref().is_some_and(|s| s.available_replicas == ready) && decided_by(*p, digest));
    (done.count() == count).then_some(())
}

/// Whether `digest` decided `obj` last (the host's annotation says so).
pub fn decided_by<K: kube::Resource + ?Sized>(obj: &K, digest: &str) -> bool {
    obj.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(podset_host::reconcile::execute::DIGEST_ANNOTATION))
        .map(String::as_str)
        == Some(digest)
}

/// A kubeconfig for the shipped ServiceAccount (manifests/rbac.yaml applied for real,
/// a TokenRequest as the kubelet would mount it), written into `dir`.
pub async fn service_account_kubeconfig(client: &Client, dir: &std::path::Path) -> PathBuf {
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
    let admin = Kubeconfig::read_from(kubeconfig_path()).expect("kubeconfig");
    let server = admin.clusters[0].cluster.as_ref().and_then(|c| c.server.clone()).expect("server");
    let path = dir.join("operator.kubeconfig");
    write_kubeconfig(&path, &server, token.trim());
    path
}

/// Publishes `module` as ConfigMap `cm` (key `module.wasm`) in `ns` and points
/// ReconcilePolicy `rp` at it, selecting the objects `selector` matches (creating or
/// updating both).
pub async fn publish_policy(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;
    use podset_host::crd::{ConfigMapKeyRef, ReconcilePolicy, ReconcilePolicySpec};
    let map = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(cm.into()), ..Default::default() },
        binary_data: Some(std::collections::BTreeMap::from([("module.wasm".to_string(), ByteString(module.to_vec()))])),
        ..Default::default()
    };
    let pp = PatchParams::apply("podset-tests").force();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    cms.patch(cm, &pp, &Patch::Apply(&map)).await.expect("apply ConfigMap");
    let mut policy = ReconcilePolicy::new(
        rp,
        ReconcilePolicySpec {
            config_map_ref: ConfigMapKeyRef { name: cm.into(), key: "module.wasm".into() },
            sha256: podset_host::sandbox::Digest::of(module).to_string(),
            selector,
        },
    );
    policy.metadata.namespace = Some(ns.into());
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    rps.patch(rp, &pp, &Patch::Apply(&policy)).await.expect("apply ReconcilePolicy");
}
