//! `plan()` gives the same plan whether the snapshot carries precomputed pod summaries or not, whatever
//! the pods look like and whichever selector (if any) the summaries were made for.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use insitu_api::keys;
use insitu_core::{PackedPod, PodSummary, Snapshot};
use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::SignedDuration;
use serde_json::json;

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    fn chance(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// A world after a rollout to a second revision began, then disturbed pod by pod in every way `PodSummary`
/// records (and some it must not be fooled by).
fn disturbed_world(rng: &mut Rng) -> World {
    let strategy = json!({
        "type": rng.pick(&["InPlaceIfPossible", "InPlaceOnly", "ReCreate"]),
        "partition": rng.below(3), "maxUnavailable": 1 + rng.below(3), "maxSurge": rng.below(2),
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": rng.pick(&[0, 5])},
    });
    let mut w = World::new(cloneset(2 + rng.below(5) as i32, "nginx:1", strategy));
    if rng.chance(2) {
        w.cs.spec.lifecycle = Some(
            serde_json::from_value(json!({
                "preDelete": {"labelsHandler": {"hook": "x"}, "markPodNotReady": rng.chance(2)},
                "inPlaceUpdate": {"labelsHandler": {"hook": "x"}, "markPodNotReady": rng.chance(2)},
            }))
            .unwrap(),
        );
    }
    w.converge(40);
    let c = &mut w.cs.spec.template.spec.as_mut().unwrap().containers[0];
    c.image = Some("nginx:2".into());
    w.cs.spec.replicas = Some(rng.below(8) as i32);
    w.cs.metadata.generation = Some(2);
    w.cs.spec.min_ready_seconds = Some(*rng.pick(&[0, 0, 30]));
    if rng.chance(3) {
        // Same pods selected, another selector (and fingerprint) than the summaries may have been made for.
        w.cs.spec.selector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        }))
        .unwrap();
    }
    // A round or two of the rollout, so some pods are mid-update.
    for _ in 0..rng.below(3) {
        let p = w.plan();
        w.apply(&p);
        if rng.chance(2) {
            w.kubelet();
        }
    }
    let now = w.now;
    let revisions: Vec<String> = w
        .revisions
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    let mut pods_to_delete = Vec::new();
    let long = "x".repeat(40);
    for (i, p) in w.pods.iter_mut().enumerate() {
        let labels = p.metadata.labels.get_or_insert_with(BTreeMap::new);
        match rng.below(8) {
            0 => {
                labels.remove(keys::CONTROLLER_REVISION_HASH_LABEL);
            }
            1 => {
                labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), String::new());
            }
            2 => {
                // The short hash only (CloneSetShortHash), or a hash too long to be held inline.
                let r = rng.pick(&revisions);
                let short = r.rsplit('-').next().unwrap().to_string();
                let v = if rng.chance(2) {
                    short
                } else {
                    format!("{r}{long}")
                };
                labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), v);
            }
            3 => {
                labels.remove(keys::POD_TEMPLATE_HASH_LABEL);
            }
            _ => {}
        }
        if rng.chance(6) {
            labels.insert("tier".into(), "db".into());
        }
        if rng.chance(8) {
            labels.insert("app".into(), "other".into());
        }
        if rng.chance(6) {
            let st = rng.pick(&[
                keys::lifecycle::PREPARING_NORMAL,
                keys::lifecycle::PREPARING_UPDATE,
                keys::lifecycle::UPDATING,
                keys::lifecycle::UPDATED,
                keys::lifecycle::PREPARING_DELETE,
                "Bogus",
            ]);
            labels.insert(keys::LIFECYCLE_STATE_LABEL.into(), (*st).into());
        }
        if rng.chance(6) {
            labels.insert("hook".into(), "x".into());
        }
        if rng.chance(10) {
            labels.insert(keys::SPECIFIED_DELETE_LABEL.into(), "true".into());
        }
        if rng.chance(10) {
            pods_to_delete.push(p.metadata.name.clone().unwrap());
        }
        if rng.chance(8) {
            // Long names are held by their first bytes only.
            p.metadata.name = Some(format!("web-{long}-{i:02}"));
        }
        let ann = p.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match rng.below(6) {
            0 => {
                ann.insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), String::new());
                ann.insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), "{}".into());
            }
            1 => {
                ann.insert(
                    keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD.into(),
                    "not json".into(),
                );
            }
            2 => {
                ann.insert(
                    keys::POD_DELETION_COST_ANNOTATION.into(),
                    rng.below(5).to_string(),
                );
            }
            _ => {}
        }
        if rng.chance(10) {
            p.metadata.deletion_timestamp = Some(Time(now));
        }
        if rng.chance(6) {
            let spec = p.spec.as_mut().unwrap();
            spec.node_name = None;
            spec.readiness_gates
                .get_or_insert_with(Vec::new)
                .push(PodReadinessGate {
                    condition_type: keys::KRUISE_POD_READY.into(),
                });
        }
        let st = p.status.get_or_insert_with(Default::default);
        if rng.chance(6) {
            st.phase = Some((*rng.pick(&["Pending", "Unknown", "Succeeded", "Failed"])).into());
        }
        let conds = st.conditions.get_or_insert_with(Vec::new);
        if rng.chance(4) {
            set_cond(conds, "Ready", rng.chance(2), now);
        }
        if rng.chance(5) {
            set_cond(conds, keys::INPLACE_UPDATE_READY, rng.chance(2), now);
        }
        if rng.chance(5) {
            conds.push(PodCondition {
                type_: keys::KRUISE_POD_READY.into(),
                status: "False".into(),
                message: Some(r#"[{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#.into()),
                ..Default::default()
            });
        }
        for c in conds.iter_mut() {
            if c.type_ == "Ready" && rng.chance(3) {
                c.last_transition_time = Some(Time(now - SignedDuration::from_secs(rng.below(60) as i64)));
            }
        }
        for cs in st.container_statuses.iter_mut().flatten() {
            cs.restart_count = rng.below(3) as i32;
        }
    }
    if !pods_to_delete.is_empty() {
        pods_to_delete.push("gone".into());
        w.cs.spec.scale_strategy =
            Some(serde_json::from_value(json!({ "podsToDelete": pods_to_delete })).unwrap());
    }
    // The cache lists pods in no particular order.
    for i in (1..w.pods.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        w.pods.swap(i, j);
    }
    w.advance(rng.below(40) as i64);
    w
}

fn with_summaries(
    snap: &Snapshot,
    make: impl Fn(usize, &Arc<k8s_openapi::api::core::v1::Pod>) -> PodSummary,
) -> Snapshot {
    Snapshot {
        summaries: Some(Arc::new(
            snap.pods.iter().enumerate().map(|(i, p)| make(i, p)).collect(),
        )),
        ..snap.clone()
    }
}

#[test]
fn plans_from_summaries_equal_plans_from_pods() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let other: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap();
    let mut non_empty = 0;
    for case in 0..150 {
        let w = disturbed_world(&mut rng);
        let snap = w.snapshot();
        let want = insitu_core::plan(&snap);
        non_empty += usize::from(!want.actions.is_empty());
        let sel = &w.cs.spec.selector;
        let variants = [
            (
                "controller",
                with_summaries(&snap, |_, p| PodSummary::with_selector(p.clone(), sel)),
            ),
            (
                "no selector",
                with_summaries(&snap, |_, p| PodSummary::new(p.clone())),
            ),
            (
                "other selector",
                with_summaries(&snap, |_, p| PodSummary::with_selector(p.clone(), &other)),
            ),
            (
                "mixed",
                with_summaries(&snap, |i, p| match i % 3 {
                    0 => PodSummary::with_selector(p.clone(), sel),
                    1 => PodSummary::new(p.clone()),
                    _ => PodSummary::with_selector(p.clone(), &other),
                }),
            ),
            // Summaries of other `Arc`s (equal pods) or of fewer pods are not used.
            (
                "other arcs",
                with_summaries(&snap, |_, p| {
                    PodSummary::with_selector(Arc::new((**p).clone()), sel)
                }),
            ),
            // The controller's lean cache: packed pods, the summaries are the pods (`pods` empty).
            ("packed", {
                let mut s = with_summaries(&snap, |_, p| {
                    PodSummary::with_selector(Arc::new(PackedPod::pack((**p).clone())), sel)
                });
                s.pods.clear();
                s
            }),
            ("short", {
                let mut s = with_summaries(&snap, |_, p| PodSummary::with_selector(p.clone(), sel));
                Arc::make_mut(s.summaries.as_mut().unwrap()).pop();
                s
            }),
        ];
        for (name, s) in &variants {
            assert_eq!(insitu_core::plan(s), want, "case {case}: summaries {name}");
        }
    }
    // The populations exercise the planner, not just empty plans.
    assert!(non_empty > 100, "{non_empty}");
}

#[test]
fn stale_times_do_not_matter() {
    // Summaries hold no clock-dependent fact: one made long before the plan gives the same plan.
    let mut rng = Rng(7);
    let mut w = disturbed_world(&mut rng);
    w.cs.spec.min_ready_seconds = Some(30);
    let snap = w.snapshot();
    let early = with_summaries(&snap, |_, p| {
        PodSummary::with_selector(p.clone(), &w.cs.spec.selector)
    });
    for secs in [0, 29, 31, 120] {
        let later = Snapshot {
            now: snap.now + SignedDuration::from_secs(secs),
            ..snap.clone()
        };
        let early_later = Snapshot {
            now: later.now,
            ..early.clone()
        };
        assert_eq!(
            insitu_core::plan(&early_later),
            insitu_core::plan(&later),
            "+{secs}s"
        );
    }
}
