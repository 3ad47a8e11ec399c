//! The decision: the tenant's namespace in wave 0, what goes in it in wave 1; the
//! status says what is in place.
//!
//! A namespace is usable only once it is `Active`: the host holds wave 1 until then
//! (`podset.dev/wave`), and says so on the Tenant (condition `WaitingForWave`). The
//! policy states the order; it does not wait by hand. Deleting the Tenant
//! deletes all of it: every child carries the Tenant as its owner, and the garbage
//! collector removes them (the namespace, and with it what is inside).

use policy_sdk::conditions::{self, Condition};
use policy_sdk::{Action, Input, Object, PolicyError, Status, apply, in_wave};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::types::{Quota, TenantSpec, TenantStatus};
use crate::{LIMIT_RANGE, NAMESPACE, NETWORK_POLICY, RESOURCE_QUOTA, ROLE_BINDING};

/// The label every namespace of a tenant carries, with the Tenant's name.
pub const TENANT_LABEL: &str = "tenancy.example.com/tenant";
/// The names of the objects inside the namespace.
pub const QUOTA: &str = "tenant";
pub const LIMITS: &str = "tenant";
pub const EDITORS: &str = "tenant-edit";
pub const DENY_ALL: &str = "default-deny";

pub fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let parent = &input.parent;
    if parent.meta.deleting {
        // The garbage collector removes the children: nothing to decide.
        return Ok(Vec::new());
    }
    let spec: TenantSpec = parent.spec()?;
    let current: TenantStatus = parent.status()?;
    let name = &parent.meta.name;
    let mut actions = vec![apply(&namespace(name))?];
    let active = input.child(NAMESPACE, name).map(phase).transpose()?.flatten().as_deref() == Some("Active");
    for object in inside(name, &spec) {
        actions.push(apply(&in_wave(object, 1))?);
    }
    let next = status(input, active, &current);
    actions.extend(next.update_from(&current)?);
    Ok(actions)
}

/// The namespace, named after the Tenant, under the `restricted` Pod Security profile.
pub fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                TENANT_LABEL: name,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted"
            }
        }
    })
}

/// What goes in the namespace `ns`.
pub fn inside(ns: &str, spec: &TenantSpec) -> Vec<Value> {
    let Quota { cpu, memory, pods } = &spec.quota;
    let meta = |name: &str| json!({ "name": name, "namespace": ns });
    vec![
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(QUOTA),
            "spec": { "hard": {
                "requests.cpu": cpu, "limits.cpu": cpu,
                "requests.memory": memory, "limits.memory": memory,
                "pods": pods.to_string()
            } }
        }),
        json!({
            "apiVersion": "v1", "kind": "LimitRange", "metadata": meta(LIMITS),
            "spec": { "limits": [{
                "type": "Container",
                "default": { "cpu": "500m", "memory": "512Mi" },
                "defaultRequest": { "cpu": "100m", "memory": "128Mi" }
            }] }
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(EDITORS),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": spec.group }]
        }),
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(DENY_ALL),
            "spec": { "podSelector": {}, "policyTypes": ["Ingress", "Egress"] }
        }),
    ]
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamespaceStatus {
    phase: Option<String>,
}

fn phase(ns: &Object) -> Result<Option<String>, PolicyError> {
    Ok(ns.status::<NamespaceStatus>()?.phase)
}

fn status(input: &Input, active: bool, current: &TenantStatus) -> TenantStatus {
    let name = &input.parent.meta.name;
    let kinds = [(RESOURCE_QUOTA, QUOTA), (LIMIT_RANGE, LIMITS), (ROLE_BINDING, EDITORS), (NETWORK_POLICY, DENY_ALL)];
    let mut ready: Vec<String> = kinds
        .iter()
        .filter(|(kind, object)| input.child(*kind, object).is_some())
        .map(|(kind, object)| format!("{}/{object}", kind.kind))
        .collect();
    let missing: Vec<String> =
        kinds.iter().map(|(kind, object)| format!("{}/{object}", kind.kind)).filter(|k| !ready.contains(k)).collect();
    let exists = input.child(NAMESPACE, name).is_some();
    if active {
        ready.push(format!("Namespace/{name}"));
    }
    ready.sort();
    let (ok, reason, message) = match (exists, active, missing.is_empty()) {
        (false, _, _) => (false, "CreatingNamespace", format!("creating namespace {name}")),
        (true, false, _) => (false, "WaitingForNamespace", format!("namespace {name} is not active yet")),
        (true, true, false) => (false, "Creating", format!("namespace {name}: waiting for {}", missing.join(", "))),
        (true, true, true) => (true, "Ready", format!("namespace {name} is ready")),
    };
    let mut conditions = current.conditions.clone();
    let generation = input.parent.meta.generation;
    conditions::set(&mut conditions, Condition::new("Ready", ok, reason, message, input.now).generation(generation));
    TenantStatus {
        namespace: exists.then(|| name.clone()),
        ready,
        conditions,
        // The host's to write.
        policy_digest: None,
    }
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{deleting, input, object};

    use super::*;
    use crate::TENANT;

    fn tenant() -> Object {
        let mut t = object(TENANT, "team-a", json!({ "spec": { "group": "team-a-devs" } }));
        t.meta.namespace = String::new();
        t
    }

    fn child(kind: policy_sdk::Kind, name: &str, ns: &str, body: Value) -> Object {
        let mut o = object(kind, name, body);
        o.meta.namespace = ns.into();
        o
    }

    /// The kind and namespace of each applied child.
    fn applied(actions: &[Action]) -> Vec<(String, String)> {
        policy_sdk::testing::applied(actions)
            .iter()
            .map(|v| {
                (v["kind"].as_str().unwrap_or("").into(), v["metadata"]["namespace"].as_str().unwrap_or("").into())
            })
            .collect()
    }

    #[test]
    fn the_namespace_is_wave_0_and_what_goes_in_it_wave_1() {
        // The order is stated, not waited for: every decision applies all of it, and the
        // host holds wave 1 until the namespace is Active.
        let first = reconcile(&input(tenant())).expect("decides");
        let kinds = applied(&first);
        let expected = ["Namespace", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy"];
        assert_eq!(kinds.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), expected);
        assert!(kinds[1..].iter().all(|(_, ns)| ns == "team-a"), "{kinds:?}");
        let waves: Vec<Option<String>> = policy_sdk::testing::applied(&first)
            .iter()
            .map(|v| v["metadata"]["annotations"][policy_sdk::objects::WAVE].as_str().map(String::from))
            .collect();
        assert_eq!(waves[0], None, "the namespace: wave 0");
        assert!(waves[1..].iter().all(|w| w.as_deref() == Some("1")), "{waves:?}");
    }

    #[test]
    fn the_status_says_what_is_in_place() {
        let mut i = input(tenant());
        i.children = vec![
            child(NAMESPACE, "team-a", "", json!({ "status": { "phase": "Active" } })),
            child(RESOURCE_QUOTA, QUOTA, "team-a", json!({})),
        ];
        let s = status(&i, true, &TenantStatus::default());
        assert_eq!(s.namespace.as_deref(), Some("team-a"));
        assert_eq!(s.ready, vec!["Namespace/team-a", "ResourceQuota/tenant"]);
        let ready = conditions::find(&s.conditions, "Ready").expect("Ready");
        assert!(!ready.is_true());
        assert!(ready.message.contains("LimitRange/tenant, RoleBinding/tenant-edit, NetworkPolicy/default-deny"));
        for (kind, name) in [(LIMIT_RANGE, LIMITS), (ROLE_BINDING, EDITORS), (NETWORK_POLICY, DENY_ALL)] {
            i.children.push(child(kind, name, "team-a", json!({})));
        }
        let s = status(&i, true, &TenantStatus::default());
        assert!(conditions::find(&s.conditions, "Ready").expect("Ready").is_true());
        assert_eq!(s.ready.len(), 5);
    }

    #[test]
    fn a_tenant_being_deleted_is_left_to_the_garbage_collector() {
        assert!(reconcile(&input(deleting(tenant()))).expect("decides").is_empty());
    }
}
