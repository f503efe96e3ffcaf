//! Test world: a CloneSet, its pods and revisions, an executor for plans and a tiny kubelet.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use insitu_api::{CloneSet, keys};
use insitu_core::{Action, FeatureGates, Plan, PodSummary, Snapshot};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ContainerStatus, PersistentVolumeClaim, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

pub fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

pub fn cloneset(replicas: i32, image: &str, strategy: serde_json::Value) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": image}]}},
            "updateStrategy": strategy,
        }
    }))
    .unwrap()
}

pub struct World {
    pub cs: CloneSet,
    pub pods: Vec<Pod>,
    pub revisions: Vec<ControllerRevision>,
    /// PVCs as the apiserver holds them (the snapshot gets those owned by the CloneSet).
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub now: Timestamp,
    pub gates: FeatureGates,
    pub uid_seq: u64,
    pub nodes: insitu_core::NodeLabels,
}

impl World {
    pub fn new(cs: CloneSet) -> Self {
        World {
            cs,
            pods: vec![],
            revisions: vec![],
            pvcs: vec![],
            now: t0(),
            gates: FeatureGates::default(),
            uid_seq: 0,
            nodes: Default::default(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            cloneset: Arc::new(self.cs.clone()),
            pods: self.pods.iter().cloned().map(Arc::new).collect(),
            summaries: None,
            revisions: self.revisions.iter().cloned().map(Arc::new).collect(),
            pvcs: self
                .pvcs
                .iter()
                .filter(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| Some(&r.uid) == self.cs.metadata.uid.as_ref())
                })
                .cloned()
                .map(Arc::new)
                .collect(),
            now: self.now,
            gates: self.gates.clone(),
            nodes: self.nodes.clone(),
            image_pull_jobs: None,
        }
    }

    /// The plan from the raw pods, checked equal to the plan from summaries made as the controller makes
    /// them (with the CloneSet's selector): every test that plans also tests that equivalence.
    pub fn plan(&self) -> Plan {
        let snap = self.snapshot();
        let plan = insitu_core::plan(&snap);
        let summarised = self.summarised(&snap);
        assert_eq!(
            insitu_core::plan(&summarised),
            plan,
            "plan from precomputed summaries differs"
        );
        plan
    }

    /// `snap` with precomputed summaries, as the controller passes them.
    pub fn summarised(&self, snap: &Snapshot) -> Snapshot {
        let summaries = snap
            .pods
            .iter()
            .map(|p| PodSummary::with_selector(p.clone(), &self.cs.spec.selector))
            .collect();
        Snapshot {
            summaries: Some(Arc::new(summaries)),
            ..snap.clone()
        }
    }

    pub fn advance(&mut self, secs: i64) {
        self.now = self.now.checked_add(SignedDuration::from_secs(secs)).unwrap();
    }

    pub fn pod_mut(&mut self, name: &str) -> Option<&mut Pod> {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    /// Sets (`Some`) or removes (`None`) a label of pod `name`, as a hook owner would.
    pub fn set_label(&mut self, name: &str, key: &str, value: Option<&str>) {
        let labels = self
            .pod_mut(name)
            .unwrap()
            .metadata
            .labels
            .get_or_insert_with(Default::default);
        match value {
            Some(v) => labels.insert(key.into(), v.into()),
            None => labels.remove(key),
        };
    }

    pub fn pod(&self, name: &str) -> &Pod {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    /// Executes every action in order, as the controller would, then writes the status.
    pub fn apply(&mut self, plan: &Plan) {
        let now = self.now;
        for a in &plan.actions {
            match a {
                Action::CreateRevision { revision } => self.revisions.push((**revision).clone()),
                Action::BumpRevision { name, revision, .. } => {
                    if let Some(r) = self
                        .revisions
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                    {
                        r.revision = *revision;
                    }
                }
                Action::DeleteRevision { name } => self
                    .revisions
                    .retain(|r| r.metadata.name.as_deref() != Some(name)),
                Action::CreatePod { pod, .. } => {
                    let mut p = pod.unpack();
                    self.uid_seq += 1;
                    p.metadata.uid = Some(format!("pod-uid-{}", self.uid_seq));
                    p.metadata.creation_timestamp = Some(Time(now));
                    p.status = Some(PodStatus {
                        phase: Some("Pending".into()),
                        ..Default::default()
                    });
                    assert!(
                        !self.pods.iter().any(|x| x.metadata.name == p.metadata.name),
                        "duplicate pod name {:?}",
                        p.metadata.name
                    );
                    self.pods.push(p);
                }
                Action::DeletePod { pod, .. } => {
                    self.pods.retain(|p| p.metadata.name.as_deref() != Some(pod))
                }
                Action::CreatePvc { pvc } => {
                    // AlreadyExists is fine (the controller treats 409 as created).
                    if !self.pvcs.iter().any(|x| x.metadata.name == pvc.metadata.name) {
                        let mut c = (**pvc).clone();
                        self.uid_seq += 1;
                        c.metadata.uid = Some(format!("pvc-uid-{}", self.uid_seq));
                        self.pvcs.push(c);
                    }
                }
                Action::DeletePvc { name, .. } => {
                    self.pvcs.retain(|p| p.metadata.name.as_deref() != Some(name))
                }
                Action::ReleasePvc {
                    name, pod, pod_uid, ..
                } => {
                    let cs_uid = self.cs.metadata.uid.clone().unwrap_or_default();
                    if let Some(c) = self
                        .pvcs
                        .iter_mut()
                        .find(|p| p.metadata.name.as_deref() == Some(name))
                    {
                        let refs = c.metadata.owner_references.get_or_insert_with(Vec::new);
                        refs.retain(|r| r.uid != cs_uid);
                        refs.push(k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: pod.clone(),
                            uid: pod_uid.clone(),
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        });
                    }
                }
                Action::SetInPlaceUpdateReady { pod, ready, .. } => {
                    let p = self.pod_mut(pod).unwrap();
                    let st = p.status.get_or_insert_with(Default::default);
                    let conds = st.conditions.get_or_insert_with(Vec::new);
                    set_cond(conds, keys::INPLACE_UPDATE_READY, *ready, now);
                    if !*ready {
                        set_cond(conds, "Ready", false, now);
                    }
                }
                Action::SetKruisePodReady { pod, messages, .. } => {
                    let p = self.pod_mut(pod).unwrap();
                    let st = p.status.get_or_insert_with(Default::default);
                    let conds = st.conditions.get_or_insert_with(Vec::new);
                    set_cond(conds, keys::KRUISE_POD_READY, messages.is_empty(), now);
                    let msg = insitu_core::lifecycle::message_json(messages);
                    if let Some(c) = conds.iter_mut().find(|c| c.type_ == keys::KRUISE_POD_READY) {
                        c.message = (!msg.is_empty()).then_some(msg);
                    }
                    if !messages.is_empty() {
                        set_cond(conds, "Ready", false, now);
                    }
                }
                Action::UpdatePod { pod, mutation, .. } => mutation.apply(self.pod_mut(pod).unwrap()),
                Action::PatchPodMetadata {
                    pod,
                    labels,
                    annotations,
                    ..
                } => {
                    let p = self.pod_mut(pod).unwrap();
                    for (k, v) in labels {
                        let l = p.metadata.labels.get_or_insert_with(Default::default);
                        match v {
                            Some(v) => l.insert(k.clone(), v.clone()),
                            None => l.remove(k),
                        };
                    }
                    for (k, v) in annotations {
                        let l = p.metadata.annotations.get_or_insert_with(Default::default);
                        match v {
                            Some(v) => l.insert(k.clone(), v.clone()),
                            None => l.remove(k),
                        };
                    }
                }
                Action::ReleasePod { pod, .. } => {
                    let cs_uid = self.cs.metadata.uid.clone();
                    let p = self.pod_mut(pod).unwrap();
                    if let Some(refs) = p.metadata.owner_references.as_mut() {
                        refs.retain(|r| Some(&r.uid) != cs_uid.as_ref());
                    }
                }
                Action::AdoptPod { pod, .. } => {
                    let owner = insitu_core::revision::controller_ref(&self.cs);
                    let p = self.pod_mut(pod).unwrap();
                    let refs = p.metadata.owner_references.get_or_insert_with(Vec::new);
                    refs.retain(|r| r.uid != owner.uid);
                    refs.push(owner);
                }
                Action::TruncatePodsToDelete { remove } => {
                    if let Some(s) = self.cs.spec.scale_strategy.as_mut() {
                        s.pods_to_delete.retain(|n| !remove.contains(n));
                    }
                }
                // The barrier ConfigMap is not modelled: only the pod's completed mark.
                Action::LaunchBarrier { pod, complete, .. } => {
                    if *complete && let Some(p) = self.pod_mut(pod) {
                        p.metadata
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(
                                insitu_core::launch_priority::COMPLETED_ANNOTATION.into(),
                                "true".into(),
                            );
                    }
                }
                Action::LabelRevision { name, label } => {
                    if let Some(r) = self
                        .revisions
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                    {
                        r.metadata
                            .labels
                            .get_or_insert_with(Default::default)
                            .insert(label.clone(), "true".into());
                    }
                }
                // ImagePullJobs are not modelled.
                Action::CreateImagePullJob { .. } | Action::DeleteImagePullJob { .. } => {}
            }
        }
        if let Some(st) = &plan.status {
            self.cs.status = Some(st.clone());
        }
    }

    /// A kubelet + scheduler: binds pods, runs them, reports the spec image (imageID `id:<image>`),
    /// restarts containers whose image changed, and computes Ready from containers and readiness gates.
    pub fn kubelet(&mut self) {
        let now = self.now;
        for p in &mut self.pods {
            let spec = p.spec.as_mut().unwrap();
            if spec.node_name.is_none() {
                spec.node_name = Some("node-1".into());
            }
            let gates: Vec<String> = spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| g.condition_type.clone())
                .collect();
            let containers: Vec<(String, String)> = spec
                .containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect();
            let st = p.status.get_or_insert_with(Default::default);
            st.phase = Some("Running".into());
            let statuses = st.container_statuses.get_or_insert_with(Vec::new);
            for (name, image) in &containers {
                match statuses.iter_mut().find(|s| &s.name == name) {
                    Some(s) if s.image != format!("docker.io/library/{image}") => {
                        s.image = format!("docker.io/library/{image}");
                        s.image_id = format!("id:{image}");
                        s.restart_count += 1;
                    }
                    Some(_) => {}
                    None => statuses.push(ContainerStatus {
                        name: name.clone(),
                        image: format!("docker.io/library/{image}"),
                        image_id: format!("id:{image}"),
                        ready: true,
                        ..Default::default()
                    }),
                }
            }
            let conds = st.conditions.get_or_insert_with(Vec::new);
            let gates_ok = gates
                .iter()
                .all(|g| conds.iter().any(|c| &c.type_ == g && c.status == "True"));
            set_cond(conds, "Ready", gates_ok, now);
        }
    }

    /// Plans and applies until the plan is empty (or `max` rounds), running the kubelet between rounds.
    pub fn converge(&mut self, max: usize) -> usize {
        for i in 0..max {
            let plan = self.plan();
            if plan.is_empty() {
                return i;
            }
            self.apply(&plan);
            self.kubelet();
            if let Some(d) = plan.requeue_after
                && plan.actions.is_empty()
            {
                self.advance(i64::try_from(d.as_secs()).unwrap() + 1);
            }
        }
        panic!("did not converge in {max} rounds");
    }

    pub fn labels(&self, name: &str) -> BTreeMap<String, String> {
        self.pod(name).metadata.labels.clone().unwrap_or_default()
    }

    pub fn image(&self, name: &str) -> String {
        self.pod(name).spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap_or_default()
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
        v.sort();
        v
    }
}

pub fn set_cond(conds: &mut Vec<PodCondition>, type_: &str, ok: bool, now: Timestamp) {
    let status = if ok { "True" } else { "False" };
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => {}
        Some(c) => {
            c.status = status.into();
            c.last_transition_time = Some(Time(now));
        }
        None => conds.push(PodCondition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }),
    }
}

/// A short summary of a plan's actions, for assertions: `verb pod`.
pub fn verbs(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .map(|a| match a {
            Action::CreateRevision { revision } => {
                format!("CreateRevision {}", revision.metadata.name.clone().unwrap())
            }
            Action::BumpRevision { name, revision, .. } => format!("BumpRevision {name} {revision}"),
            Action::DeleteRevision { name } => format!("DeleteRevision {name}"),
            Action::CreatePod { revision, .. } => format!("CreatePod {revision}"),
            Action::DeletePod { pod, .. } => format!("DeletePod {pod}"),
            Action::CreatePvc { pvc } => format!("CreatePvc {}", pvc.metadata.name.clone().unwrap()),
            Action::DeletePvc { name, .. } => format!("DeletePvc {name}"),
            Action::ReleasePvc { name, pod, .. } => format!("ReleasePvc {name} {pod}"),
            Action::SetInPlaceUpdateReady { pod, ready, .. } => {
                format!("SetInPlaceUpdateReady {pod} {ready}")
            }
            Action::SetKruisePodReady { pod, messages, .. } => {
                format!(
                    "SetKruisePodReady {pod} {}",
                    insitu_core::lifecycle::message_json(messages)
                )
            }
            Action::UpdatePod { pod, reason, .. } => format!("UpdatePod {pod} {reason:?}"),
            Action::PatchPodMetadata { pod, reason, .. } => format!("PatchPodMetadata {pod} {reason:?}"),
            Action::ReleasePod { pod, .. } => format!("ReleasePod {pod}"),
            Action::AdoptPod { pod, .. } => format!("AdoptPod {pod}"),
            Action::TruncatePodsToDelete { remove } => format!("TruncatePodsToDelete {remove:?}"),
            Action::LaunchBarrier {
                pod, key, complete, ..
            } => format!("LaunchBarrier {pod} {key} {complete}"),
            Action::CreateImagePullJob { name, .. } => format!("CreateImagePullJob {name}"),
            Action::LabelRevision { name, label } => format!("LabelRevision {name} {label}"),
            Action::DeleteImagePullJob { name } => format!("DeleteImagePullJob {name}"),
        })
        .collect()
}
