//! PodSets and their pods, as tests create and check them, and a test's world
//! ([`Env`]: a namespace and an operator scoped to it).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use podset_host::crd::{PodSet, PodSetSpec};

use podset_host::reconcile::translate::podset::default_template;

use crate::cluster::{client, delete_namespace, namespace};
use crate::nodes::on_simulated_node;
use crate::operator::Operator;
use crate::policies::policy_dir;
use crate::poll::eventually;

/// A PodSet of the default pod, placed on the simulated node: tests of the reconcile
/// logic create hundreds of pods and script their phases there.
pub fn podset(name: &str, replicas: i32) -> PodSet {
    let mut template = default_template();
    if let Some(spec) = template.spec.as_mut() {
        on_simulated_node(spec);
    }
    PodSet::new(name, PodSetSpec { replicas, template: Some(template), policy_ref: None })
}

/// A PodSet of the default pod as a user writes it (no template): its pods run on the
/// real node.
pub fn real_podset(name: &str, replicas: i32) -> PodSet {
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
        Self::with_args(prefix, policy, &[]).await
    }

    /// As [`Env::with_policy`], with more `podset-host run` flags.
    pub async fn with_args(prefix: &str, policy: &std::path::Path, extra: &[&str]) -> Env {
        let client = client().await;
        let ns = namespace(&client, prefix).await;
        let op = Operator::spawn_with_args(&ns, &[policy], &crate::cluster::kubeconfig_path(), extra);
        op.ready().await;
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

    /// A PodSet as a user writes it: its pods run on the real node.
    pub async fn create_real(&self, name: &str, replicas: i32) {
        self.podsets.create(&PostParams::default(), &real_podset(name, replicas)).await.expect("create PodSet");
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

/// Whether `digest` decided `obj` last (the host records it in the status).
pub fn decided_by<K: serde::Serialize>(obj: &K, digest: &str) -> bool {
    let status = serde_json::to_value(obj).ok();
    let recorded = status.as_ref().and_then(|o| o["status"][podset_host::reconcile::status::DIGEST_FIELD].as_str());
    recorded == Some(digest)
}

/// Samples PodSet `name`'s active pods every 100 ms until [`MostActive::stop`]; for
/// tests that assert a bound across a disruption (a handover, a restart).
pub struct MostActive {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<usize>,
}

impl MostActive {
    pub fn start(pods: Api<Pod>, name: &str) -> MostActive {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (s, name) = (stop.clone(), name.to_string());
        let task = tokio::spawn(async move {
            let mut most = 0;
            while !s.load(Ordering::Relaxed) {
                most = most.max(active_pods(&pods, &name).await.len());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            most
        });
        MostActive { stop, task }
    }

    /// Stops sampling; the most active pods seen at once.
    pub async fn stop(self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.expect("the sampler ran")
    }
}
