//! The plan's side steps Kruise runs outside scale and update: the container-launch-priority barrier
//! (`pkg/controller/containerlaunchpriority`) and image pre-download (`cloneset_predownload_image.go`).

mod common;

use common::*;
use insitu_core::Action;
use insitu_core::launch_priority::{COMPLETED_ANNOTATION, PRIORITY_ENV};
use insitu_core::predownload::CREATED_LABEL;
use serde_json::json;

/// A CloneSet whose `main` container starts after `sidecar` (priority 10 before 0).
fn prioritised(replicas: i32) -> World {
    let mut cs = cloneset(
        replicas,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 1}),
    );
    let spec = cs.spec.template.spec.as_mut().unwrap();
    spec.containers = serde_json::from_value(json!([
        {"name": "sidecar", "image": "envoy:1", "env": [{"name": PRIORITY_ENV, "value": "10"}]},
        {"name": "main", "image": "nginx:1"},
    ]))
    .unwrap();
    World::new(cs)
}

fn barriers(plan: &insitu_core::Plan) -> Vec<(String, String, bool)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::LaunchBarrier {
                pod, key, complete, ..
            } => Some((pod.clone(), key.clone(), *complete)),
            _ => None,
        })
        .collect()
}

#[test]
fn launching_pods_get_their_barrier_key_in_the_plan() {
    let mut w = prioritised(2);
    let created = w.plan();
    assert!(created.launch_priority, "the template asks for launch priority");
    w.apply(&created);
    // The pods exist, no container is ready: the highest pending priority is released first.
    let plan = w.plan();
    let mut steps = barriers(&plan);
    steps.sort();
    let names = w.names();
    assert_eq!(
        steps,
        names
            .iter()
            .map(|n| (n.clone(), "p_10".to_string(), false))
            .collect::<Vec<_>>()
    );
    let Some(Action::LaunchBarrier { barrier, .. }) = plan
        .actions
        .iter()
        .find(|a| matches!(a, Action::LaunchBarrier { .. }))
    else {
        unreachable!("a barrier step was just seen")
    };
    assert!(names.iter().any(|n| *barrier == format!("{n}-barrier")));
    assert!(
        insitu_core::explain::text(&plan, &[]).contains("launch priority: key p_10 in ConfigMap"),
        "insitu explain shows the barrier step"
    );
    // A completed pod needs nothing more.
    let first = names[0].clone();
    w.pod_mut(&first)
        .unwrap()
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(COMPLETED_ANNOTATION.into(), "true".into());
    assert!(barriers(&w.plan()).iter().all(|(p, _, _)| *p != first));
}

#[test]
fn no_priority_no_barrier_step() {
    let mut w = World::new(cloneset(2, "nginx:1", json!({})));
    let plan = w.plan();
    w.apply(&plan);
    let plan = w.plan();
    assert!(!plan.launch_priority);
    assert!(barriers(&plan).is_empty());
}

fn predownload_steps(plan: &insitu_core::Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateImagePullJob { name, image, .. } => Some(format!("create {name} {image}")),
            Action::LabelRevision { name, label } => Some(format!("label {name} {label}")),
            Action::DeleteImagePullJob { name } => Some(format!("delete {name}")),
            _ => None,
        })
        .collect()
}

#[test]
fn pre_download_is_planned_in_the_round_that_creates_the_update_revision() {
    let mut w = World::new(cloneset(
        5,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 1}),
    ));
    w.converge(20);
    w.cs.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    let mut snap = w.snapshot();
    // Off (no ImagePullJobs known): no step.
    assert!(predownload_steps(&insitu_core::plan(&snap)).is_empty());
    snap.image_pull_jobs = Some(vec![]);
    let plan = insitu_core::plan(&snap);
    let update = plan.update_revision.clone();
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a, Action::CreateRevision { revision } if revision.metadata.name.as_deref() == Some(update.as_str()))),
        "the update revision is created this round"
    );
    assert_eq!(
        predownload_steps(&plan),
        vec![
            format!("create {update}-web nginx:2"),
            format!("label {update} {CREATED_LABEL}"),
        ]
    );
    // Revisions agree again: the owned jobs go.
    let mut settled = w.snapshot();
    settled.cloneset = std::sync::Arc::new(cloneset(
        5,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 1}),
    ));
    settled.image_pull_jobs = Some(vec!["old-web".into()]);
    assert_eq!(
        predownload_steps(&insitu_core::plan(&settled)),
        vec!["delete old-web".to_string()]
    );
}
