//! The decision: the Deployment a Memcached needs, its status, and its finalizer flow.

use policy_sdk::conditions::{self, Condition};
use policy_sdk::{Action, Input, Object, PolicyError, Status, apply, event};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::types::{MemcachedSpec, MemcachedStatus};
use crate::{DEPLOYMENT, INSTANCE_LABEL, NAME_LABEL, POD};

/// The image the seed runs, built locally for the embedded cluster.
pub const IMAGE: &str = "memcached:1.6.18";
/// A non-root user for memcached (the seed's choice).
const RUN_AS_USER: i64 = 1001;

pub fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let parent = &input.parent;
    let spec: MemcachedSpec = parent.spec()?;
    // `policyDigest` is the operator's: neither written nor compared here, or every
    // decision after the operator wrote it would rewrite the status (seen by a shadow).
    let current = MemcachedStatus { policy_digest: None, ..parent.status()? };
    if parent.meta.deleting {
        return finalize(input, &current);
    }
    let mut actions = vec![apply(&deployment(parent, &spec))?];
    let next = observed_status(input, &spec, &current)?;
    actions.extend(next.update_from(&current)?);
    Ok(actions)
}

/// The Deployment named after the Memcached: `size` replicas of memcached, non-root
/// under the restricted profile, its pods labelled so the policy finds them.
pub fn deployment(parent: &Object, spec: &MemcachedSpec) -> Value {
    let name = &parent.meta.name;
    let labels = json!({ NAME_LABEL: "memcached", INSTANCE_LABEL: name });
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "replicas": spec.size,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "memcached",
                        "image": IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        // The seed writes `-p=11211 -m=64`; memcached's getopt then reads
                        // "=64" as 0 MB, and 1.6 refuses to start. Separate values mean what
                        // the seed meant.
                        "command": ["memcached", "-p", spec.container_port.to_string(), "-m", "64", "-o", "modern", "-v"],
                        "ports": [{ "containerPort": spec.container_port, "name": "memcached" }],
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": RUN_AS_USER,
                            "allowPrivilegeEscalation": false,
                            "capabilities": { "drop": ["ALL"] }
                        }
                    }]
                }
            }
        }
    })
}

/// The fields of the Deployment's status the policy reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct DeploymentStatus {
    observed_generation: i64,
    ready_replicas: i32,
    updated_replicas: i32,
    replicas: i32,
}

/// The fields of a pod the policy reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodStatus {
    phase: Option<String>,
}

fn observed_status(
    input: &Input,
    spec: &MemcachedSpec,
    current: &MemcachedStatus,
) -> Result<MemcachedStatus, PolicyError> {
    let (name, now, generation) = (&input.parent.meta.name, input.now, input.parent.meta.generation);
    let deployment = input.child(DEPLOYMENT, name);
    let ds: DeploymentStatus = match deployment {
        Some(d) => d.status()?,
        None => DeploymentStatus::default(),
    };
    let mut nodes = Vec::new();
    for pod in input.related(POD) {
        let phase = pod.status::<PodStatus>()?.phase;
        if !pod.meta.deleting && matches!(phase.as_deref().unwrap_or("Pending"), "Pending" | "Running") {
            nodes.push(pod.meta.name.clone());
        }
    }
    nodes.sort();

    // policy_digest is the host's to write.
    let mut next = MemcachedStatus { conditions: current.conditions.clone(), nodes, policy_digest: None };
    // A Deployment its controller has not acted on yet (no observed generation) is still
    // being created: "Creating" from the apply until that controller's first status. Said
    // "Updating" in between, the status changed there for 36 of 50 Memcacheds created at
    // once; with the host's `Reconciling` keeping its words too, 5.16 status changes per
    // Memcached became 4.40 (a private cluster, 2026-12-01).
    let acted = deployment.filter(|_| ds.observed_generation > 0);
    let available = acted.is_some() && ds.ready_replicas >= spec.size;
    // Said without the count of ready pods, as the Deployment's own conditions are: the
    // count moved at each pod, and each move was a status write (5.0 per Memcached while
    // 50 × 3 converged, against the sample's 3; 4.8 without the count, the rest not split
    // yet; `make bench`, 2026-11-30). The pods are in `nodes`, their count in the
    // Deployment's status.
    //
    // A new Memcached is "Creating" until its Deployment is first ready: that
    // controller's first status (which often arrives after the pods) changes nothing a
    // user reads, and saying "Scaling" from there was a status write of its own.
    let creating = conditions::find(&current.conditions, "Available").is_some_and(|c| c.reason == "Creating");
    let (reason, message) = match acted {
        Some(_) if available => ("Ready", format!("Deployment {name} is ready at size {}", spec.size)),
        Some(_) if !creating => ("Scaling", format!("Deployment {name} is not yet ready at size {}", spec.size)),
        _ => ("Creating", format!("Creating Deployment {name} with {} replicas", spec.size)),
    };
    // Counts the Deployment controller wrote before it saw the Deployment's latest spec
    // are those of the spec before (as `kubectl rollout status` reads them): the rollout
    // is still under way, whatever they say. Seen in the fault suite: "Complete, 1 of 1"
    // written from such a status while the Deployment was being scaled to 3.
    let behind = acted.is_some_and(|d| ds.observed_generation < d.meta.generation);
    let progressing = behind || !available || ds.updated_replicas != spec.size || ds.replicas != spec.size;
    // One pair of words from the apply until the rollout is complete. It said "Ready"
    // (the Deployment cached at the old size), "Updating" (its generation not yet
    // observed), "Ready" again, then "Complete": four status writes for a size 3 -> 1,
    // 4.3 per Memcached while 50 were sized at once against the sample's 1.5 (a private
    // cluster, 2026-12-01).
    let (progress_reason, progress_message) = if reason == "Creating" {
        (reason, message.clone())
    } else if progressing {
        ("Updating", format!("Deployment {name} is rolling out at size {}", spec.size))
    } else {
        ("Complete", message.clone())
    };
    let set = |list: &mut Vec<Condition>, type_, status, reason: &str, message: &str| {
        conditions::set(list, Condition::new(type_, status, reason, message, now).generation(generation))
    };
    set(&mut next.conditions, "Available", available, reason, &message);
    set(&mut next.conditions, "Progressing", progressing, progress_reason, &progress_message);
    // A message even when all is well: `kubectl describe` shows it beside the reason.
    set(&mut next.conditions, "Degraded", false, "AsExpected", "No failure observed");
    Ok(next)
}

/// The seed's finalizer flow: say it on the status (`Degraded`, reason `Finalizing`),
/// emit an Event, and let the host remove the finalizer. The Deployment goes with the
/// Memcached through its owner reference.
fn finalize(input: &Input, current: &MemcachedStatus) -> Result<Vec<Action>, PolicyError> {
    let meta = &input.parent.meta;
    let mut next = current.clone();
    let message = format!("Performing finalizer operations for the custom resource: {}", meta.name);
    conditions::set(
        &mut next.conditions,
        Condition::new("Degraded", true, "Finalizing", message, input.now).generation(meta.generation),
    );
    let mut actions: Vec<Action> = next.update_from(current)?.into_iter().collect();
    actions.push(event(
        true,
        "Deleting",
        format!("Custom Resource {} is being deleted from the namespace {}", meta.name, meta.namespace),
    ));
    actions.push(Action::FinalizeDone);
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{deleting, input, labelled, object};

    use super::*;
    use crate::MEMCACHED;

    fn memcached(size: i32, status: Value) -> Object {
        object(MEMCACHED, "cache", json!({ "spec": { "size": size, "containerPort": 11211 }, "status": status }))
    }

    fn pod(name: &str, phase: &str) -> Object {
        let p = object(POD, name, json!({ "status": { "phase": phase } }));
        labelled(labelled(p, NAME_LABEL, "memcached"), INSTANCE_LABEL, "cache")
    }

    fn status_of(actions: &[Action]) -> Option<MemcachedStatus> {
        policy_sdk::testing::status(actions)
    }

    /// A Deployment whose controller has acted on its spec (generation 1).
    fn deployment_with(replicas: i32, ready: i32) -> Object {
        let mut d = object(DEPLOYMENT, "cache", json!({}));
        d.body = json!({ "spec": { "replicas": replicas }, "status": { "observedGeneration": d.meta.generation,
            "replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas } })
        .to_string();
        d
    }

    #[test]
    fn a_new_memcached_gets_its_deployment_and_a_creating_status() {
        let actions = reconcile(&input(memcached(3, json!({})))).expect("decides");
        let Action::Apply(d) = &actions[0] else { panic!("applies the Deployment first: {actions:?}") };
        let d: Value = serde_json::from_str(d).expect("json");
        assert_eq!(d["spec"]["replicas"], json!(3));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], json!(IMAGE));
        assert_eq!(c["command"], json!(["memcached", "-p", "11211", "-m", "64", "-o", "modern", "-v"]));
        assert_eq!(c["securityContext"]["runAsNonRoot"], json!(true));
        let status = status_of(&actions).expect("a status");
        let available = conditions::find(&status.conditions, "Available").expect("Available");
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("False", "Creating"));
    }

    #[test]
    fn the_status_lists_the_pods_and_a_converged_memcached_costs_nothing_but_the_apply() {
        let mut i = input(memcached(2, json!({})));
        i.children.push(deployment_with(2, 2));
        i.related = vec![pod("cache-b", "Running"), pod("cache-a", "Running"), pod("cache-x", "Failed")];
        let actions = reconcile(&i).expect("decides");
        let status = status_of(&actions).expect("a status");
        assert_eq!(status.nodes, ["cache-a", "cache-b"]);
        assert!(conditions::find(&status.conditions, "Available").is_some_and(Condition::is_true));
        assert!(!conditions::find(&status.conditions, "Progressing").expect("Progressing").is_true());
        // The status written, the next decision changes nothing but re-states the
        // Deployment (which the host drops when every field already holds).
        i.parent = memcached(2, serde_json::to_value(&status).expect("json"));
        i.now += 60_000;
        let again = reconcile(&i).expect("decides");
        assert_eq!(again.len(), 1, "{again:?}");
        assert!(matches!(again[0], Action::Apply(_)));
    }

    #[test]
    fn a_new_memcached_stays_creating_until_its_deployment_is_first_ready() {
        let creating = status_of(&reconcile(&input(memcached(3, json!({})))).expect("decides")).expect("a status");
        let mut i = input(memcached(3, serde_json::to_value(&creating).expect("json")));
        // The Deployment controller's first status, no pod ready: nothing a user reads changed.
        i.children.push(deployment_with(3, 0));
        assert_eq!(status_of(&reconcile(&i).expect("decides")), None);
        // Ready once; from then on a Deployment short of its size is Scaling.
        i.children = vec![deployment_with(3, 3)];
        let ready = status_of(&reconcile(&i).expect("decides")).expect("a status");
        i.parent = memcached(3, serde_json::to_value(&ready).expect("json"));
        i.children = vec![deployment_with(3, 2)];
        let short = status_of(&reconcile(&i).expect("decides")).expect("a status");
        let available = conditions::find(&short.conditions, "Available").expect("Available");
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("False", "Scaling"));
    }

    #[test]
    fn scaling_is_progressing_until_every_pod_is_ready() {
        let mut i = input(memcached(5, json!({})));
        i.children.push(deployment_with(5, 3));
        let status = status_of(&reconcile(&i).expect("decides")).expect("a status");
        let available = conditions::find(&status.conditions, "Available").expect("Available");
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("False", "Scaling"));
        assert_eq!(available.message, "Deployment cache is not yet ready at size 5");
        assert!(conditions::find(&status.conditions, "Progressing").is_some_and(Condition::is_true));
    }

    #[test]
    fn a_pod_becoming_ready_while_scaling_writes_no_status() {
        let mut i = input(memcached(5, json!({})));
        i.children.push(deployment_with(5, 3));
        let status = status_of(&reconcile(&i).expect("decides")).expect("a status");
        // That status written, a fourth pod ready: the same status, so nothing to write.
        i.parent = memcached(5, serde_json::to_value(&status).expect("json"));
        i.children = vec![deployment_with(5, 4)];
        i.now += 1_000;
        assert_eq!(status_of(&reconcile(&i).expect("decides")), None);
    }

    #[test]
    fn a_deployment_status_older_than_its_spec_is_still_progressing() {
        let mut i = input(memcached(3, json!({})));
        // Scaled from 1 to 3 (generation 2); its controller's last status is of generation 1.
        let mut d = deployment_with(1, 1);
        d.meta.generation = 2;
        i.children.push(d);
        let status = status_of(&reconcile(&i).expect("decides")).expect("a status");
        let progressing = conditions::find(&status.conditions, "Progressing").expect("Progressing");
        assert_eq!((progressing.status.as_str(), progressing.reason.as_str()), ("True", "Updating"));
        assert_eq!(progressing.message, "Deployment cache is rolling out at size 3");
        assert!(!conditions::find(&status.conditions, "Available").expect("Available").is_true());

        // Scaled down from 3 to 1 the same way: its 3 ready pods serve, the rollout is not done.
        let mut i = input(memcached(1, json!({})));
        let mut d = deployment_with(3, 3);
        d.meta.generation = 2;
        i.children.push(d);
        let status = status_of(&reconcile(&i).expect("decides")).expect("a status");
        assert!(conditions::find(&status.conditions, "Available").is_some_and(Condition::is_true));
        assert!(conditions::find(&status.conditions, "Progressing").is_some_and(Condition::is_true));
    }

    #[test]
    fn a_size_change_says_updating_once_until_the_rollout_is_complete() {
        // Converged at 3, its status written.
        let mut i = input(memcached(3, json!({})));
        i.children.push(deployment_with(3, 3));
        let converged = status_of(&reconcile(&i).expect("decides")).expect("a status");
        let progressing = |s: &MemcachedStatus| {
            let c = conditions::find(&s.conditions, "Progressing").expect("Progressing").clone();
            (c.status, c.reason, c.message)
        };
        assert_eq!(progressing(&converged).1, "Complete");

        // Sized to 1, the Deployment still cached at 3: updating.
        i.parent = memcached(1, serde_json::to_value(&converged).expect("json"));
        let updating = status_of(&reconcile(&i).expect("decides")).expect("a status");
        let words =
            ("True".to_string(), "Updating".to_string(), "Deployment cache is rolling out at size 1".to_string());
        assert_eq!(progressing(&updating), words);

        // The Deployment at generation 2, not yet observed, then observed with its
        // surplus pods still counted: the same words, so no status write.
        i.parent = memcached(1, serde_json::to_value(&updating).expect("json"));
        i.now += 1_000;
        let mut d = deployment_with(1, 3);
        d.meta.generation = 2;
        d.body = json!({ "spec": { "replicas": 1 }, "status": { "observedGeneration": 1, "replicas": 3,
            "readyReplicas": 3, "updatedReplicas": 3 } })
        .to_string();
        i.children = vec![d.clone()];
        assert_eq!(status_of(&reconcile(&i).expect("decides")), None, "not yet observed");
        d.body = json!({ "spec": { "replicas": 1 }, "status": { "observedGeneration": 2, "replicas": 3,
            "readyReplicas": 3, "updatedReplicas": 1 } })
        .to_string();
        i.children = vec![d];
        assert_eq!(status_of(&reconcile(&i).expect("decides")), None, "observed, not yet at size");

        // At size: complete.
        i.children = vec![deployment_with(1, 1)];
        let done = status_of(&reconcile(&i).expect("decides")).expect("a status");
        assert_eq!(progressing(&done).1, "Complete");
    }

    #[test]
    fn deletion_runs_the_seeds_finalizer_flow() {
        let actions = reconcile(&input(deleting(memcached(3, json!({}))))).expect("decides");
        let status = status_of(&actions).expect("a status");
        let degraded = conditions::find(&status.conditions, "Degraded").expect("Degraded");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "Finalizing"));
        assert!(actions.iter().any(|a| matches!(a, Action::EmitEvent(e) if e.reason == "Deleting")));
        assert_eq!(actions.last(), Some(&Action::FinalizeDone), "finalize-done comes last");
        assert!(!actions.iter().any(|a| matches!(a, Action::Apply(_))), "nothing is applied while finalizing");
    }

    #[test]
    fn a_spec_that_does_not_parse_is_a_policy_error() {
        let e =
            reconcile(&input(object(MEMCACHED, "cache", json!({ "spec": { "size": "three" } })))).expect_err("refused");
        assert_eq!(e.reason, "InvalidSpec");
    }
}
