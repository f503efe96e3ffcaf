//! Sim-backed in-place resize (Kruise InPlaceWorkloadVerticalScaling) on virtual time: NotRequired keeps the
//! pod serving, RestartContainer restarts it, a QoS change recreates, a resize beyond the node is refused,
//! a deferred one waits; each with `insitu_resize_total{outcome}` as /metrics shows it.

mod common;

use common::*;
use insitu_api::CloneSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

/// 2 Burstable replicas (requests 500m/256Mi, limits 1/512Mi), no grace period, cpu resize policy `policy`.
fn sized(name: &str, policy: &str) -> CloneSet {
    let mut cs = cloneset(name, 2);
    let mut v = serde_json::to_value(&cs).unwrap();
    v["spec"]["updateStrategy"]["inPlaceUpdateStrategy"] = json!({});
    v["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"}
    });
    v["spec"]["template"]["spec"]["containers"][0]["resizePolicy"] =
        json!([{"resourceName": "cpu", "restartPolicy": policy}]);
    cs = serde_json::from_value(v).unwrap();
    cs
}

fn cpu_request(p: &Pod) -> (String, String) {
    let spec = p.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    let status = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.first())
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    (spec, status)
}

fn lifecycle(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(insitu_api::keys::LIFECYCLE_STATE_LABEL))
        .cloned()
        .unwrap_or_default()
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.first())
        .map_or(0, |s| s.restart_count)
}

/// `insitu_resize_total{outcome="…"}` from the /metrics text (0 when absent).
fn resizes(h: &Harness, outcome: &str) -> u64 {
    let prefix = format!("insitu_resize_total{{outcome=\"{outcome}\"}} ");
    h.metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0)
}

/// (requested, failed, deferred, infeasible, completed).
fn resize_counts(h: &Harness) -> [u64; 5] {
    ["requested", "failed", "deferred", "infeasible", "completed"].map(|o| resizes(h, o))
}

async fn set_cpu_request(h: &Harness, name: &str, cpu: &str) {
    h.json_patch(
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": cpu}]),
    )
    .await;
}

async fn resized(h: &Harness, name: &str, cpu: &str, n: usize) -> bool {
    let pods = h.pods(name).await;
    let st = h.status(name).await;
    pods.len() == n
        && pods.iter().all(|p| {
            cpu_request(p) == (cpu.to_string(), cpu.to_string()) && is_ready(p) && lifecycle(p) == "Normal"
        })
        && st.updated_ready_replicas == i32::try_from(n).unwrap()
}

#[test]
fn cpu_resize_with_not_required_keeps_pods_serving_in_place() {
    run(async {
        let h = Harness::start(31).await;
        h.create(&sized("vpa", "NotRequired")).await;
        h.wait_ready("vpa", 2, None, 120).await;
        let before: Vec<String> = h.pods("vpa").await.iter().map(uid).collect();
        h.track_unavailable();
        set_cpu_request(&h, "vpa", "700m").await;
        h.wait_for("both pods resized to 700m in place", 300, || {
            resized(&h, "vpa", "700m", 2)
        })
        .await;
        let pods = h.pods("vpa").await;
        assert!(pods.iter().all(|p| before.contains(&uid(p))), "same UIDs");
        assert!(pods.iter().all(|p| restarts(p) == 0), "no container restarted");
        assert_eq!(
            h.worst_unavailable(),
            0,
            "a NotRequired resize never takes a pod out of service"
        );
        let ex = h.explain("vpa").await;
        assert_eq!(ex.matches("stage None").count(), 2, "{ex}");
        assert_eq!(ex.matches("next update: up to date").count(), 2, "{ex}");
        // Completion counted where it is detected: InPlaceUpdateReady never went False, so never back.
        assert_eq!(resize_counts(&h), [2, 0, 0, 0, 2], "requested … completed");
        for p in &pods {
            let state: serde_json::Value = serde_json::from_str(
                &p.metadata.annotations.as_ref().unwrap()[insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION],
            )
            .unwrap();
            assert_eq!(state["updateResources"], json!(true), "{state}");
            assert!(state.get("updateImages").is_none(), "{state}");
            let cs = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
            assert_eq!(
                cs.allocated_resources.as_ref().unwrap()["cpu"].0,
                "700m",
                "allocatedResources follows the accepted resize"
            );
            // The kubelet's conditions are gone once the resize is applied.
            let conds = p.status.as_ref().unwrap().conditions.as_ref().unwrap();
            assert!(
                conds.iter().all(|c| !c.type_.starts_with("PodResize")),
                "{conds:?}"
            );
        }
        h.assert_nothing_pruned();
    });
}

#[test]
fn restart_container_policy_restarts_the_container_in_place() {
    run(async {
        let h = Harness::start(32).await;
        h.create(&sized("vpar", "RestartContainer")).await;
        h.wait_ready("vpar", 2, None, 120).await;
        let before: Vec<String> = h.pods("vpar").await.iter().map(uid).collect();
        set_cpu_request(&h, "vpar", "750m").await;
        h.wait_for("both pods resized to 750m", 300, || {
            resized(&h, "vpar", "750m", 2)
        })
        .await;
        let pods = h.pods("vpar").await;
        assert!(pods.iter().all(|p| before.contains(&uid(p))), "same UIDs");
        assert!(
            pods.iter().all(|p| restarts(p) == 1),
            "RestartContainer restarts once: {:?}",
            pods.iter().map(restarts).collect::<Vec<_>>()
        );
        assert_eq!(resize_counts(&h), [2, 0, 0, 0, 2], "requested … completed");
        h.assert_nothing_pruned();
    });
}

#[test]
fn qos_class_change_recreates_the_pods() {
    run(async {
        let h = Harness::start(33).await;
        h.create(&sized("qos", "NotRequired")).await;
        h.wait_ready("qos", 2, None, 120).await;
        let before: Vec<String> = h.pods("qos").await.iter().map(uid).collect();
        // requests == limits: Burstable → Guaranteed, which a resize may not do.
        h.json_patch(
            "qos",
            json!([
                {"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "1"},
                {"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/memory", "value": "512Mi"}
            ]),
        )
        .await;
        h.wait_for("both pods recreated as Guaranteed", 600, || async {
            let pods = h.pods("qos").await;
            pods.len() == 2
                && pods.iter().all(|p| {
                    !before.contains(&uid(p))
                        && is_ready(p)
                        && p.status.as_ref().and_then(|s| s.qos_class.as_deref()) == Some("Guaranteed")
                })
        })
        .await;
        assert_eq!(resize_counts(&h), [0; 5], "a recreate is no resize");
    });
}

#[test]
fn resize_beyond_the_node_is_refused_and_retried_then_a_fix_goes_in_place() {
    run(async {
        let h = Harness::start(34).await;
        h.create(&sized("huge", "NotRequired")).await;
        h.wait_ready("huge", 2, None, 120).await;
        let before: Vec<String> = h.pods("huge").await.iter().map(uid).collect();
        // Sim nodes have 32 cpus: kube-apiserver's PodResizeValidator refuses the resize (Forbidden). As in
        // Kruise, the in-place start fails (FailedUpdatePodInPlace) and is retried; the pod keeps serving.
        set_cpu_request(&h, "huge", "100").await;
        let events: Api<Event> = Api::namespaced(h.client.clone(), "default");
        h.wait_for(
            "a FailedUpdatePodInPlace event naming the node's allocatable",
            120,
            || async {
                events
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .iter()
                    .any(|e| {
                        e.reason.as_deref() == Some("FailedUpdatePodInPlace")
                            && e.message
                                .as_deref()
                                .is_some_and(|m| m.contains("node didn't have enough allocatable resources"))
                    })
            },
        )
        .await;
        h.sleep(30).await;
        let pods = h.pods("huge").await;
        assert!(pods.iter().all(|p| is_ready(p) && before.contains(&uid(p))));
        assert!(pods.iter().all(|p| cpu_request(p).0 == "500m"), "nothing resized");
        let [requested, failed, ..] = resize_counts(&h);
        assert_eq!(requested, 0);
        assert!(failed >= 2, "each refused attempt counts: {failed}");
        set_cpu_request(&h, "huge", "2").await;
        h.wait_for("both pods resized to 2 in place", 300, || {
            resized(&h, "huge", "2", 2)
        })
        .await;
        assert!(h.pods("huge").await.iter().all(|p| before.contains(&uid(p))));
        let [requested, _, deferred, infeasible, completed] = resize_counts(&h);
        assert_eq!((requested, deferred, infeasible, completed), (2, 0, 0, 2));
    });
}

#[test]
fn deferred_resize_waits_like_kruise_until_it_fits() {
    run(async {
        let h = Harness::start_with(insitu_sim::cluster::SimConfig {
            nodes: 1,
            seed: 35,
            capacity: insitu_sim::kubelet::NodeCapacity {
                cpu: "4".into(),
                memory: "16Gi".into(),
                pods: 110,
            },
            ..Default::default()
        })
        .await;
        let mut cs = sized("tight", "NotRequired");
        let mut v = serde_json::to_value(&cs).unwrap();
        v["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({
            "requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "4", "memory": "512Mi"}
        });
        cs = serde_json::from_value(v).unwrap();
        h.create(&cs).await;
        h.wait_ready("tight", 2, None, 120).await;
        // 3 + 3 cpus do not fit a 4-cpu node: the apiserver admits each (3 ≤ 4), the kubelet defers one.
        set_cpu_request(&h, "tight", "3").await;
        h.wait_for(
            "one pod resized, the other deferred by its kubelet",
            120,
            || async {
                let pods = h.pods("tight").await;
                let done = pods
                    .iter()
                    .filter(|p| cpu_request(p) == ("3".into(), "3".into()))
                    .count();
                let deferred = pods
                    .iter()
                    .filter(|p| {
                        p.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter().any(|c| {
                                    c.type_ == "PodResizePending" && c.reason.as_deref() == Some("Deferred")
                                })
                            })
                    })
                    .count();
                done == 1 && deferred == 1
            },
        )
        .await;
        h.sleep(20).await;
        let pods = h.pods("tight").await;
        let waiting: Vec<&Pod> = pods.iter().filter(|p| cpu_request(p).1 == "1").collect();
        assert_eq!(
            waiting.len(),
            1,
            "Kruise waits for the kubelet: nothing is recreated"
        );
        assert_eq!(
            lifecycle(waiting[0]),
            "Updating",
            "the deferred pod stays Updating"
        );
        assert!(is_ready(waiting[0]), "and keeps serving");
        let ex = h.explain("tight").await;
        assert!(
            ex.contains("stage Updating") && ex.contains("waits for: the resize: PodResizePending Deferred"),
            "{ex}"
        );
        // 20 s of reconciles saw the held resize: counted once.
        assert_eq!(resize_counts(&h), [2, 0, 1, 0, 1], "requested … completed");
        // The deferred pod is `Updating`, so unavailable to Kruise's arithmetic: with maxUnavailable 1 a
        // new template waits for it (Kruise limitUpdateIndexes), the ready pod is not touched.
        set_cpu_request(&h, "tight", "2").await;
        h.sleep(30).await;
        let st = h.status("tight").await;
        assert_eq!((st.available_replicas, st.updated_replicas), (1, 0), "{st:?}");
        // Room for both: the resized pod shrinks, which frees the node, and the deferred one fits.
        h.merge_patch(
            "tight",
            json!({"spec": {"updateStrategy": {"maxUnavailable": 2}}}),
        )
        .await;
        h.wait_for("both pods at 2 cpus", 300, || resized(&h, "tight", "2", 2))
            .await;
        // The 3-cpu pod shrinks (1 resize), the deferred one is updated to the newer revision in place (its
        // own new resize, which may be deferred again until the other shrinks); the held 1 → 3 never
        // completes.
        let [requested, failed, deferred, infeasible, completed] = resize_counts(&h);
        assert_eq!((requested, failed, infeasible, completed), (4, 0, 0, 3));
        assert!((1..=2).contains(&deferred), "{deferred}");
    });
}
