//! The planner's input: everything the controller's caches know about one CloneSet at one instant.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use insitu_api::CloneSet;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::{FeatureGates, PodSummary};

/// Node name → node labels: what the scale-down ranker needs to know about nodes (topology spread).
pub type NodeLabels = HashMap<String, BTreeMap<String, String>>;

/// One CloneSet and what it owns, as seen by the cache. `now` is passed in: core never reads a clock.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub cloneset: Arc<CloneSet>,
    /// Pods whose controller ownerReference is this CloneSet (active and inactive). Empty when
    /// `summaries` stand for them.
    pub pods: Vec<Arc<Pod>>,
    /// `PodSummary` of each pod, when the caller keeps them (the controller refreshes one only when its
    /// pod changes). With `pods` empty they are the pods (the controller's lean cache: summaries of
    /// `PackedPod`s, decoded only for the pods a plan acts on). Otherwise they are used when they are, in
    /// order, summaries of the very `Arc`s in `pods`; if not (`None`, another length, another `Arc`),
    /// `plan()` summarises `pods` itself. Same plan every way, only slower.
    pub summaries: Option<Arc<Vec<PodSummary>>>,
    /// ControllerRevisions owned by this CloneSet (or matching its selector and unowned).
    pub revisions: Vec<Arc<ControllerRevision>>,
    /// PersistentVolumeClaims owned by this CloneSet (Kruise getOwnedPVCs: any ownerReference with its UID).
    /// Ones with a deletionTimestamp are ignored by the planner, as Kruise filters them out.
    pub pvcs: Vec<Arc<PersistentVolumeClaim>>,
    pub now: Timestamp,
    pub gates: FeatureGates,
    /// Labels of the nodes the pods run on. Only needed when the template has `topologySpreadConstraints`
    /// (Kruise's spread ranker for scale-down); may be empty otherwise.
    pub nodes: NodeLabels,
    /// Names of the ImagePullJobs this CloneSet controls, when image pre-download is on (its gates, and the
    /// server serves ImagePullJobs) and they are known; `None` plans no pre-download step.
    pub image_pull_jobs: Option<Vec<String>>,
}
