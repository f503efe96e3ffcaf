//! Sim-backed Advanced StatefulSet scenarios on virtual time (`insitu run --workloads cloneset,statefulset`):
//! pods created in ordinal order with their PVCs, an image change rolled in place (same pods, names and
//! claims; one restart each), a partition that updates only the ordinals at or above it, and a scale-down
//! that removes the highest ordinal.

mod common;

use std::collections::BTreeMap;

use common::*;
use insitu_api::statefulset::StatefulSet;
use insitu_controller::Config;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

fn statefulset(name: &str, replicas: i32) -> StatefulSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "main", "image": "nginx:1.19.0",
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
                }
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
        }
    }))
    .unwrap()
}

async fn start(seed: u64) -> Harness {
    let mut h = Harness::without_controller(seed).await;
    h.start_controller_with(Config {
        statefulset: true,
        ..Config::default()
    });
    h
}

fn sets(h: &Harness) -> Api<StatefulSet> {
    Api::namespaced(h.client.clone(), "default")
}

async fn patch(h: &Harness, name: &str, p: serde_json::Value) {
    sets(h)
        .patch(name, &PatchParams::default(), &Patch::Merge(&p))
        .await
        .expect("patch statefulset");
}

async fn set_image(h: &Harness, name: &str, image: &str) {
    let p = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}]);
    let p: json_patch::Patch = serde_json::from_value(p).unwrap();
    sets(h)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
        .await
        .expect("set image");
}

/// Live PVCs: name → uid.
async fn pvcs(h: &Harness) -> BTreeMap<String, String> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .expect("list pvcs")
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| (c.name_any(), c.uid().unwrap_or_default()))
        .collect()
}

fn image(p: &Pod) -> String {
    insitu_core::explain::podtable::image(p).to_string()
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count)
}

#[test]
fn created_in_order_then_rolled_in_place_keeping_pods_and_claims() {
    run(async {
        let h = start(41).await;
        sets(&h)
            .create(&PostParams::default(), &statefulset("db", 3))
            .await
            .expect("create statefulset");
        h.wait_ready("db", 3, None, 300).await;
        let pods = h.pods("db").await;
        let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["db-0", "db-1", "db-2"]);
        // OrderedReady: each pod was created after its predecessor was Ready.
        let created: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.creation_timestamp.clone().unwrap().0)
            .collect();
        assert!(
            created.windows(2).all(|w| w[0] < w[1]),
            "created in order: {created:?}"
        );
        let claims = pvcs(&h).await;
        assert_eq!(
            claims.keys().cloned().collect::<Vec<_>>(),
            ["data-db-0", "data-db-1", "data-db-2"]
        );
        for p in &pods {
            let vol = p
                .spec
                .as_ref()
                .unwrap()
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == "data")
                .unwrap();
            let claim = &vol.persistent_volume_claim.as_ref().unwrap().claim_name;
            assert_eq!(claim, &format!("data-{}", p.name_any()));
        }
        let uids: Vec<String> = pods.iter().map(uid).collect();

        set_image(&h, "db", "nginx:1.20.0").await;
        h.wait_ready("db", 3, Some("nginx:1.20.0"), 600).await;
        let pods = h.pods("db").await;
        assert_eq!(pods.iter().map(|p| p.name_any()).collect::<Vec<_>>(), names);
        assert_eq!(
            pods.iter().map(uid).collect::<Vec<_>>(),
            uids,
            "updated in place: same pods"
        );
        for p in &pods {
            assert_eq!(restarts(p), 1, "{} restarted once", p.name_any());
        }
        assert_eq!(pvcs(&h).await, claims, "the same claims, never recreated");
        h.wait_for("status reports the rollout done", 60, || async {
            let st = sets(&h)
                .get_status("db")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            st.updated_replicas == 3 && st.ready_replicas == 3 && st.current_revision == st.update_revision
        })
        .await;
    });
}

#[test]
fn partition_updates_only_the_highest_ordinal_and_scale_down_removes_it() {
    run(async {
        let h = start(42).await;
        sets(&h)
            .create(&PostParams::default(), &statefulset("kv", 3))
            .await
            .expect("create statefulset");
        h.wait_ready("kv", 3, None, 300).await;
        let uids: Vec<String> = h.pods("kv").await.iter().map(uid).collect();
        patch(
            &h,
            "kv",
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
        )
        .await;
        set_image(&h, "kv", "nginx:1.20.0").await;
        h.wait_for("kv-2 updated in place", 300, || async {
            let pods = h.pods("kv").await;
            pods.len() == 3 && image(&pods[2]) == "nginx:1.20.0" && is_ready(&pods[2])
        })
        .await;
        // Long enough for another pod to have been updated, were the partition ignored.
        h.sleep(60).await;
        let pods = h.pods("kv").await;
        let images: Vec<String> = pods.iter().map(image).collect();
        assert_eq!(images, ["nginx:1.19.0", "nginx:1.19.0", "nginx:1.20.0"]);
        assert_eq!(pods.iter().map(uid).collect::<Vec<_>>(), uids);
        let st = sets(&h)
            .get_status("kv")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        assert_eq!((st.current_replicas, st.updated_replicas), (2, 1));

        patch(&h, "kv", json!({"spec": {"replicas": 2}})).await;
        h.wait_for("kv-2 removed", 300, || async {
            let names: Vec<String> = h.pods("kv").await.iter().map(|p| p.name_any()).collect();
            names == ["kv-0", "kv-1"]
        })
        .await;
        let left: Vec<String> = h.pods("kv").await.iter().map(uid).collect();
        assert_eq!(left, uids[..2], "the lower ordinals are untouched");
        assert!(
            pvcs(&h).await.contains_key("data-kv-2"),
            "Retain: the claim of a removed ordinal stays"
        );
    });
}
