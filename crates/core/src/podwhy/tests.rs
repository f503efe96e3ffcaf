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
    let bytes = crate::gojson::marshal(&data);
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
