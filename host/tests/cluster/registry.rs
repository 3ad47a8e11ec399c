//! Policies from OCI registries, as a platform team publishes them: `policy push` to a
//! real registry (the test cluster's, TLS and basic auth; or one a test starts for
//! itself), `ReconcilePolicy.spec.image` and `--policy oci://` in a running operator,
//! cosign signatures required or not. Each test runs its own operator, in its own
//! namespace, with its own module cache.

use podset_test_support as common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::registry::{OwnRegistry, Tamper, TamperProxy, cluster_registry, push};
use common::{Operator, eventually, kubeconfig_path, policy_cli, policy_dir, with_namespace};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use podset_host::crd::{PodSet, ReconcilePolicy};
use podset_host::sandbox::Digest;

const WAIT: Duration = Duration::from_secs(60);

fn podset_wasm() -> PathBuf {
    policy_dir().join("podset.wasm")
}

fn write_module(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write module");
    path
}

fn pin(path: &Path) -> String {
    Digest::of(&std::fs::read(path).expect("module")).to_string()
}

/// Applies a ReconcilePolicy with `spec` (JSON).
async fn apply_rp(client: &Client, ns: &str, name: &str, spec: serde_json::Value) {
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let rp = serde_json::json!({
        "apiVersion": "podset.dev/v1alpha1", "kind": "ReconcilePolicy",
        "metadata": {"name": name}, "spec": spec,
    });
    rps.patch(name, &PatchParams::apply("registry-tests").force(), &Patch::Apply(&rp))
        .await
        .expect("apply ReconcilePolicy");
}

/// Waits until `name`'s condition `type_` has `status` and `reason`; returns the policy.
async fn condition(client: &Client, ns: &str, name: &str, type_: &str, status: &str, reason: &str) -> ReconcilePolicy {
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), ns);
    let what = format!("ReconcilePolicy {name}: {type_}={status} ({reason})");
    eventually(&what, WAIT, || async {
        let rp = rps.get(name).await.ok()?;
        let c = rp.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?.clone();
        (c.status == status && c.reason == reason).then_some(rp)
    })
    .await
}

fn failed_message(rp: &ReconcilePolicy) -> String {
    let status = rp.status.as_ref().expect("status");
    status.conditions.iter().find(|c| c.type_ == "Failed").map(|c| c.message.clone()).unwrap_or_default()
}

/// A `kubernetes.io/dockerconfigjson` Secret holding `config`.
async fn pull_secret(client: &Client, ns: &str, name: &str, config: &[u8]) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name},
        "data": {".dockerconfigjson": base64(config)},
    });
    secrets.patch(name, &PatchParams::apply("registry-tests").force(), &Patch::Apply(&secret)).await.expect("Secret");
}

fn base64(bytes: &[u8]) -> String {
    let (ok, out) = {
        let mut child = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("base64 runs");
        use std::io::Write as _;
        child.stdin.take().expect("stdin").write_all(bytes).expect("write");
        let out = child.wait_with_output().expect("base64");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    assert!(ok);
    out
}

async fn create_podset(client: &Client, ns: &str, name: &str, replicas: i32, labels: &[(&str, &str)]) {
    let mut ps = common::podset(name, replicas);
    ps.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), ns);
    podsets.create(&Default::default(), &ps).await.expect("create PodSet");
}

async fn scale(client: &Client, ns: &str, name: &str, replicas: i32) {
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({ "spec": { "replicas": replicas } });
    podsets.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("scale");
}

/// Waits until PodSet `name` has `n` active pods and (when given) was decided by `digest`.
async fn converged(client: &Client, ns: &str, name: &str, n: usize, digest: Option<&str>) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{name} to have {n} active pods"), WAIT, || async {
        let active = common::active_pods(&pods, name).await;
        let ps = podsets.get(name).await.ok()?;
        let decided = digest.is_none_or(|d| common::decided_by(&ps, d));
        (active.len() == n && decided).then_some(())
    })
    .await;
}

fn operator(ns: &str, policies: &[&Path], cache: &Path, extra: &[String]) -> Operator {
    let mut args: Vec<String> =
        vec!["--registry-poll".into(), "2s".into(), "--policy-cache-dir".into(), cache.display().to_string()];
    args.extend_from_slice(extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Operator::spawn_with_args(ns, policies, &kubeconfig_path(), &refs)
}

/// The Warning Events of `name` with `reason`.
fn has_event(ns: &str, name: &str, reason: &str) -> bool {
    let (ok, out) = common::kubectl(&[
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        &format!("involvedObject.name={name},reason={reason}"),
        "-o",
        "name",
    ]);
    ok && !out.trim().is_empty()
}

#[tokio::test]
async fn a_policy_loads_by_digest_and_by_tag_and_a_moved_tag_is_reported_never_loaded() {
    with_namespace("registry-tag", |client, ns| async move {
        let registry = cluster_registry();
        let repo = format!("{}/tests/{ns}/podset", registry.addr);
        let pushed = push(&podset_wasm(), &format!("{repo}:v1"), &registry.flags());
        let d1 = pushed.split_once('@').expect("pinned").1.to_string();
        pull_secret(&client, &ns, "regcred", &std::fs::read(&registry.auth).expect("auth")).await;
        let cache = tempfile::tempdir().expect("cache");
        // Credentials only from the Secret; the CA from the flag.
        let ca = vec!["--registry-ca".to_string(), registry.ca.display().to_string()];
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &ca);
        op.ready().await;

        let spec = |image: &str| {
            serde_json::json!({"image": image, "sha256": pin(&podset_wasm()), "imagePullSecrets": [{"name": "regcred"}]})
        };
        apply_rp(&client, &ns, "by-digest", spec(&format!("{repo}@{d1}"))).await;
        apply_rp(&client, &ns, "by-tag", spec(&format!("{repo}:v1"))).await;
        for name in ["by-digest", "by-tag"] {
            let rp = condition(&client, &ns, name, "Ready", "True", "Loaded").await;
            let status = rp.status.expect("status");
            assert_eq!(status.loaded_digest.as_deref(), Some(pin(&podset_wasm()).as_str()));
            let image = status.image.expect("status.image");
            assert_eq!(image.resolved_digest.as_deref(), Some(d1.as_str()), "{name} resolved to what was pushed");
            assert_eq!(image.tag_digest, None);
        }

        // The tag moves to another module: reported, never loaded.
        let moved = push(&policy_dir().join("memcached.wasm"), &format!("{repo}:v1"), &registry.flags());
        let d2 = moved.split_once('@').expect("pinned").1.to_string();
        assert_ne!(d1, d2);
        let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
        let rp = eventually("the moved tag in status.image.tagDigest", WAIT, || async {
            let rp = rps.get("by-tag").await.ok()?;
            let image = rp.status.as_ref()?.image.as_ref()?;
            (image.tag_digest.as_deref() == Some(d2.as_str())).then_some(rp)
        })
        .await;
        let status = rp.status.expect("status");
        assert_eq!(status.loaded_digest.as_deref(), Some(pin(&podset_wasm()).as_str()), "the pinned module serves");
        assert_eq!(status.image.expect("image").resolved_digest.as_deref(), Some(d1.as_str()));
        assert!(has_event(&ns, "by-tag", "TagMoved"), "a TagMoved Event");
        assert!(op.readyz().await.is_some_and(|(ok, _)| ok));
    })
    .await;
}

#[tokio::test]
async fn wrong_or_missing_credentials_fail_naming_401_and_recover_when_the_secret_is_fixed() {
    with_namespace("registry-auth", |client, ns| async move {
        let registry = cluster_registry();
        let reference = format!("{}/tests/{ns}/podset:v1", registry.addr);
        push(&podset_wasm(), &reference, &registry.flags());
        let wrong = format!(
            "{{\"auths\":{{\"{}\":{{\"username\":\"podset\",\"password\":\"wrong\"}}}}}}",
            registry.addr
        );
        pull_secret(&client, &ns, "regcred", wrong.as_bytes()).await;
        let cache = tempfile::tempdir().expect("cache");
        let ca = vec!["--registry-ca".to_string(), registry.ca.display().to_string()];
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &ca);
        op.ready().await;
        let spec = serde_json::json!({"image": reference, "sha256": pin(&podset_wasm()), "imagePullSecrets": [{"name": "regcred"}]});
        apply_rp(&client, &ns, "wrong", spec).await;
        apply_rp(&client, &ns, "missing", serde_json::json!({"image": reference, "sha256": pin(&podset_wasm())})).await;
        for name in ["wrong", "missing"] {
            let rp = condition(&client, &ns, name, "Failed", "True", "Unauthorized").await;
            let message = failed_message(&rp);
            assert!(message.contains("401"), "{name}: the message names 401: {message}");
            condition(&client, &ns, name, "Ready", "False", "Unauthorized").await;
        }
        // The Secret fixed: picked up at the next try, without touching the policy.
        pull_secret(&client, &ns, "regcred", &std::fs::read(&registry.auth).expect("auth")).await;
        let fixed = Instant::now();
        condition(&client, &ns, "wrong", "Ready", "True", "Loaded").await;
        println!("loaded {:?} after the Secret was fixed", fixed.elapsed());
    })
    .await;
}

#[tokio::test]
async fn with_signatures_required_unsigned_untrusted_and_replayed_signatures_are_refused_and_a_signed_module_loads() {
    with_namespace("registry-signed", |client, ns| async move {
        let registry = cluster_registry();
        let keys = tempfile::tempdir().expect("keys");
        for prefix in ["trusted", "other"] {
            let p = keys.path().join(prefix);
            let (ok, out) = policy_cli(&["keygen".as_ref(), p.as_os_str()]);
            assert!(ok, "keygen: {out}");
        }
        let (trusted, other) = (keys.path().join("trusted.key"), keys.path().join("other.key"));
        let repo = |name: &str| format!("{}/tests/{ns}/{name}", registry.addr);
        let sign = |reference: &str, key: &Path| {
            let mut args: Vec<std::ffi::OsString> = vec!["sign".into(), reference.into(), "--key".into(), key.into()];
            args.extend(registry.flags().iter().map(Into::into));
            let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let (ok, out) = policy_cli(&refs);
            assert!(ok, "policy sign {reference}: {out}");
        };
        for name in ["unsigned", "untrusted", "replayed", "signed"] {
            push(&podset_wasm(), &format!("{}:v1", repo(name)), &registry.flags());
        }
        sign(&format!("{}:v1", repo("untrusted")), &other);
        sign(&format!("{}:v1", repo("signed")), &trusted);
        // A trusted signature of another artifact, moved onto this one's signature tag.
        let podset = push(&podset_wasm(), &format!("{}:v1", repo("replayed")), &registry.flags());
        let other_module =
            push(&policy_dir().join("memcached.wasm"), &format!("{}:other", repo("replayed")), &registry.flags());
        sign(&other_module, &trusted);
        let tag = |pushed: &str| {
            format!("{}:{}.sig", repo("replayed"), pushed.split_once('@').expect("pinned").1.replace(':', "-"))
        };
        skopeo_copy(&registry, &tag(&other_module), &tag(&podset));

        let cache = tempfile::tempdir().expect("cache");
        let mut flags = registry.flags();
        flags.extend(["--require-signatures".into(), "--trusted-key".into()]);
        flags.push(keys.path().join("trusted.pub").display().to_string());
        // The default policy from a file needs its detached signature too.
        let signed_file = keys.path().join("podset.wasm");
        std::fs::copy(podset_wasm(), &signed_file).expect("copy");
        let (ok, out) =
            policy_cli(&["sign-blob".as_ref(), signed_file.as_os_str(), "--key".as_ref(), trusted.as_os_str()]);
        assert!(ok, "sign-blob: {out}");
        let op = operator(&ns, &[&signed_file], cache.path(), &flags);
        op.ready().await;

        for (name, reason) in
            [("unsigned", "Unsigned"), ("untrusted", "UntrustedSignature"), ("replayed", "SignedDigestMismatch")]
        {
            apply_rp(
                &client,
                &ns,
                name,
                serde_json::json!({"image": format!("{}:v1", repo(name)), "sha256": pin(&podset_wasm())}),
            )
            .await;
            let rp = condition(&client, &ns, name, "Failed", "True", reason).await;
            println!("{name}: {}", failed_message(&rp));
        }
        apply_rp(
            &client,
            &ns,
            "signed",
            serde_json::json!({"image": format!("{}:v1", repo("signed")), "sha256": pin(&podset_wasm())}),
        )
        .await;
        let rp = condition(&client, &ns, "signed", "Ready", "True", "Loaded").await;
        let signed_by = rp.status.and_then(|s| s.image).and_then(|i| i.signed_by).unwrap_or_default();
        assert!(signed_by.contains("trusted.pub"), "verified by the trusted key: {signed_by}");

        // Pointed at the unsigned copy: refused, and the signed module keeps serving.
        apply_rp(
            &client,
            &ns,
            "signed",
            serde_json::json!({"image": format!("{}:v1", repo("unsigned")), "sha256": pin(&podset_wasm())}),
        )
        .await;
        condition(&client, &ns, "signed", "Failed", "True", "Unsigned").await;
        condition(&client, &ns, "signed", "Ready", "True", "LastGoodServing").await;

        // A ConfigMap's module: refused without `KEY.sig`, loaded with it.
        let sig = std::fs::read_to_string(keys.path().join("podset.wasm.sig")).expect("detached signature");
        let module = std::fs::read(podset_wasm()).expect("module");
        for (cm, with_sig) in [("cm-unsigned", false), ("cm-signed", true)] {
            let mut data = serde_json::Map::new();
            if with_sig {
                data.insert("module.wasm.sig".into(), sig.clone().into());
            }
            let map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm},
                "binaryData": {"module.wasm": base64(&module)}, "data": data});
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
            cms.patch(cm, &PatchParams::apply("registry-tests").force(), &Patch::Apply(&map)).await.expect("ConfigMap");
            let spec =
                serde_json::json!({"configMapRef": {"name": cm, "key": "module.wasm"}, "sha256": pin(&podset_wasm())});
            apply_rp(&client, &ns, cm, spec).await;
        }
        condition(&client, &ns, "cm-unsigned", "Failed", "True", "Unsigned").await;
        condition(&client, &ns, "cm-signed", "Ready", "True", "Loaded").await;
        assert!(op.readyz().await.is_some_and(|(ok, _)| ok));
    })
    .await;
}

/// `skopeo copy` within the cluster's registry (the manifest kept as it is).
fn skopeo_copy(registry: &common::registry::ClusterRegistry, from: &str, to: &str) {
    let certs = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&registry.ca, certs.path().join("ca.crt")).expect("CA");
    let dir = certs.path().to_string_lossy().into_owned();
    let out = std::process::Command::new("skopeo")
        .args(["--insecure-policy", "copy", "-q", "--preserve-digests", "--authfile"])
        .arg(&registry.auth)
        .args(["--src-cert-dir", &dir, "--dest-cert-dir", &dir])
        .args([format!("docker://{from}"), format!("docker://{to}")])
        .output()
        .expect("skopeo runs");
    assert!(out.status.success(), "skopeo copy {from} {to}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn a_self_signed_registry_is_refused_without_its_ca_and_accepted_with_it() {
    with_namespace("registry-ca", |client, ns| async move {
        let own = OwnRegistry::start(true).await;
        let reference = format!("{}/policies/podset:v1", own.addr);
        push(&podset_wasm(), &reference, &own.flags());
        let plain = OwnRegistry::start(false).await;
        let plain_reference = format!("{}/policies/podset:v1", plain.addr);
        push(&podset_wasm(), &plain_reference, &plain.flags());
        let cache = tempfile::tempdir().expect("cache");
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &[]);
        op.ready().await;
        apply_rp(&client, &ns, "self-signed", serde_json::json!({"image": reference, "sha256": pin(&podset_wasm())}))
            .await;
        let rp = condition(&client, &ns, "self-signed", "Failed", "True", "RegistryCertificate").await;
        println!("without its CA: {}", failed_message(&rp));
        // Plain HTTP is not spoken unless the operator allows it for that registry.
        apply_rp(&client, &ns, "plain", serde_json::json!({"image": plain_reference, "sha256": pin(&podset_wasm())}))
            .await;
        let plain_rp = eventually("the plain-HTTP registry refused", WAIT, || async {
            let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
            let rp = rps.get("plain").await.ok()?;
            rp.status.as_ref()?.conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True").then_some(rp)
        })
        .await;
        println!("plain HTTP, not allowed: {}", failed_message(&plain_rp));
        assert!(plain_rp.status.and_then(|s| s.loaded_digest).is_none());

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let ca = std::fs::read(own.ca.as_ref().expect("a TLS registry has a CA")).expect("CA");
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "own-ca"},
            "data": {"ca.crt": base64(&ca)}});
        secrets
            .patch("own-ca", &PatchParams::apply("registry-tests").force(), &Patch::Apply(&secret))
            .await
            .expect("Secret");
        apply_rp(
            &client,
            &ns,
            "self-signed",
            serde_json::json!({"image": reference, "sha256": pin(&podset_wasm()),
            "registryCA": {"name": "own-ca"}}),
        )
        .await;
        condition(&client, &ns, "self-signed", "Ready", "True", "Loaded").await;
    })
    .await;
}

#[tokio::test]
async fn corrupt_manifests_and_layers_are_refused_and_the_last_good_module_serves() {
    with_namespace("registry-tamper", |client, ns| async move {
        let own = OwnRegistry::start(false).await;
        let proxy = TamperProxy::start(&own.addr).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let podset = std::fs::read(podset_wasm()).expect("podset");
        let variant = write_module(dir.path(), "variant.wasm", &common::with_custom_section(&podset, "variant", &[0x5a; 16]));
        push(&podset_wasm(), &format!("{}/p/podset:v1", own.addr), &own.flags());
        push(&variant, &format!("{}/p/podset:v2", own.addr), &own.flags());
        let cache = tempfile::tempdir().expect("cache");
        let flags = vec!["--insecure-registry".to_string(), proxy.addr.clone()];
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &flags);
        op.ready().await;
        let spec = |tag: &str, module: &Path| serde_json::json!({"image": format!("{}/p/podset:{tag}", proxy.addr), "sha256": pin(module)});
        apply_rp(&client, &ns, "p", spec("v1", &podset_wasm())).await;
        condition(&client, &ns, "p", "Ready", "True", "Loaded").await;

        // The layer corrupted on its way.
        proxy.set(Tamper::Blob(pin(&variant)));
        apply_rp(&client, &ns, "p", spec("v2", &variant)).await;
        let rp = condition(&client, &ns, "p", "Failed", "True", "DigestMismatch").await;
        println!("corrupt layer: {}", failed_message(&rp));
        let rp = condition(&client, &ns, "p", "Ready", "True", "LastGoodServing").await;
        assert_eq!(rp.status.and_then(|s| s.loaded_digest), Some(pin(&podset_wasm())), "the last good module serves");

        // The manifest corrupted.
        proxy.set(Tamper::Manifests);
        let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
        let rp = eventually("a corrupt manifest refused", WAIT, || async {
            let rp = rps.get("p").await.ok()?;
            let message = failed_message(&rp);
            message.contains("manifest").then_some(rp)
        })
        .await;
        println!("corrupt manifest: {}", failed_message(&rp));
        assert_eq!(rp.status.and_then(|s| s.loaded_digest), Some(pin(&podset_wasm())));

        // Nothing corrupted any more: the next check loads it.
        proxy.set(Tamper::Nothing);
        let rp = condition(&client, &ns, "p", "Ready", "True", "Loaded").await;
        assert_eq!(rp.status.and_then(|s| s.loaded_digest), Some(pin(&variant)));
    })
    .await;
}

#[tokio::test]
async fn with_the_registry_down_the_last_good_module_serves_and_a_restart_loads_from_the_cache() {
    with_namespace("registry-down", |client, ns| async move {
        let mut own = OwnRegistry::start(false).await;
        let reference = format!("{}/p/podset:v1", own.addr);
        push(&podset_wasm(), &reference, &own.flags());
        let cache = tempfile::tempdir().expect("cache");
        let default = PathBuf::from(format!("oci://{reference}"));
        let started = Instant::now();
        let mut op = operator(&ns, &[&default], cache.path(), &own.flags());
        op.ready().await;
        println!("operator ready with --policy oci:// pulled cold in {:?}", started.elapsed());
        apply_rp(&client, &ns, "p", serde_json::json!({"image": reference, "sha256": pin(&podset_wasm())})).await;
        condition(&client, &ns, "p", "Ready", "True", "Loaded").await;
        create_podset(&client, &ns, "served", 2, &[]).await;
        converged(&client, &ns, "served", 2, None).await;

        own.stop();
        let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
        let rp = eventually("status.image.unreachable", WAIT, || async {
            let rp = rps.get("p").await.ok()?;
            rp.status.as_ref()?.image.as_ref()?.unreachable.is_some().then_some(rp)
        })
        .await;
        let ready =
            rp.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready").cloned()).expect("Ready");
        assert_eq!(ready.status, "True", "the module keeps serving: {ready:?}");
        assert!(ready.message.contains("cache"), "Ready says it serves from the cache: {}", ready.message);
        assert!(has_event(&ns, "p", "RegistryUnreachable"));
        scale(&client, &ns, "served", 3).await;
        converged(&client, &ns, "served", 3, None).await;

        // A restart with the registry still down: both modules from the cache.
        op.kill();
        let restarted = Instant::now();
        op.respawn();
        op.ready().await;
        println!("operator ready with the registry down, from the cache, in {:?}", restarted.elapsed());
        scale(&client, &ns, "served", 1).await;
        converged(&client, &ns, "served", 1, None).await;
        let log = std::fs::read_to_string(&op.log).unwrap_or_default();
        assert!(log.contains("the cached module serves"), "the log says the cache served");
        // Said once per process (the log spans both), not at every poll.
        assert_eq!(log.matches("the cached module serves").count(), 2, "{log}");
        let cached = op.sum("podset_registry_fetches_total", "result=\"cached\"").await;
        assert!(cached >= 1.0, "the metric counts fetches the cache answered: {cached}");

        // The registry back: status says so at the next check.
        own.start_again().await;
        eventually("status.image.unreachable cleared", WAIT, || async {
            let rp = rps.get("p").await.ok()?;
            let image = rp.status.as_ref()?.image.as_ref()?;
            image.unreachable.is_none().then_some(())
        })
        .await;
        assert!(op.sum("podset_registry_fetches_total", "result=\"fetched\"").await >= 1.0);
    })
    .await;
}

#[tokio::test]
async fn oversize_and_two_layer_artifacts_are_refused_before_their_layers_are_downloaded() {
    with_namespace("registry-shape", |client, ns| async move {
        use podset_host::oci::{self, artifact};
        let own = OwnRegistry::start(false).await;
        let settings = oci::Settings { insecure: vec![own.addr.clone()], ..Default::default() };
        let registry = oci::Registry::new(settings);
        let module = std::fs::read(podset_wasm()).expect("module");
        // Over the 8 MiB module cap, as one layer.
        let big = common::with_custom_section(&module, "big", &vec![0x5a; 9 << 20]);
        let big_ref = oci::parse_reference(&format!("{}/p/big:v1", own.addr)).expect("ref");
        let session = registry.session(&big_ref, &Default::default(), &[]).expect("session");
        session
            .push_artifact(&big_ref, artifact::build(big.clone(), &[], &[], Default::default()))
            .await
            .expect("push big");
        // Two layers: the module twice.
        let two_ref = oci::parse_reference(&format!("{}/p/two:v1", own.addr)).expect("ref");
        let built = artifact::build(module.clone(), &[], &[], Default::default());
        let mut manifest: serde_json::Value = serde_json::from_slice(&built.manifest).expect("manifest");
        let layer = manifest["layers"][0].clone();
        manifest["layers"] = serde_json::json!([layer.clone(), layer]);
        session.push_blob(&two_ref, built.config.clone()).await.expect("config");
        session.push_blob(&two_ref, module.clone()).await.expect("layer");
        let bytes = serde_json::to_vec(&manifest).expect("json");
        session.push_manifest(&two_ref, bytes, "application/vnd.oci.image.manifest.v1+json").await.expect("manifest");

        let cache = tempfile::tempdir().expect("cache");
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &own.flags());
        op.ready().await;
        apply_rp(
            &client,
            &ns,
            "big",
            serde_json::json!({"image": big_ref.whole(), "sha256": Digest::of(&big).to_string()}),
        )
        .await;
        apply_rp(&client, &ns, "two", serde_json::json!({"image": two_ref.whole(), "sha256": pin(&podset_wasm())}))
            .await;
        let big_rp = condition(&client, &ns, "big", "Failed", "True", "InvalidArtifact").await;
        assert!(failed_message(&big_rp).contains("before downloading"), "{}", failed_message(&big_rp));
        let two_rp = condition(&client, &ns, "two", "Failed", "True", "InvalidArtifact").await;
        assert!(failed_message(&two_rp).contains("2 layers"), "{}", failed_message(&two_rp));
        // The registry's log: the big layer was uploaded, and never read back.
        let log = own.log_text();
        let big_digest = artifact::digest_of(&big);
        let reads: Vec<&str> = log.lines().filter(|l| l.contains("GET") && l.contains(&big_digest)).collect();
        assert!(reads.is_empty(), "the oversize layer was downloaded: {reads:?}");
    })
    .await;
}

#[tokio::test]
async fn a_module_too_big_for_a_configmap_serves_from_the_registry() {
    with_namespace("registry-big", |client, ns| async move {
        let registry = cluster_registry();
        let dir = tempfile::tempdir().expect("tempdir");
        // 1.5 MiB: over what a ConfigMap holds (1 MiB), within the 8 MiB module cap.
        let big = common::with_custom_section(
            &std::fs::read(podset_wasm()).expect("podset"),
            "padding",
            &vec![0x5a; 1536 << 10],
        );
        let path = write_module(dir.path(), "big.wasm", &big);
        let (ok, out) = common::kubectl(&[
            "create",
            "configmap",
            "too-big",
            "-n",
            &ns,
            &format!("--from-file=module.wasm={}", path.display()),
        ]);
        assert!(!ok && out.contains("Too long"), "a ConfigMap cannot hold it: {out}");
        let reference = format!("{}/tests/{ns}/big:v1", registry.addr);
        push(&path, &reference, &registry.flags());
        let cache = tempfile::tempdir().expect("cache");
        let op = operator(&ns, &[&podset_wasm()], cache.path(), &registry.flags());
        op.ready().await;
        let selector = serde_json::json!({"matchLabels": {"decided-by": "big"}});
        apply_rp(
            &client,
            &ns,
            "big",
            serde_json::json!({"image": reference, "sha256": pin(&path), "selector": selector}),
        )
        .await;
        let rp = condition(&client, &ns, "big", "Ready", "True", "Loaded").await;
        assert_eq!(rp.status.and_then(|s| s.loaded_digest), Some(pin(&path)));
        // It decides: a PodSet it selects gets its pods, with its digest.
        create_podset(&client, &ns, "big-decides", 2, &[("decided-by", "big")]).await;
        converged(&client, &ns, "big-decides", 2, Some(&pin(&path))).await;
    })
    .await;
}
