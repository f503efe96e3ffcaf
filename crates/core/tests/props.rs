//! Property tests: budgets are never exceeded and planning + simulated execution converges.

mod common;

use std::collections::HashSet;

use common::*;
use insitu_api::keys;
use insitu_core::budget::{partition, surge_and_unavailable};
use insitu_core::{Action, PodSummary, UpdateReason};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
struct Scenario {
    r0: i32,
    r1: i32,
    partition: i32,
    mu: i32,
    ms: i32,
    in_place: bool,
    grace: i32,
    env_change: bool,
    broken: Vec<usize>,
    deletes: Vec<usize>,
    kubelet_every: usize,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        1..8i32,
        0..9i32,
        0..6i32,
        0..4i32,
        0..3i32,
        any::<bool>(),
        prop_oneof![Just(0), Just(5)],
        any::<bool>(),
        proptest::collection::vec(0..8usize, 0..3),
        proptest::collection::vec(0..8usize, 0..2),
        1..3usize,
    )
        .prop_map(
            |(r0, r1, partition, mu, ms, in_place, grace, env_change, broken, deletes, k)| Scenario {
                r0,
                r1,
                partition,
                // Kruise validation: maxUnavailable and maxSurge not both < 1.
                mu: if mu == 0 && ms == 0 { 1 } else { mu },
                ms,
                in_place,
                grace,
                env_change,
                broken,
                deletes,
                kubelet_every: k,
            },
        )
}

fn world(s: &Scenario) -> World {
    let strategy = json!({
        "type": if s.in_place { "InPlaceIfPossible" } else { "ReCreate" },
        "partition": s.partition, "maxUnavailable": s.mu, "maxSurge": s.ms,
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": s.grace},
    });
    let mut w = World::new(cloneset(s.r0, "nginx:1", strategy));
    w.converge(40);
    // The disruption: new template, new replicas, some pods broken, some specified for deletion.
    let c = &mut w.cs.spec.template.spec.as_mut().unwrap().containers[0];
    c.image = Some("nginx:2".into());
    if s.env_change {
        c.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "E".into(),
            value: Some("1".into()),
            value_from: None,
        }]);
    }
    w.cs.spec.replicas = Some(s.r1);
    w.cs.metadata.generation = Some(2);
    let names = w.names();
    for &b in &s.broken {
        if let Some(n) = names.get(b % names.len().max(1)) {
            let now = w.now;
            let p = w.pod_mut(n).unwrap();
            set_cond(
                p.status.as_mut().unwrap().conditions.as_mut().unwrap(),
                "Ready",
                false,
                now,
            );
        }
    }
    for &d in &s.deletes {
        if let Some(n) = names.get(d % names.len().max(1)) {
            w.pod_mut(n)
                .unwrap()
                .metadata
                .labels
                .as_mut()
                .unwrap()
                .insert(keys::SPECIFIED_DELETE_LABEL.into(), "true".into());
        }
    }
    w
}

/// Checks the safety properties of one plan against the snapshot it was made from.
fn check_plan(w: &World, plan: &insitu_core::Plan) {
    let snap = w.snapshot();
    let spec = &w.cs.spec;
    let replicas = spec.replicas();
    let (max_surge, max_unavailable) = surge_and_unavailable(spec);
    let none = HashSet::new();
    let summaries: Vec<PodSummary> = snap.pods.iter().cloned().map(PodSummary::new).collect();
    let facts: Vec<insitu_core::pods::PodFacts> = summaries
        .iter()
        .map(|s| {
            insitu_core::pods::PodFacts::new(s, w.now, spec.min_ready_seconds(), &none, &plan.update_revision)
        })
        .filter(|f| f.active())
        .collect();
    let n = facts.len() as i32;
    let u = facts
        .iter()
        .filter(|f| !f.available && (!f.specified_delete || f.preparing_delete()))
        .count() as i32;

    // Pods the plan takes out of service.
    let mut disrupted: HashSet<&str> = HashSet::new();
    let mut moved_to_update: HashSet<&str> = HashSet::new();
    let mut creates = 0;
    for a in &plan.actions {
        match a {
            Action::DeletePod { pod, .. } => {
                disrupted.insert(pod);
            }
            Action::UpdatePod {
                pod,
                reason: UpdateReason::StartInPlaceUpdate,
                mutation,
                ..
            } => {
                disrupted.insert(pod);
                if mutation.labels.get(keys::CONTROLLER_REVISION_HASH_LABEL)
                    == Some(&Some(plan.update_revision.clone()))
                {
                    moved_to_update.insert(pod);
                }
            }
            Action::PatchPodMetadata {
                pod,
                reason: UpdateReason::Recreate,
                ..
            } => {
                disrupted.insert(pod);
                moved_to_update.insert(pod);
            }
            Action::PatchPodMetadata { pod, labels, .. }
                if labels.get(keys::LIFECYCLE_STATE_LABEL).is_some_and(|v| {
                    v.as_deref() == Some("PreparingDelete") || v.as_deref() == Some("PreparingUpdate")
                }) =>
            {
                disrupted.insert(pod);
            }
            Action::CreatePod { .. } => creates += 1,
            _ => {}
        }
    }
    let disrupted_available = facts
        .iter()
        .filter(|f| f.available && disrupted.contains(f.name()))
        .count() as i32;
    let allowed = (max_unavailable + n - replicas - u).max(0);
    assert!(
        disrupted_available <= allowed,
        "took {disrupted_available} available pods out, allowed {allowed} (MU {max_unavailable}, pods {n}, R {replicas}, unavailable {u}): {:?}",
        verbs(plan)
    );
    // Never above replicas + maxSurge.
    assert!(
        n + creates <= n.max(replicas + max_surge),
        "{n} pods + {creates} creates > {replicas} + {max_surge}"
    );
    // Never below the partition (no rollback gate).
    let p = partition(
        spec.update_strategy.as_ref().and_then(|s| s.partition.as_ref()),
        replicas,
    );
    let old: Vec<_> = facts
        .iter()
        .filter(|f| !f.updated && !f.preparing_delete())
        .collect();
    let old_after =
        old.len() as i32 - old.iter().filter(|f| moved_to_update.contains(f.name())).count() as i32;
    assert!(
        old_after >= p.min(old.len() as i32),
        "old pods {} → {old_after} below partition {p}",
        old.len()
    );
    // Deterministic.
    assert_eq!(plan, &insitu_core::plan(&snap));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn budgets_hold_and_rollouts_converge(s in scenario()) {
        let mut w = world(&s);
        let mut converged = false;
        for round in 0..300 {
            let plan = w.plan();
            check_plan(&w, &plan);
            if plan.is_empty() && plan.requeue_after.is_none() {
                // Quiet only if the kubelet has nothing left to report either (a watch event would come).
                let before = w.pods.clone();
                w.kubelet();
                if w.pods == before {
                    converged = true;
                    break;
                }
                continue;
            }
            let idle = plan.actions.is_empty();
            w.apply(&plan);
            if round % s.kubelet_every == 0 || idle {
                w.kubelet();
            }
            if idle {
                w.advance(plan.requeue_after.map_or(1, |d| d.as_secs() as i64 + 1));
            }
        }
        prop_assert!(converged, "no convergence: {:?}", s);
        // Converged: the right number of pods, `replicas − partition` of them at the update revision.
        let st = w.cs.status.clone().unwrap();
        let p = partition(w.cs.spec.update_strategy.as_ref().and_then(|u| u.partition.as_ref()), s.r1);
        prop_assert_eq!(w.pods.len() as i32, s.r1);
        prop_assert_eq!(st.replicas, s.r1);
        prop_assert!(st.updated_replicas >= s.r1 - p, "updated {} < {}", st.updated_replicas, s.r1 - p);
        prop_assert_eq!(st.ready_replicas, s.r1);
        // A converged snapshot plans nothing.
        prop_assert!(w.plan().is_empty());
    }
}
