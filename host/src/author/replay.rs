//! `podset-host policy replay`: a module run on recorded inputs, its decisions
//! compared with the recorded ones (or with another module's) by the rules of
//! [`compare`](crate::scenario::compare).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::sandbox::Policy;
use crate::scenario::compare::{Outcome, compare};
use crate::scenario::schemas::Schemas;
use crate::scenario::{Failure, Scenario, decided, validate};

/// What the module's decisions are compared with.
pub enum Against<'a> {
    /// The decision each scenario file records (`expect`).
    Recorded,
    /// Another module's decision on the same input.
    Baseline(&'a Policy),
}

/// One scenario replayed.
pub struct Row {
    pub path: PathBuf,
    pub name: Option<String>,
    /// `Err`: the scenario could not be replayed (unreadable, or not an input of the
    /// module's world).
    pub outcome: Result<Outcome, String>,
    /// What the kinds' schemas refuse of the module's decision (with `--schemas`).
    pub refused: Vec<String>,
}

/// Replays every file of `files` with `policy`; with `schemas`, its decisions are
/// checked against the schemas of the kinds they write too.
pub fn replay(policy: &Policy, against: &Against<'_>, files: &[PathBuf], schemas: Option<&Schemas>) -> Vec<Row> {
    files
        .iter()
        .map(|path| {
            let scenario = Scenario::read(path);
            let name = scenario.as_ref().ok().and_then(|s| s.name.clone());
            let refused = match (&scenario, schemas) {
                (Ok(s), Some(schemas)) => refused(policy, s, schemas),
                _ => Vec::new(),
            };
            let outcome = scenario.and_then(|s| one(policy, against, &s)).map_err(|e| e.to_string());
            Row { path: path.clone(), name, outcome, refused }
        })
        .collect()
}

/// What the schemas refuse of `policy`'s decision on `s`'s input.
fn refused(policy: &Policy, s: &Scenario, schemas: &Schemas) -> Vec<String> {
    let Ok(input) = s.input(policy) else { return Vec::new() };
    let Ok(decision) = policy.decide(&input) else { return Vec::new() };
    validate::check(schemas, &input, &decision.actions).refused.iter().map(|r| r.to_string()).collect()
}

fn one(policy: &Policy, against: &Against<'_>, s: &Scenario) -> Result<Outcome, Failure> {
    let input = s.input(policy)?;
    let now = decided(policy, &input);
    Ok(match against {
        Against::Recorded => compare(&s.expected(policy)?, &now, ("recorded", "replayed")),
        Against::Baseline(baseline) => {
            let before = decided(baseline, &s.input(baseline)?);
            compare(&before, &now, ("baseline", "module"))
        }
    })
}

/// The scenario files under `paths`: files as given, directories walked for
/// `*.yaml` and `*.yml`, in path order.
pub fn files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
    Ok(())
}

/// Counts of a replay.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub agree: usize,
    pub differ: usize,
    pub failed: usize,
    /// Decisions (agreeing or not) whose output the schemas refuse.
    pub refused: usize,
}

impl Summary {
    pub fn of(rows: &[Row]) -> Summary {
        let mut s = Summary::default();
        for r in rows {
            match &r.outcome {
                Ok(Outcome::Agree) => s.agree += 1,
                Ok(Outcome::Differ { .. }) => s.differ += 1,
                Err(_) => s.failed += 1,
            }
            if !r.refused.is_empty() {
                s.refused += 1;
            }
        }
        s
    }

    pub fn clean(&self) -> bool {
        self.differ == 0 && self.failed == 0 && self.refused == 0
    }
}

/// The table (scenario, outcome, diff size), each difference in full, and the summary.
pub struct Report<'a>(pub &'a [Row]);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.0.iter().map(|r| r.path.display().to_string().len()).max().unwrap_or(8).max(8);
        writeln!(f, "{:width$}  {:7}  DIFF", "SCENARIO", "OUTCOME")?;
        for r in self.0 {
            let (outcome, diff) = match &r.outcome {
                Ok(Outcome::Agree) => ("agree", String::new()),
                Ok(Outcome::Differ { diff }) => ("differ", changed_lines(diff)),
                Err(e) => ("failed", e.lines().next().unwrap_or_default().to_string()),
            };
            writeln!(f, "{:width$}  {outcome:7}  {diff}", r.path.display())?;
        }
        for r in self.0 {
            if let Ok(Outcome::Differ { diff }) = &r.outcome {
                writeln!(f, "\n{} ({})", r.path.display(), r.name.as_deref().unwrap_or("unnamed"))?;
                write!(f, "{diff}")?;
            }
            if !r.refused.is_empty() {
                writeln!(f, "\n{}: the kinds' schemas refuse the module's decision:", r.path.display())?;
                r.refused.iter().try_for_each(|line| writeln!(f, "  {line}"))?;
            }
        }
        let s = Summary::of(self.0);
        write!(f, "\n{} scenarios: {} agree, {} differ, {} failed", self.0.len(), s.agree, s.differ, s.failed)?;
        if s.refused > 0 {
            write!(f, ", {} refused by the schemas", s.refused)?;
        }
        writeln!(f)
    }
}

/// `-3 +1 lines` for a unified diff.
fn changed_lines(diff: &str) -> String {
    let lines = diff.lines().filter(|l| !l.starts_with("---") && !l.starts_with("+++"));
    let (minus, plus) = lines.fold((0, 0), |(m, p), l| match l.as_bytes().first() {
        Some(b'-') => (m + 1, p),
        Some(b'+') => (m, p + 1),
        _ => (m, p),
    });
    format!("-{minus} +{plus} lines")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_summed_up_by_its_changed_lines() {
        let diff = "--- a\n+++ b\n@@ -1,2 +1,2 @@\n creates:\n-- x\n+- y\n+- z\n";
        assert_eq!(changed_lines(diff), "-1 +2 lines");
    }

    #[test]
    fn directories_are_walked_for_yaml_in_path_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("b/c")).expect("mkdir");
        for f in ["b/c/2.yaml", "b/1.yml", "a.yaml", "b/readme.txt"] {
            std::fs::write(dir.path().join(f), "").expect("write");
        }
        let found = files(&[dir.path().to_path_buf()]).expect("walk");
        let names: Vec<String> =
            found.iter().map(|p| p.strip_prefix(dir.path()).unwrap_or(p).display().to_string()).collect();
        assert_eq!(names, ["a.yaml", "b/1.yml", "b/c/2.yaml"]);
    }
}
