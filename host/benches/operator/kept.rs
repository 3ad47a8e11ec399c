//! A full run's groups, each kept as it ends, so that a run cut short can be finished:
//! `BENCH_RESUME=1 make bench` measures only the groups that no full run with the same
//! [`Stamp`] (machine, Kubernetes version, code, settings) has kept, and writes
//! bench/results/latest.md from them all. The policy sandbox's tables, printed before
//! the operator's and not written, are measured again.
//!
//! Why: a full run took 142 min on the 2-core Intel machine of 2026-11-30 and about
//! 1.8× as long on the 2-core AMD EPYC of 2026-12-01 (200 × 5 converging in 17–19 s
//! there against 9–11 s), more than a working session on it. A group's figures do not
//! depend on the groups before it: each starts its own operators and objects, and
//! leaves the controller manager's client rate as the control plane starts it. A
//! resumed sitting's first group meets a control plane just started (its etcd empty),
//! where in one sitting it follows other groups' objects, deleted.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use crate::sizes::Group;

/// What must be the same for two groups' tables to stand in one run's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stamp {
    /// The machine as the results' heading describes it (cores and CPU model).
    pub machine: String,
    /// What is measured: the git tree of every top-level entry but [`UNMEASURED`] (the
    /// operator, its policies, its peers, the control plane's scripts, this benchmark),
    /// so that a commit of docs between two sittings does not void the first.
    pub code: String,
    /// The control plane's version.
    pub kubernetes: String,
    /// What else the figures depend on ([`settings`]), `NAME=value`, sorted.
    pub settings: Vec<String>,
}

/// Top-level entries whose changes leave every figure as it was.
const UNMEASURED: [&str; 5] = ["README.md", "bench", "charts", "docs", "monitoring"];

impl Stamp {
    /// This run's stamp, or why its groups cannot be kept: uncommitted changes to what
    /// is measured are not a tree another run could match. (Untracked files are not
    /// looked at: target/ and the clusters' directories lie in the tree, ignored.)
    pub fn now(machine: String, kubernetes: String) -> anyhow::Result<Stamp> {
        let excluded: Vec<String> = UNMEASURED.iter().map(|p| format!(":!/{p}")).collect();
        let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--", "."];
        status.extend(excluded.iter().map(String::as_str));
        if !git(&status)?.is_empty() {
            bail!("what it measures has uncommitted changes");
        }
        // "<mode> <type> <object>\t<name>" per entry: the objects of those measured.
        let code = git(&["ls-tree", "HEAD"])?
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .filter(|(_, name)| !UNMEASURED.contains(name))
            .map(|(entry, name)| format!("{name}={}", entry.rsplit(' ').next().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(Stamp { machine, code, kubernetes, settings: settings() })
    }

    /// What differs between `self` and `other`, in words: none for a match. (The one
    /// comparison: a field added to the stamp is added here.)
    fn differences(&self, other: &Stamp) -> Vec<&'static str> {
        [
            (self.machine != other.machine).then_some("the machine"),
            (self.kubernetes != other.kubernetes).then_some("the Kubernetes version"),
            (self.code != other.code).then_some("the code measured"),
            (self.settings != other.settings).then_some("the settings"),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The settings set in this run's environment that its figures depend on beyond its
/// code: the operator's flags read from the environment (the operators inherit it:
/// `RECONCILE_CONCURRENCY=16 make bench`), as `podset-host run` declares them, and the
/// curve's sizes (`BENCH_CURVE`).
fn settings() -> Vec<String> {
    use clap::Args as _;
    let run = podset_host::config::run::RunArgs::augment_args(clap::Command::new("run"));
    let mut names: Vec<String> =
        run.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()).collect();
    names.push(crate::sizes::CURVE.into());
    let mut set: Vec<String> =
        names.into_iter().filter_map(|name| std::env::var(&name).ok().map(|v| format!("{name}={v}"))).collect();
    set.sort();
    set.dedup();
    set
}

/// HEAD, for the heading of a run finished with `BENCH_RESUME=1`.
pub fn head() -> String {
    git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|e| format!("(unknown: {e:#})"))
}

/// `git args` in the repository, its output trimmed.
fn git(args: &[&str]) -> anyhow::Result<String> {
    let said = || format!("git {}", args.join(" "));
    let out =
        Command::new("git").args(args).current_dir(podset_test_support::workspace()).output().with_context(said)?;
    if !out.status.success() {
        bail!("{}: {}", said(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One group's tables as Markdown, and when they were measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Part {
    pub group: Group,
    /// When the group ended, UTC, to the minute.
    pub date: String,
    pub markdown: String,
}

#[derive(Serialize, Deserialize)]
struct Kept {
    stamp: Stamp,
    part: Part,
}

/// Whether this run finishes one cut short (`BENCH_RESUME=1`).
pub fn resuming() -> bool {
    std::env::var("BENCH_RESUME").is_ok_and(|v| v == "1")
}

/// Where a group is kept: beside the other files tests and benchmarks write in target/.
fn path(group: Group) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-groups").join(format!("{}.json", group.key()))
}

/// `group` as a run with `stamp` kept it, if one did. Anything else kept for it (another
/// stamp, a file of an older format) is said and measured again.
pub fn find(stamp: &Stamp, group: Group) -> Option<Part> {
    let text = std::fs::read_to_string(path(group)).ok()?;
    match serde_json::from_str::<Kept>(&text) {
        Ok(kept) => {
            let differ = kept.stamp.differences(stamp);
            if differ.is_empty() {
                return Some(kept.part);
            }
            eprintln!("kept {} ({}) not used: {} differ", group.key(), kept.part.date, differ.join(", "));
            None
        }
        Err(e) => {
            eprintln!("kept {} not used: {}: {e}", group.key(), path(group).display());
            None
        }
    }
}

/// Keeps `part` for a later run with `stamp` to finish this one. A group that cannot be
/// kept costs its re-measuring, not this run: said, not fatal.
pub fn keep(stamp: &Stamp, part: &Part) {
    let path = path(part.group);
    let kept = Kept { stamp: stamp.clone(), part: part.clone() };
    let written = serde_json::to_string(&kept).map_err(anyhow::Error::from).and_then(|text| {
        std::fs::create_dir_all(path.parent().context("a directory")?)?;
        Ok(std::fs::write(&path, text)?)
    });
    match written {
        Ok(()) => eprintln!("kept {} in {}", part.group.key(), path.display()),
        Err(e) => eprintln!("{} not kept in {}: {e:#}", part.group.key(), path.display()),
    }
}
