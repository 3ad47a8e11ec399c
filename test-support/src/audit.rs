//! The API server's audit log (`hack/cluster.sh` logs writes to pods, PodSets,
//! Deployments, ReplicaSets and Memcacheds): what really reached the API server,
//! independent of what the operator believes it did.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

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
    #[serde(default)]
    pub response_status: ResponseStatus,
    /// When the response was sent (RFC 3339 with microseconds: sorts as text).
    pub stage_timestamp: String,
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

    /// A write to `resource` (no subresource) in `namespace`.
    pub fn is(&self, resource: &str, namespace: &str) -> bool {
        self.object_ref.resource == resource
            && self.object_ref.subresource.is_none()
            && self.object_ref.namespace.as_deref() == Some(namespace)
    }
}

/// A position in the log: entries after it are what a test caused.
#[derive(Clone, Copy, Debug)]
pub struct Mark(u64);

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
        Mark(std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0))
    }

    /// Every completed request logged since `mark`, in completion order.
    pub fn since(&self, mark: Mark) -> Vec<Entry> {
        let mut f = std::fs::File::open(&self.path).expect("audit log");
        f.seek(SeekFrom::Start(mark.0)).expect("seek");
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
pub fn peak_active_pods(entries: &[Entry], namespace: &str, initial: usize) -> usize {
    let mut active = initial as i64;
    let mut peak = active;
    let mut deleted = HashSet::new();
    for e in entries.iter().filter(|e| e.succeeded() && e.is("pods", namespace)) {
        match e.verb.as_str() {
            "create" => active += 1,
            "delete" if e.object_ref.name.as_ref().is_some_and(|n| deleted.insert(n.clone())) => active -= 1,
            _ => {}
        }
        peak = peak.max(active);
    }
    usize::try_from(peak).unwrap_or(0)
}
