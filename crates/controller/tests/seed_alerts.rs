//! The seed tutorial's alert rules (`examples/seed-alerts.yaml`) against the metrics the controller exports: each
//! expression parses as PromQL, and every metric it selects is exported with the type its function needs
//! (`rate` over a counter's `_total`, `histogram_quantile` over a histogram's `_bucket`).

mod promql;

use insitu_controller::metrics::{Metrics, cs_labels};
use promql::selectors;
use promql_parser::parser;

/// The `expr: |` blocks of the rules file (a block ends at the next key at the rule's indentation).
fn expressions(yaml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(indent) = line.find("expr: |") else {
            continue;
        };
        let mut expr = String::new();
        while let Some(next) = lines.peek() {
            let depth = next.len() - next.trim_start().len();
            if !next.trim().is_empty() && depth <= indent {
                break;
            }
            expr.push_str(next.trim());
            expr.push(' ');
            lines.next();
        }
        out.push(expr.trim().to_string());
    }
    out
}

#[test]
fn the_seeds_alert_rules_select_metrics_insitu_exports() {
    let yaml = include_str!("../../../examples/seed-alerts.yaml");
    let exprs = expressions(yaml);
    assert_eq!(exprs.len(), 2, "{exprs:?}");
    // One in-place update of each outcome, so that every series exists.
    let m = Metrics::new();
    let labels = cs_labels("default", "nginx-demo");
    m.inplace_update.get_or_create(&labels).inc();
    m.inplace_update_failed.get_or_create(&labels).inc();
    m.inplace_update_duration.get_or_create(&labels).observe(12.0);
    let text = m.render();
    let mut checked = 0;
    for expr in &exprs {
        let ast = parser::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let mut found = Vec::new();
        selectors(&ast, "", &mut found);
        assert!(!found.is_empty(), "{expr}");
        for (func, name) in found {
            let sample = format!("\n{name}{{");
            assert!(
                text.contains(&sample),
                "{name} (in {expr}) is not exported:\n{text}"
            );
            let (base, kind) = match name.strip_suffix("_bucket") {
                Some(b) => (b.to_string(), "histogram"),
                None => (name.trim_end_matches("_total").to_string(), "counter"),
            };
            assert!(
                text.contains(&format!("# TYPE {base} {kind}")),
                "{name} is not a {kind} (for {func}):\n{text}"
            );
            if func == "histogram_quantile" {
                assert_eq!(kind, "histogram", "{expr}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2);
}
