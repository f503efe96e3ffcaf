//! Sim-backed rollout scenarios on virtual time: recreate fallback, partition canary, pause, rollback, batches.

mod common;

use common::*;
use serde_json::json;

#[test]
fn env_change_recreates_pods_within_max_unavailable() {
    run(async {
        let h = Harness::start(11).await;
        h.create(&cloneset("envy", 4)).await;
        h.wait_ready("envy", 4, None, 120).await;
        let before: Vec<String> = h.pods("envy").await.iter().map(uid).collect();
        h.track_unavailable();
        // Pod env is immutable in Kubernetes: this cannot go in place, Kruise recreates the pods.
        h.json_patch("envy", json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "v2.0"}]))
            .await;
        h.wait_for("all pods recreated with the new env", 600, || async {
            let pods = h.pods("envy").await;
            pods.len() == 4
                && pods.iter().all(|p| is_ready(p) && !before.contains(&uid(p)))
                && pods.iter().all(|p| {
                    p.spec.as_ref().unwrap().containers[0].env.as_ref().unwrap()[0]
                        .value
                        .as_deref()
                        == Some("v2.0")
                })
        })
        .await;
        assert!(
            h.worst_unavailable() <= 1,
            "maxUnavailable 1, saw {}",
            h.worst_unavailable()
        );
    });
}

#[test]
fn partition_keeps_old_pods_and_updates_the_canaries_in_place() {
    run(async {
        let h = Harness::start(12).await;
        let mut cs = cloneset("canary", 10);
        cs.spec.update_strategy.as_mut().unwrap().partition =
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8));
        h.create(&cs).await;
        h.wait_ready("canary", 10, None, 120).await;
        let before: Vec<String> = h.pods("canary").await.iter().map(uid).collect();
        h.set_image("canary", "nginx:1.21.0").await;
        h.wait_for("2 pods on the new image and status settled", 600, || async {
            let pods = h.pods("canary").await;
            let updated = pods
                .iter()
                .filter(|p| insitu_core::explain::podtable::image(p) == "nginx:1.21.0" && is_ready(p))
                .count();
            let st = h.status("canary").await;
            updated == 2 && st.updated_ready_replicas == 2
        })
        .await;
        h.sleep(120).await;
        let pods = h.pods("canary").await;
        assert_eq!(
            pods.iter()
                .filter(|p| insitu_core::explain::podtable::image(p) == "nginx:1.21.0")
                .count(),
            2,
            "exactly 2 canaries"
        );
        assert!(
            pods.iter().all(|p| before.contains(&uid(p))),
            "all updates in place"
        );
        let st = h.status("canary").await;
        assert_eq!(st.updated_replicas, 2);
        assert_eq!(st.expected_updated_replicas, 2);
        // Lower the partition: the rest follow, in place.
        h.merge_patch("canary", json!({"spec": {"updateStrategy": {"partition": 0}}}))
            .await;
        h.wait_ready("canary", 10, Some("nginx:1.21.0"), 900).await;
        assert!(h.pods("canary").await.iter().all(|p| before.contains(&uid(p))));
        h.assert_nothing_pruned();
    });
}

#[test]
fn pause_stops_the_rollout_and_resume_completes_it() {
    run(async {
        let h = Harness::start(13).await;
        h.create(&cloneset("pausy", 5)).await;
        h.wait_ready("pausy", 5, None, 120).await;
        h.set_image("pausy", "nginx:1.21.0").await;
        h.wait_for("first pod on the new image", 300, || async {
            h.pods("pausy")
                .await
                .iter()
                .any(|p| insitu_core::explain::podtable::image(p) == "nginx:1.21.0")
        })
        .await;
        h.merge_patch("pausy", json!({"spec": {"updateStrategy": {"paused": true}}}))
            .await;
        h.sleep(30).await;
        let updated_at_pause = h
            .pods("pausy")
            .await
            .iter()
            .filter(|p| insitu_core::explain::podtable::image(p) == "nginx:1.21.0")
            .count();
        h.sleep(300).await;
        let updated_later = h
            .pods("pausy")
            .await
            .iter()
            .filter(|p| insitu_core::explain::podtable::image(p) == "nginx:1.21.0")
            .count();
        assert_eq!(updated_at_pause, updated_later, "no pod updated while paused");
        assert!(updated_later < 5);
        h.merge_patch("pausy", json!({"spec": {"updateStrategy": {"paused": false}}}))
            .await;
        h.wait_ready("pausy", 5, Some("nginx:1.21.0"), 900).await;
    });
}

#[test]
fn rollback_to_the_previous_template_reuses_the_revision_in_place() {
    run(async {
        let h = Harness::start(14).await;
        h.create(&cloneset("rolly", 3)).await;
        h.wait_ready("rolly", 3, None, 120).await;
        let first_rev = h.status("rolly").await.update_revision;
        let uids: Vec<String> = h.pods("rolly").await.iter().map(uid).collect();
        h.set_image("rolly", "nginx:1.21.0").await;
        h.wait_ready("rolly", 3, Some("nginx:1.21.0"), 600).await;
        h.set_image("rolly", "nginx:1.19.0").await;
        h.wait_ready("rolly", 3, Some("nginx:1.19.0"), 600).await;
        h.wait_for("status back on the first revision", 60, || async {
            let st = h.status("rolly").await;
            st.update_revision == first_rev && st.updated_ready_replicas == 3
        })
        .await;
        let pods = h.pods("rolly").await;
        assert!(pods.iter().all(|p| uids.contains(&uid(p))), "rollback in place");
        assert!(
            pods.iter()
                .all(|p| insitu_core::explain::podtable::restarts(p) == 2)
        );
    });
}

#[test]
fn max_unavailable_percent_bounds_each_batch() {
    run(async {
        let h = Harness::start(15).await;
        let mut cs = cloneset("batchy", 20);
        cs.spec.update_strategy.as_mut().unwrap().max_unavailable = Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("20%".into()),
        );
        h.create(&cs).await;
        h.wait_ready("batchy", 20, None, 180).await;
        h.track_unavailable();
        h.set_image("batchy", "nginx:1.21.0").await;
        h.wait_ready("batchy", 20, Some("nginx:1.21.0"), 1200).await;
        let worst = h.worst_unavailable();
        assert!(worst <= 4, "20% of 20 = 4 unavailable at most, saw {worst}");
        assert!(worst >= 2, "batches should run in parallel, saw {worst}");
    });
}

#[test]
fn scale_up_mid_rollout_and_scale_down() {
    run(async {
        let h = Harness::start(16).await;
        h.create(&cloneset("scaly", 3)).await;
        h.wait_ready("scaly", 3, None, 120).await;
        h.set_image("scaly", "nginx:1.21.0").await;
        h.sleep(15).await;
        h.merge_patch("scaly", json!({"spec": {"replicas": 6}})).await;
        h.wait_ready("scaly", 6, Some("nginx:1.21.0"), 900).await;
        h.merge_patch("scaly", json!({"spec": {"replicas": 2}})).await;
        h.wait_ready("scaly", 2, Some("nginx:1.21.0"), 300).await;
        // The status follows the last deletions the controller observes: the round after them writes it, which
        // on a loaded machine lands after the pod list already shows 2.
        h.wait_for("status (2, 2, 2)", 60, || async {
            let st = h.status("scaly").await;
            (st.replicas, st.ready_replicas, st.updated_replicas) == (2, 2, 2)
        })
        .await;
    });
}

/// Controller writes to pods (`pods` + `pods/status`, any verb) so far, by `verb resource`.
fn pod_writes(h: &Harness) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for verb in ["create", "update", "patch", "delete"] {
        for resource in ["pods", "pods/status"] {
            let labels = vec![("verb", verb.to_string()), ("resource", resource.to_string())];
            let n = h.metrics.api_writes.get_or_create(&labels).get();
            if n > 0 {
                out.insert(format!("{verb} {resource}"), n);
            }
        }
    }
    out
}

#[test]
fn in_place_update_costs_at_most_three_pod_writes_per_pod() {
    // The brief's budget: ≤ 3 API writes per in-place-updated pod (InPlaceUpdateReady=False, the spec
    // update, then InPlaceUpdateReady=True together with the lifecycle label).
    run(async {
        let h = Harness::start(17).await;
        let mut cs = cloneset("frugal", 6);
        // No grace period: with one, Kruise writes the spec twice (grace annotation first, images after).
        cs.spec.update_strategy.as_mut().unwrap().in_place_update_strategy = None;
        h.create(&cs).await;
        h.wait_ready("frugal", 6, None, 120).await;
        h.sleep(30).await;
        let before = pod_writes(&h);
        let uids: Vec<String> = h.pods("frugal").await.iter().map(uid).collect();
        h.set_image("frugal", "nginx:1.21.0").await;
        h.wait_ready("frugal", 6, Some("nginx:1.21.0"), 900).await;
        h.sleep(30).await;
        assert!(
            h.pods("frugal").await.iter().all(|p| uids.contains(&uid(p))),
            "in place"
        );
        let after = pod_writes(&h);
        let spent: std::collections::BTreeMap<&String, u64> = after
            .iter()
            .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        let total: u64 = spent.values().sum();
        assert!(total <= 3 * 6, "{total} pod writes for 6 pods: {spent:?}");
    });
}
