//! Env from metadata and container priorities in place: Kruise's `CalculateInPlaceUpdateSpec` #4 and its
//! `TestDefaultPatchUpdateSpecToPod` batch cases (`inplace_update_defaults_test.go`), the completion check on
//! the node agent's report, and launch-priority injection at pod creation.

use insitu_api::containermeta::{self, RUNTIME_CONTAINERS_META_ANNOTATION};
use insitu_api::inplace::InPlaceUpdateState;
use insitu_core::inplaceupdate::{self, StartTemplate};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn now() -> Timestamp {
    Timestamp::from_second(1_764_000_000).unwrap()
}

fn tpl(labels: Value, containers: Value) -> Value {
    json!({"$patch": "replace", "metadata": {"creationTimestamp": null, "labels": labels},
           "spec": {"containers": containers}})
}

fn env_label(key: &str) -> Value {
    json!([{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.labels['{key}']")}}}])
}

#[test]
fn kruise_case_4_label_read_by_env_goes_to_its_container() {
    let old = tpl(
        json!({"app": "a", "k": "v1"}),
        json!([{"name": "c1", "image": "foo1", "env": env_label("k")}]),
    );
    let new = tpl(
        json!({"app": "a", "k": "v2", "k1": "v1"}),
        json!([{"name": "c1", "image": "foo2", "env": env_label("k")}]),
    );
    let s = inplaceupdate::calculate(&old, &new, true).unwrap();
    assert_eq!(s.images.get("c1").map(String::as_str), Some("foo2"));
    assert!(s.update_env_from_metadata);
    assert_eq!(
        s.ref_metadata["c1"].labels,
        std::collections::BTreeMap::from([("k".to_string(), "v2".to_string())])
    );
    // The referenced key leaves the plain metadata patch: it reaches the pod with c1's batch.
    assert_eq!(
        s.meta_patch.as_deref(),
        Some(r#"{"metadata":{"labels":{"k1":"v1"}}}"#)
    );
    assert!(!s.labels.contains_key("k"));
}

#[test]
fn a_label_nobody_reads_is_plain_metadata() {
    let old = tpl(
        json!({"app": "a", "k": "v1"}),
        json!([{"name": "c1", "image": "foo1"}]),
    );
    let new = tpl(
        json!({"app": "a", "k": "v2"}),
        json!([{"name": "c1", "image": "foo1"}]),
    );
    let s = inplaceupdate::calculate(&old, &new, true).unwrap();
    assert!(!s.update_env_from_metadata && s.ref_metadata.is_empty());
    assert_eq!(s.labels.get("k"), Some(&Some("v2".to_string())));
}

fn barrier(p: i64) -> Value {
    json!({"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": format!("p_{p}")}}})
}

fn field(path: &str) -> Value {
    json!({"name": "config", "valueFrom": {"fieldRef": {"fieldPath": path}}})
}

/// Kruise's `givenPod`: c1 p_20 reads label-k1, c2 p_10 and c3 p_0 read label-k2, c4 p_0 reads annotation-k1.
fn containers(images: [&str; 4]) -> Value {
    json!([
        {"name": "c1", "image": images[0], "env": [barrier(20), field("metadata.labels['label-k1']")]},
        {"name": "c2", "image": images[1], "env": [barrier(10), field("metadata.labels['label-k2']")]},
        {"name": "c3", "image": images[2], "env": [barrier(0), field("metadata.labels['label-k2']")]},
        {"name": "c4", "image": images[3], "env": [barrier(0), field("metadata.annotations['annotation-k1']")]}
    ])
}

fn pod(ready: &[&str]) -> Pod {
    let statuses: Vec<Value> = ["c1", "c2", "c3", "c4"]
        .iter()
        .map(|c| json!({"name": c, "image": format!("{c}-img"), "imageID": format!("containerd://{c}-img"), "ready": ready.contains(c), "restartCount": 0}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"label-k1": "foo", "label-k2": "foo"}, "annotations": {"annotation-k1": "foo"}},
        "spec": {"containers": containers(["c1-img", "c2-img", "c3-img", "c4-img"])},
        "status": {"containerStatuses": statuses}
    }))
    .unwrap()
}

fn state_of(m: &insitu_core::PodMutation) -> InPlaceUpdateState {
    serde_json::from_str(
        m.annotations[insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION]
            .as_deref()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn kruise_batches_by_priority_with_shared_labels() {
    let old = tpl(
        json!({"label-k1": "foo", "label-k2": "foo"}),
        containers(["c1-img", "c2-img", "c3-img", "c4-img"]),
    );
    let new = tpl(
        json!({"label-k1": "foo", "label-k2": "bar"}),
        containers(["c1-img-new", "c2-img-new", "c3-img", "c4-img-new"]),
    );
    let spec = inplaceupdate::calculate(&old, &new, true).unwrap();
    assert_eq!(spec.ref_metadata.keys().collect::<Vec<_>>(), ["c2", "c3"]);
    let start = StartTemplate::new(spec, "rev-new", "rev-new", 0, now());
    // 1st batch: c1 alone (priority 20); the others wait.
    let m = start.mutation(&pod(&[]));
    assert_eq!(m.container_images.keys().collect::<Vec<_>>(), ["c1"]);
    assert!(
        !m.labels.contains_key("label-k2"),
        "label-k2 waits for c2/c3's batch"
    );
    let st = state_of(&m);
    assert!(st.update_env_from_metadata && st.update_images);
    assert_eq!(st.container_batches_record[0].containers, ["c1"]);
    assert_eq!(
        st.pre_check_before_next
            .as_ref()
            .unwrap()
            .containers_required_ready,
        ["c1"]
    );
    assert_eq!(st.next_container_images.keys().collect::<Vec<_>>(), ["c2", "c4"]);
    assert_eq!(
        st.next_container_ref_metadata.keys().collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    assert!(inplaceupdate::has_next_batch(&st));
    // Not before c1 is ready.
    assert!(inplaceupdate::next_batch(&pod(&[]), st.clone(), now()).is_err());
    // 2nd batch: c2 (priority 10) and c3, which shares label-k2 with it.
    let m = inplaceupdate::next_batch(&pod(&["c1"]), st, now()).unwrap();
    assert_eq!(m.container_images.keys().collect::<Vec<_>>(), ["c2"]);
    assert_eq!(m.labels.get("label-k2"), Some(&Some("bar".to_string())));
    let st = state_of(&m);
    let batches: Vec<&Vec<String>> = st
        .container_batches_record
        .iter()
        .map(|b| &b.containers)
        .collect();
    assert_eq!(
        batches,
        [&vec!["c1".to_string()], &vec!["c2".to_string(), "c3".to_string()]]
    );
    assert_eq!(
        st.pre_check_before_next
            .as_ref()
            .unwrap()
            .containers_required_ready,
        ["c2", "c3"]
    );
    assert_eq!(st.next_container_images.keys().collect::<Vec<_>>(), ["c4"]);
    assert!(st.next_container_ref_metadata.is_empty());
    let last = st.last_container_statuses.as_ref().unwrap();
    assert_eq!(
        last.keys().collect::<Vec<_>>(),
        ["c1", "c2"],
        "imageIDs only of image changes"
    );
    // 3rd batch: c4.
    let m = inplaceupdate::next_batch(&pod(&["c1", "c2", "c3"]), st, now()).unwrap();
    assert_eq!(m.container_images.keys().collect::<Vec<_>>(), ["c4"]);
    let st = state_of(&m);
    assert!(st.pre_check_before_next.is_none() && !inplaceupdate::has_next_batch(&st));
    assert_eq!(st.container_batches_record.len(), 3);
}

#[test]
fn env_update_completes_only_on_the_agents_report() {
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"k": "v2"}},
        "spec": {"containers": [{"name": "c1", "image": "foo1", "env": env_label("k")}]},
        "status": {"containerStatuses": [{"name": "c1", "image": "foo1", "imageID": "id1", "containerID": "containerd://b", "ready": true, "restartCount": 1}]}
    }))
    .unwrap();
    let st = InPlaceUpdateState {
        revision: "r".into(),
        update_env_from_metadata: true,
        ..Default::default()
    };
    let err = inplaceupdate::containers_completed(&p, &st).unwrap_err();
    assert!(err.contains("runtime-container-meta not found"), "{err}");
    let report = |id: &str, value: &str| {
        json!({"containers": [{"name": "c1", "containerID": id, "restartCount": 1,
            "hashes": {"plainHash": 1, "extractedEnvFromMetadataHash": containermeta::hash_envs(&[("E".into(), value.into())])}}]})
        .to_string()
    };
    let set = |p: &mut Pod, v: String| {
        p.metadata.annotations = Some([(RUNTIME_CONTAINERS_META_ANNOTATION.to_string(), v)].into());
    };
    set(&mut p, report("containerd://a", "v2"));
    assert!(
        inplaceupdate::containers_completed(&p, &st).is_err(),
        "another container"
    );
    set(&mut p, report("containerd://b", "v1"));
    assert!(inplaceupdate::containers_completed(&p, &st).is_err(), "old value");
    set(&mut p, report("containerd://b", "v2"));
    assert_eq!(inplaceupdate::containers_completed(&p, &st), Ok(()));
}
