//! `insitu explain`'s per-pod answers on small snapshots.

use std::sync::Arc;

use super::*;
use insitu_api::CloneSet;
use serde_json::{Value, json};

use crate::revision::{new_revision, revision_data};

fn cs(env: &str) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web", "generation": 2},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "nginx:1",
                                                  "env": [{"name": "VERSION", "value": env}]}]}},
            "updateStrategy": {"type": "InPlaceIfPossible"},
        }
    }))
    .unwrap()
}

fn rev(c: &CloneSet, n: i64) -> ControllerRevision {
    let data = revision_data(&c.spec.template);
    let bytes = crate::util::gojson::marshal(&data);
    new_revision(c, data, &bytes, n, 0)
}

fn pod(hash: &str, extra: Value) -> Pod {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-a", "namespace": "ns", "uid": "p1",
                     "labels": {"app": "web", "controller-revision-hash": hash,
                                "pod-template-hash": crate::revision::short_hash(hash)},
                     "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                                          "name": "web", "uid": "uid-web", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut p["metadata"], extra) {
        m.extend(e);
    }
    serde_json::from_value(p).unwrap()
}

fn snapshot(cs: &CloneSet, pods: Vec<Pod>, revs: Vec<ControllerRevision>) -> Snapshot {
    Snapshot {
        cloneset: Arc::new(cs.clone()),
        pods: pods.into_iter().map(Arc::new).collect(),
        summaries: None,
        revisions: revs.into_iter().map(Arc::new).collect(),
        pvcs: Vec::new(),
        now: "2026-01-01T00:00:00Z".parse().unwrap(),
        gates: Default::default(),
        nodes: Default::default(),
        image_pull_jobs: None,
    }
}

#[test]
fn env_change_explains_a_recreate_with_the_field() {
    let (old, new) = (cs("1"), cs("2"));
    let (r1, r2) = (rev(&old, 1), rev(&new, 2));
    let h1 = r1.metadata.name.clone().unwrap();
    let s = snapshot(&new, vec![pod(&h1, json!({}))], vec![r1, r2]);
    let plan = crate::plan(&s);
    let why = pods(&s, &plan);
    assert_eq!(why.len(), 1);
    assert_eq!(why[0].next, "recreate");
    assert_eq!(why[0].stage, "None");
    let r = why[0].refusal.as_ref().unwrap();
    assert_eq!(r.fields, vec!["spec.containers[app].env[VERSION]"]);
    let t = text(&why);
    assert!(
        t.contains("next update: recreate — spec.containers[app].env[VERSION] changed"),
        "{t}"
    );
    assert!(t.contains("this round: marks it for recreation"), "{t}");
    assert_eq!(
        plan.refusals.len(),
        1,
        "the plan carries the reason for the event and metric"
    );
    assert_eq!(plan.refusals[0].refusal.reason, "spec.containers.env");
}

#[test]
fn image_change_goes_in_place_and_stages_follow_the_annotations() {
    let old = cs("1");
    let mut new = cs("1");
    new.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    let (r1, r2) = (rev(&old, 1), rev(&new, 2));
    let h1 = r1.metadata.name.clone().unwrap();
    let s = snapshot(&new, vec![pod(&h1, json!({}))], vec![r1, r2]);
    let plan = crate::plan(&s);
    let why = pods(&s, &plan);
    assert_eq!(why[0].next, "in place");
    assert!(why[0].refusal.is_none());

    let mut preparing = pod(
        &h1,
        json!({"annotations": {keys::INPLACE_UPDATE_GRACE_ANNOTATION: "{}"}}),
    );
    preparing
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(
            serde_json::from_value(json!({"type": keys::INPLACE_UPDATE_READY, "status": "False"})).unwrap(),
        );
    let (st, waits) = stage(&preparing);
    assert_eq!(st, "Preparing");
    assert!(waits[0].contains("grace"), "{waits:?}");
}

/// A pod updating in place at revision `hash`: state annotation `state`, InPlaceUpdateReady False, and the
/// given pod `status` fields merged in.
fn updating(hash: &str, state: Value, status: Value) -> Pod {
    let mut p = pod(
        hash,
        json!({"annotations": {keys::INPLACE_UPDATE_STATE_ANNOTATION: state.to_string()}}),
    );
    let mut v = serde_json::to_value(&p).unwrap();
    v["status"]["conditions"] = json!([{"type": "Ready", "status": "True"},
                                       {"type": keys::INPLACE_UPDATE_READY, "status": "False"}]);
    if let (Value::Object(m), Value::Object(e)) = (&mut v["status"], status) {
        m.extend(e);
    }
    p = serde_json::from_value(v).unwrap();
    p
}

#[test]
fn a_pending_resize_says_deferred_or_infeasible() {
    let state = json!({"revision": "r", "updateTimestamp": "2026-01-01T00:00:00Z", "updateResources": true});
    for (reason, then) in [
        ("Deferred", "when the node has room"),
        ("Infeasible", "never fit"),
    ] {
        let p = updating(
            "r",
            state.clone(),
            json!({"containerStatuses": [{"name": "app", "image": "nginx:1", "imageID": "i", "ready": true,
                                          "restartCount": 0, "resources": {"requests": {"cpu": "1"}}}],
                   "conditions": [{"type": "Ready", "status": "True"},
                                  {"type": keys::INPLACE_UPDATE_READY, "status": "False"},
                                  {"type": "PodResizePending", "status": "True", "reason": reason,
                                   "message": "Node didn't have enough capacity: cpu"}]}),
        );
        let (st, waits) = stage(&p);
        assert_eq!(st, "Updating");
        assert!(
            waits[0].contains(&format!(
                "PodResizePending {reason} (Node didn't have enough capacity: cpu)"
            )) && waits[0].contains(then),
            "{waits:?}"
        );
    }
}

// A NotRequired resize leaves InPlaceUpdateReady True (no not-ready marking): the lifecycle label says
// the update is in flight, and a held resize is still explained.
#[test]
fn a_pending_resize_without_not_ready_marking_is_explained() {
    let state = json!({"revision": "r", "updateTimestamp": "2026-01-01T00:00:00Z", "updateResources": true});
    let mut p = updating(
        "r",
        state,
        json!({"containerStatuses": [{"name": "app", "image": "nginx:1", "imageID": "i", "ready": true,
                                      "restartCount": 0, "resources": {"requests": {"cpu": "1"}}}],
               "conditions": [{"type": "Ready", "status": "True"},
                              {"type": keys::INPLACE_UPDATE_READY, "status": "True"},
                              {"type": "PodResizePending", "status": "True", "reason": "Deferred",
                               "message": "Node didn't have enough capacity: cpu"}]}),
    );
    assert_eq!(
        stage(&p).0,
        "None",
        "without the lifecycle label nothing says it is in flight"
    );
    p.metadata.labels.as_mut().unwrap().insert(
        keys::LIFECYCLE_STATE_LABEL.into(),
        keys::lifecycle::UPDATING.into(),
    );
    let (st, waits) = stage(&p);
    assert_eq!(st, "Updating");
    assert!(waits[0].contains("PodResizePending Deferred"), "{waits:?}");
    // Applied (status reports the spec's resources: none here), lifecycle not moved yet.
    p.spec.as_mut().unwrap().containers[0].resources =
        serde_json::from_value(json!({"requests": {"cpu": "1"}})).unwrap();
    p.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .retain(|c| c.type_ != "PodResizePending");
    let (st, waits) = stage(&p);
    assert_eq!(st, "Updated");
    assert_eq!(
        waits,
        ["the controller to end the update (lifecycle Updating → Normal)"]
    );
}

#[test]
fn env_from_metadata_without_a_node_agent_says_so() {
    let state =
        json!({"revision": "r", "updateTimestamp": "2026-01-01T00:00:00Z", "updateEnvFromMetadata": true});
    let p = updating(
        "r",
        state,
        json!({"containerStatuses": [{"name": "app", "image": "nginx:1", "imageID": "i", "ready": true,
                                      "restartCount": 0}]}),
    );
    let (st, waits) = stage(&p);
    assert_eq!(st, "Updating");
    assert!(
        waits[0].contains("node agent (kruise-daemon)")
            && waits[0].contains(insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION),
        "{waits:?}"
    );
}

/// `new` with `replicas` and extra `updateStrategy` fields, and `n` pods at the old revision (`web-0`…).
fn rollout(update_strategy: Value, replicas: i32, n: usize) -> Vec<PodWhy> {
    let old = cs("1");
    let mut new = cs("1");
    new.spec.template.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    let mut v = serde_json::to_value(&new).unwrap();
    v["spec"]["replicas"] = json!(replicas);
    if let (Value::Object(m), Value::Object(e)) = (&mut v["spec"]["updateStrategy"], update_strategy) {
        m.extend(e);
    }
    let new: CloneSet = serde_json::from_value(v).unwrap();
    let (r1, r2) = (rev(&old, 1), rev(&new, 2));
    let h1 = r1.metadata.name.clone().unwrap();
    let old_pods: Vec<Pod> = (0..n)
        .map(|i| {
            let mut p = pod(&h1, json!({"name": format!("web-{i}"), "uid": format!("p{i}")}));
            p.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert(keys::LIFECYCLE_STATE_LABEL.into(), "Normal".into());
            p.status.as_mut().unwrap().conditions.as_mut().unwrap().push(
                serde_json::from_value(json!({"type": keys::INPLACE_UPDATE_READY, "status": "True"}))
                    .unwrap(),
            );
            p
        })
        .collect();
    let s = snapshot(&new, old_pods, vec![r1, r2]);
    let plan = crate::plan(&s);
    pods(&s, &plan)
}

#[test]
fn a_pod_held_by_the_partition_says_partition() {
    let why = rollout(json!({"partition": 2}), 2, 2);
    for p in &why {
        assert!(p.this_round.iter().any(|a| a.starts_with("nothing yet")), "{p:?}");
        assert!(
            p.waits.iter().any(|w| w.contains("updateStrategy.partition 2")),
            "{:?}",
            p.waits
        );
    }
}

#[test]
fn a_pod_waiting_for_its_batch_says_max_unavailable() {
    let why = rollout(json!({"maxUnavailable": 1}), 3, 3);
    let started: Vec<_> = why
        .iter()
        .filter(|p| p.this_round.iter().any(|a| a == "starts an in-place update"))
        .collect();
    assert_eq!(started.len(), 1, "{why:?}");
    let waiting: Vec<_> = why
        .iter()
        .filter(|p| p.this_round.iter().any(|a| a.starts_with("nothing yet")))
        .collect();
    assert_eq!(waiting.len(), 2, "{why:?}");
    for p in waiting {
        assert!(
            p.waits
                .iter()
                .any(|w| w.contains("its batch") && w.contains("maxUnavailable 1")),
            "{:?}",
            p.waits
        );
    }
}

#[test]
fn a_pod_held_by_the_in_place_hook_says_hook() {
    let old = cs("1");
    let mut v = serde_json::to_value(cs("1")).unwrap();
    v["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    v["spec"]["lifecycle"] = json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}}});
    let new: CloneSet = serde_json::from_value(v).unwrap();
    let (r1, r2) = (rev(&old, 1), rev(&new, 2));
    let h1 = r1.metadata.name.clone().unwrap();
    let mut p = pod(&h1, json!({}));
    let labels = p.metadata.labels.as_mut().unwrap();
    labels.insert(
        keys::LIFECYCLE_STATE_LABEL.into(),
        keys::lifecycle::PREPARING_UPDATE.into(),
    );
    labels.insert("hold".into(), "true".into());
    let s = snapshot(&new, vec![p], vec![r1, r2]);
    let plan = crate::plan(&s);
    let why = pods(&s, &plan);
    assert!(
        why[0].this_round.iter().any(|a| a.starts_with("nothing yet")),
        "{:?}",
        why[0]
    );
    assert!(
        why[0]
            .waits
            .iter()
            .any(|w| w.contains("lifecycle.inPlaceUpdate hook")),
        "{:?}",
        why[0].waits
    );
}
