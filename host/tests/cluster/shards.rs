//! Scale-out beyond one leader: two operators side by side, each serving the
//! namespaces its `--namespace-selector` matches and electing its leader on its own
//! Lease. The API server's audit log (which records each request's User-Agent, the
//! operator's identity) shows that each touched only its own namespaces, also after
//! a namespace moved from one shard to the other by relabelling.

use podset_test_support as common;

use std::time::Duration;

use common::audit::{AuditLog, Entry};
use common::{Env, Operator, eventually, kubeconfig_path, kubectl, policy_dir};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

fn shard(name: &str, selector: &str, lease_ns: &str) -> Operator {
    let policy = policy_dir().join("podset.wasm");
    Operator::spawn_shard(
        name,
        selector,
        &[&policy],
        &kubeconfig_path(),
        &["--leader-elect", "--lease-namespace", lease_ns, "--lease-identity", name],
    )
}

async fn leading(op: &Operator) {
    eventually(&format!("the shard to lead (log: {})", op.log.display()), Duration::from_secs(60), || async {
        let (ready, body) = op.readyz().await?;
        (ready && body.contains("(leader)")).then_some(())
    })
    .await;
}

/// Waits until the shard's gauge says it serves `n` namespaces.
async fn serving(op: &Operator, n: usize) {
    eventually(&format!("the shard to serve {n} namespaces"), Duration::from_secs(30), || async {
        (op.sum("podset_shard_namespaces", "").await == n as f64).then_some(())
    })
    .await;
}

/// The identities (from the User-Agent) that wrote to `namespace`.
fn writers(entries: &[Entry], namespace: &str) -> Vec<String> {
    let mut who: Vec<String> = entries
        .iter()
        .filter(|e| e.succeeded() && e.object_ref.namespace.as_deref() == Some(namespace))
        .filter_map(|e| e.user_agent.strip_prefix("podset-host/"))
        .filter_map(|ua| Some(ua.split_once(" (")?.1.trim_end_matches(')').to_string()))
        .collect();
    who.sort();
    who.dedup();
    who
}

fn label(ns: &str, selector: &str) {
    let (ok, out) = kubectl(&["label", "namespace", ns, selector, "--overwrite"]);
    assert!(ok, "{out}");
}

#[tokio::test]
async fn two_shards_side_by_side_each_touch_only_their_own_namespaces() {
    let client = common::client().await;
    common::require_sim_node(&client).await;
    let ns_a = common::namespace(&client, "shard-a").await;
    let ns_b = common::namespace(&client, "shard-b").await;
    // Selectors of this run only: operators of other tests never match them.
    let (sel_a, sel_b) = (format!("podset.dev/shard={ns_a}"), format!("podset.dev/shard={ns_b}"));
    label(&ns_a, &sel_a);
    label(&ns_b, &sel_b);
    let audit = AuditLog::open();
    let start = audit.mark();
    let (name_a, name_b) = (format!("{ns_a}-op"), format!("{ns_b}-op"));
    let (a, b) = (shard(&name_a, &sel_a, &ns_a), shard(&name_b, &sel_b, &ns_a));
    leading(&a).await;
    leading(&b).await;
    serving(&a, 1).await;
    serving(&b, 1).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns_a);
    let holders: Vec<String> = leases
        .list(&Default::default())
        .await
        .expect("leases")
        .items
        .iter()
        .filter_map(|l| l.spec.as_ref()?.holder_identity.clone())
        .collect();
    assert_eq!(holders.len(), 2, "one Lease per shard, each held: {holders:?}");

    let env = |ns: &str, op: Operator| Env {
        podsets: Api::namespaced(client.clone(), ns),
        pods: Api::namespaced(client.clone(), ns),
        client: client.clone(),
        ns: ns.to_string(),
        op,
    };
    let (env_a, env_b) = (env(&ns_a, a), env(&ns_b, b));
    env_a.create("web", 2).await;
    env_b.create("web", 3).await;
    env_a.converged("web", 2).await;
    env_b.converged("web", 3).await;
    let entries = audit.since(&start);
    assert_eq!(writers(&entries, &ns_a), [name_a.as_str()], "only shard A wrote to its namespace");
    assert_eq!(writers(&entries, &ns_b), [name_b.as_str()], "only shard B wrote to its namespace");

    // Move namespace B to shard A as docs/how-to/deploy.md says: out of B first (B lets go),
    // then into A, which takes it on although nothing about its objects changed.
    let moved = audit.mark();
    let (ok, out) = kubectl(&["label", "namespace", &ns_b, "podset.dev/shard-"]);
    assert!(ok, "{out}");
    serving(&env_b.op, 0).await;
    label(&ns_b, &sel_a);
    serving(&env_a.op, 2).await;
    env_b.scale("web", 1).await;
    env_b.converged("web", 1).await;
    // By arrival: shard B's own last writes, before the move, may be logged after the mark.
    let entries = audit.arrived_since(&moved);
    assert_eq!(writers(&entries, &ns_b), [name_a.as_str()], "after the move, only shard A wrote to namespace B");

    let _ = tokio::join!(env_a.cleanup(), env_b.cleanup());
}
