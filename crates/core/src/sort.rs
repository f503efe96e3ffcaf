//! Pod orderings: update candidates (research §3.7 step 5) and scale-down victims (§3.6 step 7).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use insitu_api::validation::selector_matches;
use insitu_api::{UpdatePriorityStrategy, UpdateScatterTerm, keys};
use k8s_openapi::jiff::Timestamp;

use crate::pods::PodFacts;

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
/// more restarts, newer), with the name as a final key so the order is deterministic.
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
        .then_with(|| b.restarts.cmp(&a.restarts))
        .then_with(|| after_or_zero(a.created, b.created))
        .then_with(|| a.name.cmp(b.name))
}

/// Kruise/k8s `ActivePodsWithRanks` as Kruise's scale-down uses it: unassigned, phase, not available,
/// not ready, lower `pod-deletion-cost`, more pods on the same node, shorter ready time, more restarts, newer.
pub fn scale_down(a: &PodFacts, b: &PodFacts, rank: &HashMap<&str, usize>) -> Ordering {
    let ra = rank.get(a.node).copied().unwrap_or(0);
    let rb = rank.get(b.node).copied().unwrap_or(0);
    a.node_assigned
        .cmp(&b.node_assigned)
        .then_with(|| a.phase_ord.cmp(&b.phase_ord))
        .then_with(|| a.available.cmp(&b.available))
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
        .then_with(|| b.restarts.cmp(&a.restarts))
        .then_with(|| after_or_zero(a.created, b.created))
        .then_with(|| a.name.cmp(b.name))
}

/// Kruise `getIntFromStringSuffix`: the trailing decimal digits of a label value.
fn int_suffix(v: &str) -> Option<i64> {
    let digits = v.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    v[v.len() - digits..].parse().ok()
}

/// The priority key of a pod: higher sorts first. Weight: sum of matching weights. Order: per term, the
/// integer suffix of the label value; pods without any ordered key rank lowest... (Kruise `prioritySort`).
fn priority_key(p: &PodFacts, s: &UpdatePriorityStrategy) -> Vec<i64> {
    let empty = BTreeMap::new();
    let labels = p.pod.metadata.labels.as_ref().unwrap_or(&empty);
    if !s.weight_priority.is_empty() {
        let w: i64 = s
            .weight_priority
            .iter()
            .filter(|t| selector_matches(&t.match_selector, labels))
            .map(|t| i64::from(t.weight))
            .sum();
        return vec![w];
    }
    // Order priority: compare term by term; a pod with the key beats one without it.
    s.order_priority
        .iter()
        .map(|t| {
            labels
                .get(&t.ordered_key)
                .and_then(|v| int_suffix(v))
                .map_or(i64::MIN, |v| v)
        })
        .collect()
}

/// Kruise `SortUpdateIndexes`: ActivePods order, then priorityStrategy (stable), then scatterStrategy,
/// then PreparingUpdate pods first (stable).
pub fn update_candidates(
    facts: &[PodFacts],
    idx: &mut Vec<usize>,
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
) {
    idx.sort_by(|&i, &j| active_pods(&facts[i], &facts[j]));
    if let Some(ps) = priority.filter(|p| !p.weight_priority.is_empty() || !p.order_priority.is_empty()) {
        let keys: HashMap<usize, Vec<i64>> = idx.iter().map(|&i| (i, priority_key(&facts[i], ps))).collect();
        idx.sort_by(|i, j| keys[j].cmp(&keys[i]));
    }
    if !scatter.is_empty() {
        scatter_sort(facts, idx, scatter);
    }
    idx.sort_by_key(|&i| facts[i].lifecycle != keys::lifecycle::PREPARING_UPDATE);
}

/// Kruise `scatterSort`: spread pods carrying a scatter label k=v evenly across the update order so that
/// each batch gets its share, keeping the relative order of both groups.
fn scatter_sort(facts: &[PodFacts], idx: &mut Vec<usize>, terms: &[UpdateScatterTerm]) {
    for term in terms {
        let matches = |i: usize| {
            facts[i]
                .pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(&term.key))
                .is_some_and(|v| *v == term.value)
        };
        let (hit, miss): (Vec<usize>, Vec<usize>) = idx.iter().partition(|&&i| matches(i));
        if hit.is_empty() || miss.is_empty() {
            continue;
        }
        // Place hits at evenly spaced slots over the whole order.
        let n = idx.len();
        let k = hit.len();
        let mut out = Vec::with_capacity(n);
        let (mut hi, mut mi) = (0usize, 0usize);
        for pos in 0..n {
            // slot pos gets a hit when floor((pos+1)·k/n) advances.
            let due = ((pos + 1) * k) / n;
            if hi < due && hi < k {
                out.push(hit[hi]);
                hi += 1;
            } else if mi < miss.len() {
                out.push(miss[mi]);
                mi += 1;
            } else {
                out.push(hit[hi]);
                hi += 1;
            }
        }
        *idx = out;
    }
}
