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
