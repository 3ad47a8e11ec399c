//! The results: the tables as Markdown, under a heading that says what ran where.

use kube::Client;
use podset_test_support as common;

use crate::kept::{self, Part};
use crate::machine;
use crate::sizes::Run;

/// What the results' heading says of the run, read before it measures.
pub struct Heading {
    run: Run,
    pub machine: String,
    pub kubernetes: String,
}

impl Heading {
    pub async fn of(client: &Client, run: Run) -> Heading {
        let kubernetes = client.apiserver_version().await.map(|v| v.git_version);
        Heading {
            run,
            machine: machine::describe(),
            kubernetes: kubernetes.unwrap_or_else(|e| format!("of unknown version: {e}")),
        }
    }
}

/// The groups' tables under a heading that says what ran where, printed, and written to
/// bench/results/latest.md by a full run. A run finished with `BENCH_RESUME=1`
/// (`resumed`: some of its groups were kept by an earlier one) says when each ended.
pub fn report(heading: &Heading, parts: &[Part], resumed: bool) {
    let when = if resumed {
        let ended: Vec<String> = parts.iter().map(|p| format!("{} {}", p.group.said(), p.date)).collect();
        format!(
            "the code of commit {}, finished with `BENCH_RESUME=1`; each group's end: {}",
            kept::head(),
            ended.join("; ")
        )
    } else {
        date()
    };
    let mut md = format!(
        "# Benchmarks\n\n`make bench`{} on {}, {}. Embedded control plane (Kubernetes {}), simulated node (pods ready 1 s after they start), operator `{}`.\n\n",
        heading.run.note(),
        heading.machine,
        when,
        heading.kubernetes,
        // Relative to the repository: results name no machine's paths.
        relative(&common::operator_binary()).display()
    );
    md += &parts.iter().map(|p| p.markdown.as_str()).collect::<Vec<_>>().join("\n");
    println!("\n{md}");
    if heading.run == Run::Full {
        let path = common::workspace().join("bench/results/latest.md");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("bench/results");
        std::fs::write(&path, &md).expect("write bench/results/latest.md");
        eprintln!("written to {}", relative(&path).display());
    }
}

/// Now, in UTC, to the minute.
pub fn date() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// `path` relative to the repository, when it is inside it.
fn relative(path: &std::path::Path) -> std::path::PathBuf {
    let root = common::workspace().canonicalize().unwrap_or_else(|_| common::workspace());
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).map_or(path.clone(), std::path::Path::to_path_buf)
}
