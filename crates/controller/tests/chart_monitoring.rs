//! The chart's monitoring values (charts/insitu/files: the PrometheusRule's groups and the Grafana dashboard)
//! against the metrics insitu exports: every rule and panel expression parses as PromQL and every metric it
//! names is a family the controller declares, with the type its name and function need.
//!
//! Offline it reads the chart's files and the controller's own rendering of its metrics. e2e/in-cluster/run sets
//! `INSITU_CHART_RENDERED` (the output of `helm template` with the monitoring values on) and
//! `INSITU_METRICS_SCRAPE` (a live `/metrics` of the controller pod), so the same checks run on what Helm
//! installs and what the pod serves.

mod promql;

use insitu_controller::metrics::{Metrics, cs_labels};
use serde_json::Value;

const RULES: &str = include_str!("../../../charts/insitu/files/prometheus-rules.yaml");
const DASHBOARD: &str = include_str!("../../../charts/insitu/files/insitu-dashboard.json");
const ALERTS: [&str; 4] = [
    "InPlaceUpdateFailureRateHigh",
    "InPlaceUpdateDurationHigh",
    "InSituRolloutStalled",
    "InSituControllerDown",
];

/// (where: an alert or a panel title, PromQL expression) pairs.
type Exprs = Vec<(String, String)>;

/// (alert name, expression) of every rule in a PrometheusRule's `groups`.
fn rules(groups: &Value) -> Exprs {
    let mut out = Vec::new();
    for g in groups.as_array().into_iter().flatten() {
        for r in g["rules"].as_array().into_iter().flatten() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            out.push((name.to_string(), r["expr"].as_str().unwrap_or("").to_string()));
        }
    }
    out
}

/// (panel title, expression) of every target of every panel of a Grafana dashboard.
fn panels(dashboard: &Value) -> Exprs {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?").to_string();
            out.push((title, t["expr"].as_str().unwrap_or("").to_string()));
        }
    }
    out
}

/// Rules and panels from `helm template`'s output: the PrometheusRule and the dashboard ConfigMap.
fn from_rendered(yaml: &str) -> (Exprs, Exprs) {
    let (mut r, mut p) = (None, None);
    for doc in yaml.split("\n---") {
        if doc.trim().is_empty() {
            continue;
        }
        let v: Value = serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("rendered YAML: {e}\n{doc}"));
        match (v["kind"].as_str(), v["metadata"]["name"].as_str()) {
            (Some("PrometheusRule"), _) => r = Some(rules(&v["spec"]["groups"])),
            (Some("ConfigMap"), Some("insitu-dashboard")) => {
                let json = v["data"]["insitu.json"].as_str().expect("data insitu.json");
                p = Some(panels(&serde_json::from_str(json).expect("dashboard JSON")));
            }
            _ => {}
        }
    }
    (
        r.expect("the rendered chart has a PrometheusRule"),
        p.expect("the rendered chart has the dashboard ConfigMap"),
    )
}

/// The controller's metrics with one series in every family, as a leader that rolled a CloneSet exports them.
fn own_exposition() -> String {
    let m = Metrics::new();
    let labels = cs_labels("default", "demo");
    m.inplace_update.get_or_create(&labels).inc();
    m.inplace_update_failed.get_or_create(&labels).inc();
    m.inplace_update_duration.get_or_create(&labels).observe(3.0);
    m.recreate_update.get_or_create(&labels).inc();
    m.expectation_leakage.get_or_create(&labels).inc();
    m.reconcile
        .get_or_create(&vec![("result", "ok".to_string())])
        .inc();
    m.write("patch", "pods");
    m.leader.set(1);
    m.plan_duration.observe(0.001);
    m.set_allocator_stats(|| vec![("resident", 4096)]);
    m.render()
}

#[test]
fn every_rule_and_panel_names_metrics_insitu_exports() {
    let (rules, panels) = match std::env::var("INSITU_CHART_RENDERED") {
        Ok(path) => from_rendered(&std::fs::read_to_string(&path).expect("INSITU_CHART_RENDERED file")),
        Err(_) => (
            rules(&serde_saphyr::from_str::<Value>(RULES).expect("rules YAML")["groups"]),
            panels(&serde_json::from_str(DASHBOARD).expect("dashboard JSON")),
        ),
    };
    let exposition = match std::env::var("INSITU_METRICS_SCRAPE") {
        Ok(path) => std::fs::read_to_string(&path).expect("INSITU_METRICS_SCRAPE file"),
        Err(_) => own_exposition(),
    };
    let names: Vec<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ALERTS, "the chart's alerts");
    assert!(panels.len() >= 8, "{panels:?}");
    let mut checked = 0;
    for (what, expr) in rules.iter().chain(&panels) {
        checked += promql::check_exported(expr, &exposition).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert!(checked >= rules.len() + panels.len(), "{checked} selectors");
}

#[test]
fn a_metric_insitu_does_not_export_is_caught() {
    let text = own_exposition();
    assert!(promql::check_exported("rate(kruise_inplace_update_total[5m])", &text).is_ok());
    let err = promql::check_exported("rate(kruise_inplace_update_succeeded_total[5m])", &text).unwrap_err();
    assert!(err.contains("kruise_inplace_update_succeeded"), "{err}");
    let err = promql::check_exported("rate(insitu_leader[5m])", &text).unwrap_err();
    assert!(err.contains("over a gauge"), "{err}");
    assert!(promql::check_exported("sum(rate(x[5m]) > ", &text).is_err());
}
