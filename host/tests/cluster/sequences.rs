//! Acto-style sequences (SOSP '23): a seeded random run of spec changes to PodSets, a
//! Memcached and a Netperf, with policy swaps, deletions and recreations under the same
//! name in between, applied while the operator reconciles. After each sequence, the
//! state of every parent must equal what its last spec gives a fresh parent.
//!
//! `make test` runs the fixed seeds below. `FAULT_SEED=N` replays one seed (the same
//! steps; the operator's interleaving with them is the cluster's), `SEQUENCE_SEEDS=N`
//! runs N new ones (`make fuzz-cluster`). A failure names its seed and its steps.

use podset_test_support as common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use common::{Env, eventually, memcached, memcacheds, policy_dir};
use guest_netperf::types::{Netperf, NetperfSpec, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use podset_host::crd::{PodSet, PodSetSpec, PolicyRef};
use podset_host::sandbox::Digest;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::json;

/// The seeds every `make test` runs: three sequences of [`STEPS`] steps, ~1 min each.
const FIXED_SEEDS: [u64; 3] = [0x5eed_0001, 0x5eed_0002, 0x5eed_0003];
const STEPS: usize = 12;
const PODSETS: [&str; 2] = ["a", "b"];
/// The Memcached of the sequence; the fresh one's name is no substring of it, so that
/// their Deployments compare with the name replaced.
const MEMCACHED: &str = "mc-seq";
const FRESH_MEMCACHED: &str = "mc-fresh";
/// The Netperf of the sequence (a real measurement on the real node), and the fresh one.
const NETPERF: &str = "np-seq";
const FRESH_NETPERF: &str = "np-fresh";
/// ReconcilePolicies a PodSet may name: the default module as published by a team, and a
/// build of it with another digest (a custom section), so that a swap changes who decides.
const POLICIES: [&str; 2] = ["alpha", "beta"];
const T: Duration = Duration::from_secs(120);

#[derive(Clone, Debug)]
enum Step {
    Replicas { podset: usize, replicas: i32 },
    Template { podset: usize, variant: u8 },
    Policy { podset: usize, policy: Option<usize> },
    Recreate { podset: usize },
    Size { size: i32 },
    RecreateMemcached,
    NetperfDuration { duration: i32 },
    RecreateNetperf,
    Pause { ms: u64 },
}

/// Draws `STEPS` steps from `seed`: the same seed gives the same steps.
fn steps(seed: u64) -> Vec<Step> {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed.to_le_bytes(), [0; 8], [0; 8], [0; 8]].concat());
    let mut pick = |n: u64| rng.next_u64() % n;
    (0..STEPS)
        .map(|_| {
            let podset = pick(PODSETS.len() as u64) as usize;
            match pick(12) {
                0..=2 => Step::Replicas { podset, replicas: 1 + pick(4) as i32 },
                3 => Step::Template { podset, variant: pick(3) as u8 },
                4 => Step::Policy { podset, policy: [None, Some(0), Some(1)][pick(3) as usize] },
                5 => Step::Recreate { podset },
                6 => Step::Size { size: 1 + pick(3) as i32 },
                7 => Step::RecreateMemcached,
                8 => Step::NetperfDuration { duration: 1 + pick(3) as i32 },
                9 => Step::RecreateNetperf,
                _ => Step::Pause { ms: pick(1500) },
            }
        })
        .collect()
}

fn seeds() -> Vec<u64> {
    if let Ok(seed) = std::env::var("FAULT_SEED") {
        return vec![seed.parse().expect("FAULT_SEED is an unsigned integer")];
    }
    match std::env::var("SEQUENCE_SEEDS") {
        Ok(n) => {
            let n: u64 = n.parse().expect("SEQUENCE_SEEDS is a count");
            let now =
                SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
            let mut rng =
                TestRng::from_seed(RngAlgorithm::ChaCha, &[now.to_le_bytes(), [0; 8], [0; 8], [0; 8]].concat());
            (0..n).map(|_| rng.next_u64()).collect()
        }
        Err(_) => FIXED_SEEDS.to_vec(),
    }
}

/// What the sequence asked for last, per parent, and what it asked along the way.
#[derive(Clone)]
struct Model {
    podsets: Vec<PodSetSpec>,
    /// Template variants each PodSet had since it was last created: a PodSet, like a
    /// ReplicaSet, does not replace pods on a template change.
    variants: Vec<BTreeSet<u8>>,
    size: i32,
    netperf: NetperfSpec,
}

fn template(variant: u8) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    let mut ps = common::podset("x", 1);
    let mut t = ps.spec.template.take().expect("the test PodSet has a template");
    t.metadata.get_or_insert_default().labels.get_or_insert_default().insert("variant".into(), format!("v{variant}"));
    if let Some(c) = t.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.env = Some(vec![EnvVar { name: "VARIANT".into(), value: Some(variant.to_string()), ..Default::default() }]);
    }
    t
}

fn variant_of(pod: &Pod) -> Option<u8> {
    pod.labels().get("variant")?.strip_prefix('v')?.parse().ok()
}

struct Run {
    env: Env,
    memcacheds: Api<DynamicObject>,
    netperfs: Api<Netperf>,
    deployments: Api<Deployment>,
    digests: Digests,
}

/// Which digest decides a PodSet naming no policy, `alpha`, or `beta`.
struct Digests {
    default: String,
    beta: String,
}

impl Digests {
    fn of(&self, policy: Option<&PolicyRef>) -> &str {
        match policy.map(|p| p.name.as_str()) {
            Some("beta") => &self.beta,
            _ => &self.default,
        }
    }
}

impl Run {
    async fn apply(&self, model: &mut Model, step: &Step) {
        match *step {
            Step::Replicas { podset, replicas } => {
                model.podsets[podset].replicas = replicas;
                self.patch(PODSETS[podset], json!({ "spec": { "replicas": replicas } })).await;
            }
            Step::Template { podset, variant } => {
                model.podsets[podset].template = Some(template(variant));
                model.variants[podset].insert(variant);
                self.patch(PODSETS[podset], json!({ "spec": { "template": template(variant) } })).await;
            }
            Step::Policy { podset, policy } => {
                let name = policy.map(|p| POLICIES[p]);
                model.podsets[podset].policy_ref = name.map(|n| PolicyRef { name: n.into() });
                self.patch(PODSETS[podset], json!({ "spec": { "policyRef": name.map(|n| json!({ "name": n })) } }))
                    .await;
            }
            Step::Recreate { podset } => {
                let name = PODSETS[podset];
                delete_and_wait(&self.env.podsets, name).await;
                let spec = &model.podsets[podset];
                model.variants[podset] = spec.template.as_ref().and_then(variant_label).into_iter().collect();
                self.env
                    .podsets
                    .create(&PostParams::default(), &PodSet::new(name, spec.clone()))
                    .await
                    .expect("recreate");
            }
            Step::Size { size } => {
                model.size = size;
                let patch = Patch::Merge(json!({ "spec": { "size": size } }));
                self.memcacheds.patch(MEMCACHED, &PatchParams::default(), &patch).await.expect("resize Memcached");
            }
            Step::RecreateMemcached => {
                delete_and_wait(&self.memcacheds, MEMCACHED).await;
                self.memcacheds
                    .create(&PostParams::default(), &memcached(MEMCACHED, model.size))
                    .await
                    .expect("recreate");
            }
            Step::NetperfDuration { duration } => {
                model.netperf.duration = duration;
                let patch = Patch::Merge(json!({ "spec": { "duration": duration } }));
                self.netperfs.patch(NETPERF, &PatchParams::default(), &patch).await.expect("patch Netperf");
            }
            Step::RecreateNetperf => {
                delete_and_wait(&self.netperfs, NETPERF).await;
                let np = Netperf::new(NETPERF, model.netperf.clone());
                self.netperfs.create(&PostParams::default(), &np).await.expect("recreate Netperf");
            }
            Step::Pause { ms } => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }

    async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.env.podsets.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.expect("patch PodSet");
    }

    /// PodSet `name` once converged on `spec`: its controlled active pods (by name).
    async fn podset_converged(&self, name: &str, spec: &PodSetSpec) -> (PodSet, Vec<Pod>) {
        let digest = self.digests.of(spec.policy_ref.as_ref());
        let what = format!("PodSet {name} to converge on {} pods decided by {digest}", spec.replicas);
        eventually(&what, T, || async {
            let ps = self.env.podsets.get(name).await.ok()?;
            let uid = ps.uid()?;
            let pods = self.env.pods.list(&ListParams::default()).await.ok()?.items;
            let mut active: Vec<Pod> = pods
                .into_iter()
                .filter(|p| common::is_active(p) && p.owner_references().iter().any(|o| o.uid == uid))
                .collect();
            active.sort_by_key(|p| p.name_any());
            let st = ps.status.as_ref()?;
            let names: Vec<String> = active.iter().map(|p| p.name_any()).collect();
            let settled = active.len() == spec.replicas as usize
                && st.pod_names == names
                && st.available_replicas == spec.replicas
                && common::decided_by(&ps, digest)
                && ps.spec.replicas == spec.replicas
                && ps.spec.policy_ref == spec.policy_ref;
            settled.then_some((ps, active))
        })
        .await
    }

    /// Netperf `name` once finished with its pods gone: its phase and whether it measured a speed.
    async fn netperf_finished(&self, name: &str, duration: i32) -> (Phase, bool) {
        eventually(&format!("Netperf {name} to finish"), T, || async {
            let np = self.netperfs.get(name).await.ok()?;
            let st = np.status.as_ref()?;
            let selector = format!("app.kubernetes.io/instance={name}");
            let left = self.env.pods.list(&ListParams::default().labels(&selector)).await.ok()?.items.len();
            (st.status.finished() && left == 0 && np.spec.duration == duration)
                .then(|| (st.status, st.speed_bits_per_sec.is_some_and(|s| s > 0)))
        })
        .await
    }

    /// Memcached `name` once converged on `size`: its Deployment's spec.
    async fn memcached_converged(&self, name: &str, size: i32) -> serde_json::Value {
        eventually(&format!("Memcached {name} at {size}/{size}"), T, || async {
            let mc = self.memcacheds.get(name).await.ok()?;
            let d = self.deployments.get(name).await.ok()?;
            let owned = d.owner_references().iter().any(|o| Some(&o.uid) == mc.metadata.uid.as_ref());
            let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
            let nodes = mc.data["status"]["nodes"].as_array().map_or(0, Vec::len);
            let spec = d.spec.as_ref()?;
            (owned && spec.replicas == Some(size) && ready == size && nodes == size as usize).then(|| {
                // Compared with a fresh one's: its own name is the only difference allowed.
                let text = serde_json::to_string(&spec.template).unwrap_or_default();
                serde_json::from_str(&text.replace(name, "NAME")).unwrap_or_default()
            })
        })
        .await
    }
}

fn variant_label(t: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Option<u8> {
    t.metadata.as_ref()?.labels.as_ref()?.get("variant")?.strip_prefix('v')?.parse().ok()
}

async fn delete_and_wait<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete {name}: {e}"),
    }
    // The operator removes its finalizer once the children are gone.
    eventually(&format!("{name} to be deleted"), T, || async {
        matches!(api.get(name).await, Err(kube::Error::Api(ref s)) if s.code == 404).then_some(())
    })
    .await;
}

/// Runs the sequence of `seed`; returns its steps and what differs from fresh parents.
async fn sequence(seed: u64) -> (Vec<Step>, Vec<String>, Duration) {
    let steps = steps(seed);
    let dir = policy_dir();
    let env = Env::with_args(
        &format!("seq-{:x}", seed & 0xffff),
        &dir.join("podset.wasm"),
        &[
            "--policy",
            &dir.join("memcached.wasm").to_string_lossy(),
            "--policy",
            &dir.join("netperf.wasm").to_string_lossy(),
        ],
    )
    .await;
    let podset_module = common::read_policy("podset.wasm");
    let beta = common::with_custom_section(&podset_module, "sequence-beta", b"another build");
    common::publish_policy(&env.client, &env.ns, "alpha", "alpha-module", &podset_module, None).await;
    common::publish_policy(&env.client, &env.ns, "beta", "beta-module", &beta, None).await;
    common::policy_loaded(&env.client, &env.ns, "alpha", &env.op).await;
    common::policy_loaded(&env.client, &env.ns, "beta", &env.op).await;
    let run = Run {
        memcacheds: memcacheds(&env.client, &env.ns),
        netperfs: Api::namespaced(env.client.clone(), &env.ns),
        deployments: Api::namespaced(env.client.clone(), &env.ns),
        digests: Digests { default: Digest::of(&podset_module).to_string(), beta: Digest::of(&beta).to_string() },
        env,
    };
    let mut model = Model {
        podsets: vec![PodSetSpec { replicas: 2, template: Some(template(0)), policy_ref: None }; PODSETS.len()],
        variants: vec![BTreeSet::from([0]); PODSETS.len()],
        size: 1,
        netperf: NetperfSpec { server_node: None, client_node: None, duration: 1 },
    };
    for (name, spec) in PODSETS.iter().zip(&model.podsets) {
        run.env.podsets.create(&PostParams::default(), &PodSet::new(name, spec.clone())).await.expect("create PodSet");
    }
    run.memcacheds.create(&PostParams::default(), &memcached(MEMCACHED, model.size)).await.expect("create Memcached");
    let np = Netperf::new(NETPERF, model.netperf.clone());
    run.netperfs.create(&PostParams::default(), &np).await.expect("create Netperf");

    let started = Instant::now();
    for step in &steps {
        run.apply(&mut model, step).await;
    }

    // The oracle: each parent as a fresh parent with its last spec ends up.
    let mut diffs = Vec::new();
    for (i, name) in PODSETS.iter().enumerate() {
        let spec = &model.podsets[i];
        let (ps, pods) = run.podset_converged(name, spec).await;
        let fresh_name = format!("fresh-{name}");
        run.env.podsets.create(&PostParams::default(), &PodSet::new(&fresh_name, spec.clone())).await.expect("fresh");
        let (fresh, fresh_pods) = run.podset_converged(&fresh_name, spec).await;
        let (st, fresh_st) = (ps.status.clone().unwrap_or_default(), fresh.status.clone().unwrap_or_default());
        if (st.available_replicas, st.pod_names.len()) != (fresh_st.available_replicas, fresh_st.pod_names.len()) {
            diffs.push(format!("PodSet {name}: status {st:?}, a fresh one's {fresh_st:?}"));
        }
        let last = spec.template.as_ref().and_then(variant_label);
        if fresh_pods.iter().any(|p| variant_of(p) != last) {
            diffs.push(format!("fresh PodSet {name}: pods not of the last template v{last:?}"));
        }
        let stray: Vec<String> = pods
            .iter()
            .filter(|p| !variant_of(p).is_some_and(|v| model.variants[i].contains(&v)))
            .map(|p| format!("{} ({:?})", p.name_any(), variant_of(p)))
            .collect();
        if !stray.is_empty() {
            diffs.push(format!("PodSet {name}: pods of a template it did not have since created: {stray:?}"));
        }
    }
    let deployment = run.memcached_converged(MEMCACHED, model.size).await;
    let fresh = memcached(FRESH_MEMCACHED, model.size);
    run.memcacheds.create(&PostParams::default(), &fresh).await.expect("fresh Memcached");
    let fresh_deployment = run.memcached_converged(FRESH_MEMCACHED, model.size).await;
    if deployment != fresh_deployment {
        diffs.push(format!("Memcached: its Deployment's template {deployment}, a fresh one's {fresh_deployment}"));
    }
    let netperf = run.netperf_finished(NETPERF, model.netperf.duration).await;
    let fresh = Netperf::new(FRESH_NETPERF, model.netperf.clone());
    run.netperfs.create(&PostParams::default(), &fresh).await.expect("fresh Netperf");
    let fresh_netperf = run.netperf_finished(FRESH_NETPERF, model.netperf.duration).await;
    if netperf != fresh_netperf || netperf != (Phase::Done, true) {
        diffs.push(format!("Netperf: finished {netperf:?} (phase, measured), a fresh one {fresh_netperf:?}"));
    }
    // Nothing left of what was deleted: every pod belongs to a parent that exists now.
    diffs.extend(orphans(&run).await);
    let took = started.elapsed();
    run.env.cleanup().await;
    (steps, diffs, took)
}

/// Active pods whose owner is no current PodSet, ReplicaSet or Netperf.
async fn orphans(run: &Run) -> Vec<String> {
    let owners: BTreeSet<String> = {
        let podsets = run.env.podsets.list(&ListParams::default()).await.expect("PodSets").items;
        let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(run.env.client.clone(), &run.env.ns);
        let sets = rs.list(&ListParams::default()).await.expect("ReplicaSets").items;
        let netperfs = run.netperfs.list(&ListParams::default()).await.expect("Netperfs").items;
        let uids = podsets.iter().filter_map(|p| p.uid()).chain(sets.iter().filter_map(|r| r.uid()));
        uids.chain(netperfs.iter().filter_map(|n| n.uid())).collect()
    };
    let pods = run.env.pods.list(&ListParams::default()).await.expect("pods").items;
    pods.iter()
        .filter(|p| common::is_active(p) && !p.owner_references().iter().any(|o| owners.contains(&o.uid)))
        .map(|p| format!("pod {} is owned by no parent that exists", p.name_any()))
        .collect()
}

#[tokio::test]
async fn random_sequences_of_spec_changes_end_where_a_fresh_parent_does() {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    common::require_real_node(&client).await;
    let mut failed = Vec::new();
    for seed in seeds() {
        let (steps, diffs, took) = sequence(seed).await;
        println!(
            "sequence seed {seed}: converged and compared in {took:?}, {} differences; steps: {steps:?}",
            diffs.len()
        );
        if !diffs.is_empty() {
            failed.push(format!(
                "seed {seed} (replay: FAULT_SEED={seed} cargo test -p podset-host --test sequences)\n  steps: {steps:?}\n  {}",
                diffs.join("\n  ")
            ));
        }
    }
    assert!(failed.is_empty(), "sequences that did not end where fresh parents do:\n{}", failed.join("\n"));
}
