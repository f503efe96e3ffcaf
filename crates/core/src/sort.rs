//! Pod orderings: update candidates (research §3.7 step 5) and scale-down victims (§3.6 step 7).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use insitu_api::validation::selector_matches;
use insitu_api::{UpdatePriorityStrategy, UpdateScatterTerm};
use k8s_openapi::jiff::Timestamp;

use crate::pods::{Lc, PodFacts};

/// k8s `afterOrZero`: a zero time sorts first, otherwise the later time first.
fn after_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    }
}

/// k8s `controller.ActivePods.Less` (unassigned, Pending<Unknown<Running, not-ready, shorter ready time,
/// more restarts, newer); the caller breaks ties deterministically.
pub fn active_pods(a: &PodFacts, b: &PodFacts) -> Ordering {
    b.node_assigned
        .cmp(&a.node_assigned)
        .reverse()
        .reverse()
        .then_with(|| a.node_assigned.cmp(&b.node_assigned))
        .then_with(|| a.phase_ord.cmp(&b.phase_ord))
        .then_with(|| a.ready.cmp(&b.ready))
        .then_with(|| {
            if a.ready && b.ready {
                after_or_zero(a.ready_since, b.ready_since)
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| b.restarts().cmp(&a.restarts()))
        .then_with(|| after_or_zero(a.created, b.created))
}

/// Kruise `ActivePodsWithRanks.Less` without the rank (used inside a node by the same-node ranker).
fn with_rank(a: &PodFacts, b: &PodFacts, ra: usize, rb: usize, use_available: bool) -> Ordering {
    a.node_assigned
        .cmp(&b.node_assigned)
        .then_with(|| a.phase_ord.cmp(&b.phase_ord))
        .then_with(|| {
            if use_available {
                a.available.cmp(&b.available)
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| a.ready.cmp(&b.ready))
        .then_with(|| a.deletion_cost.cmp(&b.deletion_cost))
        .then_with(|| rb.cmp(&ra))
        .then_with(|| {
            if a.ready && b.ready {
                after_or_zero(a.ready_since, b.ready_since)
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| b.restarts().cmp(&a.restarts()))
        .then_with(|| after_or_zero(a.created, b.created))
        .then_with(|| a.name.cmp(b.name))
}

/// Kruise `NewSameNodeRanker`: on a node with k > 1 of these pods, sort them (ActivePodsWithRanks without
/// ranks) and give all but the best ranks k−1 … 1, so crowded nodes lose pods first.
fn same_node_ranks(pods: &[&PodFacts]) -> HashMap<usize, usize> {
    let mut by_node: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, p) in pods.iter().enumerate() {
        if p.node_assigned {
            by_node.entry(p.node).or_default().push(i);
        }
    }
    let mut ranks = HashMap::new();
    for (_, mut idx) in by_node {
        if idx.len() <= 1 {
            continue;
        }
        idx.sort_by(|&i, &j| with_rank(pods[i], pods[j], 0, 0, false));
        idx.pop();
        let n = idx.len();
        for (k, i) in idx.into_iter().enumerate() {
            ranks.insert(i, n - k);
        }
    }
    ranks
}

/// Kruise scale-down order (`ActivePodsWithRanks` with availability and the same-node ranker; topology
/// spread ranks need Node labels and are not modelled): the first pods are deleted first.
pub fn scale_down(pods: &mut [&PodFacts]) {
    let ranks = same_node_ranks(pods);
    let mut idx: Vec<usize> = (0..pods.len()).collect();
    idx.sort_by(|&i, &j| {
        let (ri, rj) = (
            ranks.get(&i).copied().unwrap_or(0),
            ranks.get(&j).copied().unwrap_or(0),
        );
        with_rank(pods[i], pods[j], ri, rj, true)
    });
    let sorted: Vec<_> = idx.iter().map(|&i| pods[i]).collect();
    pods.copy_from_slice(&sorted);
}

/// Kruise `getIntFromStringSuffix`: the trailing decimal digits of a label value.
fn int_suffix(v: &str) -> i64 {
    let digits = v.bytes().rev().take_while(u8::is_ascii_digit).count();
    v[v.len() - digits..].parse().unwrap_or(0)
}

/// Kruise `prioritySort` key, smaller sorts first. Weight: higher sum of matching weights first.
/// Order: the index of the first ordered key the pod has (pods with none: −1, first), then the integer
/// suffix of its value, higher first.
fn priority_key(p: &PodFacts, s: &UpdatePriorityStrategy) -> (i64, i64) {
    let empty = BTreeMap::new();
    let labels = p.pod.metadata.labels.as_ref().unwrap_or(&empty);
    if !s.weight_priority.is_empty() {
        let w: i64 = s
            .weight_priority
            .iter()
            .filter(|t| selector_matches(&t.match_selector, labels))
            .map(|t| i64::from(t.weight))
            .sum();
        return (-w, 0);
    }
    for (i, t) in s.order_priority.iter().enumerate() {
        if let Some(v) = labels.get(&t.ordered_key) {
            return (i as i64, -int_suffix(v));
        }
    }
    (-1, 0)
}

/// Kruise `SortUpdateIndexes`: ActivePods order, then priorityStrategy (stable), then scatterStrategy,
/// then PreparingUpdate pods first (stable).
pub fn update_candidates(
    facts: &[PodFacts],
    idx: &mut Vec<usize>,
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
) {
    // Ties by index (facts are sorted by name): deterministic without string comparisons.
    idx.sort_by(|&i, &j| active_pods(&facts[i], &facts[j]).then(i.cmp(&j)));
    if let Some(ps) = priority.filter(|p| !p.weight_priority.is_empty() || !p.order_priority.is_empty()) {
        let keys: HashMap<usize, (i64, i64)> =
            idx.iter().map(|&i| (i, priority_key(&facts[i], ps))).collect();
        idx.sort_by_key(|i| keys[i]);
    }
    if !scatter.is_empty() {
        scatter_sort(facts, idx, scatter);
    }
    idx.sort_by_key(|&i| facts[i].lc != Lc::PreparingUpdate);
}

/// Kruise `getScatterTerms`: one term as is; several → the terms present among the candidates, most
/// matched first (stable).
fn scatter_terms(facts: &[PodFacts], idx: &[usize], terms: &[UpdateScatterTerm]) -> Vec<UpdateScatterTerm> {
    if terms.len() == 1 {
        return terms.to_vec();
    }
    let mut out: Vec<(UpdateScatterTerm, usize)> = Vec::new();
    for t in terms {
        for &i in idx {
            if scatter_match(&facts[i], t) {
                match out.iter_mut().find(|(o, _)| o.key == t.key && o.value == t.value) {
                    Some((_, c)) => *c += 1,
                    None => out.push((t.clone(), 1)),
                }
            }
        }
    }
    out.sort_by_key(|t| std::cmp::Reverse(t.1));
    out.into_iter().map(|(t, _)| t).collect()
}

fn scatter_match(f: &PodFacts, t: &UpdateScatterTerm) -> bool {
    f.pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&t.key))
        .is_some_and(|v| *v == t.value)
}

/// Kruise `scatterSort`: for each term, interleave matched and unmatched candidates in groups sized by
/// the density of matches among all pods, keeping the last matched candidate at the very end.
fn scatter_sort(facts: &[PodFacts], idx: &mut Vec<usize>, terms: &[UpdateScatterTerm]) {
    if idx.len() <= 1 {
        return;
    }
    for term in scatter_terms(facts, idx, terms) {
        let (mut matched, mut unmatched): (Vec<usize>, Vec<usize>) =
            idx.iter().partition(|&&i| scatter_match(&facts[i], &term));
        if matched.len() <= 1 || unmatched.len() <= 1 {
            continue;
        }
        let total_matched = facts.iter().filter(|f| scatter_match(f, &term)).count() - 1;
        let total_unmatched = facts.len() - total_matched - 1;
        let last = matched.pop().unwrap_or_default();
        let g = group_by_density(total_matched, total_unmatched, matched.len(), unmatched.len());
        let mut out = Vec::with_capacity(idx.len());
        let rem = g.unmatched_remainder.min(unmatched.len());
        out.extend(unmatched.drain(..rem));
        for _ in 0..g.num {
            let m = g.matched_size.min(matched.len());
            out.extend(matched.drain(..m));
            let u = g.unmatched_size.min(unmatched.len());
            out.extend(unmatched.drain(..u));
        }
        out.append(&mut matched);
        out.append(&mut unmatched);
        out.push(last);
        *idx = out;
    }
}

#[derive(Debug, Default)]
struct ScatterGroup {
    num: usize,
    matched_size: usize,
    unmatched_size: usize,
    unmatched_remainder: usize,
}

/// Go `math.Round(a / b)` (half away from zero) for non-negative counts.
fn round_div(a: usize, b: usize) -> usize {
    if b == 0 { 0 } else { (2 * a + b) / (2 * b) }
}

fn scatter_group(matched: usize, unmatched: usize) -> ScatterGroup {
    let num = matched.min(unmatched);
    ScatterGroup {
        num,
        matched_size: round_div(matched, num),
        unmatched_size: round_div(unmatched, num),
        unmatched_remainder: 0,
    }
}

/// Kruise `calculateGroupByDensity`.
fn group_by_density(total_m: usize, total_u: usize, upd_m: usize, upd_u: usize) -> ScatterGroup {
    let total = scatter_group(total_m, total_u);
    let update = scatter_group(upd_m, upd_u);
    // float32(totalUnmatched)/float32(totalMatched) >= float32(updateUnmatched)/float32(updateMatched)
    if (total_u as f64) * (upd_m as f64) >= (upd_u as f64) * (total_m as f64) {
        return update;
    }
    let (ms, us) = (total.matched_size.max(1), total.unmatched_size.max(1));
    let num = if upd_m / ms < upd_u / us {
        upd_m / ms
    } else {
        upd_u / us
    };
    ScatterGroup {
        num,
        matched_size: ms,
        unmatched_size: us,
        unmatched_remainder: upd_u.saturating_sub(num * us),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use std::collections::HashSet;

    fn pod(name: &str, labels: &[(&str, &str)], phase: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
            "spec": {"containers": []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn facts(pods: &[Pod]) -> Vec<PodFacts<'_>> {
        let none = HashSet::new();
        pods.iter()
            .map(|p| PodFacts::new(p, Timestamp::UNIX_EPOCH, 0, &none, "rev"))
            .collect()
    }

    #[test]
    fn sort_update_indexes_kruise_case() {
        // TestSortUpdateIndexes: [Pending+Ready, Pending, Pending, Running+Ready, Running], candidates
        // [0,1,3,4] → [1,0,4,3].
        let pods = vec![
            pod("p0", &[], "Pending", true),
            pod("p1", &[], "Pending", false),
            pod("p2", &[], "Pending", false),
            pod("p3", &[], "Running", true),
            pod("p4", &[], "Running", false),
        ];
        let f = facts(&pods);
        let mut idx = vec![0, 1, 3, 4];
        update_candidates(&f, &mut idx, None, &[]);
        assert_eq!(idx, vec![1, 0, 4, 3]);
    }

    #[test]
    fn scatter_kruise_cases() {
        let cases: &[(&[&str], &[usize])] = &[
            (&["", "", "", "", "A", "A"], &[4, 0, 1, 2, 3, 5]),
            (&["", "", "", "A", "A", "A"], &[3, 0, 1, 4, 2, 5]),
            (&["", "", "", "A", "", "", "A"], &[3, 0, 1, 2, 4, 5, 6]),
            (
                &["", "", "", "", "", "", "A", "A", "A"],
                &[6, 0, 1, 2, 7, 3, 4, 5, 8],
            ),
            (&["", "", "A", "A", "A", "A"], &[2, 3, 0, 4, 1, 5]),
            (
                &["", "", "A", "", "A", "A", "A", "A", "A"],
                &[2, 4, 0, 5, 6, 1, 7, 3, 8],
            ),
            (
                &["", "A", "", "A", "", "", "A", "A", "A"],
                &[1, 0, 3, 2, 6, 4, 7, 5, 8],
            ),
            (
                &["", "", "", "", "", "", "", "A", "A", "A"],
                &[7, 0, 1, 2, 3, 8, 4, 5, 6, 9],
            ),
            (&["A", ""], &[0, 1]),
        ];
        let term = UpdateScatterTerm {
            key: "labelA".into(),
            value: "AAA".into(),
        };
        for (labels, want) in cases {
            let pods: Vec<Pod> = labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let lab: &[(&str, &str)] = if *l == "A" { &[("labelA", "AAA")] } else { &[] };
                    pod(&format!("{i}"), lab, "Running", true)
                })
                .collect();
            let f = facts(&pods);
            let mut idx: Vec<usize> = (0..pods.len()).collect();
            scatter_sort(&f, &mut idx, std::slice::from_ref(&term));
            assert_eq!(&idx, want, "labels {labels:?}");
        }
    }

    #[test]
    fn priority_weight_and_order() {
        let pods = vec![
            pod("a", &[("key", "bar")], "Running", true),
            pod("b", &[("key", "foo")], "Running", true),
            pod("c", &[], "Running", true),
        ];
        let f = facts(&pods);
        let ws: UpdatePriorityStrategy = serde_json::from_value(serde_json::json!({"weightPriority": [
            {"weight": 20, "matchSelector": {"matchLabels": {"key": "foo"}}},
            {"weight": 10, "matchSelector": {"matchLabels": {"key": "bar"}}}
        ]}))
        .unwrap();
        let mut idx = vec![0, 1, 2];
        update_candidates(&f, &mut idx, Some(&ws), &[]);
        assert_eq!(idx, vec![1, 0, 2]);

        let pods = vec![
            pod("a", &[("k2", "v-3")], "Running", true),
            pod("b", &[("k1", "v-1")], "Running", true),
            pod("c", &[("k1", "v-10")], "Running", true),
            pod("d", &[], "Running", true),
        ];
        let f = facts(&pods);
        let os: UpdatePriorityStrategy = serde_json::from_value(serde_json::json!({"orderPriority": [
            {"orderedKey": "k1"}, {"orderedKey": "k2"}
        ]}))
        .unwrap();
        let mut idx = vec![0, 1, 2, 3];
        update_candidates(&f, &mut idx, Some(&os), &[]);
        // no key (level −1) first, then k1 by suffix descending, then k2.
        assert_eq!(idx, vec![3, 2, 1, 0]);
    }
}
