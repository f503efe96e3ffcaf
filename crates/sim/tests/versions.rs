//! The embedded apiserver serves CloneSets at v1alpha1 and v1beta1 (storage), converting in-process with
//! `insitu_api::conversion`: create in one version, read, list, watch, patch and validate in the other.

mod common;

use common::server;
use futures::{StreamExt, TryStreamExt};
use insitu_api::{CloneSet, v1beta1};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

fn beta(name: &str) -> v1beta1::CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly",
                               "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}}},
            "scaleStrategy": {"enablePVCReuse": true, "excludePreparingDelete": true},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
        }
    }))
    .expect("v1beta1 cloneset")
}

#[tokio::test(start_paused = true)]
async fn a_v1beta1_cloneset_reads_as_v1alpha1_and_back() {
    let s = server();
    let betas: Api<v1beta1::CloneSet> = Api::default_namespaced(s.client());
    let alphas: Api<CloneSet> = Api::default_namespaced(s.client());
    let created = betas
        .create(&PostParams::default(), &beta("web"))
        .await
        .expect("create v1beta1");
    let ru = created
        .spec
        .update_strategy
        .clone()
        .and_then(|u| u.rolling_update)
        .expect("rollingUpdate");
    assert_eq!(
        ru.partition,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
    );
    assert_eq!(
        ru.max_unavailable.as_ref().map(|m| serde_json::to_value(m).ok()),
        Some(Some(json!("20%")))
    );

    let a = alphas.get("web").await.expect("get v1alpha1");
    let us = a.spec.update_strategy.clone().unwrap_or_default();
    assert_eq!(us.type_.as_deref(), Some("InPlaceOnly"));
    assert_eq!(
        us.in_place_update_strategy.and_then(|i| i.grace_period_seconds),
        Some(5)
    );
    assert!(
        !a.spec
            .scale_strategy
            .clone()
            .unwrap_or_default()
            .disable_pvc_reuse
    );
    assert_eq!(
        a.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(insitu_api::keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL)),
        Some(&"true".to_string())
    );
    assert_eq!(a.metadata.uid, created.metadata.uid);
    assert_eq!(a.metadata.resource_version, created.metadata.resource_version);

    let list = alphas.list(&ListParams::default()).await.expect("list v1alpha1");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].spec.update_strategy, a.spec.update_strategy);

    // A patch through v1alpha1 keeps what only v1beta1 says.
    alphas
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("merge patch v1alpha1");
    let b = betas.get("web").await.expect("get v1beta1");
    assert_eq!(b.spec.replicas, Some(5));
    assert_eq!(b.spec.update_strategy, created.spec.update_strategy);
    assert_eq!(b.spec.scale_strategy, created.spec.scale_strategy);
    assert!(
        b.metadata.labels.is_none(),
        "the v1alpha1 spelling does not leak into v1beta1: {:?}",
        b.metadata.labels
    );

    // Status written through v1alpha1 reads the same in v1beta1.
    let mut st = a.status.clone().unwrap_or_default();
    st.replicas = 5;
    st.update_revision = "web-abc".into();
    alphas
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": st})),
        )
        .await
        .expect("status v1alpha1");
    let b = betas.get("web").await.expect("get v1beta1");
    assert_eq!(
        b.status.map(|s| (s.replicas, s.update_revision)),
        Some((5, "web-abc".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn watches_and_validation_speak_the_request_version() {
    let s = server();
    let betas: Api<v1beta1::CloneSet> = Api::default_namespaced(s.client());
    let alphas: Api<CloneSet> = Api::default_namespaced(s.client());
    let mut w = alphas
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch v1alpha1")
        .boxed();
    betas
        .create(&PostParams::default(), &beta("w"))
        .await
        .expect("create");
    match w.try_next().await.expect("event") {
        Some(WatchEvent::Added(cs)) => {
            assert_eq!(
                cs.spec.update_strategy.and_then(|u| u.type_).as_deref(),
                Some("InPlaceOnly")
            );
        }
        other => panic!("expected Added, got {other:?}"),
    }

    // v1beta1's rules and paths.
    let mut bad = serde_json::to_value(beta("bad")).unwrap_or(Value::Null);
    bad["spec"]["updateStrategy"]["type"] = json!("Sometimes");
    bad["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = json!(1);
    let bad: v1beta1::CloneSet = serde_json::from_value(bad).expect("bad");
    let err = betas
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid");
    let (_, _, msg) = common::api_err(err);
    assert!(
        msg.contains(
            "spec.updateStrategy.type: Invalid value: \"Sometimes\": must be 'RollingUpdate' or 'OnDelete'"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"1\": can not use maxSurge with podUpdatePolicy InPlaceOnly"),
        "{msg}"
    );

    // v1alpha1's rules and paths for a v1alpha1 request.
    let mut a = alphas.get("w").await.expect("get");
    a.spec.update_strategy.get_or_insert_with(Default::default).type_ = Some("OnDelete".into());
    let err = alphas
        .replace("w", &PostParams::default(), &a)
        .await
        .expect_err("OnDelete is v1beta1 only");
    let (_, _, msg) = common::api_err(err);
    assert!(
        msg.contains("spec.updateStrategy.type: Invalid value: \"OnDelete\""),
        "{msg}"
    );
}

#[tokio::test(start_paused = true)]
async fn discovery_serves_both_versions_v1beta1_preferred() {
    let s = server();
    let client = s.client();
    let groups: Value = client
        .request(
            http::Request::get("/apis/apps.kruise.io")
                .body(Vec::new())
                .expect("req"),
        )
        .await
        .expect("group");
    let versions: Vec<&str> = groups["versions"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v["version"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(versions, ["v1beta1", "v1alpha1"]);
    assert_eq!(groups["preferredVersion"]["version"], "v1beta1");
    for v in ["v1alpha1", "v1beta1"] {
        let res: Value = client
            .request(
                http::Request::get(format!("/apis/apps.kruise.io/{v}"))
                    .body(Vec::new())
                    .expect("req"),
            )
            .await
            .expect("resources");
        let names: Vec<&str> = res["resources"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            names,
            [
                "clonesets",
                "clonesets/status",
                "clonesets/scale",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "imagepulljobs",
                "imagepulljobs/status"
            ],
            "{v}"
        );
    }
}
