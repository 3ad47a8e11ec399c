//! Recording real decisions (`run --record-dir`): each decision the serving policy
//! makes becomes a scenario file that `policy test` and `policy replay` read, under
//! `DIR/<Kind.group>/<namespace>/<name>/`.
//!
//! The reconcile only clones the input and the actions and hands them to a bounded
//! queue; a thread of its own redacts, serialises and writes, and deletes the oldest
//! files to stay within a number of files per object and a total size. When the queue
//! is full the decision is not recorded (counted as `dropped`).
//!
//! Redacted before writing (the keys stay):
//! - every value under `data` and `stringData` of a Secret that reaches a policy
//!   becomes `REDACTED:sha256:<hex>`, its digest (see `digest_of`);
//! - the `kubectl.kubernetes.io/last-applied-configuration` annotation of any object
//!   (it repeats the object as last applied, Secrets' data included) becomes [`REDACTED`].
//!
//! A policy that reads what was redacted will not decide the same on replay, unless it
//! reads Secrets' values only through their digests.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::SystemTime;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tracing::{debug, warn};

use crate::contract::bindings::reconciler::Object;
use crate::metrics::Metrics;
use crate::sandbox::{Actions, Input};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "REDACTED";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Decisions waiting to be written. At ~10 KiB of input each (a parent of 5 pods), a
/// full queue holds ~2.5 MiB.
const QUEUE: usize = 256;

/// Where to record and how much to keep.
#[derive(Clone, Debug)]
pub struct Settings {
    pub dir: PathBuf,
    /// Files kept per object; the oldest go first.
    pub per_object: usize,
    /// Bytes kept under `dir` in all; the oldest files go first.
    pub max_bytes: u64,
}

/// The object a decision was for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subject {
    /// `Kind.group` (`Kind` for the core group), as kubectl names a kind.
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

struct Entry {
    subject: Subject,
    /// The policy's label and digest.
    policy: String,
    digest: String,
    input: Input,
    outcome: Result<Actions, &'static str>,
}

/// Hands decisions to the writer thread.
pub struct Recorder {
    queue: SyncSender<Entry>,
    metrics: Arc<Metrics>,
}

impl Recorder {
    /// Creates `settings.dir`, takes stock of the files already there (they count
    /// against the bounds) and starts the writer.
    pub fn start(settings: Settings, metrics: Arc<Metrics>) -> io::Result<Recorder> {
        std::fs::create_dir_all(&settings.dir)?;
        let mut files = Files::new(settings);
        files.scan()?;
        let (queue, rx) = sync_channel(QUEUE);
        let m = metrics.clone();
        std::thread::Builder::new().name("recorder".into()).spawn(move || files.run(rx, &m))?;
        Ok(Recorder { queue, metrics })
    }

    /// Records one decision, unless the writer is behind.
    pub fn record(
        &self,
        subject: Subject,
        policy: &crate::sandbox::Policy,
        input: Input,
        outcome: Result<Actions, &'static str>,
    ) {
        let entry =
            Entry { subject, policy: policy.label().to_string(), digest: policy.digest().to_string(), input, outcome };
        match self.queue.try_send(entry) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.metrics.decision_recorded("dropped"),
            Err(TrySendError::Disconnected(_)) => self.metrics.decision_recorded("failed"),
        }
    }
}

/// Replaces what must not reach a file; see the module's header.
pub fn redact(input: &mut Input) {
    let Input::Reconcile(i) = input else {
        // The PodSet world carries labels, phases and names: nothing secret.
        return;
    };
    let answers = i.looked_up.iter_mut().flat_map(|a| a.objects.iter_mut());
    for o in std::iter::once(&mut i.parent).chain(i.children.iter_mut()).chain(i.related.iter_mut()).chain(answers) {
        redact_object(o);
    }
}

fn redact_object(o: &mut Object) {
    for kv in o.meta.annotations.iter_mut().filter(|kv| kv.key == LAST_APPLIED) {
        kv.value = REDACTED.into();
    }
    if o.kind.group.is_empty() && o.kind.kind == "Secret" {
        let Ok(mut body) = serde_json::from_str::<Value>(&o.body) else {
            // Not JSON: nothing of it is kept.
            o.body = "{}".into();
            return;
        };
        for field in ["data", "stringData"] {
            if let Some(Value::Object(m)) = body.get_mut(field) {
                m.values_mut().for_each(|v| *v = Value::String(digest_of(v)));
            }
        }
        o.body = body.to_string();
    }
}

/// A Secret's value as recorded: `REDACTED:sha256:<hex>`, the SHA-256 of the value as
/// the API serves it. A policy that reads Secrets only to hash them (the SDK's
/// `secrets::digest` reads this form as the digest it names) decides the same on
/// replay; the value itself never reaches the file. A weak value's digest can be
/// guessed offline: keep recording directories as private as the Secrets.
fn digest_of(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!("{REDACTED}:sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// The files under the directory, oldest first, and how many bytes they hold.
struct Files {
    settings: Settings,
    /// By write order: (object directory, file, bytes).
    order: BTreeMap<u64, (PathBuf, PathBuf, u64)>,
    /// Each object's files by write order.
    objects: HashMap<PathBuf, VecDeque<u64>>,
    bytes: u64,
    next: u64,
}

impl Files {
    fn new(settings: Settings) -> Self {
        Files { settings, order: BTreeMap::new(), objects: HashMap::new(), bytes: 0, next: 0 }
    }

    /// Files of an earlier run, by modification time then name.
    fn scan(&mut self) -> io::Result<()> {
        let mut found = Vec::new();
        walk(&self.settings.dir, &mut found)?;
        found.sort();
        for (_, path, bytes) in found {
            let object = path.parent().map(Path::to_path_buf).unwrap_or_default();
            self.add(object, path, bytes);
        }
        self.trim();
        Ok(())
    }

    fn run(mut self, rx: Receiver<Entry>, metrics: &Metrics) {
        while let Ok(entry) = rx.recv() {
            match self.write(entry) {
                Ok(()) => metrics.decision_recorded("written"),
                Err(e) => {
                    metrics.decision_recorded("failed");
                    warn!(dir = %self.settings.dir.display(), "cannot record a decision: {e}");
                }
            }
        }
        debug!("recorder stopped");
    }

    fn write(&mut self, mut entry: Entry) -> io::Result<()> {
        redact(&mut entry.input);
        let s = &entry.subject;
        let object = self.settings.dir.join(segment(&s.kind)).join(segment(&s.namespace)).join(segment(&s.name));
        std::fs::create_dir_all(&object)?;
        let at = Timestamp::now();
        let name = format!("{} {}/{} at {at} by {}", s.kind, s.namespace, s.name, entry.policy);
        let text = crate::scenario::write(&name, &entry.digest, &entry.input, entry.outcome.as_ref().map_err(|e| *e));
        // Sorts by time, then by the order of this run's writes.
        let file = object.join(format!("{}-{:06}.yaml", at.strftime("%Y%m%dT%H%M%S%.3fZ"), self.next % 1_000_000));
        // Written under a name replay skips, then renamed: a replay run while the
        // operator records (CI saw one) never reads half a file.
        let partial = object.join(format!(".{:06}.partial", self.next % 1_000_000));
        std::fs::write(&partial, &text)?;
        std::fs::rename(&partial, &file)?;
        self.add(object, file, text.len() as u64);
        self.trim();
        Ok(())
    }

    fn add(&mut self, object: PathBuf, file: PathBuf, bytes: u64) {
        let n = self.next;
        self.next += 1;
        self.order.insert(n, (object.clone(), file, bytes));
        self.objects.entry(object).or_default().push_back(n);
        self.bytes += bytes;
    }

    /// Deletes the oldest files beyond the bounds.
    fn trim(&mut self) {
        let over: Vec<u64> = self
            .objects
            .values()
            .filter(|q| q.len() > self.settings.per_object)
            .flat_map(|q| q.iter().take(q.len() - self.settings.per_object).copied())
            .collect();
        for n in over {
            self.remove(n);
        }
        while self.bytes > self.settings.max_bytes {
            let Some(&n) = self.order.keys().next() else { break };
            self.remove(n);
        }
    }

    fn remove(&mut self, n: u64) {
        let Some((object, file, bytes)) = self.order.remove(&n) else { return };
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Err(e) = std::fs::remove_file(&file)
            && e.kind() != io::ErrorKind::NotFound
        {
            warn!(file = %file.display(), "cannot delete an old recording: {e}");
        }
        if let Some(q) = self.objects.get_mut(&object) {
            q.retain(|m| *m != n);
            if q.is_empty() {
                self.objects.remove(&object);
                // The object's directory, and its namespace's and kind's when they empty.
                let mut dir = Some(object.as_path());
                while let Some(d) = dir.filter(|d| *d != self.settings.dir) {
                    if std::fs::remove_dir(d).is_err() {
                        break;
                    }
                    dir = d.parent();
                }
            }
        }
    }
}

/// A path segment from a Kubernetes name: names cannot hold `/`, but be sure.
fn segment(s: &str) -> String {
    let s: String = s.chars().map(|c| if c == '/' || c == '\0' { '_' } else { c }).collect();
    if s.is_empty() || s == "." || s == ".." { format!("_{s}") } else { s }
}

fn walk(dir: &Path, out: &mut Vec<(SystemTime, PathBuf, u64)>) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        if meta.is_dir() {
            walk(&e.path(), out)?;
        } else if e.path().extension().is_some_and(|x| x == "yaml") {
            out.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), e.path(), meta.len()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::bindings::reconciler::{Answer, InFlight, Input as RInput, Lookup, LookupMatch, ObjectMeta};
    use crate::contract::bindings::{GroupVersionKind, KeyValue};

    fn object(group: &str, kind: &str, body: Value, annotations: &[(&str, &str)]) -> Object {
        Object {
            kind: GroupVersionKind { group: group.into(), version: "v1".into(), kind: kind.into() },
            meta: ObjectMeta {
                name: "o".into(),
                namespace: "ns".into(),
                uid: "u".into(),
                generation: 1,
                resource_version: "1".into(),
                labels: vec![],
                annotations: annotations
                    .iter()
                    .map(|(k, v)| KeyValue { key: (*k).into(), value: (*v).into() })
                    .collect(),
                created_at: 0,
                deleting: false,
                finalizers: vec![],
            },
            body: body.to_string(),
        }
    }

    #[test]
    fn secrets_values_and_last_applied_are_redacted_and_nothing_else() {
        let secret =
            serde_json::json!({"type": "Opaque", "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t0k"}});
        let configmap = serde_json::json!({"data": {"password": "not a secret"}});
        let mut input = Input::Reconcile(RInput {
            parent: object(
                "cache.example.com",
                "Memcached",
                serde_json::json!({"spec": {}}),
                &[(LAST_APPLIED, "{\"data\":1}"), ("keep", "me")],
            ),
            children: vec![],
            related: vec![object("", "Secret", secret.clone(), &[]), object("", "ConfigMap", configmap.clone(), &[])],
            looked_up: vec![Answer {
                lookup: Lookup {
                    kind: GroupVersionKind { group: "".into(), version: "v1".into(), kind: "Secret".into() },
                    namespace: "".into(),
                    match_: LookupMatch::Name("o".into()),
                },
                objects: vec![object("", "Secret", secret, &[])],
            }],
            in_flight: InFlight { creations: vec![], deletions: vec![] },
            now: 0,
        });
        redact(&mut input);
        let Input::Reconcile(i) = input else { unreachable!() };
        let annotations: Vec<(&str, &str)> =
            i.parent.meta.annotations.iter().map(|kv| (kv.key.as_str(), kv.value.as_str())).collect();
        assert_eq!(annotations, [(LAST_APPLIED, REDACTED), ("keep", "me")]);
        // The SHA-256 of each value as served (sha256sum of the same bytes), never the value.
        let redacted = serde_json::json!({
            "type": "Opaque",
            "data": {"password": "REDACTED:sha256:b073aefd7c9215dd0179def431a8e7b5b1c39770f72ab676e9d9bd4a466268d1"},
            "stringData": {"token": "REDACTED:sha256:98e4e27695754ae0d421e3a5a48b69d8fab2b3af4383a5c318201f8a92eb9fd0"},
        });
        let secret: Value = serde_json::from_str(&i.related[0].body).expect("json");
        assert_eq!(secret, redacted);
        let looked_up: Value = serde_json::from_str(&i.looked_up[0].objects[0].body).expect("json");
        assert_eq!(looked_up, redacted, "a looked-up Secret too");
        let cm: Value = serde_json::from_str(&i.related[1].body).expect("json");
        assert_eq!(cm, configmap, "a ConfigMap is not a Secret");
    }

    #[test]
    fn the_oldest_files_go_first_per_object_and_in_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = Settings { dir: dir.path().to_path_buf(), per_object: 2, max_bytes: 25 };
        let mut files = Files::new(settings.clone());
        let put = |files: &mut Files, object: &str, name: &str| {
            let o = dir.path().join(object);
            std::fs::create_dir_all(&o).expect("mkdir");
            let f = o.join(name);
            std::fs::write(&f, "0123456789").expect("write");
            files.add(o, f, 10);
            files.trim();
        };
        put(&mut files, "k/ns/a", "1.yaml");
        put(&mut files, "k/ns/a", "2.yaml");
        put(&mut files, "k/ns/a", "3.yaml");
        assert!(!dir.path().join("k/ns/a/1.yaml").exists(), "a third file for one object pushes out its first");
        assert!(dir.path().join("k/ns/a/2.yaml").exists());
        put(&mut files, "k/ns/b", "4.yaml");
        assert!(!dir.path().join("k/ns/a/2.yaml").exists(), "over 25 bytes the oldest file goes");
        assert_eq!(files.bytes, 20);
        put(&mut files, "k/ns/b", "5.yaml");
        put(&mut files, "k/ns/b", "6.yaml");
        assert!(!dir.path().join("k/ns/a").exists(), "an emptied object's directory goes too");
        // A restart takes stock of what is there.
        let mut again = Files::new(settings);
        again.scan().expect("scan");
        assert_eq!((again.bytes, again.order.len()), (20, 2));
    }
}
