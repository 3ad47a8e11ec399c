//! The dashboard and the alert rules of monitoring/ name only metrics the operator
//! exports (its registry is the single source of truth), each alert has its runbook in
//! docs/reference/alerts.md, and each runbook its alert. The rules' behaviour is
//! tested by `promtool test rules` (hack/check.sh).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use podset_host::metrics::Metrics;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The `podset_*` metric names a PromQL expression reads.
fn metrics_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("podset_") {
        let name: String =
            rest[at..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        rest = &rest[at + name.len()..];
        out.push(name);
    }
    out
}

/// What a scrape can show: every registered metric, a histogram's series too.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for m in Metrics::default().described {
        if m.kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{}{suffix}", m.name));
            }
        } else {
            names.insert(m.name);
        }
    }
    names
}

struct Alert {
    name: String,
    expr: String,
    runbook: String,
}

fn alerts() -> Vec<Alert> {
    let rules: Value = serde_yaml::from_str(&read("monitoring/alerts.yaml")).expect("alerts.yaml is YAML");
    let groups = rules["groups"].as_array().expect("groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| Alert {
            name: r["alert"].as_str().expect("every rule is an alert").to_string(),
            expr: r["expr"].as_str().expect("an expr").to_string(),
            runbook: r["annotations"]["runbook_url"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

#[test]
fn the_dashboard_and_the_rules_name_only_metrics_the_operator_exports() {
    let exported = exported();
    let mut named = Vec::new();
    for alert in alerts() {
        named.extend(metrics_in(&alert.expr).into_iter().map(|m| (format!("alert {}", alert.name), m)));
    }
    let dashboard: Value = serde_json::from_str(&read("monitoring/dashboards/podset-host.json")).expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("every panel has a title");
        assert!(ids.insert(panel["id"].as_i64().expect("an id")), "panel ids are unique: {title}");
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        for target in targets.unwrap_or_else(|| panic!("panel {title} has no query")) {
            let expr = target["expr"].as_str().expect("a PromQL query");
            named.extend(metrics_in(expr).into_iter().map(|m| (format!("panel {title:?}"), m)));
        }
    }
    let unknown: Vec<String> =
        named.iter().filter(|(_, m)| !exported.contains(m)).map(|(w, m)| format!("{w}: {m}")).collect();
    assert!(unknown.is_empty(), "not exported by the operator (docs/reference/metrics.md):\n{}", unknown.join("\n"));
    let distinct: BTreeSet<&String> = named.iter().map(|(_, m)| m).collect();
    assert!(distinct.len() >= 15, "the dashboard and rules read {} metrics: {distinct:?}", distinct.len());
}

#[test]
fn every_alert_has_its_runbook_and_every_runbook_its_alert() {
    let page = read("docs/reference/alerts.md");
    let sections: BTreeSet<String> =
        page.lines().filter_map(|l| l.strip_prefix("## ")).map(|s| s.trim().to_string()).collect();
    let alerts = alerts();
    assert!(alerts.len() >= 7, "{} alerts", alerts.len());
    for alert in &alerts {
        assert!(sections.contains(&alert.name), "docs/reference/alerts.md has no section for {}", alert.name);
        // GitHub's anchor of a `## Name` heading is its lowercase.
        let expected = format!("docs/reference/alerts.md#{}", alert.name.to_lowercase());
        assert_eq!(alert.runbook, expected, "{}'s runbook_url", alert.name);
    }
    let names: BTreeSet<String> = alerts.iter().map(|a| a.name.clone()).collect();
    let orphans: Vec<&String> = sections.difference(&names).collect();
    assert!(orphans.is_empty(), "runbooks without an alert: {orphans:?}");
}

#[test]
fn a_metric_the_operator_does_not_export_is_caught() {
    let exported = exported();
    assert!(metrics_in("rate(podset_reconciles_total[5m])").iter().all(|m| exported.contains(m)));
    let typo = metrics_in("sum(podset_reconcile_total) / podset_policy_decision_duration_seconds_bucket");
    assert_eq!(typo, ["podset_reconcile_total", "podset_policy_decision_duration_seconds_bucket"]);
    assert!(!exported.contains(&typo[0]) && exported.contains(&typo[1]));
}
