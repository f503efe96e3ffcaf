//! Kruise's pre-download rules (`createImagePullJobsForInPlaceUpdate`), one case each.

use super::*;
use crate::revision::{new_revision, revision_data};
use serde_json::json;

fn cs(replicas: i32, image: &str, strategy: Value, annotations: Value) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web", "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "main", "image": image},
                                                 {"name": "side", "image": "busybox:1"}]}},
            "updateStrategy": strategy,
        }
    }))
    .unwrap()
}

fn rev(c: &CloneSet, n: i64) -> ControllerRevision {
    let data = revision_data(&c.spec.template);
    let bytes = crate::util::gojson::marshal(&data);
    new_revision(c, data, &bytes, n, 0)
}

fn in_place(partition: i32) -> Value {
    json!({"type": "InPlaceIfPossible", "partition": partition})
}

fn run(old: &CloneSet, new: &CloneSet, owned: &[String]) -> PreDownload {
    let (cur, upd) = (rev(old, 1), rev(new, 2));
    plan(&Input {
        cs: new,
        current: Some(&cur),
        update: Some(&upd),
        owned_jobs: owned,
        vertical: true,
    })
}

#[test]
fn one_job_per_changed_container_with_kruise_naming_labels_selector_and_parallelism() {
    let old = cs(5, "nginx:1", in_place(1), json!({}));
    let new = cs(5, "nginx:2", in_place(1), json!({PARALLELISM_ANNOTATION: "2"}));
    let p = run(&old, &new, &[]);
    let upd = rev(&new, 2);
    let name = upd.metadata.name.clone().unwrap();
    let hash = upd.metadata.labels.as_ref().unwrap()[keys::CONTROLLER_REVISION_HASH_KEY].clone();
    assert_eq!(p.create.len(), 1, "{p:?}");
    let j = &p.create[0];
    assert_eq!(j["metadata"]["name"], format!("{name}-main"));
    assert_eq!(j["metadata"]["namespace"], "ns");
    assert_eq!(
        j["metadata"]["labels"],
        json!({"app": "web", keys::CONTROLLER_REVISION_HASH_KEY: hash})
    );
    assert_eq!(j["metadata"]["ownerReferences"][0]["uid"], "uid-web");
    assert_eq!(j["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(j["spec"]["image"], "nginx:2");
    assert_eq!(j["spec"]["parallelism"], 2);
    assert_eq!(
        j["spec"]["pullPolicy"],
        json!({"backoffLimit": 1, "timeoutSeconds": 300})
    );
    assert_eq!(
        j["spec"]["completionPolicy"],
        json!({"type": "Always", "ttlSecondsAfterFinished": 600})
    );
    assert_eq!(
        j["spec"]["podSelector"],
        json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "controller-revision-hash", "operator": "NotIn", "values": [name, hash]}]})
    );
    assert_eq!(p.label_revision, Some((name, CREATED_LABEL)));
}

#[test]
fn defaults_and_timeout_annotation() {
    let old = cs(5, "nginx:1", in_place(1), json!({}));
    let new = cs(
        5,
        "nginx:2",
        in_place(1),
        json!({TIMEOUT_ANNOTATION: "60", PARALLELISM_ANNOTATION: "x"}),
    );
    let j = &run(&old, &new, &[]).create[0];
    assert_eq!(
        j["spec"]["parallelism"], 1,
        "unparsable parallelism keeps Kruise's default"
    );
    assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 60);
}

#[test]
fn ignored_cases_label_the_revision_and_create_nothing() {
    let cases = [
        (
            "recreate",
            cs(5, "nginx:1", json!({}), json!({})),
            cs(5, "nginx:2", json!({}), json!({})),
        ),
        (
            "3 replicas",
            cs(3, "nginx:1", in_place(1), json!({})),
            cs(3, "nginx:2", in_place(1), json!({})),
        ),
        (
            "one batch",
            cs(
                5,
                "nginx:1",
                json!({"type": "InPlaceIfPossible", "maxUnavailable": 5}),
                json!({}),
            ),
            cs(
                5,
                "nginx:2",
                json!({"type": "InPlaceIfPossible", "maxUnavailable": 5}),
                json!({}),
            ),
        ),
    ];
    for (what, old, new) in cases {
        let p = run(&old, &new, &[]);
        assert!(p.create.is_empty(), "{what}: {p:?}");
        assert_eq!(
            p.label_revision.as_ref().map(|l| l.1),
            Some(IGNORED_LABEL),
            "{what}"
        );
    }
    // Not in place: a changed env forces recreate, so nothing is worth pulling ahead.
    let old = cs(5, "nginx:1", in_place(1), json!({}));
    let mut new = cs(5, "nginx:2", in_place(1), json!({}));
    new.spec.template.spec.as_mut().unwrap().containers[0].env = Some(vec![
        serde_json::from_value(json!({"name": "A", "value": "1"})).unwrap(),
    ]);
    let p = run(&old, &new, &[]);
    assert!(
        p.create.is_empty() && p.why.contains("not an in-place update"),
        "{p:?}"
    );
}

#[test]
fn labelled_revision_and_min_updated_ready_pods_wait() {
    let old = cs(5, "nginx:1", in_place(1), json!({}));
    let new = cs(
        5,
        "nginx:2",
        in_place(1),
        json!({MIN_UPDATED_READY_PODS_ANNOTATION: "2"}),
    );
    let p = run(&old, &new, &[]);
    assert!(
        p.create.is_empty() && p.label_revision.is_none(),
        "0 < 2 updated ready: {p:?}"
    );

    let mut ready = new.clone();
    let upd = rev(&new, 2);
    ready.status = Some(
        serde_json::from_value(json!({
        "updateRevision": upd.metadata.name, "updatedReadyReplicas": 2}))
        .unwrap(),
    );
    assert_eq!(run(&old, &ready, &[]).create.len(), 1);

    let mut labelled = upd.clone();
    labelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(CREATED_LABEL.into(), "true".into());
    let cur = rev(&old, 1);
    let p = plan(&Input {
        cs: &ready,
        current: Some(&cur),
        update: Some(&labelled),
        owned_jobs: &[],
        vertical: true,
    });
    assert!(
        p.create.is_empty() && p.label_revision.is_none(),
        "created once per revision: {p:?}"
    );
}

#[test]
fn consistent_revisions_delete_owned_jobs() {
    let c = cs(5, "nginx:1", in_place(1), json!({}));
    let r = rev(&c, 1);
    let owned = vec!["web-abc-main".to_string()];
    let p = plan(&Input {
        cs: &c,
        current: Some(&r),
        update: Some(&r),
        owned_jobs: &owned,
        vertical: true,
    });
    assert_eq!(p.delete, owned);
    assert!(p.create.is_empty() && p.label_revision.is_none());
}

#[test]
fn changed_images_include_new_containers_only_when_changed() {
    let old = cs(5, "nginx:1", in_place(1), json!({}));
    let mut new = cs(5, "nginx:1", in_place(1), json!({}));
    new.spec.template.spec.as_mut().unwrap().containers[1].image = Some("busybox:2".into());
    let imgs = changed_images(&rev(&old, 1), &rev(&new, 2));
    assert_eq!(
        imgs.into_iter().collect::<Vec<_>>(),
        vec![("side".to_string(), "busybox:2".to_string())]
    );
}
