//! A label selector prepared once per plan, so matching every pod neither walks the selector's map nor
//! allocates (`insitu_api::validation::selector_matches` builds a value set per expression per call).

use crate::util::strmap::Entries;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Same answers as `insitu_api::validation::selector_matches` (tested below against it).
pub(crate) struct Selector<'a> {
    match_labels: Vec<(&'a str, &'a str)>,
    exprs: Vec<Expr<'a>>,
}

struct Expr<'a> {
    key: &'a str,
    op: Op,
    /// Selector value lists are tiny: a linear scan beats a set.
    values: Vec<&'a str>,
}

enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Any other operator matches nothing, as in `selector_matches`.
    Unknown,
}

impl<'a> Selector<'a> {
    pub(crate) fn new(sel: &'a LabelSelector) -> Self {
        // From a BTreeMap, so sorted by key (`match_labels` promises it).
        let match_labels = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let exprs = sel
            .match_expressions
            .iter()
            .flatten()
            .map(|e| Expr {
                key: &e.key,
                op: match e.operator.as_str() {
                    "In" => Op::In,
                    "NotIn" => Op::NotIn,
                    "Exists" => Op::Exists,
                    "DoesNotExist" => Op::DoesNotExist,
                    _ => Op::Unknown,
                },
                values: e.values.iter().flatten().map(String::as_str).collect(),
            })
            .collect();
        Selector { match_labels, exprs }
    }

    /// Whether a pod with these labels (`None` = no labels) is selected.
    pub(crate) fn matches<'l>(&self, labels: impl Into<Entries<'l>>) -> bool {
        let labels = labels.into();
        self.match_labels.iter().all(|&(k, v)| labels.get(k) == Some(v)) && self.matches_expressions(labels)
    }

    /// `matchLabels` as (key, value) pairs, distinct keys, sorted by key like a pod's label map: a caller
    /// already walking a pod's labels counts the pairs it meets (selected ⇔ all met, and
    /// `matches_expressions`) instead of looking each one up again.
    pub(crate) fn match_labels(&self) -> &[(&'a str, &'a str)] {
        &self.match_labels
    }

    /// The `matchExpressions` part of `matches`.
    pub(crate) fn matches_expressions(&self, labels: Entries<'_>) -> bool {
        self.exprs.iter().all(|e| {
            let got = labels.get(e.key);
            match e.op {
                Op::In => got.is_some_and(|g| e.values.contains(&g)),
                Op::NotIn => got.is_none_or(|g| !e.values.contains(&g)),
                Op::Exists => got.is_some(),
                Op::DoesNotExist => got.is_none(),
                Op::Unknown => false,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use insitu_api::validation::selector_matches;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn same_answers_as_selector_matches() {
        let selectors = [
            json!({}),
            json!({"matchLabels": {}}),
            json!({"matchLabels": {"app": "web"}}),
            json!({"matchLabels": {"app": "web", "tier": "fe"}}),
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fe"]}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "Bogus", "values": ["fe"]}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "In"}]}),
            json!({"matchLabels": {"app": "web"},
                   "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["be"]},
                                        {"key": "zone", "operator": "Exists"}]}),
        ];
        let label_sets: Vec<Option<BTreeMap<String, String>>> = vec![
            None,
            Some(BTreeMap::new()),
            Some(serde_json::from_value(json!({"app": "web"})).unwrap()),
            Some(serde_json::from_value(json!({"app": "db"})).unwrap()),
            Some(serde_json::from_value(json!({"app": "web", "tier": "fe"})).unwrap()),
            Some(serde_json::from_value(json!({"app": "web", "tier": "be", "zone": "a"})).unwrap()),
            Some(serde_json::from_value(json!({"app": "web", "tier": "mid", "zone": "a"})).unwrap()),
        ];
        let empty = BTreeMap::new();
        for s in &selectors {
            let sel: LabelSelector = serde_json::from_value(s.clone()).unwrap();
            let compiled = Selector::new(&sel);
            for l in &label_sets {
                assert_eq!(
                    compiled.matches(l),
                    selector_matches(&sel, l.as_ref().unwrap_or(&empty)),
                    "selector {s} labels {l:?}"
                );
            }
        }
    }
}
