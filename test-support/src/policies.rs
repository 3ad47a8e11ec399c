//! The compiled policies (`hack/policy.sh --fixtures`), and publishing one in the cluster.

use std::path::PathBuf;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::cluster::workspace;

/// Where `hack/policy.sh --fixtures` put the compiled policies. The tests need the
/// real .wasm: missing files fail the test with instructions, never skip it.
pub fn policy_dir() -> PathBuf {
    let dir =
        std::env::var_os("PODSET_POLICY_DIR").map(PathBuf::from).unwrap_or_else(|| workspace().join("target/policy"));
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

/// The label on a PodSet saying which attack (or benign behaviour) the hostile fixture
/// (`fixtures/generic-hostile.wasm`) tries on it.
pub const ATTACK: &str = "fixture.podset.dev/attack";

/// The PodSets carrying [`ATTACK`]: the selector of a ReconcilePolicy serving the fixture.
pub fn attackers() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: ATTACK.into(),
            operator: "Exists".into(),
            values: None,
        }]),
        match_labels: None,
    }
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
    publish_in_mode(client, ns, rp, cm, module, selector, Serving::default()).await;
}

/// [`publish_policy`], with `spec.reach`: what the policy may write beyond `ns`.
pub async fn publish_reaching(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    reach: podset_host::crd::Reach,
) {
    publish_in_mode(client, ns, rp, cm, module, selector, Serving { reach: Some(reach), ..Serving::default() }).await;
}

/// [`publish_policy`], acting as service account `account` of `ns` (`spec.serviceAccountName`).
pub async fn publish_acting_as(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    account: &str,
) {
    let serving = Serving { service_account_name: Some(account.into()), ..Serving::default() };
    publish_in_mode(client, ns, rp, cm, module, selector, serving).await;
}

/// [`publish_policy`], in Shadow mode: the policy decides beside the live one and never acts.
pub async fn publish_shadow(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) {
    publish_in_mode(
        client,
        ns,
        rp,
        cm,
        module,
        selector,
        Serving { mode: podset_host::crd::PolicyMode::Shadow, ..Serving::default() },
    )
    .await;
}

/// [`publish_policy`] with `spec.rollout`: a new module takes over by the plan (a module
/// not seen before, or an unchanged plan and module, as before).
pub async fn publish_rolling(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    rollout: podset_host::crd::Rollout,
) {
    let serving = Serving { rollout: Some(rollout), ..Serving::default() };
    publish_in_mode(client, ns, rp, cm, module, selector, serving).await;
}

/// How a published ReconcilePolicy serves: its mode, reach and rollout plan.
#[derive(Default)]
struct Serving {
    mode: podset_host::crd::PolicyMode,
    reach: Option<podset_host::crd::Reach>,
    rollout: Option<podset_host::crd::Rollout>,
    service_account_name: Option<String>,
}

async fn publish_in_mode(
    client: &Client,
    ns: &str,
    rp: &str,
    cm: &str,
    module: &[u8],
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    Serving { mode, reach, rollout, service_account_name }: Serving,
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
            config_map_ref: Some(ConfigMapKeyRef { name: cm.into(), key: "module.wasm".into() }),
            sha256: podset_host::sandbox::Digest::of(module).to_string(),
            selector,
            mode,
            image: None,
            image_pull_secrets: Vec::new(),
            registry_ca: None,
            reach,
            rollout,
            service_account_name,
        },
    );
    policy.metadata.namespace = Some(ns.into());
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    rps.patch(rp, &pp, &Patch::Apply(&policy)).await.expect("apply ReconcilePolicy");
}

/// `podset-host policy replay ARGS…` as a user runs it: whether it exited 0, and what
/// it printed.
pub fn replay(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let mut all = vec![std::ffi::OsStr::new("replay")];
    all.extend_from_slice(args);
    policy_cli(&all)
}

/// `podset-host policy ARGS…` as a user runs it, against the test cluster: whether it
/// exited 0, and what it printed.
pub fn policy_cli(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = std::process::Command::new(crate::operator::operator_binary())
        .arg("policy")
        .args(args)
        .env("KUBECONFIG", crate::cluster::kubeconfig_path())
        .output()
        .expect("run podset-host policy");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Replays every decision recorded under `dir` with `module` (`policy replay`), asserts
/// that each agrees with what was recorded, and returns how many there were. Stop the
/// operator that recorded them first: a decision it makes meanwhile races the count.
pub fn replays_exactly(module: &std::path::Path, dir: &std::path::Path) -> usize {
    let files = podset_host::author::replay::files(&[dir.to_path_buf()]).expect("recordings");
    let (ok, out) = replay(&[module.as_os_str(), dir.as_os_str()]);
    assert!(ok, "the decisions under {} replayed with {}:\n{out}", dir.display(), module.display());
    assert_eq!(replay_summary(&out), Some((files.len(), files.len(), 0, 0)), "{out}");
    files.len()
}

/// The counts of a replay's closing line, `N scenarios: A agree, D differ, F failed`.
pub fn replay_summary(output: &str) -> Option<(usize, usize, usize, usize)> {
    let line = output.lines().rev().find(|l| l.contains(" scenarios: "))?;
    let n: Vec<usize> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match n[..] {
        [total, agree, differ, failed] => Some((total, agree, differ, failed)),
        _ => None,
    }
}

/// Waits until ReconcilePolicy `rp` of `ns` has loaded its module (Ready=True).
pub async fn policy_loaded(client: &Client, ns: &str, rp: &str, op: &crate::operator::Operator) {
    use podset_host::crd::ReconcilePolicy;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let what = format!("ReconcilePolicy {rp} to load (log: {})", op.log.display());
    crate::poll::eventually(&what, std::time::Duration::from_secs(60), || async {
        let st = rps.get(rp).await.ok()?.status?;
        st.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())
    })
    .await;
}

/// Waits until `op` has acted on ReconcilePolicy `rp`'s latest spec: its
/// `status.observedGeneration`, written after the watch event that re-routes its parents.
/// A parent changed before then may still be decided by the policy it had: the promotion
/// test scaled the stable track at once after widening a selector, under the load of a
/// cold `make test` (2026-12-02), and the default policy made the pod the widened one was
/// awaited for.
pub async fn policy_observed(client: &Client, ns: &str, rp: &str, op: &crate::operator::Operator) {
    use podset_host::crd::ReconcilePolicy;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let what = format!("ReconcilePolicy {rp}'s latest spec to be acted on (log: {})", op.log.display());
    crate::poll::eventually(&what, std::time::Duration::from_secs(60), || async {
        let rp = rps.get(rp).await.ok()?;
        let observed = rp.status?.observed_generation;
        (observed.is_some() && observed == rp.metadata.generation).then_some(())
    })
    .await;
}

/// The `status.shadow` of Shadow ReconcilePolicy `rp` of `ns`, once it has caught up
/// with `op`'s metrics (it is written every few seconds): every decision the operator
/// counted is in it, and there was at least one.
pub async fn shadow_settled(
    client: &Client,
    ns: &str,
    rp: &str,
    op: &crate::operator::Operator,
) -> podset_host::crd::ShadowStatus {
    use podset_host::crd::ReconcilePolicy;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let label = format!(r#"policy="{ns}/{rp}""#);
    let what = format!("status.shadow of {rp} to catch up (log: {})", op.log.display());
    crate::poll::eventually(&what, std::time::Duration::from_secs(60), || async {
        let counted = op.sum("podset_shadow_decisions_total", &label).await;
        let st = rps.get(rp).await.ok()?.status?.shadow?;
        (st.decisions > 0 && (st.decisions + st.dropped) as f64 == counted).then_some(st)
    })
    .await
}

/// `component` with a custom section appended: a valid component with another digest.
pub fn with_custom_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    leb128(&mut payload, name.len());
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(data);
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb128(&mut out, payload.len());
    out.extend(payload);
    out
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
