//! The operator deployed as users deploy it (`hack/deploy.sh`, what `make deploy` runs):
//! its image pushed to the cluster's registry and pulled by the real node with an
//! imagePullSecret (nothing imported by hand), two replicas under the shipped ServiceAccount
//! and RBAC, one Lease. The leader pod is deleted, forced and gracefully, and the
//! standby takes over without a PodSet ever having more pods than asked for. Then the
//! Deployment's image changes (a rollout) and its policy ConfigMap changes (a hot
//! swap in the running pods), while a probe keeps changing a PodSet and times how
//! long each change waits to be reconciled.
//!
//! Scoped to the test's namespace (WATCH_NAMESPACE), so the other tests' objects are
//! left to their own operators.

use podset_test_support as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{MostActive, active_pods, cluster_dir, eventually, http_body, kubectl, podset, workspace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use podset_host::crd::PodSet;

const SYSTEM: &str = "podset-system";
const SELECTOR: &str = "app.kubernetes.io/name=podset-host";
const METRICS_PORT: u16 = 8080;

fn deploy_script(args: &[&str], watch_namespace: &str) -> (bool, String) {
    let out = Command::new(workspace().join("hack/deploy.sh"))
        .args(args)
        .env("CLUSTER_DIR", cluster_dir())
        .env("WATCH_NAMESPACE", watch_namespace)
        .env("IMAGE_PROFILE", "debug")
        .env_remove("IMG")
        .env_remove("IMAGE")
        .env_remove("REGISTRY_AUTH")
        .output()
        .expect("hack/deploy.sh runs");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The operator's pods that are not terminating, by name, with their IPs once they have one.
async fn operator_pods(pods: &Api<Pod>) -> Vec<(String, Option<String>)> {
    let list = pods.list(&ListParams::default().labels(SELECTOR)).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.name?, p.status.and_then(|s| s.pod_ip))))
        .collect()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get("podset-host").await.ok()?.spec?.holder_identity
}

/// The pod's `/readyz` body (`ok (leader)`, `ok (standby)`), over its pod IP.
async fn readyz(ip: &str) -> Option<String> {
    http_body(ip, METRICS_PORT, "/readyz").await
}

/// Container restarts of the operator's pods, all together.
async fn restarts(pods: &Api<Pod>) -> i32 {
    let list = pods.list(&ListParams::default().labels(SELECTOR)).await.expect("pods");
    list.items
        .iter()
        .flat_map(|p| p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()))
        .map(|c| c.restart_count)
        .sum()
}

/// Writes a pod sent that change the cluster, from its `/metrics`.
async fn writes(ip: &str) -> f64 {
    common::cluster_writes(&http_body(ip, METRICS_PORT, "/metrics").await.unwrap_or_default())
}

/// Waits until two operator pods serve, one leading (holding the Lease) and one on
/// standby; returns (leader, standby) as (name, IP).
async fn leader_and_standby(pods: &Api<Pod>, leases: &Api<Lease>) -> ((String, String), (String, String)) {
    eventually("two operator pods: a leader and a standby", Duration::from_secs(120), || async {
        let holder = holder(leases).await?;
        let mut leader = None;
        let mut standby = None;
        for (name, ip) in operator_pods(pods).await {
            let ip = ip?;
            match readyz(&ip).await?.as_str() {
                "ok (leader)" if name == holder => leader = Some((name, ip)),
                "ok (standby)" => standby = Some((name, ip)),
                _ => return None,
            }
        }
        Some((leader?, standby?))
    })
    .await
}

#[tokio::test]
async fn deployed_the_standby_pod_takes_over_when_the_leader_pod_is_deleted() {
    let client = common::client().await;
    common::require_real_node(&client).await;
    common::require_sim_node(&client).await;
    let ns = common::namespace(&client, "deployed").await;
    let started = Instant::now();
    let (ok, out) = deploy_script(&["deploy"], &ns);
    assert!(ok, "hack/deploy.sh deploy failed:\n{out}");
    println!("deployed in {:?}", started.elapsed());
    // The operator's own pods run where the restricted Pod Security profile is enforced.
    let system = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()).get(SYSTEM).await.expect(SYSTEM);
    let enforced = system.metadata.labels.unwrap_or_default().get("pod-security.kubernetes.io/enforce").cloned();
    assert_eq!(enforced.as_deref(), Some("restricted"), "{SYSTEM} enforces the restricted profile");

    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM);
    let ((leader, leader_ip), (standby, standby_ip)) = leader_and_standby(&pods, &leases).await;
    pulled_from_the_registry(&pods, &leader).await;
    unreachable_image_policy(&client, &ns, &pods).await;

    // The deployed operator serves the namespace; no local operator runs for it.
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let ns_pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let converged = |replicas: i32| {
        let (podsets, ns_pods) = (podsets.clone(), ns_pods.clone());
        async move {
            eventually(
                &format!("the deployed operator to converge web on {replicas}"),
                Duration::from_secs(60),
                || async {
                    (active_pods(&ns_pods, "web").await.len() == replicas as usize
                        && podsets.get("web").await.ok()?.status?.available_replicas == replicas)
                        .then_some(())
                },
            )
            .await
        }
    };
    let scale = |replicas: i32| {
        let podsets = podsets.clone();
        async move {
            let patch = serde_json::json!({ "spec": { "replicas": replicas } });
            podsets.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
        }
    };
    podsets.create(&PostParams::default(), &podset("web", 3)).await.expect("create PodSet");
    converged(3).await;
    assert!(writes(&leader_ip).await >= 3.0, "the leader {leader} created the pods");
    assert_eq!(writes(&standby_ip).await, 0.0, "the standby {standby} changed nothing");

    // Sample the active pods through both handovers.
    let sampler = MostActive::start(ns_pods.clone(), "web");

    let mut handovers = Vec::new();
    let mut replicas = 3;
    for (how, args) in [("forced", vec!["--grace-period=0", "--force"]), ("graceful", vec![])] {
        let (old, _) = leader_and_standby(&pods, &leases).await;
        let t = Instant::now();
        let mut delete = vec!["delete", "pod", "-n", SYSTEM, &old.0, "--wait=false"];
        delete.extend(args.iter().copied());
        let (ok, out) = kubectl(&delete);
        assert!(ok, "kubectl delete pod {}: {out}", old.0);
        let new_holder = eventually("another pod to take the Lease", Duration::from_secs(60), || async {
            holder(&leases).await.filter(|h| *h != old.0)
        })
        .await;
        let took = t.elapsed();
        replicas += 1;
        scale(replicas).await;
        converged(replicas).await;
        handovers.push(format!("{how} {took:?} (to {new_holder}, converged {:?} after the delete)", t.elapsed()));
    }
    // The replacement pod came up as a standby and changed nothing.
    let (_, (standby, standby_ip)) = leader_and_standby(&pods, &leases).await;
    assert_eq!(writes(&standby_ip).await, 0.0, "the new standby {standby} changed nothing");
    let most = sampler.stop().await;
    assert!(most <= replicas as usize, "never more active pods than asked for: saw {most}");

    let memory = pod_memory(&pods, &leader_now(&leases).await).await;
    println!(
        "leader handover on pod deletion: {}; at most {most} active pods; the leader pod's memory: {memory}",
        handovers.join(", ")
    );

    rollout_and_policy_change(&client, &ns).await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), SYSTEM);
    let deployed = deployments.get("podset-host").await.expect("the Deployment");
    let image = deployed.spec.and_then(|s| s.template.spec).and_then(|s| s.containers[0].image.clone());

    // Not `undeploy`: it deletes the CRDs, under every other test. The ConfigMap goes
    // too: this test changed it, and a later server-side apply would conflict.
    let (ok, out) = kubectl(&["delete", "deployment,poddisruptionbudget", "-n", SYSTEM, "podset-host", "--wait=true"]);
    assert!(ok, "removing the Deployment: {out}");
    let (ok, out) = kubectl(&["delete", "configmap", "-n", SYSTEM, "podset-policy-podset"]);
    assert!(ok, "removing the policy ConfigMap: {out}");
    common::delete_namespace(&client, &ns).await;

    helm_install_upgrade_uninstall(&client, &image.expect("the deployed image")).await;
}

/// The chart as a user installs it, with the image the test deployed: 2 replicas serve
/// the three default policies given as ConfigMaps; an upgrade to 3 replicas while a
/// PodSet scales makes no duplicate pod (the audit log); an uninstall removes what
/// the install made.
async fn helm_install_upgrade_uninstall(client: &kube::Client, image: &str) {
    use crate::chart::helm;
    let release_ns = common::namespace(client, "helm-release").await;
    let served = common::namespace(client, "helm-served").await;
    // The registry's pull Secret, copied from the operator's namespace.
    let (ok, secret) = kubectl(&["get", "secret", "podset-host-registry", "-n", SYSTEM, "-o", "json"]);
    assert!(ok, "{secret}");
    let mut secret: serde_json::Value = serde_json::from_str(&secret).expect("JSON");
    secret["metadata"] = serde_json::json!({ "name": "registry", "namespace": release_ns });
    let secret_file = std::env::temp_dir().join(format!("{release_ns}-secret.json"));
    std::fs::write(&secret_file, secret.to_string()).expect("write");
    let (ok, out) = kubectl(&["apply", "-f", &secret_file.to_string_lossy()]);
    assert!(ok, "{out}");
    let dir = common::policy_dir();
    for name in ["podset", "memcached", "netperf"] {
        let from = format!("{name}.wasm={}", dir.join(format!("{name}.wasm")).display());
        let (ok, out) =
            kubectl(&["create", "configmap", &format!("policy-{name}"), "-n", &release_ns, "--from-file", &from]);
        assert!(ok, "{out}");
    }
    // REGISTRY:PORT/podset-host:TAG, perhaps @sha256:...
    let (named, digest) = image.split_once('@').unwrap_or((image, ""));
    let (repository, tag) = named.rsplit_once(':').filter(|(_, t)| !t.contains('/')).unwrap_or((named, ""));
    let values = format!(
        "image.repository={repository},image.tag={tag},image.digest={digest},imagePullSecrets={{registry}},\
         watchNamespace={served},\
         crds.enabled=false,policies.reach=null,\
         policies.configMaps[0].name=policy-podset,policies.configMaps[0].key=podset.wasm,\
         policies.configMaps[1].name=policy-memcached,policies.configMaps[1].key=memcached.wasm,\
         policies.configMaps[2].name=policy-netperf,policies.configMaps[2].key=netperf.wasm"
    );
    let release = "podset-chart";
    let t = Instant::now();
    let install =
        ["install", release, "charts/podset-host", "-n", &release_ns, "--set", &values, "--wait", "--timeout", "180s"];
    let (ok, out, err) = helm(&install);
    assert!(ok, "helm install: {out}{err}");
    println!("helm install: 2 replicas ready in {:?}", t.elapsed());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &release_ns);
    let selector = format!("app.kubernetes.io/instance={release}");
    let ips = || async {
        let list = pods.list(&ListParams::default().labels(&selector)).await.expect("list the operator's pods");
        list.items.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect::<Vec<String>>()
    };
    let ready = ips().await;
    assert_eq!(ready.len(), 2, "two replicas: {ready:?}");
    for ip in &ready {
        let metrics = http_body(ip, METRICS_PORT, "/metrics").await.unwrap_or_default();
        let loads = common::sum_metric(&metrics, "podset_policy_loads_total", "result=\"ok\"");
        assert_eq!(loads, 3.0, "{ip} serves the three policies");
    }

    // A PodSet it serves, then an upgrade to 3 replicas while the PodSet scales.
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &served);
    let served_pods: Api<Pod> = Api::namespaced(client.clone(), &served);
    let audit = common::audit::AuditLog::open();
    let mark = audit.mark();
    podsets.create(&PostParams::default(), &podset("charted", 2)).await.expect("create PodSet");
    let converged = |n: usize| {
        let (podsets, served_pods) = (podsets.clone(), served_pods.clone());
        async move {
            eventually(&format!("charted on {n}"), Duration::from_secs(90), || async {
                let available = podsets.get("charted").await.ok()?.status?.available_replicas;
                (active_pods(&served_pods, "charted").await.len() == n && available == n as i32).then_some(())
            })
            .await
        }
    };
    converged(2).await;
    let upgrade = ["upgrade", release, "charts/podset-host", "-n", &release_ns, "--reuse-values"]
        .into_iter()
        .chain(["--set", "replicaCount=3", "--wait", "--timeout", "180s"])
        .map(String::from)
        .collect::<Vec<String>>();
    let upgrading = tokio::task::spawn_blocking(move || helm(&upgrade.iter().map(String::as_str).collect::<Vec<_>>()));
    let patch = serde_json::json!({ "spec": { "replicas": 4 } });
    podsets.patch("charted", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
    let (ok, out, err) = upgrading.await.expect("helm ran");
    assert!(ok, "helm upgrade: {out}{err}");
    converged(4).await;
    assert_eq!(ips().await.len(), 3, "three replicas after the upgrade");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let creates = common::audit::operator_pod_writes(&audit.since(&mark), &served, "create");
    assert_eq!(creates, 4, "4 pods asked for, 4 created across the upgrade: no duplicate child");

    // Uninstalled: nothing it made is left (the PodSet's pods stay, owned by the PodSet).
    let (ok, out, err) = helm(&["uninstall", release, "-n", &release_ns, "--wait", "--timeout", "120s"]);
    assert!(ok, "helm uninstall: {out}{err}");
    let (ok, left) = kubectl(&[
        "get",
        "deployment,serviceaccount,role,rolebinding,service,poddisruptionbudget",
        "-n",
        &release_ns,
        "-l",
        &selector,
        "-o",
        "name",
    ]);
    assert!(ok && left.trim().is_empty(), "left in {release_ns}: {left}");
    let (ok, left) = kubectl(&["get", "clusterrole,clusterrolebinding", "-l", &selector, "-o", "name"]);
    assert!(ok && left.trim().is_empty(), "left cluster-wide: {left}");
    let _ = std::fs::remove_file(&secret_file);
    common::delete_namespace(client, &served).await;
    common::delete_namespace(client, &release_ns).await;
}

async fn leader_now(leases: &Api<Lease>) -> String {
    holder(leases).await.expect("a Lease holder")
}

/// The pod's resident memory as its cgroup counts it (memory.stat `total_rss`), found
/// by the pod's UID under the node's cgroup root.
async fn pod_memory(pods: &Api<Pod>, name: &str) -> String {
    let Some(uid) = pods.get(name).await.ok().and_then(|p| p.metadata.uid) else {
        return format!("{name} is gone");
    };
    let want = format!("pod{uid}");
    let mut dirs = vec![std::path::PathBuf::from("/sys/fs/cgroup/memory")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            if entry.file_name().to_string_lossy() == want {
                let stat = std::fs::read_to_string(entry.path().join("memory.stat")).unwrap_or_default();
                let rss = stat.lines().find_map(|l| l.strip_prefix("total_rss ")).and_then(|v| v.parse::<u64>().ok());
                return rss.map(|b| format!("{:.1} MiB RSS", b as f64 / 1048576.0)).unwrap_or_else(|| "unknown".into());
            }
            dirs.push(entry.path());
        }
    }
    format!("no cgroup for {want}")
}

/// The Deployment's `LEASE_DURATION`: no PodSet may wait longer than that to be
/// reconciled while the operator rolls.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// A PodSet changed again and again (1 <-> 2 replicas on the simulated node), each
/// change timed until its status shows it done, until stopped.
struct Probe {
    stop: tokio_util::sync::CancellationToken,
    /// Each change: when it was made (since the probe started) and how long it waited.
    task: tokio::task::JoinHandle<Vec<(Duration, Duration)>>,
}

impl Probe {
    async fn start(client: &kube::Client, ns: &str, name: &'static str) -> Probe {
        let podsets: Api<PodSet> = Api::namespaced(client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        podsets.create(&PostParams::default(), &podset(name, 1)).await.expect("create the probe PodSet");
        let stop = tokio_util::sync::CancellationToken::new();
        let until = stop.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut replicas = 1;
            while !until.is_cancelled() {
                replicas = 3 - replicas;
                let t = Instant::now();
                let patch = serde_json::json!({ "spec": { "replicas": replicas } });
                podsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale the probe");
                eventually("the probe PodSet to be reconciled", Duration::from_secs(120), || async {
                    let st = podsets.get(name).await.ok()?.status?;
                    (st.available_replicas == replicas && active_pods(&pods, name).await.len() == replicas as usize)
                        .then_some(())
                })
                .await;
                waits.push((t - started, t.elapsed()));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            waits
        });
        Probe { stop, task }
    }

    /// The longest wait, and how many changes were timed; prints the waits.
    async fn stop(self) -> (Duration, usize) {
        self.stop.cancel();
        let waits = self.task.await.expect("the probe ran");
        let timeline: Vec<String> = waits.iter().map(|(at, w)| format!("{:.1}s: {w:.1?}", at.as_secs_f64())).collect();
        println!("probe (changed at: waited): {}", timeline.join(", "));
        (waits.iter().map(|(_, w)| *w).max().unwrap_or_default(), waits.len())
    }
}

/// The operator's pod runs the image of the cluster's registry, which the node pulled
/// with the imagePullSecret: no image was imported into containerd by hand.
async fn pulled_from_the_registry(pods: &Api<Pod>, name: &str) {
    let registry = common::cluster_env("REGISTRY").expect("the cluster's env names its REGISTRY");
    let pod = pods.get(name).await.expect("the leader pod");
    let spec = pod.spec.expect("a pod spec");
    let image = spec.containers[0].image.clone().unwrap_or_default();
    assert!(image.starts_with(&format!("{registry}/podset-host:")), "the operator runs {image}, not the registry's");
    let secrets: Vec<String> = spec.image_pull_secrets.unwrap_or_default().into_iter().map(|s| s.name).collect();
    assert_eq!(secrets, ["podset-host-registry"], "the pod pulls with the registry's Secret");
    let (ok, events) =
        kubectl(&["get", "events", "-n", SYSTEM, "--field-selector", &format!("involvedObject.name={name}")]);
    assert!(
        ok && (events.contains("Pulled") || events.contains("already present")),
        "no pull event for {name}:\n{events}"
    );
    let sock = common::cluster_env("CONTAINERD_SOCK").expect("the cluster's env names its CONTAINERD_SOCK");
    let out = Command::new("ctr").args(["--address", &sock, "--namespace", "k8s.io", "images", "ls", "-q"]).output();
    let listed = String::from_utf8_lossy(&out.expect("ctr runs").stdout).into_owned();
    assert!(!listed.contains("docker.io/library/podset-host"), "an operator image was imported by hand:\n{listed}");
    println!("the operator runs {image}, pulled from the cluster's registry");
}

/// A ReconcilePolicy whose registry the pods cannot reach (the cluster's registry listens
/// on the host's loopback): reported as unreachable, and no operator pod restarts. A
/// pod's image has no CA bundle of a system to lean on but the one it ships; before it
/// did, making the registry client panicked in this very case.
async fn unreachable_image_policy(client: &kube::Client, ns: &str, pods: &Api<Pod>) {
    let registry = common::cluster_env("REGISTRY").expect("the cluster's env names its REGISTRY");
    let module = std::fs::read(common::policy_dir().join("podset.wasm")).expect("podset.wasm");
    let rp = serde_json::json!({
        "apiVersion": "podset.dev/v1alpha1", "kind": "ReconcilePolicy", "metadata": {"name": "from-registry"},
        "spec": {"image": format!("{registry}/policies/podset:v1"), "sha256": podset_host::sandbox::Digest::of(&module).to_string(),
                 "selector": {"matchLabels": {"nobody": "selects-this"}}},
    });
    let rps: Api<podset_host::crd::ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    rps.patch("from-registry", &PatchParams::apply("deploy-test"), &Patch::Apply(&rp)).await.expect("ReconcilePolicy");
    let reason = eventually("the deployed operator to report the registry", Duration::from_secs(60), || async {
        let rp = rps.get("from-registry").await.ok()?;
        rp.status?.conditions.into_iter().find(|c| c.type_ == "Failed").map(|c| c.reason)
    })
    .await;
    assert_eq!(reason, "RegistryUnreachable");
    let restarts = restarts(pods).await;
    assert_eq!(restarts, 0, "no operator pod restarted");
    rps.delete("from-registry", &Default::default()).await.expect("delete");
}

/// Rolls the Deployment to another image, then changes its policy ConfigMap, with a
/// [`Probe`] running through both.
async fn rollout_and_policy_change(client: &kube::Client, ns: &str) {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    let names = || async {
        operator_pods(&pods).await.into_iter().map(|(n, _)| n).collect::<std::collections::BTreeSet<String>>()
    };
    let before = names().await;

    // The same image under a new tag in the registry: to Kubernetes, a new image to roll to.
    let env = |k: &str| common::cluster_env(k).unwrap_or_else(|| panic!("the cluster's env names its {k}"));
    let registry = env("REGISTRY");
    let certs = tempfile::tempdir().expect("tempdir");
    std::fs::copy(env("CA_CERT"), certs.path().join("ca.crt")).expect("the cluster CA");
    let (from, to) = (format!("{registry}/podset-host:0.1.0"), format!("{registry}/podset-host:0.1.0-rollout"));
    let out = Command::new("skopeo")
        .args(["--insecure-policy", "copy", "-q", "--authfile", &env("REGISTRY_AUTH")])
        .args(["--src-cert-dir", &certs.path().to_string_lossy(), "--dest-cert-dir", &certs.path().to_string_lossy()])
        .args([format!("docker://{from}"), format!("docker://{to}")])
        .output()
        .expect("skopeo runs");
    assert!(out.status.success(), "skopeo copy {from} {to}: {}", String::from_utf8_lossy(&out.stderr));

    let probe = Probe::start(client, ns, "probe-rollout").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = Instant::now();
    let (ok, out) = kubectl(&["set", "image", "-n", SYSTEM, "deployment/podset-host", &format!("podset-host={to}")]);
    assert!(ok, "kubectl set image: {out}");
    // Off the runtime's threads: the probe must go on while kubectl waits.
    let status = ["rollout", "status", "-n", SYSTEM, "deployment/podset-host", "--timeout=180s"];
    let (ok, out) = tokio::task::spawn_blocking(move || kubectl(&status)).await.expect("kubectl ran");
    assert!(ok, "the rollout did not complete: {out}");
    let rolled = t.elapsed();
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM);
    let ((leader, _), _) = leader_and_standby(&pods, &leases).await;
    assert!(!before.contains(&leader), "a new pod leads after the rollout ({leader}; before: {before:?})");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (worst, changes) = probe.stop().await;
    println!("image rollout: {rolled:?}; {changes} probe changes, the longest waited {worst:?}");
    assert!(worst < LEASE_DURATION, "a PodSet waited {worst:?} to be reconciled during the rollout");

    // The policy ConfigMap: the running pods swap the module in (the kubelet refreshes
    // the volume, the file watch loads it); no pod restarts.
    let serving = names().await;
    let canary = common::policy_dir().join("fixtures/canary.wasm");
    let canary = std::fs::read(&canary).expect("the canary policy (make test builds the fixtures)");
    let digest = podset_host::sandbox::Digest::of(&canary).to_string();
    let probe = Probe::start(client, ns, "probe-policy").await;
    let t = Instant::now();
    let cm = ConfigMap {
        binary_data: Some([("podset.wasm".to_string(), k8s_openapi::ByteString(canary))].into()),
        ..Default::default()
    };
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    configmaps
        .patch("podset-policy-podset", &PatchParams::default(), &Patch::Merge(&cm))
        .await
        .expect("patch the ConfigMap");
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), ns);
    eventually("the PodSets to be decided by the new policy", Duration::from_secs(120), || async {
        let ps = podsets.get("web").await.ok()?;
        common::decided_by(&ps, &digest).then_some(())
    })
    .await;
    let swapped = t.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (worst, changes) = probe.stop().await;
    let after = names().await;
    let deployment: Deployment = Api::namespaced(client.clone(), SYSTEM).get("podset-host").await.expect("Deployment");
    let restarts = restarts(&pods).await;
    println!(
        "policy ConfigMap change: served by the new module {swapped:?} after the patch; {changes} probe changes, the longest waited {worst:?}"
    );
    assert_eq!(after, serving, "the same pods serve: a policy change is a hot swap, not a rollout");
    assert_eq!(restarts, 0, "no operator container restarted");
    assert!(deployment.status.and_then(|s| s.ready_replicas) == Some(2), "both replicas ready");
    assert!(worst < LEASE_DURATION, "a PodSet waited {worst:?} to be reconciled during the policy change");
}
