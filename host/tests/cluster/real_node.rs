//! PodSets on the real node (kubelet, containerd, CNI of `hack/node.sh`): their
//! containers run, print, exit and fail for real, and the operator answers what the
//! kubelet reports.

use podset_test_support as common;

use std::time::{Duration, Instant};

use common::{Env, active_pods, eventually, kubectl, require_real_node};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use podset_host::crd::{PodSet, PodSetSpec};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

/// A PodSet whose pods print their name, then wait until `/flag/fail` appears and exit 3.
/// `restartPolicy: Never`, so that exit leaves the pod `Failed`.
fn failing_on_demand(name: &str, replicas: i32) -> PodSet {
    let template = json!({
        "spec": {
            "restartPolicy": "Never",
            "securityContext": { "runAsUser": 1000 },
            "volumes": [{ "name": "flag", "emptyDir": {} }],
            "containers": [{
                "name": "app",
                "image": "busybox:1.35",
                "command": ["sh", "-c", "echo \"running as $HOSTNAME\"; until [ -e /flag/fail ]; do sleep 0.2; done; exit 3"],
                "volumeMounts": [{ "name": "flag", "mountPath": "/flag" }],
            }],
        }
    });
    PodSet::new(
        name,
        PodSetSpec {
            replicas,
            template: Some(serde_json::from_value(template).expect("template literal")),
            policy_ref: None,
        },
    )
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn exit_code(pod: &Pod) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    Some(statuses.first()?.state.as_ref()?.terminated.as_ref()?.exit_code)
}

#[tokio::test]
async fn a_podsets_containers_run_print_and_a_failed_one_is_replaced() {
    let env = Env::new("realnode").await;
    let node = require_real_node(&env.client).await;
    let applied = Instant::now();
    env.podsets.create(&PostParams::default(), &failing_on_demand("app", 2)).await.expect("create PodSet");
    let names = env.converged("app", 2).await;
    println!("2 real pods Running and Ready {:?} after the PodSet was created", applied.elapsed());

    for name in &names {
        let pod = env.pods.get(name).await.expect("pod");
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some(node.as_str()),
            "{name} runs on {node}"
        );
        assert!(pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()).is_some(), "{name} has a pod IP");
        // The container's own output, through the API server and the kubelet.
        let logs = eventually(&format!("{name}'s output in kubectl logs"), T, || async {
            let (ok, out) = kubectl(&["logs", "-n", &env.ns, name]);
            (ok && out.contains(&format!("running as {name}"))).then_some(out)
        })
        .await;
        println!("kubectl logs {name}: {}", logs.trim());
    }

    // One container exits 3: the kubelet reports the pod Failed, and the PodSet replaces it.
    let victim = names[0].clone();
    let (ok, out) = kubectl(&["exec", "-n", &env.ns, &victim, "--", "touch", "/flag/fail"]);
    assert!(ok, "kubectl exec into {victim}: {out}");
    let failed = eventually(&format!("{victim} to fail"), T, || async {
        let pod = env.pods.get(&victim).await.ok()?;
        (phase(&pod) == Some("Failed")).then_some(pod)
    })
    .await;
    assert_eq!(exit_code(&failed), Some(3), "the kubelet reports the container's exit code");
    let after = env.converged("app", 2).await;
    assert!(!after.contains(&victim), "the Failed pod is not counted: {after:?}");
    assert!(after.contains(&names[1]), "the healthy pod stays: {after:?}");
    let still = env.pods.get(&victim).await.expect("the Failed pod is left for inspection, as ReplicaSets do");
    assert_eq!(phase(&still), Some("Failed"));
    assert_eq!(active_pods(&env.pods, "app").await.len(), 2);
    env.cleanup().await;
}
