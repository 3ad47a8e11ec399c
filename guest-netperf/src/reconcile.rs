//! The state machine. Each call reads the phase from the status, looks at the two
//! pods the Netperf owns, takes at most one step and writes the next phase. A step
//! whose status write was lost (the operator died in between) is recognised by its
//! pod being there, and is not taken twice: the pods have fixed names, and a pod the
//! host created but has not seen yet counts as there.

use policy_sdk::conditions::{self, Condition};
use policy_sdk::{Action, Input, Object, PolicyError, Status, create, delete, error, event};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::POD;
use crate::iperf;
use crate::types::{NetperfSpec, NetperfStatus, Phase};

/// The image the pods run, built locally for the embedded node (`hack/images.sh`).
pub const IMAGE: &str = "iperf3:3.12";
/// The port the server listens on.
pub const PORT: i32 = 5201;
/// How long past its duration a test may run (or its server take to start) before
/// it is failed.
pub const GRACE_MS: i64 = 60_000;
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

pub fn server_name(netperf: &str) -> String {
    format!("{netperf}-server")
}

pub fn client_name(netperf: &str) -> String {
    format!("{netperf}-client")
}

pub fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let parent = &input.parent;
    // The pods go with the Netperf (owner references); nothing to do.
    if parent.meta.deleting {
        return Ok(Vec::new());
    }
    let spec: NetperfSpec = parent.spec()?;
    if !(1..=60).contains(&spec.duration) {
        return Err(error("InvalidSpec", format!("spec.duration is {}; it must be 1..=60 seconds", spec.duration)));
    }
    let current: NetperfStatus = parent.status()?;
    let name = &parent.meta.name;
    let step =
        Step { input, spec, name, server: seen(input, &server_name(name))?, client: seen(input, &client_name(name))? };

    let mut next = current.clone();
    let mut actions = Vec::new();
    match current.status {
        Phase::Initial => step.initial(&mut next, &mut actions)?,
        Phase::Server => step.server(&mut next, &mut actions)?,
        Phase::Test => step.test(&mut next, &mut actions),
        Phase::Done | Phase::Error => {}
    }
    step.finish(&current, &next, &mut actions);
    set_complete(&mut next, input);
    actions.extend(next.update_from(&current)?);
    Ok(actions)
}

/// What one decision looks at: the input, the spec, and the two pods as seen.
struct Step<'a> {
    input: &'a Input,
    spec: NetperfSpec,
    name: &'a str,
    server: Seen<'a>,
    client: Seen<'a>,
}

impl Step<'_> {
    /// When a pod's part of the test is overdue: its duration and the grace after its start.
    fn deadline(&self, pod: &Object) -> i64 {
        pod.meta.created_at + i64::from(self.spec.duration) * 1000 + GRACE_MS
    }

    /// Initial: create the server pod.
    fn initial(&self, next: &mut NetperfStatus, actions: &mut Vec<Action>) -> Result<(), PolicyError> {
        let name = self.name;
        // Present already: this step was taken and its status write lost.
        if matches!(self.server, Seen::Absent) {
            actions.push(create(&server_pod(&self.input.parent, &self.spec))?);
            actions.push(event(false, "ServerCreated", format!("Created the server pod {}", server_name(name))));
        }
        next.status = Phase::Server;
        next.server_pod = Some(server_name(name));
        Ok(())
    }

    /// Server: once it serves, create the client pod against its IP.
    fn server(&self, next: &mut NetperfStatus, actions: &mut Vec<Action>) -> Result<(), PolicyError> {
        let name = self.name;
        match &self.server {
            Seen::Absent | Seen::Going => fail(next, format!("the server pod {} vanished", server_name(name))),
            Seen::Creating => {}
            Seen::Present(pod, state) => {
                if let Some(exit) = state.exited() {
                    fail(next, format!("the server pod {} stopped: {exit}", server_name(name)));
                } else if !matches!(self.client, Seen::Absent) {
                    // The client exists: this step was taken and its status write lost. The
                    // test step follows in this decision: the client may have finished
                    // already, and then no event would come to wake the parent (seen: an
                    // operator restarted slowly under load after creating the client stayed
                    // in Test for good, the client Succeeded, fault suite 2026-11-27).
                    next.status = Phase::Test;
                    next.client_pod = Some(client_name(name));
                    self.test(next, actions);
                } else if let Some(ip) = state.serving() {
                    actions.push(create(&client_pod(&self.input.parent, &self.spec, ip))?);
                    actions.push(event(
                        false,
                        "TestStarted",
                        format!("Server {ip} serving; created the client pod {}", client_name(name)),
                    ));
                    next.status = Phase::Test;
                    next.client_pod = Some(client_name(name));
                } else if self.input.now >= self.deadline(pod) {
                    fail(next, format!("the server pod {} did not serve in time", server_name(name)));
                } else {
                    actions.push(Action::RequeueAfter(millis(self.deadline(pod) - self.input.now)));
                }
            }
        }
        Ok(())
    }

    /// Test: read the client's report once it succeeded; fail on anything else.
    fn test(&self, next: &mut NetperfStatus, actions: &mut Vec<Action>) {
        let name = self.name;
        match (&self.client, &self.server) {
            (Seen::Absent | Seen::Going, _) => {
                fail(next, format!("the client pod {} vanished mid-test", client_name(name)))
            }
            (Seen::Creating, _) => {}
            (Seen::Present(pod, state), _) if state.phase == "Succeeded" => match iperf::speed(state.message()) {
                Ok(bps) => {
                    next.status = Phase::Done;
                    next.speed_bits_per_sec = Some(bps);
                    next.message = None;
                }
                Err(e) => fail(next, format!("{}: {e}", pod.meta.name)),
            },
            (Seen::Present(pod, state), _) if state.phase == "Failed" => {
                let exit = state.exited().unwrap_or_else(|| "failed".into());
                fail(next, format!("the client pod {} failed: {exit}", pod.meta.name))
            }
            (_, Seen::Absent | Seen::Going) => {
                fail(next, format!("the server pod {} vanished mid-test", server_name(name)))
            }
            (_, Seen::Present(_, s)) if s.exited().is_some() => fail(
                next,
                format!("the server pod {} stopped mid-test: {}", server_name(name), s.exited().unwrap_or_default()),
            ),
            (Seen::Present(pod, _), _) if self.input.now >= self.deadline(pod) => fail(
                next,
                format!("no result within {} s of the client's start", i64::from(self.spec.duration) + GRACE_MS / 1000),
            ),
            (Seen::Present(pod, _), _) => {
                actions.push(Action::RequeueAfter(millis(self.deadline(pod) - self.input.now)))
            }
        }
    }

    /// Done or failed: the pods have served (a failed server would hold its node's port).
    /// They go only once the status says so: the result is read from the client pod, so
    /// deleting it in the decision that records the result would lose the result with it
    /// if the operator died between the two writes (the host deletes before it writes the
    /// status). Found by the fault suite's crash after every write of this flow.
    fn finish(&self, current: &NetperfStatus, next: &NetperfStatus, actions: &mut Vec<Action>) {
        let pods = || [&self.server, &self.client].into_iter().filter_map(Seen::present);
        if current.status.finished() {
            actions.extend(pods().map(|(pod, _)| delete(POD, &pod.meta.name)));
        } else if next.status.finished() {
            actions.push(match (&next.status, &next.message) {
                (Phase::Error, Some(m)) => event(true, "TestFailed", m.clone()),
                _ => {
                    let bps = next.speed_bits_per_sec.unwrap_or_default();
                    event(false, "Measured", format!("{:.2} Gbit/s ({bps} bits/s)", bps as f64 / 1e9))
                }
            });
            // Our own status write wakes nobody: with pods to clean up, ask to be called
            // again. (The host does not decide from a cache behind that write.)
            if pods().next().is_some() {
                actions.push(Action::RequeueAfter(1));
            }
        }
    }
}

fn fail(next: &mut NetperfStatus, message: String) {
    next.status = Phase::Error;
    next.message = Some(message);
}

/// `Complete`: False while the test runs (reason: the phase), True once it is Done
/// (`Measured`) or failed (`Failed`).
fn set_complete(next: &mut NetperfStatus, input: &Input) {
    let (done, reason, message) = match next.status {
        Phase::Done => (true, "Measured", "The throughput was measured".to_string()),
        Phase::Error => (true, "Failed", next.message.clone().unwrap_or_else(|| "failed".into())),
        phase => (false, phase_name(phase), format!("The test is in phase {}", phase_name(phase))),
    };
    let c = Condition::new("Complete", done, reason, message, input.now).generation(input.parent.meta.generation);
    conditions::set(&mut next.conditions, c);
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Initial => "Initial",
        Phase::Server => "Server",
        Phase::Test => "Test",
        Phase::Done => "Done",
        Phase::Error => "Error",
    }
}

fn millis(ms: i64) -> u32 {
    u32::try_from(ms.max(1)).unwrap_or(u32::MAX)
}

/// One of the two pods, as far as the host knows.
enum Seen<'a> {
    /// Never created, or gone.
    Absent,
    /// Created by the host, not in its cache yet.
    Creating,
    /// Being deleted.
    Going,
    Present(&'a Object, PodState),
}

impl<'a> Seen<'a> {
    fn present(&self) -> Option<(&'a Object, &PodState)> {
        match self {
            Seen::Present(o, s) => Some((o, s)),
            _ => None,
        }
    }
}

fn seen<'a>(input: &'a Input, name: &str) -> Result<Seen<'a>, PolicyError> {
    if input.deleting(POD, name) {
        return Ok(Seen::Going);
    }
    match input.child(POD, name) {
        Some(pod) if pod.meta.deleting => Ok(Seen::Going),
        Some(pod) => Ok(Seen::Present(pod, pod.status()?)),
        None if input.creating(POD, name) => Ok(Seen::Creating),
        None => Ok(Seen::Absent),
    }
}

/// The fields of a pod's status the policy reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodState {
    phase: String,
    #[serde(rename = "podIP")]
    pod_ip: Option<String>,
    conditions: Vec<PodCondition>,
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContainerStatus {
    state: ContainerState,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContainerState {
    terminated: Option<Terminated>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Terminated {
    exit_code: i32,
    reason: Option<String>,
    message: Option<String>,
}

impl PodState {
    /// The pod IP once the server listens: Running, and Ready (its startup probe
    /// connected), so the client does not race the server's start.
    fn serving(&self) -> Option<&str> {
        let ready = self.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        (self.phase == "Running" && ready).then_some(self.pod_ip.as_deref()?).filter(|ip| !ip.is_empty())
    }

    fn terminated(&self) -> Option<&Terminated> {
        self.container_statuses.iter().find_map(|c| c.state.terminated.as_ref())
    }

    /// How the pod stopped, if it did.
    fn exited(&self) -> Option<String> {
        if let Some(t) = self.terminated() {
            let reason = t.reason.as_deref().unwrap_or("Terminated");
            let tail = t.message.as_deref().map(|m| format!(": {}", m.trim())).unwrap_or_default();
            return Some(format!("{reason} (exit code {}){tail}", t.exit_code));
        }
        matches!(self.phase.as_str(), "Succeeded" | "Failed").then(|| format!("phase {}", self.phase))
    }

    /// The terminated container's message (the client's report).
    fn message(&self) -> &str {
        self.terminated().and_then(|t| t.message.as_deref()).unwrap_or_default()
    }
}

fn labels(netperf: &str, component: &str) -> Value {
    json!({ NAME_LABEL: "netperf", INSTANCE_LABEL: netperf, COMPONENT_LABEL: component })
}

/// The server: `iperf3 -s`, pinned to `serverNode` when given. A TCP startup probe
/// marks it Ready once it listens (and probes nothing afterwards, which would
/// disturb the test).
pub fn server_pod(parent: &Object, spec: &NetperfSpec) -> Value {
    let name = &parent.meta.name;
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": server_name(name), "labels": labels(name, "server") },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "iperf3",
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["iperf3", "-s", "-p", PORT.to_string()],
                "ports": [{ "containerPort": PORT, "name": "iperf3" }],
                "startupProbe": { "tcpSocket": { "port": PORT }, "periodSeconds": 1, "failureThreshold": 60 }
            }]
        }
    });
    if let Some(node) = &spec.server_node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// The client: one `iperf3 -c` run of `duration` seconds, its JSON report written as
/// the container's termination message, pinned to `clientNode` when given.
pub fn client_pod(parent: &Object, spec: &NetperfSpec, server_ip: &str) -> Value {
    let name = &parent.meta.name;
    let command = [
        "iperf3",
        "-c",
        server_ip,
        "-p",
        &PORT.to_string(),
        "-t",
        &spec.duration.to_string(),
        "-i",
        "0",
        "-J",
        "--logfile",
        "/dev/termination-log",
    ];
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": client_name(name), "labels": labels(name, "client") },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "iperf3",
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": command,
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "FallbackToLogsOnError"
            }]
        }
    });
    if let Some(node) = &spec.client_node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{created, deleted, deleting, input, object, status};
    use policy_sdk::{InFlight, ObjectKey};

    use super::*;
    use crate::NETPERF;

    const START: i64 = 1_700_000_000_000;

    fn netperf(status: Value) -> Object {
        object(NETPERF, "np", json!({ "spec": { "duration": 10 }, "status": status }))
    }

    fn pod(name: &str, status: Value) -> Object {
        object(POD, name, json!({ "status": status }))
    }

    fn serving() -> Object {
        pod(
            "np-server",
            json!({ "phase": "Running", "podIP": "10.244.1.2", "conditions": [{ "type": "Ready", "status": "True" }] }),
        )
    }

    fn finished(phase: &str, code: i32, message: &str) -> Object {
        pod(
            "np-client",
            json!({ "phase": phase, "containerStatuses": [{ "state": { "terminated": {
                "exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "message": message } } }] }),
        )
    }

    fn status_of(actions: &[Action]) -> NetperfStatus {
        status(actions).expect("a status")
    }

    fn with(parent: Object, children: Vec<Object>) -> Input {
        let mut i = input(parent);
        i.children = children;
        i.now = START + 5_000;
        i
    }

    fn in_flight(mut i: Input, creations: &[&str], deletions: &[&str]) -> Input {
        let key = |n: &&str| ObjectKey { kind: POD.gvk(), name: (*n).into() };
        i.in_flight =
            InFlight { creations: creations.iter().map(key).collect(), deletions: deletions.iter().map(key).collect() };
        i
    }

    #[test]
    fn initial_creates_the_server_pinned_where_asked_and_moves_to_server() {
        let parent = object(NETPERF, "np", json!({ "spec": { "duration": 10, "serverNode": "n1" } }));
        let actions = reconcile(&with(parent, vec![])).expect("decides");
        let pods = created(&actions);
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0]["metadata"]["name"], json!("np-server"));
        assert_eq!(pods[0]["spec"]["nodeName"], json!("n1"));
        assert_eq!(pods[0]["spec"]["containers"][0]["command"], json!(["iperf3", "-s", "-p", "5201"]));
        let status = status_of(&actions);
        assert_eq!((status.status, status.server_pod.as_deref()), (Phase::Server, Some("np-server")));
    }

    #[test]
    fn initial_with_its_server_already_there_only_moves_on() {
        for i in [
            with(netperf(json!({})), vec![pod("np-server", json!({}))]),
            in_flight(with(netperf(json!({})), vec![]), &["np-server"], &[]),
        ] {
            let actions = reconcile(&i).expect("decides");
            assert!(created(&actions).is_empty(), "never a second server: {actions:?}");
            assert_eq!(status_of(&actions).status, Phase::Server);
        }
    }

    #[test]
    fn server_waits_until_the_server_is_ready_then_creates_the_client_against_its_ip() {
        let starting = pod("np-server", json!({ "phase": "Running", "podIP": "10.244.1.2" }));
        let actions = reconcile(&with(netperf(json!({ "status": "Server" })), vec![starting])).expect("decides");
        assert!(created(&actions).is_empty(), "{actions:?}");
        assert_eq!(status_of(&actions).status, Phase::Server);
        assert!(actions.iter().any(|a| matches!(a, Action::RequeueAfter(ms) if *ms == 65_000)), "{actions:?}");

        let actions = reconcile(&with(netperf(json!({ "status": "Server" })), vec![serving()])).expect("decides");
        let pods = created(&actions);
        assert_eq!(pods.len(), 1);
        let c = &pods[0]["spec"]["containers"][0];
        assert_eq!(pods[0]["spec"]["restartPolicy"], json!("Never"));
        assert_eq!(c["command"][2], json!("10.244.1.2"));
        assert_eq!(c["terminationMessagePolicy"], json!("FallbackToLogsOnError"));
        assert_eq!(status_of(&actions).status, Phase::Test);
    }

    #[test]
    fn server_with_its_client_already_there_only_moves_on() {
        let i = with(netperf(json!({ "status": "Server" })), vec![serving(), pod("np-client", json!({}))]);
        let actions = reconcile(&i).expect("decides");
        assert!(created(&actions).is_empty(), "never a second client: {actions:?}");
        assert_eq!(status_of(&actions).status, Phase::Test);
    }

    /// `i` as the next call sees it once the status `actions` decided was written.
    fn after(i: &Input, actions: &[Action]) -> Input {
        let mut next = i.clone();
        let mut body: Value = serde_json::from_str(&next.parent.body).expect("json");
        body["status"] = serde_json::to_value(status_of(actions)).expect("json");
        next.parent.body = body.to_string();
        next
    }

    #[test]
    fn a_lost_server_status_with_the_client_already_finished_goes_on_to_its_result() {
        // The operator died after creating the client, before writing `Test`; the client
        // finished before the next operator looked: this decision must read its result,
        // as no event of the client will come again.
        let report = r#"{"end":{"sum_received":{"bits_per_second":9000000000.0}}}"#;
        let i = with(netperf(json!({ "status": "Server" })), vec![serving(), finished("Succeeded", 0, report)]);
        let status = status_of(&reconcile(&i).expect("decides"));
        assert_eq!((status.status, status.speed_bits_per_sec), (Phase::Done, Some(9_000_000_000)));
    }

    #[test]
    fn a_succeeded_client_is_parsed_and_both_pods_deleted_once_the_result_is_recorded() {
        let report = r#"{"end":{"sum_received":{"bits_per_second":14100000000.4}}}"#;
        let i = with(netperf(json!({ "status": "Test" })), vec![serving(), finished("Succeeded", 0, report)]);
        let actions = reconcile(&i).expect("decides");
        let status = status_of(&actions);
        assert_eq!((status.status, status.speed_bits_per_sec), (Phase::Done, Some(14_100_000_000)));
        assert!(conditions::find(&status.conditions, "Complete").is_some_and(Condition::is_true));
        // The result comes from the client pod: it stays until the status holds the result,
        // and the next call, asked for at once, deletes it.
        assert!(deleted(&actions).is_empty(), "{actions:?}");
        assert!(actions.iter().any(|a| matches!(a, Action::RequeueAfter(1))), "{actions:?}");
        assert_eq!(deleted(&reconcile(&after(&i, &actions)).expect("decides")), ["np-server", "np-client"]);
    }

    #[test]
    fn every_error_path_fails_the_test_with_a_message_then_removes_the_pods() {
        let test = || netperf(json!({ "status": "Test" }));
        let late = START + 10_000 + GRACE_MS;
        let cases: Vec<(&str, Input)> = vec![
            ("client failed", with(test(), vec![serving(), finished("Failed", 1, "boom")])),
            ("unparsable", with(test(), vec![serving(), finished("Succeeded", 0, "not json")])),
            (
                "iperf error",
                with(test(), vec![serving(), finished("Succeeded", 0, r#"{"error":"unable to connect"}"#)]),
            ),
            ("client vanished", with(test(), vec![serving()])),
            ("client deleted", in_flight(with(test(), vec![serving()]), &[], &["np-client"])),
            ("server vanished", with(test(), vec![pod("np-client", json!({ "phase": "Running" }))])),
            ("server vanished before the client", with(netperf(json!({ "status": "Server" })), vec![])),
            (
                "server exited",
                with(netperf(json!({ "status": "Server" })), vec![pod("np-server", json!({ "phase": "Failed" }))]),
            ),
            ("timeout", {
                let mut i = with(test(), vec![serving(), pod("np-client", json!({ "phase": "Running" }))]);
                i.now = late;
                i
            }),
        ];
        for (case, i) in cases {
            let actions = reconcile(&i).unwrap_or_else(|e| panic!("{case}: {e:?}"));
            let status = status_of(&actions);
            assert_eq!(status.status, Phase::Error, "{case}");
            assert!(status.message.as_deref().is_some_and(|m| !m.is_empty()), "{case}: a message");
            assert!(deleted(&actions).is_empty(), "{case}: nothing deleted before the failure is recorded");
            assert!(actions.iter().any(|a| matches!(a, Action::EmitEvent(e) if e.reason == "TestFailed")), "{case}");
            let present: Vec<String> =
                i.children.iter().filter(|c| !i.deleting(POD, &c.meta.name)).map(|c| c.meta.name.clone()).collect();
            let next = reconcile(&after(&i, &actions)).unwrap_or_else(|e| panic!("{case}: {e:?}"));
            assert_eq!(deleted(&next), present, "{case}: then the pods there are deleted");
        }
    }

    #[test]
    fn a_finished_test_only_cleans_up_and_then_costs_nothing() {
        let done = json!({ "status": "Done", "speedBitsPerSec": 5, "conditions": [] });
        let actions = reconcile(&with(netperf(done.clone()), vec![serving()])).expect("decides");
        assert_eq!(deleted(&actions), ["np-server"]);
        assert!(created(&actions).is_empty());
        // Its status written, a later call has nothing to do.
        let mut parent = netperf(done);
        let mut body: Value = serde_json::from_str(&parent.body).expect("json");
        body["status"] = serde_json::to_value(status_of(&actions)).expect("json");
        parent.body = body.to_string();
        assert_eq!(reconcile(&with(parent, vec![])).expect("decides"), vec![]);
    }

    #[test]
    fn a_netperf_being_deleted_is_left_to_the_garbage_collector() {
        let actions =
            reconcile(&with(deleting(netperf(json!({ "status": "Test" }))), vec![serving()])).expect("decides");
        assert!(actions.is_empty(), "{actions:?}");
    }

    #[test]
    fn an_out_of_range_duration_is_a_policy_error() {
        let parent = object(NETPERF, "np", json!({ "spec": { "duration": 0 } }));
        assert_eq!(reconcile(&with(parent, vec![])).expect_err("refused").reason, "InvalidSpec");
    }
}
