//! The Advanced StatefulSet planner against a tiny world (an executor for its plans and a kubelet): ordered
//! and parallel scaling, PVCs before pods, partitioned rolling updates in place and by recreate, status; and
//! properties over random scenarios (ordering, budgets, convergence).

use std::collections::BTreeMap;
use std::sync::Arc;

use insitu_api::keys;
use insitu_api::statefulset::StatefulSet;
use insitu_core::statefulset::{StatefulSetPlan, StatefulSetSnapshot, ordinal, plan};
use insitu_core::{Action, FeatureGates};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ContainerStatus, PersistentVolumeClaim, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use serde_json::{Value, json};

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn sts(replicas: i32, image: &str, spec_extra: Value) -> StatefulSet {
    let mut v = json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web", "generation": 1},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                                  "containers": [{"name": "web", "image": image}]}},
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}},
        }
    });
    if let (Value::Object(spec), Value::Object(extra)) = (&mut v["spec"], spec_extra) {
        for (k, x) in extra {
            spec.insert(k, x);
        }
    }
    serde_json::from_value(v).unwrap()
}

/// The apiserver and kubelet as far as the planner needs them.
struct World {
    set: StatefulSet,
    pods: BTreeMap<String, Pod>,
    revisions: Vec<ControllerRevision>,
    pvcs: BTreeMap<String, PersistentVolumeClaim>,
    now: Timestamp,
    uid_seq: u64,
    /// Pod names in creation order, and UIDs ever deleted.
    created: Vec<String>,
    deleted: Vec<String>,
}

impl World {
    fn new(set: StatefulSet) -> Self {
        World {
            set,
            pods: BTreeMap::new(),
            revisions: vec![],
            pvcs: BTreeMap::new(),
            now: t0(),
            uid_seq: 0,
            created: vec![],
            deleted: vec![],
        }
    }

    fn plan(&self) -> StatefulSetPlan {
        plan(&StatefulSetSnapshot {
            set: Arc::new(self.set.clone()),
            pods: self.pods.values().cloned().map(Arc::new).collect(),
            revisions: self.revisions.iter().cloned().map(Arc::new).collect(),
            pvcs: self.pvcs.values().cloned().map(Arc::new).collect(),
            now: self.now,
            gates: FeatureGates::default(),
        })
    }

    fn apply(&mut self, p: &StatefulSetPlan) {
        for a in &p.actions {
            match a {
                Action::CreateRevision { revision } => self.revisions.push((**revision).clone()),
                Action::BumpRevision { name, revision, .. } => {
                    for r in &mut self.revisions {
                        if r.metadata.name.as_deref() == Some(name) {
                            r.revision = *revision;
                        }
                    }
                }
                Action::DeleteRevision { name } => {
                    self.revisions
                        .retain(|r| r.metadata.name.as_deref() != Some(name));
                }
                Action::CreatePvc { pvc } => {
                    let n = pvc.metadata.name.clone().unwrap();
                    self.pvcs.entry(n).or_insert_with(|| (**pvc).clone());
                }
                Action::CreatePod { pod, .. } => {
                    let mut pod = pod.unpack();
                    let name = pod.metadata.name.clone().unwrap();
                    for v in pod.spec.as_ref().unwrap().volumes.iter().flatten() {
                        if let Some(c) = &v.persistent_volume_claim {
                            assert!(
                                self.pvcs.contains_key(&c.claim_name),
                                "pod {name} created before its pvc"
                            );
                        }
                    }
                    assert!(!self.pods.contains_key(&name), "pod {name} created twice");
                    self.uid_seq += 1;
                    pod.metadata.uid = Some(format!("uid-{}", self.uid_seq));
                    pod.status = Some(PodStatus {
                        phase: Some("Pending".into()),
                        ..Default::default()
                    });
                    self.created.push(name.clone());
                    self.pods.insert(name, pod);
                }
                Action::DeletePod { pod, uid, .. } => {
                    let p = self.pods.remove(pod).expect("delete of a pod that is not there");
                    assert_eq!(p.metadata.uid.as_deref(), Some(uid.as_str()));
                    self.deleted.push(pod.clone());
                }
                Action::UpdatePod { pod, mutation, .. } => {
                    let p = self.pods.get_mut(pod).unwrap();
                    mutation.apply(p);
                }
                Action::PatchPodMetadata {
                    pod,
                    labels,
                    annotations,
                    ..
                } => {
                    let p = self.pods.get_mut(pod).unwrap();
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
                Action::SetInPlaceUpdateReady { pod, ready, .. } => {
                    let p = self.pods.get_mut(pod).unwrap();
                    set_condition(p, keys::INPLACE_UPDATE_READY, *ready, self.now);
                    if !*ready {
                        set_condition(p, "Ready", false, self.now);
                    }
                }
                other => panic!("unexpected action {other:?}"),
            }
        }
        if let Some(st) = &p.status {
            self.set.status = Some(st.clone());
        }
    }

    /// The kubelet: pending pods start; a container whose spec image changed restarts with it; a pod is
    /// Ready when its containers run their spec images and every readiness gate is True.
    fn kubelet(&mut self) {
        for p in self.pods.values_mut() {
            let spec = p.spec.clone().unwrap();
            let st = p.status.get_or_insert_with(Default::default);
            st.phase = Some("Running".into());
            let mut statuses = st.container_statuses.clone().unwrap_or_default();
            for c in &spec.containers {
                let img = c.image.clone().unwrap_or_default();
                match statuses.iter_mut().find(|s| s.name == c.name) {
                    Some(s) if s.image != img => {
                        s.image = img.clone();
                        s.image_id = format!("id-{img}");
                        s.restart_count += 1;
                    }
                    Some(_) => {}
                    None => statuses.push(ContainerStatus {
                        name: c.name.clone(),
                        image: img.clone(),
                        image_id: format!("id-{img}"),
                        ready: true,
                        restart_count: 0,
                        ..Default::default()
                    }),
                }
            }
            st.container_statuses = Some(statuses);
            let gates_ok = spec.readiness_gates.iter().flatten().all(|g| {
                st.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            });
            let now = self.now;
            set_condition(p, "Ready", gates_ok, now);
        }
    }

    /// Plans, applies and runs the kubelet until nothing changes (or `rounds` run out); the plans seen.
    fn settle(&mut self, rounds: usize) -> Vec<StatefulSetPlan> {
        let mut plans = Vec::new();
        for _ in 0..rounds {
            let p = self.plan();
            self.apply(&p);
            let before = self.pods.clone();
            self.kubelet();
            self.now += SignedDuration::from_secs(1);
            let quiet = p.actions.is_empty() && p.status.is_none() && before == self.pods;
            plans.push(p);
            if quiet {
                break;
            }
        }
        plans
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<_> = self.pods.keys().cloned().collect();
        v.sort_by_key(|n| ordinal(n));
        v
    }

    fn revision_of(&self, pod: &str) -> String {
        self.pods[pod].metadata.labels.as_ref().unwrap()[keys::CONTROLLER_REVISION_HASH_LABEL].clone()
    }

    fn set_image(&mut self, image: &str) {
        let c = &mut self.set.spec.template.spec.as_mut().unwrap().containers[0];
        c.image = Some(image.into());
        self.set.metadata.generation = Some(self.set.metadata.generation.unwrap_or(1) + 1);
    }

    fn restarts(&self, pod: &str) -> i32 {
        self.pods[pod]
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count
    }

    fn uid(&self, pod: &str) -> String {
        self.pods[pod].metadata.uid.clone().unwrap()
    }
}

fn set_condition(p: &mut Pod, type_: &str, status: bool, now: Timestamp) {
    let st = p.status.get_or_insert_with(Default::default);
    let conds = st.conditions.get_or_insert_with(Vec::new);
    let s = if status { "True" } else { "False" };
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == s => {}
        Some(c) => {
            c.status = s.into();
            c.last_transition_time = Some(Time(now));
        }
        None => conds.push(PodCondition {
            type_: type_.into(),
            status: s.into(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }),
    }
}

fn creates(p: &StatefulSetPlan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod, .. } => Some(pod.unpack().metadata.name.unwrap()),
            _ => None,
        })
        .collect()
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_in_order() {
    let mut w = World::new(sts(3, "nginx:1", json!({})));
    let first = w.plan();
    assert_eq!(creates(&first), vec!["web-0"], "{:#?}", first.explanation);
    w.apply(&first);
    // web-0 is Pending: nothing more until it is Running and Ready.
    let wait = w.plan();
    assert!(creates(&wait).is_empty(), "{:#?}", wait.explanation);
    w.settle(20);
    assert_eq!(w.created, vec!["web-0", "web-1", "web-2"]);
    let st = w.set.status.clone().unwrap();
    assert_eq!((st.replicas, st.ready_replicas, st.available_replicas), (3, 3, 3));
    assert_eq!((st.current_replicas, st.updated_replicas), (3, 3));
    assert_eq!(st.current_revision, st.update_revision);
    assert!(st.update_revision.starts_with("web-"));
    assert_eq!(st.label_selector, "app=web");
    assert_eq!(st.observed_generation, 1);
    let hostname = w.pods["web-1"].spec.as_ref().unwrap().hostname.clone();
    assert_eq!(hostname.as_deref(), Some("web-1"));
}

#[test]
fn parallel_creates_every_pod_at_once_within_scale_max_unavailable() {
    let w = World::new(sts(5, "nginx:1", json!({"podManagementPolicy": "Parallel"})));
    assert_eq!(creates(&w.plan()).len(), 5);
    let mut w = World::new(sts(
        5,
        "nginx:1",
        json!({"podManagementPolicy": "Parallel", "scaleStrategy": {"maxUnavailable": 2}}),
    ));
    let p = w.plan();
    assert_eq!(creates(&p), vec!["web-0", "web-1"]);
    w.apply(&p);
    // Both are unavailable: the budget is spent on them (running, their InPlaceUpdateReady is set True
    // first, then the kubelet reports them Ready).
    assert!(creates(&w.plan()).is_empty());
    w.kubelet();
    let p = w.plan();
    assert!(creates(&p).is_empty());
    w.apply(&p);
    w.kubelet();
    assert_eq!(creates(&w.plan()), vec!["web-2", "web-3"]);
}

#[test]
fn start_ordinal_and_reserved_ordinals_are_skipped() {
    let mut w = World::new(sts(
        3,
        "nginx:1",
        json!({"podManagementPolicy": "Parallel", "ordinals": {"start": 2}, "reserveOrdinals": [3]}),
    ));
    w.settle(10);
    assert_eq!(w.names(), vec!["web-2", "web-4", "web-5"]);
}

#[test]
fn pvcs_are_created_before_their_pod_and_kept_on_update() {
    let mut w = World::new(sts(
        2,
        "nginx:1",
        json!({"volumeClaimTemplates": [{"metadata": {"name": "data"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}),
    ));
    let p = w.plan();
    let kinds: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePvc { .. } => Some("pvc"),
            Action::CreatePod { .. } => Some("pod"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["pvc", "pod"]);
    w.settle(20);
    assert_eq!(
        w.pvcs.keys().cloned().collect::<Vec<_>>(),
        vec!["data-web-0", "data-web-1"]
    );
    let labels = w.pvcs["data-web-0"].metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "web");
    w.set_image("nginx:2");
    w.settle(40);
    assert_eq!(w.pvcs.len(), 2);
    assert!(w.deleted.is_empty(), "in place: no pod deleted");
}

#[test]
fn image_change_rolls_in_place_highest_ordinal_first() {
    let mut w = World::new(sts(3, "nginx:1", json!({})));
    w.settle(20);
    let uids: Vec<String> = w.names().iter().map(|n| w.uid(n)).collect();
    let old_rev = w.revision_of("web-0");
    w.set_image("nginx:2");
    let p = w.plan();
    let started: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdatePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec!["web-2"], "{:#?}", p.explanation);
    // InPlaceUpdateReady goes False before the pod write (the user's template has the gate).
    assert!(
        matches!(&p.actions[1], Action::SetInPlaceUpdateReady { pod, ready: false, .. } if pod == "web-2")
    );
    w.settle(40);
    let after: Vec<String> = w.names().iter().map(|n| w.uid(n)).collect();
    assert_eq!(uids, after, "same pods");
    assert!(w.deleted.is_empty());
    for n in w.names() {
        assert_eq!(w.restarts(&n), 1, "{n} restarted once");
        assert_ne!(w.revision_of(&n), old_rev);
        let lc = &w.pods[&n].metadata.labels.as_ref().unwrap()[keys::LIFECYCLE_STATE_LABEL];
        assert_eq!(lc, "Normal");
    }
    let st = w.set.status.clone().unwrap();
    assert_eq!(st.current_revision, st.update_revision);
    assert_eq!((st.updated_replicas, st.updated_ready_replicas), (3, 3));
}

#[test]
fn partition_updates_only_ordinals_at_or_above_it() {
    let mut w = World::new(sts(3, "nginx:1", json!({})));
    w.settle(20);
    let old_rev = w.revision_of("web-0");
    w.set
        .spec
        .update_strategy
        .as_mut()
        .unwrap()
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(2);
    w.set_image("nginx:2");
    w.settle(40);
    assert_ne!(w.revision_of("web-2"), old_rev);
    assert_eq!(w.revision_of("web-1"), old_rev);
    assert_eq!(w.revision_of("web-0"), old_rev);
    let st = w.set.status.clone().unwrap();
    assert_eq!((st.current_replicas, st.updated_replicas), (2, 1));
    assert_ne!(st.current_revision, st.update_revision);
    // A pod recreated below the partition comes back at the current revision.
    w.pods.remove("web-0");
    w.settle(10);
    assert_eq!(w.revision_of("web-0"), old_rev);
}

#[test]
fn recreate_policy_deletes_and_recreates_in_order() {
    let mut w = World::new(sts(3, "nginx:1", json!({})));
    w.set
        .spec
        .update_strategy
        .as_mut()
        .unwrap()
        .rolling_update
        .as_mut()
        .unwrap()
        .pod_update_policy = Some("ReCreate".into());
    w.settle(20);
    w.set_image("nginx:2");
    w.settle(60);
    assert_eq!(w.deleted, vec!["web-2", "web-1", "web-0"]);
    let rev = w.set.status.clone().unwrap().update_revision;
    for n in w.names() {
        assert_eq!(w.revision_of(&n), rev);
    }
}

#[test]
fn in_place_only_refuses_a_change_that_cannot_go_in_place() {
    let mut w = World::new(sts(2, "nginx:1", json!({})));
    w.set
        .spec
        .update_strategy
        .as_mut()
        .unwrap()
        .rolling_update
        .as_mut()
        .unwrap()
        .pod_update_policy = Some("InPlaceOnly".into());
    w.settle(20);
    let c = &mut w.set.spec.template.spec.as_mut().unwrap().containers[0];
    c.env = Some(vec![
        serde_json::from_value(json!({"name": "A", "value": "b"})).unwrap(),
    ]);
    let p = w.plan();
    assert!(
        p.error.as_deref().unwrap().contains("InPlaceOnly"),
        "{:?}",
        p.error
    );
    assert_eq!(p.refusals.len(), 1);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::DeletePod { .. } | Action::UpdatePod { .. }))
    );
}

#[test]
fn paused_and_on_delete_update_nothing() {
    for extra in [
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"paused": true, "podUpdatePolicy": "InPlaceIfPossible"}}}),
        json!({"updateStrategy": {"type": "OnDelete"}}),
    ] {
        let mut w = World::new(sts(2, "nginx:1", extra));
        w.settle(20);
        w.set_image("nginx:2");
        w.settle(20);
        let st = w.set.status.clone().unwrap();
        assert_eq!(st.updated_replicas, 0, "{:?}", w.set.spec.update_strategy);
        assert!(w.deleted.is_empty());
    }
}

#[test]
fn scale_down_removes_the_highest_ordinal_first_one_at_a_time() {
    let mut w = World::new(sts(4, "nginx:1", json!({})));
    w.settle(30);
    w.set.spec.replicas = Some(2);
    let p = w.plan();
    let deletes: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, vec!["web-3"]);
    w.settle(10);
    assert_eq!(w.deleted, vec!["web-3", "web-2"]);
    assert_eq!(w.names(), vec!["web-0", "web-1"]);
    assert_eq!(w.set.status.clone().unwrap().replicas, 2);
}

#[test]
fn min_ready_seconds_holds_the_next_pod_and_asks_to_look_again() {
    let mut w = World::new(sts(2, "nginx:1", json!({})));
    w.set
        .spec
        .update_strategy
        .as_mut()
        .unwrap()
        .rolling_update
        .as_mut()
        .unwrap()
        .min_ready_seconds = Some(30);
    for _ in 0..2 {
        let p = w.plan();
        w.apply(&p);
        w.kubelet();
    }
    let p = w.plan();
    assert!(creates(&p).is_empty());
    let wait = p.requeue_after.unwrap().as_secs_f64();
    assert!((29.0..=30.0).contains(&wait), "{wait}");
    w.now += SignedDuration::from_secs(31);
    assert_eq!(creates(&w.plan()), vec!["web-1"]);
}

#[test]
fn a_rollback_to_an_older_template_reuses_its_revision() {
    let mut w = World::new(sts(1, "nginx:1", json!({})));
    w.settle(10);
    let first = w.revision_of("web-0");
    w.set_image("nginx:2");
    w.settle(20);
    w.set_image("nginx:1");
    let p = w.plan();
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::BumpRevision { name, .. } if *name == first))
    );
    w.settle(20);
    assert_eq!(w.revision_of("web-0"), first);
}

/// A random scenario: replicas, policy, partition, maxUnavailable, and what changes after the first settle.
#[derive(Clone, Debug)]
struct Scenario {
    replicas: i32,
    parallel: bool,
    in_place: bool,
    partition: i32,
    max_unavailable: i32,
    new_replicas: i32,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1..6i32, any::<bool>(), any::<bool>(), 0..7i32, 1..4i32, 0..7i32).prop_map(
        |(replicas, parallel, in_place, partition, max_unavailable, new_replicas)| Scenario {
            replicas,
            parallel,
            in_place,
            partition,
            max_unavailable,
            new_replicas,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// OrderedReady never creates a pod while a lower one is not Running and Ready; every rollout converges
    /// to: the right ordinals, ordinals at or above the partition at the update revision, the rest at the
    /// current one, and (in place) no pod deleted by the update.
    #[test]
    fn rollouts_converge_within_their_rules(s in scenario()) {
        let policy = if s.parallel { "Parallel" } else { "OrderedReady" };
        let pup = if s.in_place { "InPlaceIfPossible" } else { "ReCreate" };
        let mut w = World::new(sts(s.replicas, "nginx:1", json!({
            "podManagementPolicy": policy,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "partition": s.partition, "maxUnavailable": s.max_unavailable, "podUpdatePolicy": pup}},
        })));
        for _ in 0..40 {
            let p = w.plan();
            if !s.parallel {
                let made = creates(&p);
                prop_assert!(made.len() <= 1);
                if let Some(n) = made.first() {
                    let ord = ordinal(n).unwrap();
                    for (name, pod) in &w.pods {
                        if ordinal(name).unwrap() < ord {
                            let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                            prop_assert!(ready, "{n} created before {name} was ready");
                        }
                    }
                }
            }
            w.apply(&p);
            w.kubelet();
        }
        let want: Vec<String> = (0..s.replicas).map(|i| format!("web-{i}")).collect();
        prop_assert_eq!(w.names(), want);
        let old = w.revision_of("web-0");
        w.set_image("nginx:2");
        w.set.spec.replicas = Some(s.new_replicas);
        let deleted_before = w.deleted.len();
        for _ in 0..120 {
            let p = w.plan();
            let unavailable_before = w.pods.values().filter(|p| !ready(p)).count();
            let updates = p.actions.iter().filter(|a| matches!(a, Action::UpdatePod { reason: insitu_core::UpdateReason::StartInPlaceUpdate, .. })).count();
            prop_assert!(
                updates == 0 || unavailable_before + updates <= usize::try_from(s.max_unavailable.min(s.new_replicas.max(1))).unwrap().max(1),
                "{updates} started with {unavailable_before} unavailable"
            );
            w.apply(&p);
            w.kubelet();
            w.now += SignedDuration::from_secs(1);
        }
        let want: Vec<String> = (0..s.new_replicas).map(|i| format!("web-{i}")).collect();
        prop_assert_eq!(w.names(), want);
        let st = w.set.status.clone().unwrap();
        for n in w.names() {
            let ord = ordinal(&n).unwrap();
            let rev = w.revision_of(&n);
            if ord >= s.partition {
                prop_assert_eq!(&rev, &st.update_revision, "{} ≥ partition", n);
            } else if ord < s.replicas {
                prop_assert_eq!(&rev, &old, "{} below the partition keeps its revision", n);
            }
        }
        if s.in_place {
            let by_update = w.deleted.len() - deleted_before;
            let scaled_down = usize::try_from((s.replicas - s.new_replicas).max(0)).unwrap();
            prop_assert_eq!(by_update, scaled_down, "only scale-down deletes pods");
        }
        prop_assert_eq!(st.replicas, s.new_replicas);
        prop_assert_eq!(st.ready_replicas, s.new_replicas);
    }
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
