//! The pod statuses a kubelet would report, as merge patches for the `status` subresource.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// Annotation that makes the simulator fail a pod instead of running it.
pub const FAIL_ANNOTATION: &str = "sim.podset.dev/fail";

pub fn wants_failure(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAIL_ANNOTATION))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Phase Running with every container ready, or phase Failed with every container exited 1.
/// `metadata.uid` is included as a precondition (as the kubelet's status manager does): if the
/// name now belongs to a new pod, the apiserver rejects the patch instead of applying it there.
pub fn patch(pod: &Pod, failed: bool) -> Value {
    let now = Time(Timestamp::now());
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let ip = pod_ip(uid);
    let ready = if failed { "False" } else { "True" };
    let condition = |type_: &str, status: &str| json!({ "type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": now });
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    let container_statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let state = if failed {
                json!({ "terminated": {
                    "exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now,
                    "containerID": format!("sim://{uid}/{}", c.name),
                }})
            } else {
                json!({ "running": { "startedAt": now } })
            };
            json!({
                "name": c.name,
                "image": c.image.as_deref().unwrap_or_default(),
                "imageID": format!("sim://{}", c.image.as_deref().unwrap_or_default()),
                "containerID": format!("sim://{uid}/{}", c.name),
                "ready": !failed,
                "started": !failed,
                "restartCount": 0,
                "state": state,
            })
        })
        .collect();
    json!({
        "metadata": { "uid": uid },
        "status": {
            "phase": if failed { "Failed" } else { "Running" },
            "conditions": [
                condition("Initialized", "True"),
                condition("Ready", ready),
                condition("ContainersReady", ready),
                condition("PodScheduled", "True"),
            ],
            "containerStatuses": container_statuses,
            "hostIP": "127.0.0.1",
            "podIP": ip,
            "podIPs": [{ "ip": ip }],
            "startTime": now,
        }
    })
}

/// A stable loopback address per pod (127.0.a.b, never 127.0.0.1 which is the "host").
fn pod_ip(uid: &str) -> String {
    // FNV-1a: deterministic across runs, unlike std's RandomState hasher.
    let h = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("127.0.{}.{}", 1 + h % 254, 1 + (h >> 8) % 254)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use kube::api::ObjectMeta;

    fn pod(annotation: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u-1".into()),
                annotations: annotation.map(|v| [(FAIL_ANNOTATION.to_owned(), v.to_owned())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container { name: "app".into(), image: Some("busybox".into()), ..Default::default() }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn failure_annotation() {
        assert!(wants_failure(&pod(Some("true"))));
        assert!(!wants_failure(&pod(Some("false"))));
        assert!(!wants_failure(&pod(None)));
    }

    #[test]
    fn running_and_failed_patches() {
        let running = patch(&pod(None), false);
        assert_eq!(running["metadata"]["uid"], "u-1");
        assert_eq!(running["status"]["phase"], "Running");
        assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
        assert!(running["status"]["containerStatuses"][0]["state"]["running"].is_object());

        let failed = patch(&pod(Some("true")), true);
        assert_eq!(failed["status"]["phase"], "Failed");
        let state = &failed["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(state["exitCode"], 1);
        assert_eq!(failed["status"]["conditions"][1]["status"], "False");
    }

    #[test]
    fn pod_ips_are_loopback_and_stable() {
        let ip = pod_ip("abc");
        assert_eq!(ip, pod_ip("abc"));
        assert!(ip.starts_with("127.0.") && ip != "127.0.0.1");
    }
}
