//! The results: the tables as Markdown, under a heading that says what ran where.

use kube::Client;
use podset_test_support as common;

use crate::machine;
use crate::sizes::Run;
use crate::table::Table;

/// The tables as Markdown, printed, and written to bench/results/latest.md by a full run.
pub async fn report(client: &Client, run: Run, tables: &[(Table, &str)]) {
    let mut md = format!(
        "# Benchmarks\n\n`make bench`{} on {}, {}. Embedded control plane (Kubernetes {}), simulated node (pods ready 1 s after they start), operator `{}`.\n\n",
        run.note(),
        machine::describe(),
        date(),
        client.apiserver_version().await.map(|v| v.git_version).unwrap_or_else(|e| format!("of unknown version: {e}")),
        // Relative to the repository: results name no machine's paths.
        relative(&common::operator_binary()).display()
    );
    let parts: Vec<String> = tables.iter().map(|(t, against)| t.markdown(against)).collect();
    md += &parts.join("\n");
    println!("\n{md}");
    if run == Run::Full {
        let path = common::workspace().join("bench/results/latest.md");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("bench/results");
        std::fs::write(&path, &md).expect("write bench/results/latest.md");
        eprintln!("written to {}", relative(&path).display());
    }
}

/// Now, in UTC, to the minute.
fn date() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// `path` relative to the repository, when it is inside it.
fn relative(path: &std::path::Path) -> std::path::PathBuf {
    let root = common::workspace().canonicalize().unwrap_or_else(|_| common::workspace());
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).map_or(path.clone(), std::path::Path::to_path_buf)
}
