//! The Pod Security Standards' "restricted" profile, enforced on every pod and pod
//! template the host creates for any parent: a PodSet's pods, a Deployment's template,
//! a Job's, a CronJob's. What a spec leaves unset is set to the restricted value;
//! what a spec explicitly weakens is refused, so nobody is surprised by a pod running
//! differently from what they wrote. The spec is edited as JSON so that fields this
//! host does not know survive.

use serde_json::{Map, Value, json};

/// A pod spec that asks for something the restricted profile forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {why}")]
pub struct Weakening {
    /// A JSON path within the object, e.g. `spec.template.spec.hostNetwork`.
    pub field: String,
    pub why: &'static str,
}

/// Restricts every pod spec inside `object` (of `kind`): the object itself for a Pod,
/// `spec.template.spec` for workloads, `spec.jobTemplate.spec.template.spec` for a
/// CronJob.
pub fn object(kind: &str, object: &mut Value) -> Result<(), Weakening> {
    for path in pod_spec_paths(kind) {
        let pointer: String = path.iter().map(|k| format!("/{k}")).collect();
        if let Some(spec) = object.pointer_mut(&pointer) {
            pod_spec(&path.join("."), spec)?;
        }
    }
    Ok(())
}

/// Where an object of `kind` holds pod specs.
pub fn pod_spec_paths(kind: &str) -> &'static [&'static [&'static str]] {
    if kind == "Pod" {
        &[&["spec"]]
    } else {
        &[&["spec", "template", "spec"], &["spec", "jobTemplate", "spec", "template", "spec"]]
    }
}

/// Restricts one pod spec, found at `path` (for messages).
pub fn pod_spec(path: &str, spec: &mut Value) -> Result<(), Weakening> {
    let Some(spec) = spec.as_object_mut() else {
        return Err(Weakening { field: path.into(), why: "is not an object" });
    };
    let refuse = |field: String, why| Err(Weakening { field, why });
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(host) == Some(&Value::Bool(true)) {
            return refuse(format!("{path}.{host}"), "shares a host namespace, which the restricted profile forbids");
        }
    }
    if let Some(volumes) = spec.get("volumes").and_then(Value::as_array) {
        for (i, v) in volumes.iter().enumerate() {
            if v.get("hostPath").is_some() {
                return refuse(
                    format!("{path}.volumes[{i}].hostPath"),
                    "mounts the node's filesystem, which the restricted profile forbids",
                );
            }
        }
    }

    let psc = object_at(spec, "securityContext");
    run_as_non_root(&format!("{path}.securityContext"), psc)?;
    seccomp(&format!("{path}.securityContext"), psc, true)?;

    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for (i, c) in containers.iter_mut().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            let Some(c) = c.as_object_mut() else { return refuse(at, "is not an object") };
            if let Some(ports) = c.get("ports").and_then(Value::as_array)
                && ports.iter().any(|p| p.get("hostPort").and_then(Value::as_i64).is_some_and(|h| h != 0))
            {
                return refuse(format!("{at}.ports"), "binds a host port, which the restricted profile forbids");
            }
            container(&format!("{at}.securityContext"), object_at(c, "securityContext"))?;
        }
    }
    Ok(())
}

fn container(at: &str, sc: &mut Map<String, Value>) -> Result<(), Weakening> {
    let refuse = |field: &str, why| Err(Weakening { field: format!("{at}.{field}"), why });
    match sc.get("privileged") {
        Some(Value::Bool(true)) => {
            return refuse("privileged", "is true; the restricted profile forbids privileged containers");
        }
        _ => {
            sc.insert("privileged".into(), Value::Bool(false));
        }
    }
    match sc.get("allowPrivilegeEscalation") {
        Some(Value::Bool(true)) => {
            return refuse("allowPrivilegeEscalation", "is true; the restricted profile forbids it");
        }
        _ => {
            sc.insert("allowPrivilegeEscalation".into(), Value::Bool(false));
        }
    }
    if sc.get("procMount").and_then(Value::as_str).is_some_and(|m| m != "Default") {
        return refuse("procMount", "unmasks /proc, which the restricted profile forbids");
    }
    run_as_non_root(at, sc)?;
    seccomp(at, sc, false)?;
    let caps = object_at(sc, "capabilities");
    // Only NET_BIND_SERVICE may be added under the restricted profile.
    if let Some(add) = caps.get("add").and_then(Value::as_array)
        && add.iter().any(|c| c.as_str() != Some("NET_BIND_SERVICE"))
    {
        return refuse(
            "capabilities.add",
            "adds capabilities beyond NET_BIND_SERVICE, which the restricted profile forbids",
        );
    }
    let drop = caps.entry("drop").or_insert_with(|| json!([]));
    match drop.as_array_mut() {
        Some(d) if !d.iter().any(|c| c.as_str() == Some("ALL")) => d.push(json!("ALL")),
        Some(_) => {}
        None => return refuse("capabilities.drop", "is not a list"),
    }
    Ok(())
}

fn run_as_non_root(at: &str, sc: &mut Map<String, Value>) -> Result<(), Weakening> {
    if sc.get("runAsNonRoot") == Some(&Value::Bool(false)) {
        return Err(Weakening {
            field: format!("{at}.runAsNonRoot"),
            why: "is false; the restricted profile requires non-root",
        });
    }
    if sc.get("runAsUser").and_then(Value::as_i64) == Some(0) {
        return Err(Weakening {
            field: format!("{at}.runAsUser"),
            why: "is 0 (root); the restricted profile requires non-root",
        });
    }
    sc.insert("runAsNonRoot".into(), Value::Bool(true));
    Ok(())
}

/// The profile must be RuntimeDefault or Localhost; the pod level gets RuntimeDefault
/// when it has none (containers inherit it).
fn seccomp(at: &str, sc: &mut Map<String, Value>, set_default: bool) -> Result<(), Weakening> {
    match sc.get("seccompProfile").and_then(|p| p.get("type")).and_then(Value::as_str) {
        Some("RuntimeDefault" | "Localhost") => Ok(()),
        Some(_) => Err(Weakening {
            field: format!("{at}.seccompProfile.type"),
            why: "is not RuntimeDefault or Localhost; the restricted profile requires a seccomp profile",
        }),
        None => {
            if set_default {
                sc.insert("seccompProfile".into(), json!({ "type": "RuntimeDefault" }));
            }
            Ok(())
        }
    }
}

/// The object under `key`, created empty when absent (or null).
fn object_at<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(pod_spec: Value) -> Value {
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "spec": { "template": { "spec": pod_spec } } })
    }

    #[test]
    fn unset_fields_get_the_restricted_values() {
        let mut d = deployment(json!({ "containers": [{ "name": "m", "image": "memcached:1.6.18" }] }));
        object("Deployment", &mut d).expect("restricted");
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(spec["securityContext"]["runAsNonRoot"], json!(true));
        assert_eq!(spec["securityContext"]["seccompProfile"]["type"], json!("RuntimeDefault"));
        let sc = &spec["containers"][0]["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], json!(false));
        assert_eq!(sc["privileged"], json!(false));
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    }

    #[test]
    fn explicit_weakenings_are_refused_with_their_field() {
        let cases = [
            (json!({ "hostNetwork": true, "containers": [] }), "hostNetwork"),
            (json!({ "volumes": [{ "name": "h", "hostPath": { "path": "/" } }], "containers": [] }), "hostPath"),
            (json!({ "containers": [{ "name": "c", "securityContext": { "privileged": true } }] }), "privileged"),
            (json!({ "containers": [{ "name": "c", "securityContext": { "runAsUser": 0 } }] }), "runAsUser"),
            (json!({ "securityContext": { "runAsNonRoot": false }, "containers": [] }), "runAsNonRoot"),
            (
                json!({ "initContainers": [{ "name": "c", "securityContext": { "capabilities": { "add": ["SYS_ADMIN"] } } }], "containers": [] }),
                "capabilities.add",
            ),
            (json!({ "containers": [{ "name": "c", "ports": [{ "containerPort": 80, "hostPort": 80 }] }] }), "ports"),
            (
                json!({ "securityContext": { "seccompProfile": { "type": "Unconfined" } }, "containers": [] }),
                "seccompProfile",
            ),
        ];
        for (spec, field) in cases {
            let mut d = deployment(spec);
            let e = object("Deployment", &mut d).expect_err(field);
            assert!(e.field.contains(field) && e.field.starts_with("spec.template.spec"), "{e}");
        }
        let mut pod = json!({ "kind": "Pod", "spec": { "hostPID": true, "containers": [] } });
        assert_eq!(object("Pod", &mut pod).expect_err("hostPID").field, "spec.hostPID");
        let mut cron =
            json!({ "spec": { "jobTemplate": { "spec": { "template": { "spec": { "hostIPC": true } } } } } });
        assert!(object("CronJob", &mut cron).is_err());
    }

    #[test]
    fn objects_without_pod_specs_are_left_alone() {
        let mut cm = json!({ "kind": "ConfigMap", "data": { "a": "b" } });
        let before = cm.clone();
        object("ConfigMap", &mut cm).expect("nothing to restrict");
        assert_eq!(cm, before);
    }
}
