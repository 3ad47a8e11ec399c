//! Reference pages generated from their sources of truth: the command line from clap's
//! definitions, the metrics from the registry the operator serves. `podset-host
//! reference cli|metrics` prints them; `make docs` writes them under docs/reference/,
//! and a test fails when the committed pages drift.

use std::fmt::Write as _;

use crate::metrics::Metrics;

/// Every command and subcommand of `cmd`, with its arguments: flag, environment
/// variable, default and help.
pub fn cli(cmd: &clap::Command) -> String {
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from the command's definitions by `podset-host reference cli` (`make docs`); \
         a test fails when this page and the binary disagree. Every flag of `run` can also be set \
         with the environment variable beside it.\n",
    );
    let mut cmd = cmd.clone();
    cmd.build();
    command(&mut out, &cmd, cmd.get_name());
    out
}

fn command(out: &mut String, cmd: &clap::Command, path: &str) {
    let _ = write!(out, "\n## `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", one_line(&about.to_string()));
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | environment | default | |\n|---|---|---|---|\n");
        for a in args {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                name(a),
                a.get_env().map(|e| format!("`{}`", e.to_string_lossy())).unwrap_or_default(),
                default(a),
                one_line(&a.get_long_help().or(a.get_help()).map(|h| h.to_string()).unwrap_or_default())
                    .replace('|', "\\|")
            );
        }
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        command(out, sub, &format!("{path} {}", sub.get_name()));
    }
}

fn name(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    match (a.get_long(), a.get_short()) {
        (Some(long), Some(short)) if takes_value => format!("`-{short}`, `--{long} {value}`"),
        (Some(long), Some(short)) => format!("`-{short}`, `--{long}`"),
        (Some(long), None) if takes_value => format!("`--{long} {value}`"),
        (Some(long), None) => format!("`--{long}`"),
        _ if a.is_required_set() => format!("`{value}`"),
        _ => format!("`[{value}]`"),
    }
}

fn default(a: &clap::Arg) -> String {
    let values: Vec<String> = a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    match values.as_slice() {
        [] => String::new(),
        [v] if v.is_empty() => "(empty)".to_string(),
        _ => format!("`{}`", values.join(",")),
    }
}

/// Help text as one table cell: paragraphs joined.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every metric the operator serves at `/metrics`: name, type and help, as they were
/// registered.
pub fn metrics() -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         Served at `/metrics` (Prometheus text format) on `--metrics-addr`. Generated from the \
         operator's metrics registry by `podset-host reference metrics` (`make docs`); a test fails \
         when this page and the registry disagree.\n\n\
         | metric | type | |\n|---|---|---|\n",
    );
    for m in Metrics::default().described {
        let _ = writeln!(out, "| `{}` | {} | {} |", m.name, m.kind, m.help.replace('|', "\\|"));
    }
    out
}
