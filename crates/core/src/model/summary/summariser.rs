//! The answers a summary holds for one owner: whether its selector selects the pod and, for a CloneSet, whose the pod is (`Summariser`, fingerprints).

use std::cmp::Ordering;

use insitu_api::CloneSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Intrinsics, PodRef, PodSummary};
use crate::model::claim::Claimer;
use crate::util::selector::Selector;
use crate::util::strmap::Entries;

/// Feeds `s`, length-prefixed, into the FNV-1a 64 hash `h`.
fn feed(h: &mut u64, s: &[u8]) {
    for b in (s.len() as u64).to_le_bytes().iter().chain(s) {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// A stable fingerprint of a label selector (FNV-1a 64 over its length-prefixed keys, operators and
/// values), so a summary can say which selector its `selected` answers for.
pub(super) fn selector_fingerprint(sel: &LabelSelector) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in sel.match_labels.iter().flatten() {
        feed(&mut h, k.as_bytes());
        feed(&mut h, v.as_bytes());
    }
    // Separates the two lists (a length prefix no string can start with).
    feed(&mut h, b"\xff matchExpressions");
    for e in sel.match_expressions.iter().flatten() {
        feed(&mut h, e.key.as_bytes());
        feed(&mut h, e.operator.as_bytes());
        let values = e.values.as_deref().unwrap_or_default();
        feed(&mut h, &(values.len() as u64).to_le_bytes());
        for v in values {
            feed(&mut h, v.as_bytes());
        }
    }
    h
}

/// `selector_fingerprint` of the CloneSet's selector, extended with its uid and name: what summaries made
/// by `Summariser::for_cloneset` answer for (whether the selector selects the pod, and whose the pod is).
pub fn cloneset_fingerprint(cs: &CloneSet) -> u64 {
    let mut h = selector_fingerprint(&cs.spec.selector);
    for part in [
        "\u{ff} owner".as_bytes(),
        cs.metadata.uid.as_deref().unwrap_or_default().as_bytes(),
        cs.metadata.name.as_deref().unwrap_or_default().as_bytes(),
    ] {
        feed(&mut h, part);
    }
    h
}

/// `PodSummary::with_selector` for many pods: the selector is prepared (and fingerprinted) once. Made
/// `for_cloneset`, it also records each pod's owner relation to that CloneSet.
pub struct Summariser<'a> {
    selector: Selector<'a>,
    claimer: Option<Claimer<'a>>,
    fingerprint: u64,
}

impl<'a> Summariser<'a> {
    pub fn new(selector: &'a LabelSelector) -> Self {
        Summariser {
            selector: Selector::new(selector),
            claimer: None,
            fingerprint: selector_fingerprint(selector),
        }
    }

    /// For the pods of `cs`: its selector's answer and the claim's owner question, fingerprinted by
    /// `cloneset_fingerprint`. What the controller caches, made once per pod version.
    pub fn for_cloneset(cs: &'a CloneSet) -> Self {
        Summariser {
            selector: Selector::new(&cs.spec.selector),
            claimer: Some(Claimer::new(cs)),
            fingerprint: cloneset_fingerprint(cs),
        }
    }

    /// `selector_fingerprint` of the selector (`new`), `cloneset_fingerprint` of the CloneSet (`for_cloneset`).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    pub fn summarise(&self, pod: impl Into<PodRef>) -> PodSummary {
        PodSummary::build(pod.into(), Some(self))
    }
}

impl PodSummary {
    /// The summary of `pod`, without a selector answer (the planner then reads the labels for it).
    pub fn new(pod: impl Into<PodRef>) -> Self {
        Self::build(pod.into(), None)
    }

    /// The summary of `pod`, also recording whether `selector` selects it (what a controller that knows
    /// the owning CloneSet builds: its selector cannot change, so the answer holds for the pod version).
    /// For many pods, `Summariser` prepares the selector once.
    pub fn with_selector(pod: impl Into<PodRef>, selector: &LabelSelector) -> Self {
        Summariser::new(selector).summarise(pod)
    }

    /// The summary of `pod`, with the answer of `selector` if given. A packed pod brings its intrinsics
    /// (made when it was packed): nothing is decoded.
    pub(crate) fn build(pod: PodRef, summariser: Option<&Summariser>) -> Self {
        let mut facts = match &pod {
            PodRef::Full(p) => Intrinsics::of(p),
            PodRef::Packed(p) => p.intrinsics,
        };
        if let Some(s) = summariser {
            facts.selector = s.fingerprint;
            facts.has_selector = true;
            facts.selected = selects(&s.selector, pod.labels());
            facts.owner = s.claimer.as_ref().map(|c| c.owner(pod.meta()));
        }
        PodSummary { pod, facts }
    }
}

/// Whether `sel` selects a pod with `labels`. matchLabels pairs met are counted; keys are distinct on both
/// sides, so all met ⇔ count == len. Both are sorted by key, so they are walked together (a merge): once the
/// selector's keys are behind, the remaining labels cost nothing.
fn selects(sel: &Selector, labels: Entries<'_>) -> bool {
    let selector_labels = sel.match_labels();
    let mut selector_next = selector_labels.iter().peekable();
    let mut selector_met = 0;
    for (k, v) in labels.iter() {
        while let Some(&&(sk, sv)) = selector_next.peek() {
            match sk.cmp(k) {
                // A selector key this pod does not have: the pod is not selected.
                Ordering::Less => {
                    selector_next.next();
                }
                Ordering::Equal => {
                    selector_met += usize::from(sv == v);
                    selector_next.next();
                    break;
                }
                Ordering::Greater => break,
            }
        }
        if selector_next.peek().is_none() {
            break;
        }
    }
    selector_met == selector_labels.len() && sel.matches_expressions(labels)
}
