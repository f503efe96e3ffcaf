//! PersistentVolumeClaims from volumeClaimTemplates: creation before the pod, id reuse, deletion with the pod,
//! and the disablePVCReuse cleanup (Kruise TestCreatePods, TestGetOrGenAvailableIDs, TestDeletePods).

mod common;

use std::collections::HashSet;

use common::*;
use insitu_api::keys;
use insitu_core::{Action, Plan, pods};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::json;

fn vct(name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": "db"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap()
}

/// `web` with one volumeClaimTemplate `data` (and more when given).
fn world(replicas: i32, vcts: &[&str]) -> World {
    let mut cs = cloneset(replicas, "nginx:1.19.0", json!({"type": "InPlaceIfPossible"}));
    cs.spec.volume_claim_templates = vcts.iter().map(|n| vct(n)).collect();
    World::new(cs)
}

/// An owned PVC of template `data` for instance `id`, as the controller would have created it.
fn owned_pvc(w: &mut World, id: &str) -> PersistentVolumeClaim {
    let mut p = pods::new_pvc(&w.cs, &vct("data"), id);
    w.uid_seq += 1;
    p.metadata.uid = Some(format!("pvc-uid-{}", w.uid_seq));
    p
}

fn id_of(name: &str) -> &str {
    name.strip_prefix("web-").unwrap()
}

fn pvc_names(w: &World) -> Vec<String> {
    let mut v: Vec<String> = w.pvcs.iter().filter_map(|p| p.metadata.name.clone()).collect();
    v.sort();
    v
}

fn created_pods(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod, .. } => pod.meta().name.clone(),
            _ => None,
        })
        .collect()
}

fn has_pvc_action(plan: &Plan) -> bool {
    plan.actions.iter().any(|a| {
        matches!(
            a,
            Action::CreatePvc { .. } | Action::DeletePvc { .. } | Action::ReleasePvc { .. }
        )
    })
}

#[test]
fn pvcs_are_created_right_before_their_pod() {
    let w = world(3, &["data", "logs"]);
    let plan = w.plan();
    let v = verbs(&plan);
    let creates: Vec<&String> = v.iter().filter(|s| !s.starts_with("CreateRevision")).collect();
    assert_eq!(creates.len(), 9, "{v:?}");
    for chunk in creates.chunks(3) {
        assert!(chunk[0].starts_with("CreatePvc data-web-"), "{v:?}");
        assert!(chunk[1].starts_with("CreatePvc logs-web-"), "{v:?}");
        assert!(chunk[2].starts_with("CreatePod "), "{v:?}");
    }
    let mut pod_for_pvcs: Vec<&str> = Vec::new();
    for a in &plan.actions {
        match a {
            Action::CreatePvc { pvc } => {
                let m = &pvc.metadata;
                let id = m.labels.as_ref().unwrap()[keys::INSTANCE_ID_LABEL].clone();
                let tpl = if m.name.as_deref().unwrap().starts_with("data-") {
                    "data"
                } else {
                    "logs"
                };
                assert_eq!(m.name.as_deref(), Some(format!("{tpl}-web-{id}").as_str()));
                assert_eq!(m.namespace.as_deref(), Some("default"));
                let labels = m.labels.clone().unwrap();
                assert_eq!(
                    labels.get("tier").map(String::as_str),
                    Some("db"),
                    "template labels"
                );
                assert_eq!(
                    labels.get("app").map(String::as_str),
                    Some("web"),
                    "selector labels"
                );
                assert_eq!(labels.len(), 3, "{labels:?}");
                let refs = m.owner_references.as_ref().unwrap();
                assert_eq!(refs.len(), 1);
                assert_eq!(
                    (refs[0].kind.as_str(), refs[0].name.as_str(), refs[0].uid.as_str()),
                    ("CloneSet", "web", "uid-web")
                );
                assert_eq!(refs[0].controller, Some(true));
                assert_eq!(refs[0].block_owner_deletion, Some(true));
                let spec = pvc.spec.as_ref().unwrap();
                assert_eq!(
                    spec.access_modes.as_deref(),
                    Some(&["ReadWriteOnce".to_string()][..])
                );
                assert!(pvc.status.is_none());
                pod_for_pvcs.push(m.name.as_deref().unwrap());
            }
            Action::CreatePod { pod, .. } => {
                let pod = pod.unpack();
                let id = pod.metadata.labels.as_ref().unwrap()[keys::INSTANCE_ID_LABEL].clone();
                let claims: Vec<String> = pod
                    .spec
                    .as_ref()
                    .unwrap()
                    .volumes
                    .iter()
                    .flatten()
                    .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
                    .collect();
                assert_eq!(claims, [format!("data-web-{id}"), format!("logs-web-{id}")]);
                assert_eq!(
                    pod_for_pvcs,
                    claims.iter().map(String::as_str).collect::<Vec<_>>()
                );
                pod_for_pvcs.clear();
            }
            _ => {}
        }
    }
}

#[test]
fn existing_pvcs_are_not_created_again() {
    // Kruise TestCreatePods: PVC datadir-foo-id3 already exists, only the missing ones are created.
    let mut w = world(2, &["data"]);
    w.converge(10);
    let pod = w.names()[0].clone();
    // The pod vanishes behind the controller's back (eviction, kubectl delete): its PVC stays.
    w.pods.retain(|p| p.metadata.name.as_deref() != Some(&pod));
    let plan = w.plan();
    assert_eq!(
        created_pods(&plan),
        std::slice::from_ref(&pod),
        "same name again: {:?}",
        verbs(&plan)
    );
    assert!(
        !verbs(&plan).iter().any(|v| v.starts_with("CreatePvc")),
        "{:?}",
        verbs(&plan)
    );
    let before = w.pvcs.clone();
    w.apply(&plan);
    assert_eq!(w.pvcs, before, "the PVC is reused as it is");
}

#[test]
fn get_or_gen_available_ids() {
    // Kruise TestGetOrGenAvailableIDs: pods {a, b}, PVCs {b, c}, need 2 → {c, <new random id>}.
    let active: HashSet<&str> = ["a", "b"].into();
    let ids = pods::available_ids("seed", 2, &["b", "c"], &active, &HashSet::new());
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], "c");
    assert_eq!(ids[1].len(), 5);
    assert!(!["a", "b", "c"].contains(&ids[1].as_str()));
}

#[test]
fn scale_up_reuses_ids_of_owned_spare_pvcs_only() {
    let mut w = world(2, &["data"]);
    w.converge(10);
    let ids: Vec<String> = w.names().iter().map(|n| id_of(n).to_string()).collect();
    // An owned spare PVC (its pod is gone) and an orphan with matching labels but no ownerReference.
    let spare = owned_pvc(&mut w, "xub0a");
    let mut orphan = owned_pvc(&mut w, "zzzzz");
    orphan.metadata.owner_references = None;
    w.pvcs.push(spare);
    w.pvcs.push(orphan);
    w.cs.spec.replicas = Some(4);
    let plan = w.plan();
    let created = created_pods(&plan);
    assert_eq!(created.len(), 2, "{:?}", verbs(&plan));
    assert_eq!(created[0], "web-xub0a", "the owned spare PVC's id comes first");
    assert!(
        !created.contains(&"web-zzzzz".to_string()),
        "orphans are not reused"
    );
    assert!(!ids.iter().any(|i| created.contains(&format!("web-{i}"))));
    let pvcs: Vec<String> = verbs(&plan)
        .into_iter()
        .filter(|v| v.starts_with("CreatePvc"))
        .collect();
    assert_eq!(
        pvcs,
        [format!("CreatePvc data-{}", created[1])],
        "only the new pod's PVC"
    );
}

#[test]
fn deleted_pods_take_their_pvcs_along() {
    // Kruise TestDeletePods: deleting pods also deletes their same-instance-id PVCs and leaves others.
    let mut w = world(3, &["data", "logs"]);
    w.converge(10);
    assert_eq!(w.pvcs.len(), 6);
    w.cs.spec.replicas = Some(2);
    let plan = w.plan();
    let v = verbs(&plan);
    let del = v
        .iter()
        .position(|s| s.starts_with("DeletePod "))
        .expect("a pod deleted");
    let victim = v[del].strip_prefix("DeletePod ").unwrap().to_string();
    let id = id_of(&victim);
    assert_eq!(
        v[del + 1..]
            .iter()
            .filter(|s| s.starts_with("DeletePvc"))
            .collect::<Vec<_>>(),
        [
            &format!("DeletePvc data-web-{id}"),
            &format!("DeletePvc logs-web-{id}")
        ],
        "{v:?}"
    );
    for a in &plan.actions {
        if let Action::DeletePvc { pod, .. } = a {
            assert_eq!(pod.as_deref(), Some(victim.as_str()));
        }
    }
    w.apply(&plan);
    assert_eq!(w.pvcs.len(), 4);
    assert!(w.pvcs.iter().all(|p| pods::instance_id(&p.metadata.labels) != id));
    // Specified delete: same.
    let target = w.names()[0].clone();
    w.cs.spec.scale_strategy =
        Some(serde_json::from_value(json!({"podsToDelete": [target.clone()]})).unwrap());
    w.kubelet();
    let plan = w.plan();
    let v = verbs(&plan);
    let id = id_of(&target);
    assert!(v.contains(&format!("DeletePod {target}")), "{v:?}");
    assert!(v.contains(&format!("DeletePvc data-web-{id}")), "{v:?}");
    assert!(v.contains(&format!("DeletePvc logs-web-{id}")), "{v:?}");
    assert_eq!(
        v.iter().filter(|s| s.starts_with("DeletePvc")).count(),
        2,
        "{v:?}"
    );
}

#[test]
fn pvc_reuse_keeps_pvcs_of_inactive_pods_and_waits_for_the_name() {
    let mut w = world(2, &["data"]);
    w.converge(10);
    let names = w.names();
    let failed = names[0].clone();
    w.pod_mut(&failed).unwrap().status.as_mut().unwrap().phase = Some("Failed".into());
    // Reuse on (default): nothing is cleaned up; the replacement wants the failed pod's name and PVC,
    // and waits while that pod still exists.
    let plan = w.plan();
    assert!(!has_pvc_action(&plan), "{:?}", verbs(&plan));
    assert!(created_pods(&plan).is_empty(), "{:?}", verbs(&plan));
    assert!(
        plan.explanation
            .iter()
            .any(|e| e.contains(&failed) && e.contains("wait")),
        "{:?}",
        plan.explanation
    );
    // Once the failed pod is gone the same name comes back with the same PVC.
    w.pods.retain(|p| p.metadata.name.as_deref() != Some(&failed));
    let plan = w.plan();
    assert_eq!(created_pods(&plan), std::slice::from_ref(&failed));
    assert!(!has_pvc_action(&plan), "{:?}", verbs(&plan));
}

#[test]
fn disable_pvc_reuse_hands_pvcs_to_inactive_pods_and_deletes_orphans() {
    let mut w = world(2, &["data"]);
    w.converge(10);
    let names = w.names();
    let (alive, failed) = (names[1].clone(), names[0].clone());
    w.pod_mut(&failed).unwrap().status.as_mut().unwrap().phase = Some("Failed".into());
    let failed_uid = w.pod(&failed).metadata.uid.clone().unwrap();
    // An owned PVC whose pod is gone altogether.
    let gone = owned_pvc(&mut w, "ggggg");
    w.pvcs.push(gone);
    w.cs.spec.scale_strategy = Some(serde_json::from_value(json!({"disablePVCReuse": true})).unwrap());
    let plan = w.plan();
    let v = verbs(&plan);
    let fid = id_of(&failed);
    // Cleanup comes first (Kruise cleanupPVCs runs before revisions and scale), in PVC name order.
    let mut first_two = v[..2].to_vec();
    first_two.sort();
    assert_eq!(
        first_two,
        [
            "DeletePvc data-web-ggggg".to_string(),
            format!("ReleasePvc data-web-{fid} {failed}")
        ],
        "{v:?}"
    );
    for a in &plan.actions[..2] {
        match a {
            Action::DeletePvc { pod, .. } => assert_eq!(*pod, None, "cleanup, not with a pod"),
            Action::ReleasePvc { pod_uid, .. } => assert_eq!(*pod_uid, failed_uid),
            other => panic!("{other:?}"),
        }
    }
    assert!(
        !v.iter()
            .any(|s| s.contains(&format!("data-web-{}", id_of(&alive)))),
        "{v:?}"
    );
    // Reuse is off: the replacement gets a new id and a new PVC, not the released or deleted ones.
    let created = created_pods(&plan);
    assert_eq!(created.len(), 1, "{v:?}");
    assert!(created[0] != failed && created[0] != "web-ggggg");
    assert!(v.contains(&format!("CreatePvc data-{}", created[0])), "{v:?}");
    w.apply(&plan);
    let released = w
        .pvcs
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(&format!("data-web-{fid}")))
        .unwrap();
    let refs = released.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (refs[0].kind.as_str(), refs[0].name.as_str()),
        ("Pod", failed.as_str())
    );
    assert!(!pvc_names(&w).contains(&"data-web-ggggg".to_string()));
    // The released PVC is no longer the CloneSet's: nothing more to do about it.
    w.kubelet();
    w.pod_mut(&failed).unwrap().status.as_mut().unwrap().phase = Some("Failed".into());
    let plan = w.plan();
    assert!(!has_pvc_action(&plan), "{:?}", verbs(&plan));
}

#[test]
fn no_volume_claim_templates_no_pvc_actions() {
    let mut w = world(3, &[]);
    let plan = w.plan();
    assert!(!has_pvc_action(&plan));
    w.converge(10);
    w.cs.spec.replicas = Some(1);
    let plan = w.plan();
    assert!(verbs(&plan).iter().any(|v| v.starts_with("DeletePod")));
    assert!(!has_pvc_action(&plan), "{:?}", verbs(&plan));
    assert!(w.pvcs.is_empty());
}

#[test]
fn in_place_update_keeps_the_pvcs() {
    let mut w = world(3, &["data"]);
    w.converge(10);
    let before = w.pvcs.clone();
    let names = w.names();
    w.cs.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.21.0".into());
    w.cs.metadata.generation = Some(2);
    for _ in 0..30 {
        let plan = w.plan();
        assert!(!has_pvc_action(&plan), "{:?}", verbs(&plan));
        if plan.is_empty() {
            break;
        }
        w.apply(&plan);
        w.kubelet();
        if let Some(d) = plan.requeue_after
            && plan.actions.is_empty()
        {
            w.advance(i64::try_from(d.as_secs()).unwrap() + 1);
        }
    }
    assert_eq!(w.names(), names);
    assert!(names.iter().all(|n| w.image(n) == "nginx:1.21.0"));
    assert_eq!(w.pvcs, before);
}

#[test]
fn pvc_actions_serialise_with_the_action_tag() {
    let w = world(1, &["data"]);
    let plan = w.plan();
    let json = serde_json::to_value(&plan.actions).unwrap();
    let pvc = json
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "createPvc")
        .expect("createPvc");
    assert_eq!(pvc["pvc"]["metadata"]["labels"]["tier"], "db");
    let del = serde_json::to_value(Action::DeletePvc {
        name: "data-web-x".into(),
        uid: "u".into(),
        pod: None,
        reason: "r".into(),
    })
    .unwrap();
    assert_eq!(
        del,
        json!({"action": "deletePvc", "name": "data-web-x", "uid": "u", "reason": "r"})
    );
    let rel = serde_json::to_value(Action::ReleasePvc {
        name: "data-web-x".into(),
        uid: "u".into(),
        pod: "web-x".into(),
        pod_uid: "pu".into(),
    })
    .unwrap();
    assert_eq!(
        rel,
        json!({"action": "releasePvc", "name": "data-web-x", "uid": "u", "pod": "web-x", "podUid": "pu"})
    );
}
