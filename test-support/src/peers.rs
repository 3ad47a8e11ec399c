//! The seeds' own Go operators as processes against the test cluster: operator-sdk's
//! PodSet tutorial operator, its Memcached sample and the Netperf operator, written with
//! controller-runtime
//! (hack/peers/), the peers a user would otherwise write. Built once from the Go module
//! proxy by `hack/go-tool.sh peers`; `PODSET_PEERS` names the directory of a build to use
//! instead (`make test` sets it).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::cluster::kubeconfig_path;
use crate::operator::{free_port, http_get};
use crate::poll::eventually;

/// One of the seeds' operators.
#[derive(Clone, Copy, Debug)]
pub enum Seed {
    /// The operator-sdk PodSet tutorial's operator, on our PodSet CRD.
    PodSet,
    /// The operator-sdk Go sample's Memcached operator, on our Memcached CRD.
    Memcached,
    /// The seed's Netperf operator (a throughput test's phases), on our Netperf CRD.
    Netperf,
}

impl Seed {
    pub fn binary(self) -> PathBuf {
        let dir = crate::go_tools::go_tool("peers", "PODSET_PEERS");
        dir.join(match self {
            Seed::PodSet => "podset-operator",
            Seed::Memcached => "memcached-operator",
            Seed::Netperf => "netperf-operator",
        })
    }
}

/// A seed operator watching one namespace, with its metrics and probes on ports of
/// their own and its log in a file.
pub struct GoOperator {
    child: Child,
    pub log: PathBuf,
    pub metrics_port: u16,
    probe_port: u16,
}

impl GoOperator {
    /// Starts `seed` against `namespace` with more flags (`--simulated-node`, say),
    /// without waiting for it.
    pub fn spawn(seed: Seed, namespace: &str, extra: &[&str]) -> GoOperator {
        let (metrics_port, probe_port) = (free_port(), free_port());
        let log_dir = std::env::temp_dir().join("podset-host-operator-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let log = log_dir.join(format!("{seed:?}-peer-{namespace}.log").to_lowercase());
        let out = std::fs::File::create(&log).expect("log file");
        let binary = seed.binary();
        let child = Command::new(&binary)
            .arg(format!("--kubeconfig={}", kubeconfig_path().display()))
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe_port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        GoOperator { child, log, metrics_port, probe_port }
    }

    /// Starts `seed` and waits until its manager is up (`/readyz`).
    pub async fn start(seed: Seed, namespace: &str, extra: &[&str]) -> GoOperator {
        let op = Self::spawn(seed, namespace, extra);
        let what = format!("{seed:?}'s operator to serve /readyz (log: {})", op.log.display());
        eventually(&what, Duration::from_secs(30), || async {
            http_get(op.probe_port, "/readyz").await.filter(|b| b.starts_with("ok"))
        })
        .await;
        op
    }

    /// controller-runtime's `/metrics` (its registry, with the process collector).
    pub async fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
            .await
            .unwrap_or_else(|| panic!("no /metrics (log: {})", self.log.display()))
    }

    /// The process's id (for its CPU time and memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited, and how.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for GoOperator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
