//! `PodSummary`: what every plan reads of one pod, computed once per pod version and kept inline.
//!
//! A `Pod` is a 2.4 KB struct whose labels, annotations, conditions and strings live in separate heap
//! blocks: classifying it touches about 30 cache lines, and past the L3 each is a trip to memory. Nothing
//! the planner asks of every pod on every plan depends on anything but the pod (and the owner's selector,
//! which Kruise's webhook makes immutable), so it is summarised once — by the controller when the pod's
//! version changes — into about two cache lines. The plan then reads the summaries, a contiguous array,
//! and goes to the `Pod` only for the pods it sorts or acts on.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use crate::model::claim::Owner;
use crate::model::podmeta::Lc;
use crate::revision::name::{equal_to_revision, short_hash};
use crate::util::strmap::Entries;

mod facts;
mod packed;
mod summariser;

pub(crate) use facts::InFlight;
pub use packed::PackedPod;
pub use summariser::{Summariser, cloneset_fingerprint};

/// The pod a summary describes: a whole `Pod`, or a `PackedPod` (metadata at hand, spec and status decoded
/// when asked for), as a controller's lean cache keeps them.
#[derive(Clone, Debug)]
pub enum PodRef {
    Full(Arc<Pod>),
    Packed(Arc<PackedPod>),
}

impl PodRef {
    /// The metadata; of a packed pod without labels and annotations: read those with `labels()` and
    /// `annotations()`, which answer for both.
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            PodRef::Full(p) => &p.metadata,
            PodRef::Packed(p) => p.meta(),
        }
    }

    pub fn labels(&self) -> Entries<'_> {
        match self {
            PodRef::Full(p) => Entries::from(&p.metadata.labels),
            PodRef::Packed(p) => p.labels(),
        }
    }

    pub fn annotations(&self) -> Entries<'_> {
        match self {
            PodRef::Full(p) => Entries::from(&p.metadata.annotations),
            PodRef::Packed(p) => p.annotations(),
        }
    }

    /// The pod whole: borrowed, or decoded for the caller.
    pub fn pod(&self) -> Cow<'_, Pod> {
        match self {
            PodRef::Full(p) => Cow::Borrowed(p),
            PodRef::Packed(p) => Cow::Owned(p.unpack()),
        }
    }

    /// The address of the shared pod version: equal for clones of one `Arc`, and not reused while it lives.
    pub fn addr(&self) -> usize {
        match self {
            PodRef::Full(p) => Arc::as_ptr(p) as usize,
            PodRef::Packed(p) => Arc::as_ptr(p) as usize,
        }
    }

    /// Whether this is `pod` (the same `Arc`).
    pub fn is(&self, pod: &Arc<Pod>) -> bool {
        matches!(self, PodRef::Full(p) if Arc::ptr_eq(p, pod))
    }

    fn node_name(&self) -> Option<&str> {
        match self {
            PodRef::Full(p) => p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            PodRef::Packed(p) => p.node_name(),
        }
    }
}

impl From<Arc<Pod>> for PodRef {
    fn from(p: Arc<Pod>) -> Self {
        PodRef::Full(p)
    }
}

impl From<Arc<PackedPod>> for PodRef {
    fn from(p: Arc<PackedPod>) -> Self {
        PodRef::Packed(p)
    }
}

/// The pod-intrinsic facts of one pod version (see the module doc). Build with `PodSummary::new` or
/// `PodSummary::with_selector`; it holds the pod, so it stays valid for as long as it is kept. Its facts are
/// read through `Deref` (`Intrinsics`).
#[derive(Clone, Debug)]
pub struct PodSummary {
    pod: PodRef,
    facts: Intrinsics,
}

impl std::ops::Deref for PodSummary {
    type Target = Intrinsics;

    fn deref(&self) -> &Intrinsics {
        &self.facts
    }
}

/// What a summary says of a pod version, without the pod: made from the pod alone (`Intrinsics::of`) —
/// when a `PackedPod` is packed, or when a whole pod is summarised — plus the answer of one selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intrinsics {
    /// lastTransitionTime of `Ready` when True, and creationTimestamp: see `ready_since()`, `created()`.
    /// Two `Option<Timestamp>` would take 48 bytes; split into seconds and nanoseconds, 24.
    ready_since_s: i64,
    created_s: i64,
    ready_since_ns: i32,
    created_ns: i32,
    /// Fingerprint of the selector `selected` answers for (when `has_selector`).
    selector: u64,
    /// Kruise `getDeletionCostFromPodAnnotations`.
    pub(crate) deletion_cost: i32,
    /// k8s `maxContainerRestarts`.
    pub(crate) restarts: i32,
    /// Short hash of the `controller-revision-hash` label.
    revision: ShortHash,
    name: NamePrefix,
    pub(crate) lc: Lc,
    /// k8s `podPhaseToOrdinal`: Pending 0, Unknown 1, Running 2 (others 0).
    pub(crate) phase_ord: u8,
    /// The `InPlaceUpdateReady` condition: `None` absent, `Some(true)` True, `Some(false)` otherwise.
    pub(crate) ipu: Option<bool>,
    /// Not Succeeded/Failed and no deletionTimestamp (k8s `IsPodActive`).
    pub(crate) active: bool,
    /// The `Ready` condition is True (k8s `podutil.IsPodReady`).
    pub(crate) ready: bool,
    /// Kruise `IsPodUpdateReady(pod, 0)`: Running ∧ Ready ∧ InPlaceUpdateReady (if present) True.
    pub(crate) update_ready: bool,
    /// The `KruisePodReady` condition is present (lifecycle `markPodNotReady` bookkeeping).
    pub(crate) has_kruise_ready: bool,
    /// The `KruisePodReady` condition is True with an empty message (see `lifecycle::clean_may_change`).
    pub(crate) kruise_ready_clean: bool,
    /// The `KruisePodReady` readiness gate (without it `lifecycle::reconcile` has nothing to do).
    pub(crate) has_kruise_gate: bool,
    /// The `InPlaceUpdateReady` readiness gate.
    pub(crate) has_ipu_gate: bool,
    /// The `apps.kruise.io/specified-delete` label (any value, as Kruise `specifieddelete.IsSpecifiedDelete`).
    pub(crate) specified_label: bool,
    /// Has the `pod-template-hash` label.
    pub(crate) has_template_hash: bool,
    pub(crate) node_assigned: bool,
    /// A non-empty `controller-revision-hash` label.
    pub(crate) has_revision: bool,
    /// `grace()` / `state()` are `Some`.
    pub(crate) has_grace: bool,
    pub(crate) has_state: bool,
    /// Where the in-place update of this pod version stands (see `InFlight`).
    pub(crate) in_flight: InFlight,
    has_selector: bool,
    /// Whether the selector fingerprinted in `selector` selects the pod.
    selected: bool,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) deleting: bool,
    /// The pod's relation to the CloneSet fingerprinted in `selector` (`Summariser::for_cloneset`): the
    /// claim step reads it here rather than the pod's ownerReferences, which are three dependent heap reads
    /// per pod per plan (at 10,000 pods most of the controller's plan time: cache misses, not work).
    owner: Option<Owner>,
}

/// `*_ns` of an absent time: nanoseconds of a `Timestamp` never reach it (|ns| < 10⁹).
const NO_TIME: i32 = i32::MIN;

fn pack(t: Option<Timestamp>) -> (i64, i32) {
    t.map_or((0, NO_TIME), |t| (t.as_second(), t.subsec_nanosecond()))
}

fn unpack(second: i64, ns: i32) -> Option<Timestamp> {
    if ns == NO_TIME {
        return None;
    }
    // Both came from a `Timestamp`, so this never fails.
    Timestamp::new(second, ns).ok()
}

/// Kruise hashes (`rand.SafeEncodeString` of a uint32) have at most 10 characters.
const SHORT_HASH_INLINE: usize = 15;

/// A revision's short hash (Kruise `GetShortHash`) kept inline, so comparing revisions reads no pod. A
/// longer one (only possible for hand-written labels) is marked `LONG` and compared on the full strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShortHash {
    len: u8,
    /// Zero after `len`, so equal hashes are equal arrays.
    bytes: [u8; SHORT_HASH_INLINE],
}

impl ShortHash {
    const LONG: u8 = u8::MAX;

    pub(crate) fn of(revision: &str) -> Self {
        let h = short_hash(revision).as_bytes();
        let mut bytes = [0; SHORT_HASH_INLINE];
        if h.len() > SHORT_HASH_INLINE {
            return ShortHash {
                len: Self::LONG,
                bytes,
            };
        }
        bytes[..h.len()].copy_from_slice(h);
        ShortHash {
            len: h.len() as u8,
            bytes,
        }
    }

    /// `Some(equal)`, or `None` when either is too long to be held inline.
    fn eq_inline(&self, other: &Self) -> Option<bool> {
        (self.len != Self::LONG && other.len != Self::LONG).then(|| self == other)
    }
}

/// A revision name prepared once per plan for `PodSummary::at_revision`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RevisionKey<'a> {
    pub(crate) name: &'a str,
    short: ShortHash,
}

impl<'a> RevisionKey<'a> {
    pub(crate) fn new(name: &'a str) -> Self {
        RevisionKey {
            name,
            short: ShortHash::of(name),
        }
    }
}

/// Pod names of this length or less (a multiple of 8, see `name_cmp`) are held whole (a CloneSet's pods are `<name>-<5 chars>`); longer
/// ones by their first bytes, which decide most comparisons anyway.
const NAME_INLINE: usize = 32;
const _: () = assert!(NAME_INLINE.is_multiple_of(8));

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NamePrefix {
    len: u8,
    /// The name is longer than `bytes`.
    cut: bool,
    bytes: [u8; NAME_INLINE],
}

impl NamePrefix {
    fn of(name: &str) -> Self {
        let b = name.as_bytes();
        let n = b.len().min(NAME_INLINE);
        let mut bytes = [0; NAME_INLINE];
        bytes[..n].copy_from_slice(&b[..n]);
        NamePrefix {
            len: n as u8,
            cut: b.len() > NAME_INLINE,
            bytes,
        }
    }

    fn inline(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The value of annotation `key`, else of `old`, when not empty (Kruise reads the new key first).
fn annotation_or_old<'p>(annotations: Entries<'p>, key: &str, old: &str) -> Option<&'p str> {
    annotations
        .get(key)
        .or_else(|| annotations.get(old))
        .filter(|s| !s.is_empty())
}

impl PodSummary {
    /// The pod this summarises, whole (decoded if it is packed: for the pods a plan acts on).
    pub fn pod(&self) -> Cow<'_, Pod> {
        self.pod.pod()
    }

    /// The pod's metadata (never decodes); of a packed pod without labels and annotations: read those with
    /// `labels()` and `annotations()`.
    pub fn meta(&self) -> &ObjectMeta {
        self.pod.meta()
    }

    pub fn labels(&self) -> Entries<'_> {
        self.pod.labels()
    }

    pub fn annotations(&self) -> Entries<'_> {
        self.pod.annotations()
    }

    /// The pod version summarised, shared.
    pub fn pod_ref(&self) -> &PodRef {
        &self.pod
    }

    /// `metadata.name` (`""` when absent).
    pub fn name(&self) -> &str {
        if !self.name.cut {
            // Held whole, and cut from a `str`: always valid UTF-8.
            if let Ok(s) = std::str::from_utf8(self.name.inline()) {
                return s;
            }
        }
        self.meta().name.as_deref().unwrap_or("")
    }

    /// Orders as `self.name().cmp(other.name())`, on the inline bytes unless both names are longer.
    ///
    /// The zero-padded arrays compare as the names: where they first differ, either both hold name bytes
    /// there, or one name has ended (a zero) and is a prefix of the other, so it sorts first (the other's
    /// byte is not zero, as they differ). Equal arrays: equal names, or one a prefix of the other (the
    /// shorter first), or names cut at the same bytes (only then are the names read).
    #[inline]
    pub fn name_cmp(&self, other: &PodSummary) -> Ordering {
        // Big-endian words order as their bytes: 8 bytes a compare, without a call to memcmp.
        let (a, _) = self.name.bytes.as_chunks::<8>();
        let (b, _) = other.name.bytes.as_chunks::<8>();
        for (x, y) in a.iter().zip(b) {
            match u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        if self.name.cut || other.name.cut {
            return self.name().cmp(other.name());
        }
        self.name.len.cmp(&other.name.len)
    }

    /// `metadata.uid` (`""` when absent).
    pub fn uid(&self) -> &str {
        self.meta().uid.as_deref().unwrap_or("")
    }

    /// The `controller-revision-hash` label (`""` when absent).
    pub fn revision(&self) -> &str {
        if !self.has_revision {
            return "";
        }
        self.labels()
            .get(keys::CONTROLLER_REVISION_HASH_LABEL)
            .unwrap_or("")
    }

    /// Kruise `EqualToRevisionHash(revision label, rev)`: the label is not empty and its short hash equals
    /// the revision's (a full-name match implies that).
    pub(crate) fn at_revision(&self, rev: &RevisionKey) -> bool {
        self.has_revision
            && match self.revision.eq_inline(&rev.short) {
                Some(eq) => eq,
                None => equal_to_revision(self.revision(), rev.name),
            }
    }

    /// The lifecycle label (`""` when absent).
    pub fn lifecycle(&self) -> &str {
        if self.lc == Lc::None {
            return "";
        }
        self.labels().get(keys::LIFECYCLE_STATE_LABEL).unwrap_or("")
    }

    /// The in-place update grace annotation (new key, else the old one), when not empty.
    pub fn grace(&self) -> Option<&str> {
        if !self.has_grace {
            return None;
        }
        annotation_or_old(
            self.annotations(),
            keys::INPLACE_UPDATE_GRACE_ANNOTATION,
            keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD,
        )
    }

    /// The in-place update state annotation (new key, else the old one), when not empty.
    pub fn state(&self) -> Option<&str> {
        if !self.has_state {
            return None;
        }
        annotation_or_old(
            self.annotations(),
            keys::INPLACE_UPDATE_STATE_ANNOTATION,
            keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD,
        )
    }

    /// `spec.nodeName` (`""` when unscheduled).
    pub fn node(&self) -> &str {
        if !self.node_assigned {
            return "";
        }
        self.pod.node_name().unwrap_or("")
    }

    /// Whether the selector with fingerprint `fingerprint` selects the pod, if this summary knows.
    pub fn selected_by(&self, fingerprint: u64) -> Option<bool> {
        (self.has_selector && self.selector == fingerprint).then_some(self.selected)
    }

    /// The pod's relation to the CloneSet (`Claimer::owner`), if this summary was made for the CloneSet
    /// `fingerprint` (`cloneset_fingerprint`) says.
    pub fn owner_by(&self, fingerprint: u64) -> Option<Owner> {
        if self.has_selector && self.selector == fingerprint {
            self.owner
        } else {
            None
        }
    }

    /// `metadata.deletionTimestamp` is set (read without touching the metadata).
    pub fn deleting(&self) -> bool {
        self.deleting
    }

    /// lastTransitionTime of the `Ready` condition when it is True.
    pub(crate) fn ready_since(&self) -> Option<Timestamp> {
        unpack(self.ready_since_s, self.ready_since_ns)
    }

    /// metadata.creationTimestamp.
    pub fn created(&self) -> Option<Timestamp> {
        unpack(self.created_s, self.created_ns)
    }

    /// k8s `IsPodActive`: not Succeeded/Failed and no deletionTimestamp.
    pub fn active(&self) -> bool {
        self.active
    }

    pub fn preparing_delete(&self) -> bool {
        self.lc == Lc::PreparingDelete
    }

    /// The pod has the `InPlaceUpdateReady` readiness gate.
    pub(crate) fn has_gate(&self) -> bool {
        self.has_ipu_gate
    }

    /// k8s `maxContainerRestarts`.
    pub fn restarts(&self) -> i32 {
        self.restarts
    }

    /// The `InPlaceUpdateReady` condition is True.
    pub(crate) fn ipu_true(&self) -> bool {
        self.ipu == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::summariser::selector_fingerprint;
    use super::*;
    use crate::model::claim::Claimer;
    use insitu_api::CloneSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use serde_json::json;

    fn owned_pod(refs: &[(&str, &str, Option<bool>)], deleting: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-x", "labels": {"app": "web"},
                "deletionTimestamp": deleting.then_some("2026-01-01T00:00:00Z"),
                "ownerReferences": refs.iter().map(|(uid, name, controller)| json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                    "name": name, "uid": uid, "controller": controller,
                })).collect::<Vec<_>>(),
            },
        }))
        .unwrap()
    }

    /// A summary made for a CloneSet answers the claim's owner question as reading the references does
    /// (for full and packed pods, a CloneSet with or without uid); a summary made for a selector alone, or
    /// for another CloneSet, does not answer.
    #[test]
    fn owner_by_is_claimer_owner_for_the_cloneset_it_was_made_for() {
        let sets: Vec<CloneSet> = [("u1", "web"), ("", "web"), ("u2", "db")]
            .iter()
            .map(|(uid, name)| {
                let mut cs = CloneSet::new(name, Default::default());
                cs.metadata.uid = (!uid.is_empty()).then(|| uid.to_string());
                cs.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap();
                cs
            })
            .collect();
        let pods = [
            owned_pod(&[("u1", "web", Some(true))], false),
            owned_pod(&[("u2", "db", Some(true))], true),
            owned_pod(&[("u2", "db", Some(true)), ("u1", "web", None)], false),
            owned_pod(&[("u1", "web", None)], false),
            owned_pod(&[], false),
        ];
        let mut seen = std::collections::HashSet::new();
        for cs in &sets {
            let summariser = Summariser::for_cloneset(cs);
            let fp = summariser.fingerprint();
            assert_eq!(fp, cloneset_fingerprint(cs));
            for p in &pods {
                let want = Claimer::new(cs).owner(&p.metadata);
                seen.insert(format!("{want:?}"));
                for sm in [
                    summariser.summarise(Arc::new(p.clone())),
                    summariser.summarise(Arc::new(PackedPod::pack(p.clone()))),
                ] {
                    assert_eq!(sm.owner_by(fp), Some(want));
                    assert_eq!(sm.deleting(), p.metadata.deletion_timestamp.is_some());
                    for other in sets.iter().filter(|o| !std::ptr::eq(*o, cs)) {
                        assert_eq!(sm.owner_by(cloneset_fingerprint(other)), None);
                    }
                    assert_eq!(sm.owner_by(selector_fingerprint(&cs.spec.selector)), None);
                }
                let plain = PodSummary::with_selector(Arc::new(p.clone()), &cs.spec.selector);
                assert_eq!(plain.owner_by(fp), None);
            }
        }
        // Every relation occurs, so the comparisons above are not all of one kind.
        assert_eq!(seen.len(), 4, "{seen:?}");
    }

    fn pod(v: serde_json::Value) -> Arc<Pod> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn lazy_reads_match_the_pod() {
        let p = pod(json!({
            "metadata": {"name": "web-abcde", "uid": "u1",
                "labels": {"controller-revision-hash": "web-6d9f8b7c4", "lifecycle.apps.kruise.io/state": "Updating"},
                "annotations": {"apps.kruise.io/inplace-update-grace": "", "inplace-update-grace": "old",
                                "inplace-update-state": "{}"}},
            "spec": {"containers": [], "nodeName": "n1"},
        }));
        let s = PodSummary::new(p);
        assert_eq!(
            (s.name(), s.uid(), s.revision(), s.lifecycle(), s.node()),
            ("web-abcde", "u1", "web-6d9f8b7c4", "Updating", "n1")
        );
        // The new key wins even when empty (then there is no grace), as before summaries.
        assert_eq!((s.grace(), s.state()), (None, Some("{}")));
        assert!(s.at_revision(&RevisionKey::new("other-6d9f8b7c4")));
        assert!(!s.at_revision(&RevisionKey::new("web-6d9f8b7c5")));

        let bare = PodSummary::new(pod(json!({"metadata": {}})));
        assert_eq!((bare.name(), bare.revision(), bare.node()), ("", "", ""));
        assert!(!bare.at_revision(&RevisionKey::new("")));
    }

    #[test]
    fn long_hashes_and_names_fall_back_to_the_pod() {
        let long = "x".repeat(40);
        let mk = |name: &str, rev: &str| {
            PodSummary::new(pod(
                json!({"metadata": {"name": name, "labels": {"controller-revision-hash": rev}}}),
            ))
        };
        let a = mk(&format!("{long}-a"), &format!("r-{long}"));
        let b = mk(&format!("{long}-b"), &format!("s-{long}"));
        assert!(a.at_revision(&RevisionKey::new(&format!("q-{long}"))));
        assert!(!a.at_revision(&RevisionKey::new("q-short")));
        assert!(!mk("n", "r-short").at_revision(&RevisionKey::new(&format!("q-{long}"))));
        assert_eq!(a.name(), format!("{long}-a"));
        let names = [
            a,
            b,
            mk("a", "r"),
            mk("", "r"),
            mk(&long, "r"),
            mk(&format!("{long}-"), "r"),
            mk(&"é".repeat(20), "r"),
            mk(&"é".repeat(16), "r"),
            // Cut inside a two-byte char.
            mk(&format!("a{}", "é".repeat(20)), "r"),
            mk(&format!("a{}b", "é".repeat(14)), "r"),
            // Zero bytes compare like the padding, and are still ordered right.
            mk("a\0", "r"),
            mk("a\0b", "r"),
            mk(&format!("{long}\0"), "r"),
        ];
        for x in &names {
            for y in &names {
                assert_eq!(
                    x.name_cmp(y),
                    x.name().cmp(y.name()),
                    "{} vs {}",
                    x.name(),
                    y.name()
                );
            }
        }
    }

    #[test]
    fn two_cache_lines() {
        assert!(std::mem::size_of::<PodSummary>() <= 128);
    }

    #[test]
    fn times_round_trip() {
        for t in [
            "2026-01-01T00:00:00Z",
            "1969-12-31T23:59:59.5Z",
            "1970-01-01T00:00:00.000000001Z",
        ] {
            let t: Timestamp = t.parse().unwrap();
            assert_eq!(unpack(pack(Some(t)).0, pack(Some(t)).1), Some(t));
        }
        for t in [Timestamp::MIN, Timestamp::MAX, Timestamp::UNIX_EPOCH] {
            assert_eq!(unpack(pack(Some(t)).0, pack(Some(t)).1), Some(t));
        }
        assert_eq!(unpack(pack(None).0, pack(None).1), None);
    }

    #[test]
    fn selector_answers_are_tied_to_the_selector() {
        let sel: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap();
        let other: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap();
        let expr: LabelSelector = serde_json::from_value(
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
        )
        .unwrap();
        let fps = [&sel, &other, &expr].map(selector_fingerprint);
        assert!(fps[0] != fps[1] && fps[0] != fps[2] && fps[1] != fps[2]);
        let p = pod(json!({"metadata": {"labels": {"app": "web"}}}));
        let s = PodSummary::with_selector(p.clone(), &sel);
        assert_eq!(s.selected_by(fps[0]), Some(true));
        assert_eq!(s.selected_by(fps[1]), None);
        assert_eq!(
            PodSummary::with_selector(p.clone(), &other).selected_by(fps[1]),
            Some(false)
        );
        assert_eq!(PodSummary::new(p).selected_by(fps[0]), None);
    }
}
