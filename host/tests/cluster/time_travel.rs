//! Time travel (Sieve, OSDI '22): a parent deleted and recreated under the same name
//! while the operator does not see it happen: paused (SIGSTOP: its watches deliver the
//! deletion, the garbage collector's pod deletions and the new object all at once when
//! it resumes) or down (it starts against a cluster where the name is another object).
//! The new object's children must be the new object's: none of the old one counted,
//! adopted or deleted by the operator (the garbage collector removes them).

use podset_test_support as common;

use std::time::Duration;

use common::audit::AuditLog;
use common::{Env, eventually};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, PostParams};

#[tokio::test]
async fn a_parent_recreated_under_its_name_unseen_by_the_operator_gets_only_children_of_its_own() {
    let mut env = Env::new("timetravel").await;
    common::require_sim_node(&env.client).await;
    let audit = AuditLog::open();
    // The operator's requests (its User-Agent); the test itself writes no pod.
    let agent = "podset-host/";
    for how in ["paused", "down"] {
        let name = format!("web-{how}");
        env.create(&name, 3).await;
        let old_pods = env.converged(&name, 3).await;
        let old_uid = env.podsets.get(&name).await.expect("PodSet").uid().expect("uid");
        let mark = audit.mark();
        let pid = env.op.pid().to_string();
        if how == "paused" {
            assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().expect("kill").success());
        } else {
            env.op.kill();
        }
        env.podsets.delete(&name, &DeleteParams::background()).await.expect("delete PodSet");
        eventually(&format!("{name} to be gone"), Duration::from_secs(30), || async {
            matches!(env.podsets.get(&name).await, Err(kube::Error::Api(ref s)) if s.code == 404).then_some(())
        })
        .await;
        env.podsets.create(&PostParams::default(), &common::podset(&name, 2)).await.expect("recreate PodSet");
        let new_uid = env.podsets.get(&name).await.expect("PodSet").uid().expect("uid");
        assert_ne!(old_uid, new_uid);
        if how == "paused" {
            assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().expect("kill").success());
        } else {
            env.op.respawn();
            env.op.ready().await;
        }

        let pods = env.converged(&name, 2).await;
        let all: Vec<Pod> = env.pods.list(&ListParams::default()).await.expect("pods").items;
        for p in all.iter().filter(|p| pods.contains(&p.name_any())) {
            let owners: Vec<&str> = p.owner_references().iter().map(|o| o.uid.as_str()).collect();
            assert_eq!(owners, [new_uid.as_str()], "{how}: pod {} belongs to the new {name} only", p.name_any());
        }
        assert!(old_pods.iter().all(|o| !pods.contains(o)), "{how}: no pod of the old {name} kept: {pods:?}");
        eventually(&format!("{how}: the old {name}'s pods to be collected"), Duration::from_secs(60), || async {
            let left = env.pods.list(&ListParams::default()).await.ok()?.items;
            (!left.iter().any(|p| old_pods.contains(&p.name_any()))).then_some(())
        })
        .await;

        // The audit log: the operator created the new object's 2 pods, and touched none of the old ones.
        let entries = audit.since(&mark);
        let ours: Vec<_> =
            entries.iter().filter(|e| e.user_agent.contains(agent) && e.is("pods", &env.ns) && e.succeeded()).collect();
        let created = common::audit::operator_pod_writes(&entries, &env.ns, "create");
        let touched: Vec<String> = ours
            .iter()
            .filter(|e| e.object_ref.name.as_ref().is_some_and(|n| old_pods.contains(n)))
            .map(|e| format!("{} {:?}", e.verb, e.object_ref.name))
            .collect();
        assert_eq!(created, 2, "{how}: the operator created exactly the new {name}'s 2 pods");
        assert!(touched.is_empty(), "{how}: the operator wrote to pods of the old {name}: {touched:?}");
        println!(
            "time travel ({how}): the new {name} got {created} pods of its own; the old one's 3 were left to the GC"
        );
    }
    env.cleanup().await;
}
