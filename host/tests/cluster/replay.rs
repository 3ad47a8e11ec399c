//! Recorded real decisions (`run --record-dir`) replayed offline (`policy replay`):
//! the module that made them decides the same, a changed module is flagged. Against
//! the real test control plane; the Memcached and Netperf walkthroughs record and
//! replay too (memcached.rs, netperf.rs).

use podset_test_support as common;

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use common::{Env, replay, replay_summary};

/// The recorded files under `dir`.
fn recorded(dir: &Path) -> Vec<std::path::PathBuf> {
    podset_host::author::replay::files(&[dir.to_path_buf()]).expect("list recordings")
}

#[tokio::test]
async fn the_podset_walkthrough_recorded_replays_exactly_and_the_canary_is_flagged() {
    let record = tempfile::tempdir().expect("tempdir");
    let dir = common::policy_dir();
    let (podset, canary) = (dir.join("podset.wasm"), dir.join("fixtures/canary.wasm"));
    let mut env = Env::with_args("record", &podset, &["--record-dir", &record.path().to_string_lossy()]).await;

    // The walkthrough (docs/how-to/roll-out-a-policy-change.md): create, scale up, scale down.
    env.create("web", 2).await;
    env.converged_by("web", 2, None).await;
    env.scale("web", 4).await;
    env.converged_by("web", 4, None).await;
    env.scale("web", 1).await;
    env.converged_by("web", 1, None).await;
    let written = env.op.sum("podset_decisions_recorded_total", r#"result="written""#).await;
    let dropped = env.op.sum("podset_decisions_recorded_total", r#"result="dropped""#).await;
    // The writer runs beside the reconciles: give it a moment to catch up.
    let object = record.path().join("PodSet.app.example.com").join(&env.ns).join("web");
    common::eventually("the decisions to be written", Duration::from_secs(10), || async {
        (recorded(&object).len() as f64 >= written && written > 0.0).then_some(())
    })
    .await;
    // Stopped before the files are counted: a pod's late status update makes one
    // more decision, which CI once saw land between the count and the replay.
    assert!(env.op.terminate(Duration::from_secs(10)), "the operator stops cleanly");
    let files = recorded(&object);
    assert_eq!(dropped, 0.0, "nothing dropped at this pace");
    assert!(files.len() >= 4, "a decision per step at least: {files:?}");
    let first = std::fs::read_to_string(&files[0]).expect("read");
    let digest = podset_host::sandbox::Digest::of(&common::read_policy("podset.wasm")).to_string();
    assert!(first.contains(&format!("digest: {digest}")), "the recording names the module:\n{first}");

    // Replayed with the module that made them: the same decisions, every one.
    let (ok, out) = replay(&[podset.as_os_str(), record.path().as_os_str()]);
    assert!(ok, "{out}");
    let (n, agree, differ, failed) = replay_summary(&out).expect("a summary");
    assert_eq!((n, agree, differ, failed), (files.len(), files.len(), 0, 0), "{out}");

    // The canary against the baseline on the same inputs: flagged, with the difference.
    let (ok, out) =
        replay(&[canary.as_os_str(), record.path().as_os_str(), OsStr::new("--baseline"), podset.as_os_str()]);
    assert!(!ok, "a changed module fails the replay:\n{out}");
    let (_, _, differ, failed) = replay_summary(&out).expect("a summary");
    assert!(differ > 0 && failed == 0, "{out}");
    assert!(out.contains("app.example.com/policy-variant"), "the canary's extra pod label is in the diff:\n{out}");
    assert!(out.contains("--- baseline") && out.contains("+++ module"), "{out}");
    // Against the recorded decisions, and with --report-only: reported, exit 0.
    let (ok, out) = replay(&[canary.as_os_str(), record.path().as_os_str(), OsStr::new("--report-only")]);
    assert!(ok, "--report-only exits 0:\n{out}");
    assert!(replay_summary(&out).is_some_and(|(_, _, d, _)| d > 0), "{out}");
    println!("recorded {} decisions; canary against podset:\n{out}", files.len());

    // One live object turned into a test case, with no operator running.
    let case = record.path().join("web-now.yaml");
    let object = format!("{}/web", env.ns);
    let (ok, out) = common::policy_cli(&[
        OsStr::new("record"),
        OsStr::new("podsets"),
        OsStr::new(&object),
        OsStr::new("--policy"),
        podset.as_os_str(),
        OsStr::new("-o"),
        case.as_os_str(),
    ]);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&case).expect("the recorded case");
    let live = common::active_pods(&env.pods, "web").await;
    assert_eq!(live.len(), 1);
    assert!(text.contains(&live[0]) && text.contains(&format!("digest: {digest}")), "{text}");
    let (ok, out) = common::policy_cli(&[OsStr::new("test"), podset.as_os_str(), case.as_os_str()]);
    assert!(ok && out.contains("1 passed, 0 failed"), "the recorded case passes as a scenario:\n{out}");
    // A module of another kind is refused with a clear message.
    let memcached = dir.join("memcached.wasm");
    let (ok, out) = common::policy_cli(&[
        OsStr::new("record"),
        OsStr::new("podsets"),
        OsStr::new(&object),
        OsStr::new("--policy"),
        memcached.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("-"),
    ]);
    assert!(!ok && out.contains("not podsets"), "{out}");
    env.cleanup().await;
}
