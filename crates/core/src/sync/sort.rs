//! Pod orderings: update candidates (Kruise `SortUpdateIndexes`, `sync/cloneset_update.go`) and scale-down
//! victims (`choosePodsToDelete`, `sync/cloneset_scale.go`).

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, HashMap};

use insitu_api::{UpdatePriorityStrategy, UpdateScatterTerm};
use k8s_openapi::jiff::Timestamp;

use crate::model::pods::{Lc, PodFacts};
use crate::model::snapshot::NodeLabels;
use crate::util::selector::Selector;

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
// The reference the tests check `ActiveKey` (what the planner sorts by) against.
#[cfg(test)]
pub(crate) fn active_pods(a: &PodFacts, b: &PodFacts) -> Ordering {
    // Unassigned (false) before assigned (true).
    a.node_assigned
        .cmp(&b.node_assigned)
        .then_with(|| a.phase_ord.cmp(&b.phase_ord))
        .then_with(|| a.ready.cmp(&b.ready))
        .then_with(|| {
            if a.ready && b.ready {
                after_or_zero(a.ready_since(), b.ready_since())
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| b.restarts().cmp(&a.restarts()))
        .then_with(|| after_or_zero(a.created(), b.created()))
}

/// `after_or_zero` as a sort key: `None` (zero time) first, then later times first.
fn after_or_zero_key(t: Option<Timestamp>) -> Option<Reverse<Timestamp>> {
    t.map(Reverse)
}

/// `active_pods` as a key computed once per pod: sorting then compares small tuples instead of re-reading
/// each pod per comparison (`restarts()` walks the container statuses). Orders exactly as `active_pods`.
type ActiveKey = (
    bool,
    u8,
    bool,
    Option<Reverse<Timestamp>>,
    Reverse<i32>,
    Option<Reverse<Timestamp>>,
);

fn active_key(f: &PodFacts) -> ActiveKey {
    (
        f.node_assigned,
        f.phase_ord,
        f.ready,
        // Ready times only break ties between two ready pods.
        if f.ready {
            after_or_zero_key(f.ready_since())
        } else {
            None
        },
        Reverse(f.restarts()),
        after_or_zero_key(f.created()),
    )
}

/// Kruise `ActivePodsWithRanks.Less` without the rank (used inside a node by the same-node ranker).
fn with_rank(a: &PodFacts, b: &PodFacts, ra: f64, rb: f64, use_available: bool) -> Ordering {
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
        .then_with(|| rb.total_cmp(&ra))
        .then_with(|| {
            if a.ready && b.ready {
                after_or_zero(a.ready_since(), b.ready_since())
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| b.restarts().cmp(&a.restarts()))
        .then_with(|| after_or_zero(a.created(), b.created()))
        .then_with(|| a.name_cmp(b))
}

/// The pod template's `topologySpreadConstraints` keys and the labels of the nodes the pods run on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Topology<'a> {
    pub keys: &'a [&'a str],
    pub nodes: &'a NodeLabels,
}

/// Kruise scale-down ranks: `NewSpreadConstraintsRanker` when the template has topology spread
/// constraints, else `NewSameNodeRanker`. A higher rank is deleted first.
fn ranks(pods: &[&PodFacts], topology: Option<Topology>) -> Vec<f64> {
    let same_node = same_node_ranks(pods);
    match topology {
        Some(t) if !t.keys.is_empty() => spread_ranks(pods, t, &same_node),
        _ => same_node,
    }
}

/// Kruise `NewSpreadConstraintsRanker`: for each constraint's topologyKey, pods are grouped by their node's
/// value of that label (pods on unknown nodes or nodes without the label take no part); each group is
/// sorted (ActivePodsWithRanks with the same-node ranks, except for `kubernetes.io/hostname` where they
/// would be moot) and pod i of n adds (n − i)·ln(#values + 2) to its rank. Crowded domains lose pods first.
fn spread_ranks(pods: &[&PodFacts], t: Topology, same_node: &[f64]) -> Vec<f64> {
    let mut ranks = vec![0.0; pods.len()];
    for key in t.keys {
        let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, p) in pods.iter().enumerate() {
            if !p.node_assigned {
                continue;
            }
            if let Some(v) = t.nodes.get(p.node()).and_then(|l| l.get(*key)) {
                groups.entry(v.as_str()).or_default().push(i);
            }
        }
        let use_same_node = *key != HOSTNAME_LABEL;
        let rank_of = |i: usize| if use_same_node { same_node[i] } else { 0.0 };
        // Kruise topologyNormalizingWeight.
        let weight = ((groups.len() + 2) as f64).ln();
        for (_, mut idx) in groups {
            idx.sort_by(|&i, &j| with_rank(pods[i], pods[j], rank_of(i), rank_of(j), false));
            let n = idx.len();
            for (k, i) in idx.into_iter().enumerate() {
                ranks[i] += (n - k) as f64 * weight;
            }
        }
    }
    ranks
}

const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Kruise `NewSameNodeRanker`: on a node with k > 1 of these pods, sort them (ActivePodsWithRanks without
/// ranks) and give all but the best ranks k−1 … 1, so crowded nodes lose pods first. `ranks[i]` is pod i's.
fn same_node_ranks(pods: &[&PodFacts]) -> Vec<f64> {
    let mut by_node: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, p) in pods.iter().enumerate() {
        if p.node_assigned {
            by_node.entry(p.node()).or_default().push(i);
        }
    }
    let mut ranks = vec![0.0; pods.len()];
    for (_, mut idx) in by_node {
        if idx.len() <= 1 {
            continue;
        }
        idx.sort_by(|&i, &j| with_rank(pods[i], pods[j], 0.0, 0.0, false));
        idx.pop();
        let n = idx.len();
        for (k, i) in idx.into_iter().enumerate() {
            ranks[i] = (n - k) as f64;
        }
    }
    ranks
}

/// `with_rank(.., use_available = true)` as a key computed once per pod (see `active_key`); the position
/// breaks the remaining ties as the stable sort did.
type ScaleDownKey<'a> = (
    (bool, u8, bool, bool, i32, Reverse<u64>),
    Option<Reverse<Timestamp>>,
    Reverse<i32>,
    Option<Reverse<Timestamp>>,
    &'a str,
    usize,
);

/// Kruise scale-down order (`ActivePodsWithRanks` with availability and the spread or same-node ranker):
/// the first pods are deleted first.
// The whole order: the reference the tests check the `_prefix` form (what the planner runs) against.
#[cfg(test)]
pub(crate) fn scale_down(pods: &mut [&PodFacts], topology: Option<Topology>) {
    let n = pods.len();
    scale_down_prefix(pods, n, topology);
}

/// Like `scale_down`, but only the first `k` pods are guaranteed in order (the rest are the remaining
/// pods, unordered): choosing k victims among n pods costs O(n + k log k).
pub(crate) fn scale_down_prefix(pods: &mut [&PodFacts], k: usize, topology: Option<Topology>) {
    let ranks = ranks(pods, topology);
    let keys: Vec<ScaleDownKey> = pods
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                (
                    f.node_assigned,
                    f.phase_ord,
                    f.available,
                    f.ready,
                    f.deletion_cost,
                    // Ranks are finite and ≥ 0, where the IEEE bit pattern orders as the value.
                    Reverse(ranks[i].to_bits()),
                ),
                if f.ready {
                    after_or_zero_key(f.ready_since())
                } else {
                    None
                },
                Reverse(f.restarts()),
                after_or_zero_key(f.created()),
                f.name(),
                i,
            )
        })
        .collect();
    let sorted: Vec<_> = order_prefix(&keys, k).into_iter().map(|p| pods[p]).collect();
    pods.copy_from_slice(&sorted);
}

/// Positions of `keys`, the `k` smallest keys' first and in order, then the rest unordered. Keys are
/// unique (they end with a position), so this equals the first `k` of a full sort. Positions are what
/// move while sorting: a few bytes each, where the keys are several dozen.
fn order_prefix<K: Ord>(keys: &[K], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let by_key = |a: &usize, b: &usize| keys[*a].cmp(&keys[*b]);
    if k < order.len() {
        order.select_nth_unstable_by(k, by_key);
        order[..k].sort_unstable_by(by_key);
    } else {
        order.sort_unstable_by(by_key);
    }
    order
}

/// Kruise `getIntFromStringSuffix`: the trailing decimal digits of a label value.
fn int_suffix(v: &str) -> i64 {
    let digits = v.bytes().rev().take_while(u8::is_ascii_digit).count();
    v[v.len() - digits..].parse().unwrap_or(0)
}

/// Kruise `prioritySort` key, smaller sorts first. Weight: higher sum of matching weights first.
/// Order: the index of the first ordered key the pod has (pods with none: −1, first), then the integer
/// suffix of its value, higher first.
struct Priority<'a> {
    strategy: &'a UpdatePriorityStrategy,
    /// The weight terms' selectors, prepared once rather than per pod.
    weights: Vec<(Selector<'a>, i64)>,
}

impl<'a> Priority<'a> {
    fn new(strategy: &'a UpdatePriorityStrategy) -> Self {
        let weights = strategy
            .weight_priority
            .iter()
            .map(|t| (Selector::new(&t.match_selector), i64::from(t.weight)))
            .collect();
        Priority { strategy, weights }
    }

    fn key(&self, p: &PodFacts) -> (i64, i64) {
        let labels = p.labels();
        if !self.weights.is_empty() {
            let w: i64 = self
                .weights
                .iter()
                .filter(|(sel, _)| sel.matches(labels))
                .map(|(_, w)| w)
                .sum();
            return (-w, 0);
        }
        for (i, t) in self.strategy.order_priority.iter().enumerate() {
            if let Some(v) = labels.get(&t.ordered_key) {
                return (i as i64, -int_suffix(v));
            }
        }
        (-1, 0)
    }
}

/// Kruise `SortUpdateIndexes`: ActivePods order, then priorityStrategy (stable), then scatterStrategy,
/// then PreparingUpdate pods first (stable).
// The whole order: the reference the tests check the `_prefix` form (what the planner runs) against.
#[cfg(test)]
pub(crate) fn update_candidates(
    facts: &[PodFacts],
    idx: &mut Vec<usize>,
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
) {
    let n = idx.len();
    update_candidates_prefix(facts, idx, priority, scatter, n);
}

/// Like `update_candidates`, but only the first `k` positions are guaranteed in order (the rest hold the
/// remaining candidates, unordered): the planner looks at no more candidates than its update budget, so
/// a rollout over 50k pods orders a few thousand, not all of them. Each step of Kruise's chain of stable
/// sorts is a more significant key, so without scatter one sort by (PreparingUpdate first, priority,
/// ActivePods, index) gives the same order. Scatter regroups the whole list: then everything is sorted.
pub(crate) fn update_candidates_prefix(
    facts: &[PodFacts],
    idx: &mut Vec<usize>,
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
    k: usize,
) {
    let priority = priority
        .filter(|p| !p.weight_priority.is_empty() || !p.order_priority.is_empty())
        .map(Priority::new);
    let prio = |i: usize| priority.as_ref().map_or((0, 0), |p| p.key(&facts[i]));
    // Ties by index (facts are sorted by name): deterministic without string comparisons.
    if scatter.is_empty() {
        let keys: Vec<_> = idx
            .iter()
            .map(|&i| {
                (
                    facts[i].lc != Lc::PreparingUpdate,
                    prio(i),
                    active_key(&facts[i]),
                    i,
                )
            })
            .collect();
        *idx = order_prefix(&keys, k).into_iter().map(|p| keys[p].3).collect();
        return;
    }
    let keys: Vec<_> = idx.iter().map(|&i| (prio(i), active_key(&facts[i]), i)).collect();
    *idx = order_prefix(&keys, keys.len())
        .into_iter()
        .map(|p| keys[p].2)
        .collect();
    scatter_sort(facts, idx, scatter);
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
    f.labels().get(&t.key).is_some_and(|v| v == t.value)
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
    use crate::PodSummary;
    use k8s_openapi::api::core::v1::Pod;
    use std::collections::{BTreeMap, HashSet};
    use std::sync::Arc;

    fn pod(name: &str, labels: &[(&str, &str)], phase: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
            "spec": {"containers": []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    fn summaries(pods: &[Pod]) -> Vec<PodSummary> {
        pods.iter()
            .map(|p| PodSummary::new(Arc::new(p.clone())))
            .collect()
    }

    fn facts(summaries: &[PodSummary]) -> Vec<PodFacts<'_>> {
        let none = HashSet::new();
        summaries
            .iter()
            .map(|s| PodFacts::new(s, Timestamp::UNIX_EPOCH, 0, &none, "rev"))
            .collect()
    }

    #[test]
    fn active_pods_puts_unassigned_pods_first() {
        // Kubernetes controller.ActivePods: a pod without spec.nodeName sorts before any scheduled pod,
        // whatever its phase or readiness.
        let mut scheduled = pod("scheduled", &[], "Pending", false);
        scheduled.spec.as_mut().unwrap().node_name = Some("node-0".into());
        let pods = vec![scheduled, pod("unscheduled", &[], "Running", true)];
        let sums = summaries(&pods);
        let f = facts(&sums);
        assert_eq!(active_pods(&f[1], &f[0]), std::cmp::Ordering::Less);
        let mut idx = vec![0, 1];
        update_candidates(&f, &mut idx, None, &[]);
        assert_eq!(idx, vec![1, 0]);
    }

    fn on_node(name: &str, node: &str) -> Pod {
        let mut p = pod(name, &[], "Running", true);
        p.spec.as_mut().unwrap().node_name = Some(node.into());
        p
    }

    fn zones(pairs: &[(&str, &str)]) -> NodeLabels {
        pairs
            .iter()
            .map(|(node, zone)| {
                let labels = BTreeMap::from([
                    ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
                    ("kubernetes.io/hostname".to_string(), node.to_string()),
                ]);
                (node.to_string(), labels)
            })
            .collect()
    }

    fn first_victim(f: &[PodFacts], topology: Option<Topology>) -> String {
        let mut v: Vec<&PodFacts> = f.iter().collect();
        scale_down(&mut v, topology);
        v[0].name().to_string()
    }

    #[test]
    fn spread_ranker_deletes_from_the_most_crowded_domain() {
        // zone-x: three nodes with one pod each; zone-y: one node with two pods.
        let pods = vec![
            on_node("x1", "n1"),
            on_node("x2", "n2"),
            on_node("x3", "n3"),
            on_node("y1", "n4"),
            on_node("y2", "n4"),
        ];
        let sums = summaries(&pods);
        let f = facts(&sums);
        let nodes = zones(&[("n1", "x"), ("n2", "x"), ("n3", "x"), ("n4", "y")]);
        // Same-node ranker only: the stacked node n4 loses a pod first.
        assert!(first_victim(&f, None).starts_with('y'));
        // Spread on zones: zone-x holds 3 of 5 pods, so it loses one first.
        let keys = ["topology.kubernetes.io/zone"];
        let t = Topology {
            keys: &keys,
            nodes: &nodes,
        };
        assert!(
            first_victim(&f, Some(t)).starts_with('x'),
            "{}",
            first_victim(&f, Some(t))
        );
        // Spread on hostnames: n4 is the crowded domain again.
        let keys = ["kubernetes.io/hostname"];
        let t = Topology {
            keys: &keys,
            nodes: &nodes,
        };
        assert!(first_victim(&f, Some(t)).starts_with('y'));
        // Pods on nodes whose labels are unknown take no part (Kruise skips nodes it cannot get).
        let empty = NodeLabels::new();
        let keys = ["topology.kubernetes.io/zone"];
        let r = ranks(
            &f.iter().collect::<Vec<_>>(),
            Some(Topology {
                keys: &keys,
                nodes: &empty,
            }),
        );
        assert!(r.iter().all(|&x| x == 0.0), "{r:?}");
    }

    #[test]
    fn spread_ranks_follow_kruise_weights() {
        // Kruise: pod i of n in a domain adds (n − i)·ln(#domains + 2).
        let pods = vec![on_node("a", "n1"), on_node("b", "n2"), on_node("c", "n2")];
        let sums = summaries(&pods);
        let f = facts(&sums);
        let nodes = zones(&[("n1", "x"), ("n2", "y")]);
        let keys = ["topology.kubernetes.io/zone"];
        let all: Vec<&PodFacts> = f.iter().collect();
        let r = ranks(
            &all,
            Some(Topology {
                keys: &keys,
                nodes: &nodes,
            }),
        );
        let w = 4f64.ln();
        assert!((r[0] - w).abs() < 1e-9, "{r:?}");
        // In zone y, the pod with the same-node rank 1 sorts first: 2·w; the other 1·w.
        let mut y = [r[1], r[2]];
        y.sort_by(f64::total_cmp);
        assert!((y[0] - w).abs() < 1e-9 && (y[1] - 2.0 * w).abs() < 1e-9, "{r:?}");
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
        let sums = summaries(&pods);
        let f = facts(&sums);
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
            let sums = summaries(&pods);
            let f = facts(&sums);
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
        let sums = summaries(&pods);
        let f = facts(&sums);
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
        let sums = summaries(&pods);
        let f = facts(&sums);
        let os: UpdatePriorityStrategy = serde_json::from_value(serde_json::json!({"orderPriority": [
            {"orderedKey": "k1"}, {"orderedKey": "k2"}
        ]}))
        .unwrap();
        let mut idx = vec![0, 1, 2, 3];
        update_candidates(&f, &mut idx, Some(&os), &[]);
        // no key (level −1) first, then k1 by suffix descending, then k2.
        assert_eq!(idx, vec![3, 2, 1, 0]);
    }

    /// Pods that differ in every sort criterion (and tie on some), deterministic.
    fn varied_pods(n: usize) -> Vec<Pod> {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        (0..n)
            .map(|i| {
                let t = |s: u64| format!("2026-01-01T00:{:02}:{:02}Z", s / 60, s % 60);
                let ready = next(4) != 0;
                let zone = ["a", "b", "c"][next(3) as usize];
                let phase = ["Pending", "Unknown", "Running", "Running"][next(4) as usize];
                let mut labels = serde_json::json!({ "zone": zone });
                if next(3) == 0 {
                    labels["lifecycle.apps.kruise.io/state"] = "PreparingUpdate".into();
                }
                if next(2) == 0 {
                    labels["rank"] = format!("r-{}", next(5)).into();
                }
                let mut spec = serde_json::json!({"containers": []});
                if next(5) != 0 {
                    spec["nodeName"] = format!("node-{}", next(3)).into();
                }
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("p{i:03}"), "labels": labels,
                                 "creationTimestamp": t(next(4)),
                                 "annotations": {"controller.kubernetes.io/pod-deletion-cost": next(3).to_string()}},
                    "spec": spec,
                    "status": {"phase": phase,
                               "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                               "lastTransitionTime": t(next(4))}],
                               "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true,
                                                      "restartCount": next(3)}]}
                }))
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn prefix_orders_equal_the_full_comparator_sorts() {
        let pods = varied_pods(60);
        let sums = summaries(&pods);
        let f = facts(&sums);
        let prio: UpdatePriorityStrategy = serde_json::from_value(serde_json::json!({"orderPriority": [
            {"orderedKey": "rank"}
        ]}))
        .unwrap();
        for priority in [None, Some(&prio)] {
            // The order as originally written: comparator sort, then stable priority and PreparingUpdate sorts.
            let mut want: Vec<usize> = (0..f.len()).collect();
            want.sort_by(|&i, &j| active_pods(&f[i], &f[j]).then(i.cmp(&j)));
            if let Some(ps) = priority {
                let p = Priority::new(ps);
                want.sort_by_key(|&i| p.key(&f[i]));
            }
            want.sort_by_key(|&i| f[i].lc != Lc::PreparingUpdate);
            for k in [0, 1, 7, 30, 59, 60, 100] {
                let mut got: Vec<usize> = (0..f.len()).collect();
                update_candidates_prefix(&f, &mut got, priority, &[], k);
                let k = k.min(f.len());
                assert_eq!(got[..k], want[..k], "prefix {k}");
                let mut rest = got[k..].to_vec();
                rest.sort_unstable();
                let mut want_rest = want[k..].to_vec();
                want_rest.sort_unstable();
                assert_eq!(rest, want_rest);
            }
        }

        let all: Vec<&PodFacts> = f.iter().collect();
        let ranks = ranks(&all, None);
        let mut want: Vec<usize> = (0..all.len()).collect();
        want.sort_by(|&i, &j| with_rank(all[i], all[j], ranks[i], ranks[j], true));
        for k in [0, 1, 7, 30, 60] {
            let mut got = all.clone();
            scale_down_prefix(&mut got, k, None);
            let names: Vec<&str> = got[..k].iter().map(|p| p.name()).collect();
            let want_names: Vec<&str> = want[..k].iter().map(|&i| all[i].name()).collect();
            assert_eq!(names, want_names, "scale-down prefix {k}");
        }
    }
}
