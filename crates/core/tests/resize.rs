//! The resize outcomes a plan reports for `insitu_resize_total{outcome}`: completion is what Kruise's
//! `IsUpdateCompleted` checks (every container status reports the spec's cpu/memory), seen by Refresh
//! whether or not the update marked the pod not-ready; a held resize is the kubelet's `PodResizePending`.

mod common;

use common::*;
use insitu_core::{ResizeOutcome, ResizeSeen};
use k8s_openapi::api::core::v1::{PodCondition, ResourceRequirements};
use serde_json::json;

/// One Burstable replica (requests 500m/256Mi, limits 1/512Mi) updated in place, converged.
fn world() -> World {
    let mut cs = cloneset(1, "nginx:1.19.0", json!({"type": "InPlaceIfPossible"}));
    let mut v = serde_json::to_value(&cs).unwrap();
    v["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"}
    });
    cs = serde_json::from_value(v).unwrap();
    let mut w = World::new(cs);
    w.converge(20);
    w
}

fn set_cpu(w: &mut World, cpu: &str) {
    let mut v = serde_json::to_value(&w.cs).unwrap();
    v["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(cpu);
    v["metadata"]["generation"] = json!(2);
    w.cs = serde_json::from_value(v).unwrap();
}

fn only_pod(w: &World) -> String {
    assert_eq!(w.pods.len(), 1);
    w.pods[0].metadata.name.clone().unwrap()
}

/// The kubelet applied the resize: the container status reports the spec's resources.
fn report_spec_resources(w: &mut World, name: &str) {
    let p = w.pod_mut(name).unwrap();
    let spec: ResourceRequirements = p.spec.as_ref().unwrap().containers[0].resources.clone().unwrap();
    let st = p.status.as_mut().unwrap();
    st.container_statuses.as_mut().unwrap()[0].resources = Some(spec);
    if let Some(c) = st.conditions.as_mut() {
        c.retain(|c| c.type_ != "PodResizePending");
    }
}

fn pending(w: &mut World, name: &str, reason: &str) {
    let st = w.pod_mut(name).unwrap().status.as_mut().unwrap();
    st.conditions.get_or_insert_with(Vec::new).push(PodCondition {
        type_: "PodResizePending".into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some("Node didn't have enough capacity: cpu".into()),
        ..Default::default()
    });
}

/// Plans (applying) until the round that starts the in-place update of `pod`, and returns that plan.
fn start_update(w: &mut World, pod: &str) -> insitu_core::Plan {
    for _ in 0..5 {
        let plan = w.plan();
        if verbs(&plan).contains(&format!("UpdatePod {pod} StartInPlaceUpdate")) {
            return plan;
        }
        assert!(plan.resizes.is_empty(), "{:?}", plan.resizes);
        w.apply(&plan);
    }
    panic!("no in-place update of {pod} started: {:?}", verbs(&w.plan()));
}

fn outcomes(seen: &[ResizeSeen]) -> Vec<ResizeOutcome> {
    seen.iter().map(|r| r.outcome).collect()
}

#[test]
fn a_not_required_resize_completes_without_a_readiness_write() {
    let mut w = world();
    let pod = only_pod(&w);
    report_spec_resources(&mut w, &pod);
    set_cpu(&mut w, "700m");
    let start = start_update(&mut w, &pod);
    assert!(
        !verbs(&start)
            .iter()
            .any(|v| v.starts_with("SetInPlaceUpdateReady")),
        "NotRequired: no not-ready marking"
    );
    assert!(start.resizes.is_empty(), "nothing observed yet");
    w.apply(&start);
    // Not applied yet: the update waits, no outcome.
    let waiting = w.plan();
    assert!(waiting.resizes.is_empty(), "{:?}", waiting.resizes);
    assert!(!verbs(&waiting).contains(&format!("PatchPodMetadata {pod} Lifecycle")));
    // Applied: InPlaceUpdateReady was never False, so completion is the lifecycle Updating → Normal move,
    // and that is where the plan reports it.
    report_spec_resources(&mut w, &pod);
    let done = w.plan();
    assert_eq!(outcomes(&done.resizes), [ResizeOutcome::Completed]);
    assert_eq!(done.resizes[0].pod, pod);
    assert!(
        done.resizes[0].update.starts_with("web-"),
        "{:?}",
        done.resizes[0]
    );
    assert!(
        verbs(&done).contains(&format!("PatchPodMetadata {pod} Lifecycle")),
        "{:?}",
        verbs(&done)
    );
    w.apply(&done);
    assert!(w.plan().resizes.is_empty(), "a settled pod reports nothing");
}

#[test]
fn deferred_and_infeasible_are_reported_while_held_then_completion() {
    let mut w = world();
    let pod = only_pod(&w);
    report_spec_resources(&mut w, &pod);
    set_cpu(&mut w, "900m");
    let start = start_update(&mut w, &pod);
    w.apply(&start);
    pending(&mut w, &pod, "Deferred");
    let held = w.plan();
    assert_eq!(outcomes(&held.resizes), [ResizeOutcome::Deferred]);
    assert!(
        held.explanation
            .iter()
            .any(|l| l.contains("resize pending on its node (Deferred")),
        "{:?}",
        held.explanation
    );
    // Each round sees it again with the same update key (the controller counts it once).
    let again = w.plan();
    assert_eq!(again.resizes, held.resizes);
    let st = w.pod_mut(&pod).unwrap().status.as_mut().unwrap();
    st.conditions
        .as_mut()
        .unwrap()
        .retain(|c| c.type_ != "PodResizePending");
    pending(&mut w, &pod, "Infeasible");
    let infeasible = w.plan();
    assert_eq!(outcomes(&infeasible.resizes), [ResizeOutcome::Infeasible]);
    assert_eq!(infeasible.resizes[0].update, held.resizes[0].update);
    report_spec_resources(&mut w, &pod);
    assert_eq!(outcomes(&w.plan().resizes), [ResizeOutcome::Completed]);
}

#[test]
fn an_image_only_update_reports_no_resize() {
    let mut w = world();
    let pod = only_pod(&w);
    let mut v = serde_json::to_value(&w.cs).unwrap();
    v["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.20.0");
    w.cs = serde_json::from_value(v).unwrap();
    let mut settled = false;
    for _ in 0..20 {
        let plan = w.plan();
        assert!(plan.resizes.is_empty(), "{:?}", plan.resizes);
        if plan.is_empty() {
            settled = true;
            break;
        }
        w.apply(&plan);
        w.kubelet();
    }
    assert!(settled, "the image update settles");
    assert_eq!(w.image(&pod), "nginx:1.20.0");
    assert_eq!(w.labels(&pod)["lifecycle.apps.kruise.io/state"], "Normal");
}
