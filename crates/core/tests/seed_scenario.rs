//! The seed scenario walked round by round: 3 pods, image change, grace 10s, maxUnavailable 1.

mod common;

use common::*;
use insitu_api::inplace::{InPlaceUpdateState, UpdateSpec};
use insitu_api::keys;
use insitu_core::{Action, UpdateReason};
use serde_json::json;

fn strategy() -> serde_json::Value {
    json!({"type": "InPlaceIfPossible", "maxUnavailable": 1, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}})
}

fn ann(w: &World, pod: &str, key: &str) -> Option<String> {
    w.pod(pod)
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key).cloned())
}

fn pod_actions(plan: &insitu_core::Plan) -> Vec<String> {
    verbs(plan)
        .into_iter()
        .filter(|v| !v.contains("Revision"))
        .collect()
}

#[test]
fn seed_scenario_step_by_step() {
    let mut w = World::new(cloneset(3, "nginx:1.20.0", strategy()));

    // Round 1: a revision and three pods at it.
    let p = w.plan();
    let v = verbs(&p);
    assert!(v[0].starts_with("CreateRevision web-"), "{v:?}");
    assert_eq!(
        v.iter().filter(|a| a.starts_with("CreatePod")).count(),
        3,
        "{v:?}"
    );
    let rev1 = p.update_revision.clone();
    for a in &p.actions {
        if let Action::CreatePod { pod, .. } = a {
            let pod = pod.unpack();
            let l = pod.metadata.labels.as_ref().unwrap();
            assert_eq!(l[keys::CONTROLLER_REVISION_HASH_LABEL], rev1);
            assert_eq!(l[keys::LIFECYCLE_STATE_LABEL], "PreparingNormal");
            assert_eq!(l[keys::POD_TEMPLATE_HASH_LABEL], rev1.rsplit('-').next().unwrap());
            let id = &l[keys::INSTANCE_ID_LABEL];
            assert_eq!(pod.metadata.name.as_deref(), Some(format!("web-{id}").as_str()));
            assert_eq!(id.len(), 5);
            assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
            let gates = pod.spec.as_ref().unwrap().readiness_gates.as_ref().unwrap();
            assert_eq!(gates[0].condition_type, keys::INPLACE_UPDATE_READY);
            let o = &pod.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (o.kind.as_str(), o.controller, o.block_owner_deletion),
                ("CloneSet", Some(true), Some(true))
            );
        }
    }
    assert_eq!(p, w.plan(), "deterministic");
    w.apply(&p);
    w.kubelet();

    // Round 2: pods are scheduled → Normal, gate → True.
    let p = w.plan();
    let v = pod_actions(&p);
    assert_eq!(
        v.iter()
            .filter(|a| a.starts_with("SetInPlaceUpdateReady") && a.ends_with("true"))
            .count(),
        3
    );
    assert_eq!(v.iter().filter(|a| a.contains("Lifecycle")).count(), 3);
    w.apply(&p);
    w.kubelet();
    assert_eq!(w.converge(5), 1);
    let st = w.cs.status.clone().unwrap();
    assert_eq!(
        (
            st.replicas,
            st.ready_replicas,
            st.available_replicas,
            st.updated_replicas
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(st.current_revision, rev1);

    // Image change.
    w.cs.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.21.0".into());
    w.cs.metadata.generation = Some(2);
    w.advance(1);
    let p = w.plan();
    let rev2 = p.update_revision.clone();
    assert_ne!(rev1, rev2);
    let v = verbs(&p);
    assert!(v[0].starts_with("CreateRevision"));
    let starts: Vec<&String> = v.iter().filter(|a| a.contains("StartInPlaceUpdate")).collect();
    assert_eq!(starts.len(), 1, "exactly one pod starts in place: {v:?}");
    let first = starts[0].split(' ').nth(1).unwrap().to_string();
    let i = v
        .iter()
        .position(|a| a == &format!("SetInPlaceUpdateReady {first} false"))
        .unwrap();
    assert_eq!(v[i + 1], format!("UpdatePod {first} StartInPlaceUpdate"));
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(10)));
    assert_eq!(p.budget.update_num, 3);
    assert_eq!(p.budget.update_max_unavailable, 1);
    w.apply(&p);
    w.kubelet();
    assert_eq!(w.image(&first), "nginx:1.20.0", "image untouched during grace");
    assert_eq!(w.labels(&first)[keys::CONTROLLER_REVISION_HASH_LABEL], rev2);
    assert_eq!(w.labels(&first)[keys::LIFECYCLE_STATE_LABEL], "Updating");
    let grace: UpdateSpec =
        serde_json::from_str(&ann(&w, &first, keys::INPLACE_UPDATE_GRACE_ANNOTATION).unwrap()).unwrap();
    assert_eq!(grace.grace_seconds, 10);
    assert_eq!(grace.container_images["web"], "nginx:1.21.0");
    let state_json = ann(&w, &first, keys::INPLACE_UPDATE_STATE_ANNOTATION).unwrap();
    assert!(
        state_json.contains("\"lastContainerStatuses\":null"),
        "{state_json}"
    );

    // During grace: nothing else moves.
    w.advance(4);
    let p = w.plan();
    assert!(pod_actions(&p).is_empty(), "{:?}", verbs(&p));
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(6)));
    w.apply(&p);

    // After grace: images patched, state gains lastContainerStatuses.
    w.advance(6);
    let p = w.plan();
    assert_eq!(
        pod_actions(&p),
        vec![format!("UpdatePod {first} FinishGracePeriod")]
    );
    if let Action::UpdatePod { mutation, reason, .. } = &p.actions[0] {
        assert_eq!(*reason, UpdateReason::FinishGracePeriod);
        assert_eq!(mutation.container_images["web"], "nginx:1.21.0");
        assert_eq!(mutation.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION], None);
    }
    w.apply(&p);
    assert_eq!(w.image(&first), "nginx:1.21.0");
    assert!(ann(&w, &first, keys::INPLACE_UPDATE_GRACE_ANNOTATION).is_none());
    let st: InPlaceUpdateState =
        serde_json::from_str(&ann(&w, &first, keys::INPLACE_UPDATE_STATE_ANNOTATION).unwrap()).unwrap();
    assert_eq!(
        st.last_container_statuses.unwrap()["web"].image_id,
        "id:nginx:1.20.0"
    );
    assert_eq!(st.container_batches_record.len(), 1);

    // Before the kubelet reports the new imageID: not complete, nothing to do.
    let p = w.plan();
    assert!(pod_actions(&p).is_empty(), "{:?}", verbs(&p));

    // Kubelet restarts the container → ready True + lifecycle Normal.
    w.kubelet();
    let p = w.plan();
    let v = pod_actions(&p);
    assert_eq!(
        v,
        vec![
            format!("SetInPlaceUpdateReady {first} true"),
            format!("PatchPodMetadata {first} Lifecycle")
        ]
    );
    w.apply(&p);
    w.kubelet();
    assert_eq!(w.labels(&first)[keys::LIFECYCLE_STATE_LABEL], "Normal");

    // Next pod starts.
    let p = w.plan();
    let v = pod_actions(&p);
    assert_eq!(
        v.iter().filter(|a| a.contains("StartInPlaceUpdate")).count(),
        1,
        "{v:?}"
    );
    assert!(!v.iter().any(|a| a.contains(&first)));

    // And the rollout finishes with the same pods (same names, same uids), all in place.
    let uids: Vec<_> = w.pods.iter().map(|p| p.metadata.uid.clone()).collect();
    w.converge(40);
    assert_eq!(
        uids,
        w.pods.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>()
    );
    let st = w.cs.status.clone().unwrap();
    assert_eq!(
        (st.updated_replicas, st.updated_ready_replicas, st.ready_replicas),
        (3, 3, 3)
    );
    assert_eq!(st.current_revision, rev2);
    for n in w.names() {
        assert_eq!(w.image(&n), "nginx:1.21.0");
    }
}

#[test]
fn env_change_recreates() {
    let mut w = World::new(cloneset(2, "nginx:1.20.0", strategy()));
    w.converge(10);
    let c = &mut w.cs.spec.template.spec.as_mut().unwrap().containers[0];
    c.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
        name: "A".into(),
        value: Some("1".into()),
        value_from: None,
    }]);
    let p = w.plan();
    let v = pod_actions(&p);
    assert_eq!(v.iter().filter(|a| a.contains("Recreate")).count(), 1, "{v:?}");
    let before = w.names();
    w.converge(40);
    assert_ne!(before, w.names(), "pods were recreated");
    assert_eq!(w.pods.len(), 2);
}

#[test]
fn in_place_only_refuses_env_change() {
    let mut w = World::new(cloneset(1, "nginx:1.20.0", json!({"type": "InPlaceOnly"})));
    w.converge(10);
    let c = &mut w.cs.spec.template.spec.as_mut().unwrap().containers[0];
    c.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
        name: "A".into(),
        value: Some("1".into()),
        value_from: None,
    }]);
    let p = w.plan();
    assert!(pod_actions(&p).is_empty(), "{:?}", verbs(&p));
    let st = p.status.expect("status changes: new update revision");
    let c = st.conditions.iter().find(|c| c.type_ == "FailedUpdate").unwrap();
    assert!(
        c.message
            .contains("update strategy is InPlaceOnly but can not update in-place"),
        "{}",
        c.message
    );
}
