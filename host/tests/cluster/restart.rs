//! Regression (issue 8): every operator restart created a second full set of pods for
//! every PodSet, because the first reconciles decided from a pod cache that had not
//! listed yet. Restarted over converged PodSets, with SIGTERM and SIGKILL, five times,
//! the operator must create and delete nothing — counted from the API server's audit
//! log, not from the operator's own view.

use podset_test_support as common;

use std::time::Duration;

use common::audit::{AuditLog, pod_creates, pod_deletes, writes_by};
use common::{Env, eventually};

#[tokio::test]
async fn restarting_over_converged_podsets_creates_and_deletes_nothing() {
    let mut env = Env::new("restart").await;
    for (name, n) in [("a", 5), ("b", 5), ("c", 3), ("d", 1)] {
        env.create(name, n).await;
    }
    for (name, n) in [("a", 5), ("b", 5), ("c", 3), ("d", 1)] {
        env.converged(name, n).await;
    }
    let audit = AuditLog::open();
    let mark = audit.mark();
    for round in 0..5 {
        if round % 2 == 0 {
            assert!(env.op.terminate(Duration::from_secs(15)), "SIGTERM stops the operator cleanly");
        } else {
            env.op.kill();
        }
        env.op.respawn();
        env.op.ready().await;
        // The first reconciles after a start are where the duplicates came from:
        // give every PodSet its reconcile, and the pod watch its events.
        eventually("every PodSet reconciled after the restart", Duration::from_secs(30), || async {
            (env.op.sum("podset_reconciles_total", "").await >= 4.0).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let entries = audit.since(&mark);
    let user = "admin";
    let (creates, deletes) = (pod_creates(&entries, &env.ns, user), pod_deletes(&entries, &env.ns, user));
    let writes: Vec<String> = writes_by(&entries, user)
        .filter(|e| e.object_ref.namespace.as_deref() == Some(env.ns.as_str()))
        .map(|e| format!("{} {}", e.verb, e.object_ref.resource))
        .collect();
    assert_eq!((creates, deletes), (0, 0), "5 restarts over converged PodSets wrote: {writes:?}");
    for (name, n) in [("a", 5), ("b", 5), ("c", 3), ("d", 1)] {
        env.converged(name, n).await;
    }
    env.cleanup().await;
}
