//! TEMPORARY (perf work): drives many varied snapshots through `plan()` so the env-gated golden dump in
//! planner.rs records old vs new behaviour. Removed once the comparison is done.

mod common;

#[path = "../benches/fixture/mod.rs"]
mod fixture;

use common::*;
use insitu_api::keys;
use serde_json::json;

fn label_pods(w: &mut World) {
    for (i, p) in w.pods.iter_mut().enumerate() {
        let l = p.metadata.labels.get_or_insert_with(Default::default);
        l.insert("zone".into(), ["a", "b", "c"][i % 3].into());
        l.insert("prio".into(), format!("p-{}", (i * 7) % 5));
        if i % 4 == 0 {
            l.insert("tier".into(), format!("t{}", i % 3));
        }
        if let Some(s) = p.spec.as_mut() {
            s.node_name = Some(format!("node-{}", i % 3));
        }
        if let Some(st) = p.status.as_mut()
            && let Some(cs) = st.container_statuses.as_mut()
        {
            for c in cs {
                c.restart_count = (i % 3) as i32;
            }
        }
        if i % 5 == 1 {
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(keys::POD_DELETION_COST_ANNOTATION.into(), format!("{}", i % 7));
        }
    }
}

fn rollout(mut w: World, rounds: usize, kubelet_every: usize) {
    for round in 0..rounds {
        let plan = w.plan();
        if plan.is_empty() && plan.requeue_after.is_none() {
            w.kubelet();
            continue;
        }
        let idle = plan.actions.is_empty();
        w.apply(&plan);
        if round % kubelet_every == 0 || idle {
            w.kubelet();
            label_pods(&mut w);
        }
        w.advance(plan.requeue_after.map_or(1, |d| d.as_secs() as i64 + 1));
    }
}

#[test]
fn golden_grid() {
    let priorities = [
        json!(null),
        json!({"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"zone": "b"}}},
                                  {"weight": 10, "matchSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}]}),
        json!({"orderPriority": [{"orderedKey": "tier"}, {"orderedKey": "prio"}]}),
    ];
    let scatters = [
        json!(null),
        json!([{"key": "zone", "value": "a"}]),
        json!([{"key": "zone", "value": "a"}, {"key": "tier", "value": "t0"}]),
    ];
    let mut case = 0;
    for replicas in [7, 23] {
        for ty in ["InPlaceIfPossible", "ReCreate"] {
            for (pi, prio) in priorities.iter().enumerate() {
                for (si, scatter) in scatters.iter().enumerate() {
                    for (mu, ms, part) in [(json!(2), json!(0), json!(0)), (json!("30%"), json!(2), json!(3))]
                    {
                        case += 1;
                        let mut strategy = json!({"type": ty, "maxUnavailable": mu, "maxSurge": ms,
                                                  "partition": part,
                                                  "inPlaceUpdateStrategy": {"gracePeriodSeconds": case % 2 * 3}});
                        if !prio.is_null() {
                            strategy["priorityStrategy"] = prio.clone();
                        }
                        if !scatter.is_null() {
                            strategy["scatterStrategy"] = scatter.clone();
                        }
                        let mut w = World::new(cloneset(replicas, "nginx:1", strategy));
                        if case % 3 == 0 {
                            w.cs.spec.min_ready_seconds = Some(3);
                        }
                        if case % 4 == 1 {
                            w.cs.spec.lifecycle = Some(
                                serde_json::from_value(json!({
                                    "preDelete": {"labelsHandler": {"hold": "true"}},
                                    "inPlaceUpdate": {"labelsHandler": {"hold": "true"}}}))
                                .unwrap(),
                            );
                        }
                        w.converge(60);
                        label_pods(&mut w);
                        for p in w.pods.iter_mut().filter(|_| case % 4 == 1) {
                            p.metadata
                                .labels
                                .get_or_insert_with(Default::default)
                                .insert("hold".into(), "true".into());
                        }
                        w.cs.spec.template.spec.as_mut().unwrap().containers[0].image =
                            Some("nginx:2".into());
                        if (pi + si) % 2 == 1 {
                            w.cs.spec
                                .template
                                .metadata
                                .as_mut()
                                .unwrap()
                                .labels
                                .as_mut()
                                .unwrap()
                                .insert("extra".into(), "x".into());
                        }
                        w.cs.metadata.generation = Some(2);
                        if case % 5 == 2 {
                            let names = w.names();
                            w.cs.spec.scale_strategy = Some(
                                serde_json::from_value(json!({"podsToDelete": [names[1], "gone-1"]}))
                                    .unwrap(),
                            );
                        }
                        rollout(w, 25, 1 + case % 2);
                    }
                }
            }
        }
    }
}

#[test]
fn golden_scale_down_and_up() {
    for (from, to) in [(12, 5), (9, 1), (4, 10), (30, 29)] {
        for ty in ["InPlaceIfPossible", "ReCreate"] {
            let mut w = World::new(cloneset(
                from,
                "nginx:1",
                json!({"type": ty, "maxUnavailable": 3}),
            ));
            w.converge(60);
            label_pods(&mut w);
            // Some not ready, some pending, to exercise the orderings.
            for (i, p) in w.pods.iter_mut().enumerate() {
                let st = p.status.as_mut().unwrap();
                if i % 4 == 2 {
                    set_cond(st.conditions.as_mut().unwrap(), "Ready", false, t0());
                }
                if i % 6 == 5 {
                    st.phase = Some("Pending".into());
                }
            }
            w.cs.spec.replicas = Some(to);
            w.cs.metadata.generation = Some(2);
            rollout(w, 15, 2);
        }
    }
}

#[test]
fn golden_bench_fixture() {
    for n in [50usize, 400] {
        for steady in [true, false] {
            let s = fixture::snapshot(n, steady);
            let _ = insitu_core::plan(&s);
            // Variants: scale down across 100 nodes, scatter + priority, podsToDelete, ReCreate.
            let mut cs = (*s.cloneset).clone();
            cs.spec.replicas = Some((n / 2) as i32);
            let _ = insitu_core::plan(&insitu_core::Snapshot {
                cloneset: cs.into(),
                ..s.clone()
            });
            let mut cs = (*s.cloneset).clone();
            let us = cs.spec.update_strategy.as_mut().unwrap();
            us.scatter_strategy = serde_json::from_value(json!([{"key": "app", "value": "web"}])).unwrap();
            us.priority_strategy = Some(
                serde_json::from_value(
                    json!({"orderPriority": [{"orderedKey": "apps.kruise.io/cloneset-instance-id"}]}),
                )
                .unwrap(),
            );
            cs.spec.min_ready_seconds = Some(7200);
            let _ = insitu_core::plan(&insitu_core::Snapshot {
                cloneset: cs.into(),
                ..s.clone()
            });
            let mut cs = (*s.cloneset).clone();
            cs.spec.scale_strategy = Some(
                serde_json::from_value(json!({"podsToDelete": ["web-000003", "web-000004", "nope"]}))
                    .unwrap(),
            );
            cs.spec.update_strategy.as_mut().unwrap().type_ = Some("ReCreate".into());
            let _ = insitu_core::plan(&insitu_core::Snapshot {
                cloneset: cs.into(),
                ..s.clone()
            });
        }
    }
}
