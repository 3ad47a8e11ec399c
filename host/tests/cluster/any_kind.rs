//! The generic core against the real control plane: what a policy of the any-kind
//! world may not do is refused before any API call, and a policy declaring what the
//! operator's own RBAC forbids is refused when it loads.

use podset_test_support as common;

use std::time::Duration;

use common::{ATTACK, Env, attackers, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, PostParams};
use podset_host::crd::{PodSet, ReconcilePolicy};

const T: Duration = Duration::from_secs(60);

fn podset(name: &str, attack: &str) -> PodSet {
    let mut ps = common::podset(name, 1);
    ps.metadata.labels = Some([(ATTACK.to_string(), attack.to_string())].into());
    ps
}

/// The `PolicyFailed` condition's message on `name`, once the operator has set one.
async fn refusal(env: &Env, name: &str) -> String {
    eventually(&format!("{name} to be refused (operator log: {})", env.op.log.display()), T, || async {
        let ps = env.podsets.get(name).await.ok()?;
        let c = ps.status?.conditions.into_iter().find(|c| c.type_ == "PolicyFailed" && c.status == "True")?;
        matches!(c.reason.as_str(), "InvalidDecision" | "LookupsUnstable").then_some(c.message)
    })
    .await
}

#[tokio::test]
async fn hostile_generic_actions_are_refused_before_any_api_call() {
    let env = Env::new("hostile").await;
    let hostile = common::read_policy("fixtures/generic-hostile.wasm");
    common::publish_policy(&env.client, &env.ns, "hostile", "hostile-module", &hostile, Some(attackers())).await;
    // A ConfigMap nobody's policy controls: the fixture tries to delete it.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let foreign: ConfigMap =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "not-mine" }, "data": { "x": "y" } }))
            .expect("cm");
    cms.create(&PostParams::default(), &foreign).await.expect("foreign ConfigMap");
    let rps: Api<ReconcilePolicy> = Api::namespaced(env.client.clone(), &env.ns);
    eventually("the hostile policy to load", T, || async {
        rps.get("hostile").await.ok()?.status?.loaded_digest.map(|_| ())
    })
    .await;

    // The harmless case first: the fixture's own ConfigMap, owned by its PodSet.
    env.podsets.create(&PostParams::default(), &podset("harmless", "none")).await.expect("create");
    let owned = eventually("the harmless child ConfigMap", T, || async { cms.get("harmless-cm").await.ok() }).await;
    let owner = &owned.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("PodSet", "harmless", Some(true)));

    let cases = [
        ("other-namespace", "kube-system"),
        ("undeclared-kind", "Secret is not a kind this policy declared"),
        ("foreign-child", "not-mine is not a child this parent controls"),
        ("privileged-template", "privileged"),
        ("probe-host", "probe or lifecycle host"),
        ("owner-references", "ownerReferences is set by the host"),
        ("lookup-elsewhere", "a namespaced parent reads its own namespace"),
        ("lookups-unstable", "5 calls in one reconcile and the last still named lookups it had no answer to"),
    ];
    for (attack, _) in &cases {
        env.podsets.create(&PostParams::default(), &podset(attack, attack)).await.expect("create");
    }
    for (attack, says) in cases {
        let message = refusal(&env, attack).await;
        assert!(message.contains(says), "{attack}: {message}");
    }
    // Refused whole, before any call: nothing the fixture asked for beyond the harmless
    // ConfigMap reached the API server.
    let writes = |resource: &'static str| {
        let op = &env.op;
        async move { op.sum("podset_api_writes_total", &format!("resource=\"{resource}\"")).await }
    };
    assert_eq!(writes("configmaps").await, 1.0, "only the harmless ConfigMap was written");
    assert_eq!(writes("secrets").await, 0.0);
    assert_eq!(writes("deployments").await, 0.0);
    assert!(cms.get_opt("not-mine").await.expect("get").is_some(), "the foreign ConfigMap is untouched");
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    assert!(
        secrets.list(&ListParams::default()).await.expect("list").items.iter().all(|s| !s
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .starts_with("undeclared"))
    );
    let system: Api<ConfigMap> = Api::namespaced(env.client.clone(), "kube-system");
    assert!(system.get_opt("other-namespace-cm").await.expect("get").is_none());
    assert!(env.op.sum("podset_reconcile_failures_total", "reason=\"UndeclaredKind\"").await >= 1.0);
    assert!(env.op.sum("podset_reconcile_failures_total", "reason=\"WeakenedSecurityContext\"").await >= 1.0);
    assert!(env.op.sum("podset_reconcile_failures_total", "reason=\"NotReadable\"").await >= 1.0);
    assert!(env.op.sum("podset_reconcile_failures_total", "reason=\"LookupsUnstable\"").await >= 1.0);
    env.cleanup().await;
}

#[tokio::test]
async fn a_policy_declaring_what_the_operators_rbac_forbids_is_refused_when_it_loads() {
    let client = common::client().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = common::service_account_kubeconfig(&client, dir.path()).await;
    let ns = common::namespace(&client, "forbidden").await;
    let op = common::Operator::start_with(&ns, &common::policy_dir().join("podset.wasm"), &kubeconfig).await;
    let module = common::read_policy("fixtures/forbidden-kind.wasm");
    common::publish_policy(
        &client,
        &ns,
        "statefulsets",
        "statefulsets-module",
        &module,
        Some(LabelSelector::default()),
    )
    .await;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
    let failed = eventually(&format!("the policy to be refused (operator log: {})", op.log.display()), T, || async {
        let st = rps.get("statefulsets").await.ok()?.status?;
        st.conditions.into_iter().find(|c| c.type_ == "Failed" && c.status == "True")
    })
    .await;
    assert_eq!(failed.reason, "Forbidden");
    assert!(failed.message.contains("statefulsets.apps") && failed.message.contains("may not"), "{}", failed.message);
    assert_eq!(op.sum("podset_policies_refused_total", "reason=\"Forbidden\"").await, 1.0);
    // Nothing serves from it: PodSets in the namespace stay with the default policy.
    assert!(rps.get("statefulsets").await.expect("get").status.and_then(|s| s.loaded_digest).is_none());
    let events = std::process::Command::new("kubectl")
        .args(["get", "events", "-n", &ns, "-o", "jsonpath={.items[*].reason}"])
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .expect("kubectl");
    assert!(String::from_utf8_lossy(&events.stdout).contains("PolicyRejected"), "a Warning Event says so");
    common::delete_namespace(&client, &ns).await;
}

/// Children in waves are written in order and torn down in reverse by the operator,
/// even once no policy that put them there serves the kind any more.
#[tokio::test]
async fn waves_are_written_in_order_and_torn_down_in_reverse_after_their_policy_is_gone() {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::DeleteParams;

    let env = Env::new("waves").await;
    let hostile = common::read_policy("fixtures/generic-hostile.wasm");
    common::publish_policy(&env.client, &env.ns, "hostile", "hostile-module", &hostile, Some(attackers())).await;
    let rps: Api<ReconcilePolicy> = Api::namespaced(env.client.clone(), &env.ns);
    eventually("the policy to load", T, || async { rps.get("hostile").await.ok()?.status?.loaded_digest.map(|_| ()) })
        .await;
    env.podsets.create(&PostParams::default(), &podset("waved", "waves")).await.expect("create");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let (first, second) = eventually("both waves written", T, || async {
        Some((cms.get("waved-first").await.ok()?, cms.get("waved-second").await.ok()?))
    })
    .await;
    let created = |cm: &ConfigMap| cm.metadata.creation_timestamp.clone().expect("created").0;
    assert!(created(&second) >= created(&first), "wave 1 after wave 0");
    let ps = env.podsets.get("waved").await.expect("the PodSet");
    assert!(ps.metadata.finalizers.unwrap_or_default().contains(&"podset.dev/teardown".to_string()));

    // The policy withdrawn: the default PodSet policy decides the PodSet now (it makes
    // its pod), and the operator keeps watching the ConfigMaps it may have to delete.
    rps.delete("hostile", &DeleteParams::default()).await.expect("withdraw the policy");
    eventually("the default policy to decide it (its pod)", T, || async {
        (!env.pods.list(&ListParams::default()).await.ok()?.items.is_empty()).then_some(())
    })
    .await;
    env.podsets.delete("waved", &DeleteParams::default()).await.expect("delete");
    eventually("the PodSet and both ConfigMaps gone", T, || async {
        let gone = env.podsets.get_opt("waved").await.ok()?.is_none()
            && cms.get_opt("waved-first").await.ok()?.is_none()
            && cms.get_opt("waved-second").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let notes = eventually("the TeardownWave Events", T, || async {
        let mut waves: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("TeardownWave"))
            .map(|e| (e.event_time.map(|t| t.0.to_string()).unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        waves.sort();
        (waves.len() == 2).then_some(waves.into_iter().map(|(_, n)| n).collect::<Vec<_>>())
    })
    .await;
    assert_eq!(notes[0], "deleting wave 1: ConfigMap waved-second");
    assert!(notes[1].starts_with("deleting wave 0:") && notes[1].contains("ConfigMap waved-first"), "{notes:?}");
    env.cleanup().await;
}

/// The restricted profile, held by the operator alone: in a namespace without Pod
/// Security labels (where the API server admits anything), a hostile policy's pod
/// templates are refused, naming the field and the check: the obvious ones (privileged,
/// the host's network, hostPath, seccomp off, an added capability, root, a privileged
/// init container) and those it got past the operator before (an unconfined AppArmor
/// profile, an unsafe sysctl, an NFS volume, SELinux type spc_t); nothing is written and
/// no pod runs. An administrator's grant relaxes one policy to baseline, which lets the
/// NFS volume through and still refuses the rest.
#[tokio::test]
async fn the_whole_restricted_profile_holds_where_no_pod_security_label_does() {
    let client = common::client().await;
    let ns = common::namespace_labelled(&client, "unlabelled", &[]).await;
    let podsets: Api<PodSet> = Api::namespaced(client.clone(), &ns);
    let (ns_arg, reach_arg) = (ns.clone(), ns.clone());
    let op = common::Operator::spawn_with_args(
        &ns_arg,
        &[&common::policy_dir().join("podset.wasm")],
        &common::kubeconfig_path(),
        &["--reach-namespace", &reach_arg],
    );
    op.ready().await;
    let env = Env {
        client: client.clone(),
        ns: ns.clone(),
        podsets: podsets.clone(),
        pods: Api::namespaced(client.clone(), &ns),
        op,
    };
    let hostile = common::read_policy("fixtures/generic-hostile.wasm");
    common::publish_policy(&client, &ns, "hostile", "hostile-module", &hostile, Some(attackers())).await;
    let rps: Api<ReconcilePolicy> = Api::namespaced(client.clone(), &ns);
    eventually("the hostile policy to load", T, || async {
        rps.get("hostile").await.ok()?.status?.loaded_digest.map(|_| ())
    })
    .await;
    let cases = [
        ("privileged-template", "containers[0].securityContext.privileged", "privileged"),
        ("host-network", "hostNetwork", "hostNamespaces"),
        ("host-path", "volumes[0].hostPath", "restrictedVolumes"),
        ("seccomp-unconfined", "securityContext.seccompProfile.type", "seccompProfile_restricted"),
        ("added-capability", "securityContext.capabilities.add", "capabilities_restricted"),
        ("run-as-root", "securityContext.runAsUser", "runAsUser"),
        ("privileged-init", "initContainers[0].securityContext.privileged", "privileged"),
        ("probe-host", "livenessProbe.httpGet.host", "hostProbesAndHostLifecycle"),
        ("apparmor-unconfined", "securityContext.appArmorProfile.type", "appArmorProfile"),
        ("unsafe-sysctl", "securityContext.sysctls[0].name", "sysctls"),
        ("nfs-volume", "volumes[0].nfs", "restrictedVolumes"),
        ("selinux-spc-t", "securityContext.seLinuxOptions.type", "seLinuxOptions"),
    ];
    for (attack, _, _) in &cases {
        podsets.create(&PostParams::default(), &podset(attack, attack)).await.expect("create");
    }
    for (attack, field, check) in cases {
        let message = refusal(&env, attack).await;
        assert!(message.contains("spec.template.spec.") && message.contains(field), "{attack}: {message}");
        assert!(message.contains(&format!("check {check}")), "{attack}: {message}");
        println!("{attack}: {message}");
    }
    assert_eq!(env.op.sum("podset_api_writes_total", "resource=\"deployments\"").await, 0.0, "no Deployment written");
    assert!(env.pods.list(&Default::default()).await.expect("list").items.is_empty(), "no pod in the namespace");

    // Relaxed to baseline by the administrator's grant (this namespace is the operator's
    // --reach-namespace): the NFS volume is allowed, an unconfined AppArmor profile is not.
    let mut relaxed = common::podset("relaxed-nfs", 1);
    relaxed.metadata.labels =
        Some([("track".to_string(), "baseline".to_string()), (ATTACK.to_string(), "nfs-volume".to_string())].into());
    let mut still = common::podset("relaxed-apparmor", 1);
    still.metadata.labels = Some(
        [("track".to_string(), "baseline".to_string()), (ATTACK.to_string(), "apparmor-unconfined".to_string())].into(),
    );
    let baseline = LabelSelector {
        match_labels: Some([("track".to_string(), "baseline".to_string())].into()),
        ..Default::default()
    };
    let reach = podset_host::crd::Reach { pod_security: podset_host::crd::PodSecurity::Baseline, ..Default::default() };
    common::publish_reaching(&client, &ns, "a-baseline", "baseline-module", &hostile, Some(baseline), reach).await;
    eventually("the baseline policy to load", T, || async {
        rps.get("a-baseline").await.ok()?.status?.loaded_digest.map(|_| ())
    })
    .await;
    podsets.create(&PostParams::default(), &relaxed).await.expect("create");
    podsets.create(&PostParams::default(), &still).await.expect("create");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let nfs =
        eventually("the NFS Deployment under baseline", T, || async { deployments.get("relaxed-nfs").await.ok() })
            .await;
    let spec = nfs.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert!(spec.volumes.unwrap_or_default().iter().any(|v| v.nfs.is_some()));
    assert!(spec.security_context.and_then(|s| s.run_as_non_root).is_none(), "baseline sets nothing");
    let message = refusal(&env, "relaxed-apparmor").await;
    assert!(message.contains("check appArmorProfile"), "{message}");
    env.cleanup().await;
}
