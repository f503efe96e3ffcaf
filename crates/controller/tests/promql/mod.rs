//! PromQL helpers shared by the tests that hold alert rules and dashboards against the metrics insitu exports.

use promql_parser::parser::{self, Expr};

/// (innermost function applied to it or "", metric name) for every selector in `e`.
pub fn selectors(e: &Expr, func: &str, out: &mut Vec<(String, String)>) {
    match e {
        Expr::VectorSelector(vs) => out.push((func.into(), vs.name.clone().unwrap_or_default())),
        Expr::MatrixSelector(ms) => out.push((func.into(), ms.vs.name.clone().unwrap_or_default())),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors(a, c.func.name, out)),
        Expr::Aggregate(a) => selectors(&a.expr, func, out),
        Expr::Unary(u) => selectors(&u.expr, func, out),
        Expr::Binary(b) => {
            selectors(&b.lhs, func, out);
            selectors(&b.rhs, func, out);
        }
        Expr::Paren(p) => selectors(&p.expr, func, out),
        Expr::Subquery(s) => selectors(&s.expr, func, out),
        _ => {}
    }
}

/// The metric family a sample name belongs to and the family's type, as OpenMetrics names them
/// (`x_total` → counter `x`, `x_bucket`/`x_count`/`x_sum` → histogram `x`, anything else a gauge).
#[allow(dead_code)] // each test binary uses a part
pub fn family(name: &str) -> (&str, &'static str) {
    for suffix in ["_bucket", "_count", "_sum"] {
        if let Some(base) = name.strip_suffix(suffix) {
            return (base, "histogram");
        }
    }
    match name.strip_suffix("_total") {
        Some(base) => (base, "counter"),
        None => (name, "gauge"),
    }
}

/// Parses `expr` and checks that every metric it selects is a family declared in `exposition` (`# TYPE`
/// line) with the type its name implies, and that `rate`/`increase`/`irate` only read counters or histogram
/// series. Returns how many selectors it checked.
#[allow(dead_code)]
pub fn check_exported(expr: &str, exposition: &str) -> Result<usize, String> {
    let ast = parser::parse(expr).map_err(|e| format!("{expr}: does not parse: {e}"))?;
    let mut found = Vec::new();
    selectors(&ast, "", &mut found);
    if found.is_empty() {
        return Err(format!("{expr}: selects no metric"));
    }
    for (func, name) in &found {
        let (base, kind) = family(name);
        if !exposition.contains(&format!("\n# TYPE {base} {kind}\n"))
            && !exposition.starts_with(&format!("# TYPE {base} {kind}\n"))
        {
            return Err(format!("{name} (in {expr}): no {kind} family {base} is exported"));
        }
        if ["rate", "increase", "irate"].contains(&func.as_str()) && kind == "gauge" {
            return Err(format!("{name} (in {expr}): {func} over a gauge"));
        }
    }
    Ok(found.len())
}
