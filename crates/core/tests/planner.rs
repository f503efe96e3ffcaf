//! Planner behaviour on whole snapshots: Kruise's `TestUpdate` (`sync/cloneset_update_test.go`) update flow,
//! `TestScale` (`sync/cloneset_scale_test.go`) and the status and revision scenarios.

mod common;

use common::*;
use insitu_api::keys;
use insitu_core::Action;
use serde_json::json;

fn set_image(w: &mut World, image: &str) {
    w.cs.spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
    w.cs.metadata.generation = Some(w.cs.metadata.generation.unwrap_or(1) + 1);
}

fn count(v: &[String], pat: &str) -> usize {
    v.iter().filter(|a| a.contains(pat)).count()
}

#[test]
fn scale_down_respects_delete_ready_limit() {
    // §4.5 TestScale: R 3, 5 ready pods, minReadySeconds 9999 → nothing deleted.
    let mut w = World::new(cloneset(5, "nginx:1", json!({})));
    w.converge(10);
    w.cs.spec.replicas = Some(3);
    w.cs.spec.min_ready_seconds = Some(9999);
    w.advance(5);
    assert_eq!(count(&verbs(&w.plan()), "DeletePod"), 0);
    // minReadySeconds 0 and one specified → only that one.
    w.cs.spec.min_ready_seconds = Some(0);
    let victim = w.names()[0].clone();
    w.pod_mut(&victim)
        .unwrap()
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(keys::SPECIFIED_DELETE_LABEL.into(), "x".into());
    assert_eq!(
        verbs(&w.plan())
            .iter()
            .filter(|a| a.starts_with("DeletePod"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![format!("DeletePod {victim}")]
    );
    let p = w.plan();
    w.apply(&p);
    // Nothing specified → the remaining 1 extra pod goes.
    let p = w.plan();
    assert_eq!(count(&verbs(&p), "DeletePod"), 1);
    w.apply(&p);
    assert_eq!(w.pods.len(), 3);
}

#[test]
fn recreate_marks_one_pod_specified_delete() {
    // §4.5 TestSyncCloneSet: ReCreate, MU 1, 5 old → 1 pod marked specified-delete.
    let mut w = World::new(cloneset(5, "nginx:1", json!({"maxUnavailable": 1})));
    w.converge(10);
    set_image(&mut w, "nginx:2");
    let p = w.plan();
    let v = verbs(&p);
    assert_eq!(count(&v, "Recreate"), 1, "{v:?}");
    w.apply(&p);
    // Next round: scale deletes the marked pod (specified delete, ready, deleteReadyLimit 1).
    let v = verbs(&w.plan());
    assert_eq!(count(&v, "DeletePod"), 1, "{v:?}");
    // and the rollout converges with 5 pods at the new revision.
    w.converge(80);
    assert_eq!(w.pods.len(), 5);
    let st = w.cs.status.clone().unwrap();
    assert_eq!(st.updated_replicas, 5);
    assert_eq!(st.current_revision, st.update_revision);
}

#[test]
fn partition_keeps_old_pods_and_scale_up_uses_current_revision() {
    let mut w = World::new(cloneset(
        4,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "partition": 3, "maxUnavailable": 1}),
    ));
    w.converge(10);
    let rev1 = w.cs.status.clone().unwrap().current_revision;
    set_image(&mut w, "nginx:2");
    w.converge(40);
    let st = w.cs.status.clone().unwrap();
    assert_eq!((st.updated_replicas, st.expected_updated_replicas), (1, 1));
    assert_eq!(st.current_revision, rev1);
    // Scale to 6: partition 3 old pods stay, new pods at the update revision (expectedOld = partition).
    w.cs.spec.replicas = Some(6);
    let p = w.plan();
    assert_eq!(p.budget.scale_up_num, 2);
    assert_eq!(p.budget.scale_up_num_old_revision, 0);
    w.converge(20);
    assert_eq!(w.cs.status.clone().unwrap().updated_replicas, 3);
    // Raise partition to 6 with pods at both revisions: no rollback without the gate.
    w.cs.spec.update_strategy.as_mut().unwrap().partition =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(6));
    let p = w.plan();
    assert_eq!(p.budget.update_num, 0);
    assert!(p.actions.is_empty(), "{:?}", verbs(&p));
}

#[test]
fn rollback_bumps_the_old_revision_and_updates_in_place() {
    let mut w = World::new(cloneset(
        2,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 2}),
    ));
    w.converge(10);
    let rev1 = w.cs.status.clone().unwrap().update_revision;
    set_image(&mut w, "nginx:2");
    w.converge(30);
    let rev2 = w.cs.status.clone().unwrap().update_revision;
    assert_ne!(rev1, rev2);
    set_image(&mut w, "nginx:1");
    let p = w.plan();
    assert_eq!(p.update_revision, rev1);
    assert!(
        matches!(&p.actions[0], Action::BumpRevision { name, revision: 3, .. } if *name == rev1),
        "{:?}",
        verbs(&p)
    );
    let uids: Vec<_> = w.pods.iter().map(|p| p.metadata.uid.clone()).collect();
    w.converge(30);
    assert_eq!(
        uids,
        w.pods.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>(),
        "in place"
    );
    assert_eq!(w.cs.status.clone().unwrap().current_revision, rev1);
    assert_eq!(w.revisions.len(), 2);
}

#[test]
fn history_is_truncated_to_the_limit() {
    let mut w = World::new(cloneset(1, "nginx:0", json!({"type": "InPlaceIfPossible"})));
    w.cs.spec.revision_history_limit = Some(2);
    w.converge(10);
    for i in 1..6 {
        set_image(&mut w, &format!("nginx:{i}"));
        w.converge(30);
    }
    // current = update (live) + 2 non-live.
    assert_eq!(
        w.revisions.len(),
        3,
        "{:?}",
        w.revisions.iter().map(|r| r.revision).collect::<Vec<_>>()
    );
}

#[test]
fn new_pod_gets_ready_and_normal_only_once_scheduled() {
    // §4.3 "create: PreparingNormal→Normal" and "pod not scheduled → stays PreparingNormal".
    let mut w = World::new(cloneset(1, "nginx:1", json!({})));
    let p = w.plan();
    w.apply(&p);
    let v = verbs(&w.plan());
    assert_eq!(
        v.iter().filter(|a| a.contains("Lifecycle")).count(),
        0,
        "unscheduled: {v:?}"
    );
    assert_eq!(
        count(&v, "SetInPlaceUpdateReady"),
        1,
        "gate set True even before scheduling: {v:?}"
    );
    w.kubelet();
    let v = verbs(&w.plan());
    assert_eq!(count(&v, "Lifecycle"), 1, "{v:?}");
}

#[test]
fn pre_delete_hook_moves_to_preparing_delete() {
    let mut w = World::new(cloneset(2, "nginx:1", json!({})));
    w.cs.spec.lifecycle =
        Some(serde_json::from_value(json!({"preDelete": {"labelsHandler": {"hold": "true"}}})).unwrap());
    w.converge(10);
    let victim = w.names()[0].clone();
    w.set_label(&victim, "hold", Some("true"));
    w.cs.spec.replicas = Some(1);
    let p = w.plan();
    assert_eq!(
        verbs(&p)
            .iter()
            .filter(|a| !a.contains("Revision"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![format!("PatchPodMetadata {victim} Lifecycle")]
    );
    w.apply(&p);
    assert_eq!(w.labels(&victim)[keys::LIFECYCLE_STATE_LABEL], "PreparingDelete");
    // Hooked: nothing more.
    assert_eq!(count(&verbs(&w.plan()), "DeletePod"), 0);
    // Scale back up: the pod is reclaimed → PreparingNormal.
    w.cs.spec.replicas = Some(2);
    let p = w.plan();
    assert_eq!(count(&verbs(&p), "Lifecycle"), 1);
    w.apply(&p);
    assert_eq!(w.labels(&victim)[keys::LIFECYCLE_STATE_LABEL], "PreparingNormal");
    // Down again, hook released → deleted.
    w.cs.spec.replicas = Some(1);
    w.kubelet();
    w.converge(10);
    w.set_label(&victim, "hold", None);
    w.converge(10);
    assert_eq!(w.pods.len(), 1);
}

#[test]
fn in_place_update_hook_waits_in_preparing_update() {
    let mut w = World::new(cloneset(1, "nginx:1", json!({"type": "InPlaceIfPossible"})));
    w.cs.spec.lifecycle =
        Some(serde_json::from_value(json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}})).unwrap());
    w.converge(10);
    let n = w.names()[0].clone();
    w.set_label(&n, "hold", Some("true"));
    set_image(&mut w, "nginx:2");
    let p = w.plan();
    w.apply(&p);
    assert_eq!(w.labels(&n)[keys::LIFECYCLE_STATE_LABEL], "PreparingUpdate");
    assert_eq!(w.image(&n), "nginx:1");
    assert_eq!(count(&verbs(&w.plan()), "StartInPlaceUpdate"), 0);
    w.set_label(&n, "hold", None);
    assert_eq!(count(&verbs(&w.plan()), "StartInPlaceUpdate"), 1);
    w.converge(20);
    assert_eq!(w.image(&n), "nginx:2");
    // With lifecycle set and the hook not all-hooked, Updating → Updated → Normal... ends Normal.
    assert_eq!(w.labels(&n)[keys::LIFECYCLE_STATE_LABEL], "Updated");
}

#[test]
fn pods_to_delete_is_truncated() {
    let mut w = World::new(cloneset(1, "nginx:1", json!({})));
    w.converge(10);
    w.cs.spec.scale_strategy = Some(serde_json::from_value(json!({"podsToDelete": ["gone"]})).unwrap());
    let v = verbs(&w.plan());
    assert!(
        v.contains(&"TruncatePodsToDelete [\"gone\"]".to_string()),
        "{v:?}"
    );
}

#[test]
fn max_surge_creates_before_updating() {
    let mut w = World::new(cloneset(
        3,
        "nginx:1",
        json!({"maxSurge": 1, "maxUnavailable": 0}),
    ));
    w.converge(10);
    set_image(&mut w, "nginx:2");
    let p = w.plan();
    assert_eq!(p.budget.use_surge, 1);
    assert_eq!(count(&verbs(&p), "CreatePod"), 1);
    let mut max_pods = 0;
    for _ in 0..60 {
        let p = w.plan();
        if p.is_empty() {
            break;
        }
        w.apply(&p);
        w.kubelet();
        max_pods = max_pods.max(w.pods.len());
        assert!(w.pods.len() <= 4, "never above replicas + maxSurge");
    }
    assert_eq!(max_pods, 4);
    assert_eq!(w.pods.len(), 3);
    assert_eq!(w.cs.status.clone().unwrap().updated_replicas, 3);
}

#[test]
fn progressing_condition_follows_kruise() {
    let mut w = World::new(cloneset(
        2,
        "nginx:1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 1}),
    ));
    w.cs.spec.progress_deadline_seconds = Some(30);
    w.converge(10);
    let cond = |w: &World| {
        let c =
            w.cs.status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == "Progressing")
                .cloned()
                .unwrap();
        (c.status, c.reason)
    };
    assert_eq!(cond(&w), ("True".to_string(), "CloneSetAvailable".to_string()));
    // Rollout stuck: the kubelet never pulls the new image → deadline exceeded after 30s.
    set_image(&mut w, "nginx:2");
    w.advance(1);
    let p = w.plan();
    w.apply(&p);
    assert_eq!(cond(&w), ("True".to_string(), "CloneSetUpdated".to_string()));
    assert!(p.requeue_after.is_some());
    w.advance(31);
    let p = w.plan();
    w.apply(&p);
    assert_eq!(
        cond(&w),
        ("False".to_string(), "ProgressDeadlineExceeded".to_string())
    );
    // Paused wins.
    w.cs.spec.update_strategy.as_mut().unwrap().paused = true;
    let p = w.plan();
    w.apply(&p);
    assert_eq!(cond(&w), ("True".to_string(), "CloneSetPaused".to_string()));
    // No deadline → no condition.
    w.cs.spec.progress_deadline_seconds = None;
    let p = w.plan();
    w.apply(&p);
    assert!(
        w.cs.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.type_ != "Progressing")
    );
}

#[test]
fn status_is_only_written_when_changed() {
    let mut w = World::new(cloneset(2, "nginx:1", json!({})));
    w.converge(10);
    let p = w.plan();
    assert!(p.status.is_none());
    assert!(p.is_empty());
    let st = w.cs.status.clone().unwrap();
    assert_eq!(st.label_selector, "app=web");
    assert_eq!(st.observed_generation, 1);
    assert_eq!(st.collision_count, Some(0));
    w.cs.metadata.generation = Some(2);
    assert!(w.plan().status.is_some(), "observedGeneration increase writes");
}

#[test]
fn min_ready_seconds_requeues_until_available() {
    let mut w = World::new(cloneset(1, "nginx:1", json!({})));
    w.cs.spec.min_ready_seconds = Some(10);
    for _ in 0..4 {
        let p = w.plan();
        w.apply(&p);
        w.kubelet();
    }
    let p = w.plan();
    let st = w.cs.status.clone().unwrap();
    assert_eq!((st.ready_replicas, st.available_replicas), (1, 0));
    let d = p.requeue_after.expect("requeue for minReadySeconds");
    assert!(d.as_secs() <= 10 && d.as_secs() >= 9, "{d:?}");
    w.advance(11);
    let p = w.plan();
    assert_eq!(p.status.unwrap().available_replicas, 1);
}

fn kruise_ready(w: &World, name: &str) -> (String, String) {
    let c = w
        .pod(name)
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == keys::KRUISE_POD_READY))
        .unwrap_or_else(|| panic!("{name} has no KruisePodReady condition"));
    (c.status.clone(), c.message.clone().unwrap_or_default())
}

#[test]
fn mark_pod_not_ready_holds_the_pod_out_of_service_while_hooked() {
    // Research §2.2/§3.8: lifecycle.inPlaceUpdate.markPodNotReady → KruisePodReady False with the
    // `preUpdateHook` entry while the pod waits in PreparingUpdate; the entry goes at Updated.
    let mut w = World::new(cloneset(1, "nginx:1", json!({"type": "InPlaceIfPossible"})));
    w.cs.spec.lifecycle = Some(
        serde_json::from_value(
            json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}, "markPodNotReady": true}}),
        )
        .unwrap(),
    );
    w.converge(10);
    let n = w.names()[0].clone();
    let gates: Vec<String> = w
        .pod(&n)
        .spec
        .as_ref()
        .unwrap()
        .readiness_gates
        .as_ref()
        .unwrap()
        .iter()
        .map(|g| g.condition_type.clone())
        .collect();
    assert_eq!(gates, vec!["InPlaceUpdateReady", "KruisePodReady"]);
    assert_eq!(kruise_ready(&w, &n), ("True".into(), String::new()));
    assert_eq!(
        w.plan()
            .actions
            .iter()
            .filter(|a| !matches!(a, Action::CreateRevision { .. }))
            .count(),
        0
    );

    w.set_label(&n, "hold", Some("true"));
    set_image(&mut w, "nginx:2");
    let p = w.plan();
    let v = verbs(&p);
    let held = r#"[{"userAgent":"Lifecycle","key":"preUpdateHook"}]"#;
    let i_ready = v
        .iter()
        .position(|a| a == &format!("SetKruisePodReady {n} {held}"));
    let i_label = v
        .iter()
        .position(|a| a == &format!("PatchPodMetadata {n} Lifecycle"));
    assert!(
        i_ready.is_some() && i_ready < i_label,
        "not-ready before the label: {v:?}"
    );
    w.apply(&p);
    assert_eq!(kruise_ready(&w, &n), ("False".into(), held.into()));
    w.kubelet();
    assert_eq!(
        count(&verbs(&w.plan()), "SetKruisePodReady"),
        0,
        "stable while hooked"
    );
    let ready = w
        .pod(&n)
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(!ready, "the kubelet keeps the hooked pod NotReady");

    w.set_label(&n, "hold", None);
    w.converge(20);
    assert_eq!(w.image(&n), "nginx:2");
    assert_eq!(w.labels(&n)[keys::LIFECYCLE_STATE_LABEL], "Updated");
    assert_eq!(kruise_ready(&w, &n), ("True".into(), String::new()));
}

#[test]
fn mark_pod_not_ready_on_pre_delete() {
    let mut w = World::new(cloneset(2, "nginx:1", json!({})));
    w.cs.spec.lifecycle = Some(
        serde_json::from_value(
            json!({"preDelete": {"finalizersHandler": ["x.io/hold"], "markPodNotReady": true}}),
        )
        .unwrap(),
    );
    w.converge(10);
    let victim = w.names()[0].clone();
    w.pod_mut(&victim).unwrap().metadata.finalizers = Some(vec!["x.io/hold".into()]);
    w.cs.spec.replicas = Some(1);
    w.converge(10);
    assert_eq!(w.labels(&victim)[keys::LIFECYCLE_STATE_LABEL], "PreparingDelete");
    let (status, message) = kruise_ready(&w, &victim);
    assert_eq!(status, "False");
    assert_eq!(message, r#"[{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#);
    // Kruise managePreparingDelete: with markPodNotReady there is no regret — scaling back up does not
    // move the pod back to PreparingNormal (without markPodNotReady it would, see above).
    w.cs.spec.replicas = Some(2);
    let p = w.plan();
    assert_eq!(
        count(&verbs(&p), &format!("PatchPodMetadata {victim} Lifecycle")),
        0,
        "{:?}",
        verbs(&p)
    );
    // Hook released → deleted, and the pod's KruisePodReady entry goes with it.
    w.cs.spec.replicas = Some(1);
    w.pod_mut(&victim).unwrap().metadata.finalizers = None;
    w.converge(10);
    assert!(!w.names().contains(&victim));
}

/// `RecreatePodWhenChangeVCTInCloneSetGate` (`CanVCTemplateInplaceUpdate`; Kruise `TestReconcile`'s VCT cases
/// in `cloneset_controller_test.go`): image + VCT change → recreate with the gate, in place without it, and
/// in place under InPlaceOnly.
#[test]
fn vct_change_recreates_only_with_the_gate() {
    let outcome = |gate: bool, stype: &str| {
        let mut cs = cloneset(2, "nginx:1", json!({"type": stype, "maxUnavailable": 2}));
        let vct = |size: &str| {
            serde_json::from_value(json!({
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
            }))
            .unwrap()
        };
        cs.spec.volume_claim_templates = vec![vct("1Gi")];
        let mut w = World::new(cs);
        w.gates.recreate_pod_when_change_vct = gate;
        w.converge(20);
        assert_eq!(w.pods.len(), 2);
        set_image(&mut w, "nginx:2");
        w.cs.spec.volume_claim_templates = vec![vct("2Gi")];
        let p = w.plan();
        let v = verbs(&p);
        (count(&v, "Recreate"), count(&v, "StartInPlaceUpdate"), v)
    };
    let (recreate, in_place, v) = outcome(true, "InPlaceIfPossible");
    assert_eq!((recreate, in_place), (2, 0), "{v:?}");
    let (recreate, in_place, v) = outcome(false, "InPlaceIfPossible");
    assert_eq!((recreate, in_place), (0, 2), "{v:?}");
    let (recreate, in_place, v) = outcome(true, "InPlaceOnly");
    assert_eq!((recreate, in_place), (0, 2), "{v:?}");
}
