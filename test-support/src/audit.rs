//! The API server's audit log (`hack/cluster.sh` logs writes to pods, PodSets,
//! Deployments, ReplicaSets and Memcacheds): what really reached the API server,
//! independent of what the operator believes it did.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::cluster::cluster_env;

/// The identity the fault and HA tests run the operator as (the shipped ServiceAccount),
/// so its writes are told apart from the test's own (`admin`).
pub const OPERATOR_USER: &str = "system:serviceaccount:podset-system:podset-host";

/// One completed request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub verb: String,
    pub user: User,
    /// `podset-host/VERSION (IDENTITY)` for the operator's requests.
    #[serde(default)]
    pub user_agent: String,
    #[serde(default)]
    pub object_ref: ObjectRef,
    /// Whom the request acted as (`Impersonate-User`), if anyone.
    #[serde(default)]
    pub impersonated_user: Option<User>,
    #[serde(default)]
    pub response_status: ResponseStatus,
    /// When the response was sent (RFC 3339 with microseconds: sorts as text).
    pub stage_timestamp: String,
    /// When the request arrived (the same format).
    pub request_received_timestamp: String,
    stage: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct User {
    pub username: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub subresource: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: u16,
}

impl Entry {
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.response_status.code)
    }

    /// How long the API server took to answer it (arrival to response).
    pub fn latency(&self) -> Option<Duration> {
        let (arrived, answered) = self.arrived_and_answered()?;
        answered.duration_since(arrived).ok()
    }

    /// When it reached the API server, and when the API server answered it.
    pub fn arrived_and_answered(&self) -> Option<(SystemTime, SystemTime)> {
        let at = |t: &str| humantime::parse_rfc3339(t).ok();
        Some((at(&self.request_received_timestamp)?, at(&self.stage_timestamp)?))
    }

    /// Answered 504 Timeout because the request's context ended (its client went away,
    /// e.g. an operator killed with writes in flight) while the API server went on with
    /// it: k8s.io/apiserver's handlers/finisher answers at once and lets the store finish
    /// in the background. Whether it changed anything is not in its entry.
    pub fn undecided(&self) -> bool {
        self.response_status.code == 504
    }

    /// A request about a pod (a subresource included) in `namespace`.
    pub fn on_pods_of(&self, namespace: &str) -> bool {
        self.object_ref.resource == "pods" && self.object_ref.namespace.as_deref() == Some(namespace)
    }

    /// A write to `resource` (no subresource) in `namespace`.
    pub fn is(&self, resource: &str, namespace: &str) -> bool {
        self.object_ref.resource == resource
            && self.object_ref.subresource.is_none()
            && self.object_ref.namespace.as_deref() == Some(namespace)
    }
}

/// A position in the log, and the moment it was taken.
///
/// An entry can reach the log after what its request did is visible: the API server
/// logs a request once it is done, after the change is stored. On the test cluster,
/// with the fault suite's random kills running beside, another client's GET saw 7 of
/// 400 writes before their entries were in the log, by up to 135 ms. Entries after the
/// position can so be of requests a test saw complete before it marked;
/// [`AuditLog::arrived_since`] leaves those out.
#[derive(Clone, Debug)]
pub struct Mark {
    offset: u64,
    at: String,
}

pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// The test cluster's audit log (`AUDIT_LOG` in its env file).
    pub fn open() -> AuditLog {
        let path = cluster_env("AUDIT_LOG").expect("the test cluster's env file names its AUDIT_LOG");
        AuditLog { path: path.into() }
    }

    /// Another API server's log (a test's own instance).
    pub fn at(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog { path: path.into() }
    }

    pub fn mark(&self) -> Mark {
        // The position first: a request that arrives after the moment is logged after it.
        let offset = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        Mark { offset, at: humantime::format_rfc3339_micros(SystemTime::now()).to_string() }
    }

    /// Every completed request logged since `mark`, in completion order.
    pub fn since(&self, mark: &Mark) -> Vec<Entry> {
        let mut f = std::fs::File::open(&self.path).expect("audit log");
        f.seek(SeekFrom::Start(mark.offset)).expect("seek");
        let mut text = String::new();
        f.read_to_string(&mut text).expect("read audit log");
        let mut entries: Vec<Entry> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
            .filter(|e| e.stage == "ResponseComplete")
            .collect();
        entries.sort_by(|a, b| a.stage_timestamp.cmp(&b.stage_timestamp));
        entries
    }

    /// The completed requests that arrived after `mark` was taken: "did anything write
    /// after this point?", without the requests that were done before it but logged
    /// after it.
    pub fn arrived_since(&self, mark: &Mark) -> Vec<Entry> {
        let mut entries = self.since(mark);
        entries.retain(|e| e.request_received_timestamp > mark.at);
        entries
    }
}

/// Successful writes by `user` (creates, updates, patches, deletes).
pub fn writes_by<'a>(entries: &'a [Entry], user: &'a str) -> impl Iterator<Item = &'a Entry> {
    entries.iter().filter(move |e| e.user.username == user && e.succeeded() && e.verb != "get" && e.verb != "list")
}

/// Successful creates of pods in `namespace` by `user`.
pub fn pod_creates(entries: &[Entry], namespace: &str, user: &str) -> usize {
    writes_by(entries, user).filter(|e| e.verb == "create" && e.is("pods", namespace)).count()
}

/// Successful deletes of pods in `namespace` by `user`.
pub fn pod_deletes(entries: &[Entry], namespace: &str, user: &str) -> usize {
    writes_by(entries, user).filter(|e| e.verb == "delete" && e.is("pods", namespace)).count()
}

/// Successful `verb`s (`create`, `delete`) of pods in `namespace` by podset-host
/// processes, told apart by their User-Agent (`podset-host/VERSION (IDENTITY)`) whatever
/// credentials they run with.
pub fn operator_pod_writes(entries: &[Entry], namespace: &str, verb: &str) -> usize {
    entries
        .iter()
        .filter(|e| e.user_agent.starts_with("podset-host/") && e.succeeded() && e.verb == verb)
        .filter(|e| e.is("pods", namespace))
        .count()
}

/// The most pods of `namespace` that were active at once, from `initial` active at
/// the mark: a create adds one when it completes, the first delete of a pod (a
/// terminating pod no longer counts) takes one away. Only valid where no pod fails
/// on its own during the window.
///
/// A write answered 504 because its client went away ([`Entry::undecided`]) counts by
/// what followed it: a create did happen if the pod was written to afterwards (bound,
/// its status set, deleted) before anyone created that name again; a delete did if the
/// pod's next delete came from another user (its node removing a pod that was already
/// terminating) rather than from the same one asking again. Counting such a delete as
/// failed left a deleted pod active: the random-kill fault once counted 9 pods of 8.
pub fn peak_active_pods(entries: &[Entry], namespace: &str, initial: usize) -> usize {
    let pods: Vec<&Entry> = entries.iter().filter(|e| e.on_pods_of(namespace)).collect();
    let mut active = initial as i64;
    let mut peak = active;
    let mut deleted = HashSet::new();
    for (i, e) in pods.iter().enumerate() {
        if !e.is("pods", namespace) || !(e.succeeded() || (e.undecided() && took_effect(e, &pods[i + 1..]))) {
            continue;
        }
        match e.verb.as_str() {
            "create" => active += 1,
            "delete" if e.object_ref.name.as_ref().is_some_and(|n| deleted.insert(n.clone())) => active -= 1,
            _ => {}
        }
        peak = peak.max(active);
    }
    usize::try_from(peak).unwrap_or(0)
}

/// Whether an undecided create or delete of a pod happened, from the entries about
/// pods that came after it.
fn took_effect(undecided: &Entry, after: &[&Entry]) -> bool {
    let Some(name) = undecided.object_ref.name.as_deref() else { return false };
    let mut same_pod = after.iter().filter(|e| e.object_ref.name.as_deref() == Some(name) && e.succeeded());
    let whole = |e: &&&Entry| e.object_ref.subresource.is_none();
    match undecided.verb.as_str() {
        "create" => same_pod.next().is_some_and(|e| !(whole(&e) && e.verb == "create")),
        "delete" => same_pod
            .filter(whole)
            .find(|e| e.verb == "delete")
            .is_some_and(|e| e.user.username != undecided.user.username),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;

    /// One ResponseComplete line as the API server writes it (`--audit-log-format=json`).
    fn line(name: &str, received: SystemTime) -> String {
        let at = |t| humantime::format_rfc3339_micros(t).to_string();
        serde_json::json!({
            "kind": "Event", "stage": "ResponseComplete", "verb": "update",
            "user": { "username": OPERATOR_USER }, "userAgent": "podset-host/0.1.0 (test)",
            "objectRef": { "resource": "memcacheds", "subresource": "status", "namespace": "ns", "name": name },
            "responseStatus": { "code": 200 },
            "requestReceivedTimestamp": at(received),
            "stageTimestamp": at(received + Duration::from_millis(3)),
        })
        .to_string()
            + "\n"
    }

    /// A request about pod `name` in namespace `ns`, in the order written.
    fn pod(verb: &str, user: &str, name: &str, subresource: Option<&str>, code: u16) -> Entry {
        serde_json::from_value(serde_json::json!({
            "stage": "ResponseComplete", "verb": verb, "user": { "username": user },
            "objectRef": { "resource": "pods", "subresource": subresource, "namespace": "ns", "name": name },
            "responseStatus": { "code": code },
            "requestReceivedTimestamp": "2026-12-02T01:00:00.000000Z", "stageTimestamp": "2026-12-02T01:00:00.000001Z",
        }))
        .expect("an entry")
    }

    const NODE: &str = "podset-node-sim";

    #[test]
    fn a_delete_whose_client_went_away_counts_once_the_node_removes_the_pod() {
        // 8 → 3, the operator killed with two of its five deletes in flight (504), then 7
        // by its next process; the node removes the five terminating pods after.
        let mut entries: Vec<Entry> = ["a", "b", "c", "d", "e"]
            .iter()
            .enumerate()
            .map(|(i, n)| pod("delete", OPERATOR_USER, n, None, if i < 2 { 504 } else { 200 }))
            .collect();
        entries.extend(["f", "g", "h", "i"].map(|n| pod("create", OPERATOR_USER, n, None, 201)));
        entries.extend(["a", "b", "c", "d", "e"].map(|n| pod("delete", NODE, n, None, 200)));
        assert_eq!(peak_active_pods(&entries, "ns", 8), 8);
        // Without the node's word, the two deletes did nothing: the pods stayed active.
        let cut = entries.len() - 5;
        assert_eq!(peak_active_pods(&entries[..cut], "ns", 8), 9);
    }

    #[test]
    fn a_delete_asked_again_by_the_same_user_had_not_happened() {
        let entries = [
            pod("delete", OPERATOR_USER, "a", None, 504),
            pod("create", OPERATOR_USER, "b", None, 201),
            pod("delete", OPERATOR_USER, "a", None, 200),
            pod("delete", NODE, "a", None, 200),
        ];
        assert_eq!(peak_active_pods(&entries, "ns", 1), 2);
    }

    #[test]
    fn a_create_whose_client_went_away_counts_once_the_pod_is_written_to() {
        let entries = [
            // Happened: the scheduler bound it.
            pod("create", OPERATOR_USER, "a", None, 504),
            pod("create", "system:kube-scheduler", "a", Some("binding"), 201),
            // Had not: created again (a create of a name that exists would be refused).
            pod("create", OPERATOR_USER, "b", None, 504),
            pod("create", OPERATOR_USER, "b", None, 201),
            // Nothing followed: not counted.
            pod("create", OPERATOR_USER, "c", None, 504),
        ];
        assert_eq!(peak_active_pods(&entries, "ns", 0), 2);
        assert_eq!(peak_active_pods(&entries[..2], "ns", 0), 1);
    }

    #[test]
    fn a_request_done_before_the_mark_but_logged_after_it_did_not_arrive_since() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let mut log = std::fs::File::create(&path).expect("log");
        let before = SystemTime::now() - Duration::from_millis(50);
        log.write_all(line("logged-before", before).as_bytes()).expect("write");
        let audit = AuditLog::at(&path);
        let mark = audit.mark();
        // Logged after the mark: one request that arrived 40 ms before it, one after it.
        log.write_all(line("logged-late", before + Duration::from_millis(10)).as_bytes()).expect("write");
        log.write_all(line("arrived-after", SystemTime::now() + Duration::from_millis(1)).as_bytes()).expect("write");
        let names =
            |entries: Vec<Entry>| -> Vec<String> { entries.into_iter().filter_map(|e| e.object_ref.name).collect() };
        assert_eq!(names(audit.since(&mark)), ["logged-late", "arrived-after"]);
        assert_eq!(names(audit.arrived_since(&mark)), ["arrived-after"]);
        assert_eq!(writes_by(&audit.arrived_since(&mark), OPERATOR_USER).count(), 1);
        let answered_in: Vec<_> = audit.since(&mark).iter().map(Entry::latency).collect();
        assert_eq!(answered_in, [Some(Duration::from_millis(3)); 2]);
    }
}
