//! `podset-host run` as a user runs it, from a test: a process with its own metrics
//! port and log file.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{kubeconfig_path, workspace};
use crate::poll::eventually;

/// The operator binary: `PODSET_HOST_BIN`, else the debug build in this workspace's
/// target dir (`CARGO_TARGET_DIR` honoured), which `cargo test` builds.
pub fn operator_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("PODSET_HOST_BIN") {
        return bin.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace().join("target"));
    target.join("debug/podset-host")
}

/// `podset-host run` as a user runs it, scoped to one namespace, on its own metrics port.
pub struct Operator {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
    /// How it was started, to start it again the same way: `--namespace NS`, or a shard's selector.
    scope: Vec<String>,
    policies: Vec<PathBuf>,
    kubeconfig: PathBuf,
    extra: Vec<String>,
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
        op.ready().await;
        op
    }

    /// Starts the operator without waiting for it to be ready.
    pub fn spawn(namespace: &str, policy: &std::path::Path, kubeconfig: &std::path::Path) -> Operator {
        Self::spawn_serving(namespace, &[policy], kubeconfig)
    }

    pub fn spawn_serving(namespace: &str, policies: &[&std::path::Path], kubeconfig: &std::path::Path) -> Operator {
        Self::spawn_with_args(namespace, policies, kubeconfig, &[])
    }

    /// As [`Operator::spawn_serving`], with more `podset-host run` flags.
    pub fn spawn_with_args(
        namespace: &str,
        policies: &[&std::path::Path],
        kubeconfig: &std::path::Path,
        extra: &[&str],
    ) -> Operator {
        Self::spawn_scoped(namespace, vec!["--namespace".into(), namespace.into()], policies, kubeconfig, extra)
    }

    /// One shard: the operator serving the namespaces whose labels match `selector`;
    /// its log is named after `name`.
    pub fn spawn_shard(
        name: &str,
        selector: &str,
        policies: &[&std::path::Path],
        kubeconfig: &std::path::Path,
        extra: &[&str],
    ) -> Operator {
        Self::spawn_scoped(name, vec!["--namespace-selector".into(), selector.into()], policies, kubeconfig, extra)
    }

    fn spawn_scoped(
        name: &str,
        scope: Vec<String>,
        policies: &[&std::path::Path],
        kubeconfig: &std::path::Path,
        extra: &[&str],
    ) -> Operator {
        let port = free_port();
        let log_dir = std::env::temp_dir().join("podset-host-operator-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        // Named by port too: several replicas may serve one namespace.
        let log = log_dir.join(format!("{name}-{port}.log"));
        let _ = std::fs::remove_file(&log);
        let policies: Vec<PathBuf> = policies.iter().map(|p| p.to_path_buf()).collect();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let child = launch(&scope, &policies, kubeconfig, &extra, port, &log);
        Operator { child, port, log, scope, policies, kubeconfig: kubeconfig.to_path_buf(), extra }
    }

    /// Starts the process again, as it was started (after [`Operator::kill`] or
    /// [`Operator::terminate`]); the log goes on in the same file.
    pub fn respawn(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = launch(&self.scope, &self.policies, &self.kubeconfig, &self.extra, self.port, &self.log);
    }

    /// Starts the process again with other extra flags (a fault-injected run, then a plain one).
    pub fn respawn_with_args(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        self.respawn();
    }

    /// Whether the process has exited, and how.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until `/readyz` answers ok.
    pub async fn ready(&self) {
        let what = format!("the operator to serve /readyz (log: {})", self.log.display());
        eventually(&what, Duration::from_secs(30), || async {
            http_get(self.port, "/readyz").await.filter(|b| b.starts_with("ok"))
        })
        .await;
    }

    /// `/readyz`'s status line and body: `(ready, body)`, or `None` when nothing answers.
    pub async fn readyz(&self) -> Option<(bool, String)> {
        http_status(self.port, "/readyz").await
    }

    pub async fn metrics(&self) -> String {
        self.try_metrics().await.unwrap_or_else(|| panic!("no /metrics (log: {})", self.log.display()))
    }

    /// `/metrics`, or `None` while nothing answers (starting, exited).
    pub async fn try_metrics(&self) -> Option<String> {
        http_get(self.port, "/metrics").await
    }

    /// Sum of every sample of `metric` (all label sets) whose labels contain `filter`.
    pub async fn sum(&self, metric: &str, filter: &str) -> f64 {
        sum_metric(&self.metrics().await, metric, filter)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident set size in KiB (`VmRSS` of /proc), 0 once it is gone.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default();
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

fn launch(
    scope: &[String],
    policies: &[PathBuf],
    kubeconfig: &std::path::Path,
    extra: &[String],
    port: u16,
    log: &std::path::Path,
) -> Child {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log file");
    Command::new(operator_binary())
        .arg("run")
        .args(scope)
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(policies.iter().flat_map(|p| [std::ffi::OsStr::new("--policy"), p.as_os_str()]))
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info,podset_host=debug")
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .expect("spawn podset-host")
}

/// The resources of an operator's writes that do not change the cluster: its Lease (a
/// standby asks for it too) and SelfSubjectAccessReviews (a POST that stores nothing:
/// every replica checks its permissions when it loads a policy).
pub const NOT_CLUSTER_WRITES: [&str; 2] = ["leases", "selfsubjectaccessreviews"];

/// The writes an operator's `/metrics` text counts that change the cluster (all but
/// [`NOT_CLUSTER_WRITES`]).
pub fn cluster_writes(metrics: &str) -> f64 {
    let sum = |filter: &str| sum_metric(metrics, "podset_api_writes_total", filter);
    sum("") - NOT_CLUSTER_WRITES.iter().map(|r| sum(&format!(r#"resource="{r}""#))).sum::<f64>()
}

pub fn sum_metric(text: &str, metric: &str, filter: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(metric) && l.contains(filter))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        // The sum of nothing is -0.0, which prints as "-0.0".
        + 0.0
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A minimal HTTP/1.0 GET on loopback: `(status is 200, body)`; `None` when nothing answers.
pub async fn http_status(port: u16, path: &str) -> Option<(bool, String)> {
    http_status_at("127.0.0.1", port, path).await
}

/// As [`http_status`], at `host` (a pod IP, say), giving up after 3 s.
pub async fn http_status_at(host: &str, port: u16, path: &str) -> Option<(bool, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let get = async {
        let mut s = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes()).await.ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        let ok = head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200");
        Some((ok, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(3), get).await.ok().flatten()
}

/// A minimal HTTP/1.0 GET on loopback; `None` when nothing answers.
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    http_status(port, path).await.filter(|(ok, _)| *ok).map(|(_, body)| body)
}

/// A GET at `host`: the body when the answer is 200.
pub async fn http_body(host: &str, port: u16, path: &str) -> Option<String> {
    http_status_at(host, port, path).await.filter(|(ok, _)| *ok).map(|(_, body)| body)
}
