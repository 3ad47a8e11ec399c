//! A ReconcilePolicy's revisions (`status.revisions`): every module that served it,
//! numbered in the order they first served, with when each started and stopped and
//! why. Kept by the operator in memory while it runs and written to the status; a
//! restarted operator starts from the status.

use crate::crd::{ConfigMapKeyRef, Revision};
use crate::sandbox::Digest;

/// Now, as revisions and rollouts write times: RFC 3339 to the second.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Revisions kept per ReconcilePolicy by default (`run --revision-history`).
pub const DEFAULT_KEPT: u64 = 10;

/// Why a revision stopped serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Another revision took over, at once or at the end of its rollout.
    Replaced,
    /// An older revision was brought back.
    RolledBack,
    /// Its rollout was aborted (a gate failed, or by hand).
    RolloutAborted,
    /// A newer module's rollout began before this one's ended.
    Superseded,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Replaced => "Replaced",
            Stop::RolledBack => "RolledBack",
            Stop::RolloutAborted => "RolloutAborted",
            Stop::Superseded => "Superseded",
        }
    }
}

/// Where a module came from, as a revision records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub config_map_ref: Option<ConfigMapKeyRef>,
    pub image: Option<String>,
}

impl Source {
    /// Where `revision` came from.
    pub fn of(revision: &Revision) -> Self {
        Source { config_map_ref: revision.config_map_ref.clone(), image: revision.image.clone() }
    }
}

/// One ReconcilePolicy's revisions, oldest first, and which serves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub revisions: Vec<Revision>,
    /// The number of the revision serving (every parent a rollout has not moved).
    pub serving: Option<i64>,
    kept: usize,
}

impl History {
    /// As a status has it, keeping at most `kept`.
    pub fn from_status(revisions: &[Revision], serving: Option<i64>, kept: usize) -> Self {
        History { revisions: revisions.to_vec(), serving, kept: kept.max(1) }
    }

    /// How many revisions it keeps.
    pub fn kept(&self) -> usize {
        self.kept
    }

    pub fn get(&self, digest: &Digest) -> Option<&Revision> {
        let d = digest.to_string();
        self.revisions.iter().rev().find(|r| r.digest == d)
    }

    /// The serving revision.
    pub fn serving(&self) -> Option<&Revision> {
        let n = self.serving?;
        self.revisions.iter().find(|r| r.revision == n)
    }

    /// Whether `digest` once served every parent: bringing it back is a rollback.
    pub fn is_complete(&self, digest: &Digest) -> bool {
        self.get(digest).is_some_and(|r| r.complete)
    }

    /// `digest` starts to serve, from `source`: its revision (a new number for a
    /// module not seen before), with `complete` when it serves every parent at once
    /// (the revision serving before then stops, replaced, unless it was stopped for
    /// another reason first). Returns its number.
    pub fn started(
        &mut self,
        digest: &Digest,
        source: &Source,
        signed_by: Option<String>,
        complete: bool,
        now: &str,
    ) -> i64 {
        let d = digest.to_string();
        let next = self.revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let index = match self.revisions.iter().position(|r| r.digest == d) {
            Some(i) => i,
            None => {
                self.revisions.push(Revision { revision: next, digest: d, ..Revision::default() });
                self.revisions.len() - 1
            }
        };
        let r = &mut self.revisions[index];
        r.config_map_ref = source.config_map_ref.clone();
        r.image = source.image.clone();
        r.signed_by = signed_by;
        r.started = Some(now.to_string());
        r.stopped = None;
        r.stop_reason = None;
        r.complete |= complete;
        let n = r.revision;
        if complete {
            if let Some(old) = self.serving.filter(|old| *old != n) {
                self.stop_number(old, Stop::Replaced, now);
            }
            self.serving = Some(n);
        }
        self.trim();
        n
    }

    /// The revision of `digest` now serves every parent (its rollout completed);
    /// the one serving before stops, replaced.
    pub fn completed(&mut self, digest: &Digest, now: &str) {
        let d = digest.to_string();
        let Some(n) = self.revisions.iter().find(|r| r.digest == d).map(|r| r.revision) else { return };
        if let Some(old) = self.serving.filter(|old| *old != n) {
            self.stop_number(old, Stop::Replaced, now);
        }
        if let Some(r) = self.revisions.iter_mut().find(|r| r.revision == n) {
            r.complete = true;
        }
        self.serving = Some(n);
    }

    /// The revision of `digest` stops serving, for `why`.
    pub fn stopped(&mut self, digest: &Digest, why: Stop, now: &str) {
        let d = digest.to_string();
        if let Some(n) = self.revisions.iter().find(|r| r.digest == d).map(|r| r.revision) {
            self.stop_number(n, why, now);
            if self.serving == Some(n) {
                self.serving = None;
            }
        }
    }

    fn stop_number(&mut self, n: i64, why: Stop, now: &str) {
        if let Some(r) = self.revisions.iter_mut().find(|r| r.revision == n && r.stopped.is_none()) {
            r.stopped = Some(now.to_string());
            r.stop_reason = Some(why.as_str().to_string());
        }
    }

    /// The revision numbered `n`, or the one before the serving one (`None`).
    pub fn rollback_target(&self, n: Option<i64>) -> Option<&Revision> {
        match n {
            Some(n) => self.revisions.iter().find(|r| r.revision == n),
            None => {
                let serving = self.serving?;
                self.revisions.iter().filter(|r| r.revision < serving && r.complete).max_by_key(|r| r.revision)
            }
        }
    }

    /// The digests the store must keep.
    pub fn digests(&self) -> impl Iterator<Item = Digest> + '_ {
        self.revisions.iter().filter_map(|r| Digest::parse(&r.digest))
    }

    /// Keeps the last `kept` revisions, and the serving one whatever its age.
    fn trim(&mut self) {
        while self.revisions.len() > self.kept {
            let Some(i) = self.revisions.iter().position(|r| Some(r.revision) != self.serving) else { break };
            self.revisions.remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(key: &str) -> Source {
        Source { config_map_ref: Some(ConfigMapKeyRef { name: "modules".into(), key: key.into() }), image: None }
    }

    #[test]
    fn revisions_are_numbered_once_and_stopped_with_a_reason() {
        let (a, b, c) = (Digest::of(b"a"), Digest::of(b"b"), Digest::of(b"c"));
        let mut h = History::from_status(&[], None, 10);
        assert_eq!(h.started(&a, &cm("a"), None, true, "t1"), 1);
        // b rolls out: it serves some parents, not yet all.
        assert_eq!(h.started(&b, &cm("b"), None, false, "t2"), 2);
        assert_eq!(h.serving, Some(1));
        h.completed(&b, "t3");
        assert_eq!(h.serving, Some(2));
        let first = &h.revisions[0];
        assert_eq!((first.stopped.as_deref(), first.stop_reason.as_deref()), (Some("t3"), Some("Replaced")));
        // c's rollout aborts: b serves on.
        assert_eq!(h.started(&c, &cm("c"), None, false, "t4"), 3);
        h.stopped(&c, Stop::RolloutAborted, "t5");
        assert_eq!(h.serving, Some(2));
        assert!(!h.is_complete(&c) && h.is_complete(&a));
        // Rolling back to a: it keeps its number.
        assert_eq!(h.rollback_target(None).map(|r| r.revision), Some(1));
        h.stopped(&b, Stop::RolledBack, "t6");
        assert_eq!(h.started(&a, &cm("a"), None, true, "t6"), 1);
        assert_eq!(h.serving, Some(1));
        assert_eq!(
            h.revisions.iter().find(|r| r.revision == 2).and_then(|r| r.stop_reason.as_deref()),
            Some("RolledBack")
        );
        assert_eq!(h.revisions[0].stopped, None, "a serves again");
    }

    #[test]
    fn the_history_is_trimmed_but_never_of_the_serving_revision() {
        let mut h = History::from_status(&[], None, 3);
        let first = Digest::of(b"0");
        h.started(&first, &Source::default(), None, true, "t");
        for i in 1..6u8 {
            h.started(&Digest::of(&[i]), &Source::default(), None, false, "t");
        }
        assert_eq!(h.revisions.len(), 3);
        assert_eq!(h.revisions[0].revision, 1, "the serving one stays");
        assert_eq!(h.revisions.iter().map(|r| r.revision).collect::<Vec<_>>(), [1, 5, 6]);
    }
}
