//! Sim-backed PVC scenarios on virtual time: claims from volumeClaimTemplates are created before their pods and
//! bound, scale down takes the victim's claim along, an in-place update keeps every claim; a pod deleted behind
//! the controller's back comes back with its claim, unless disablePVCReuse; the claims go with the CloneSet.

mod common;

use std::collections::BTreeMap;

use common::*;
use insitu_api::{CloneSet, keys};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Live PVCs of `app` (no deletionTimestamp): name → (uid, phase).
async fn pvcs(h: &Harness, app: &str) -> BTreeMap<String, (String, String)> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), "default");
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pvcs")
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| {
            let phase = c
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            (c.name_any(), (c.uid().unwrap_or_default(), phase))
        })
        .collect()
}

/// The claim each pod mounts as `data`.
fn claims(pods: &[Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            p.spec
                .as_ref()?
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == "data")?
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.clone())
        })
        .collect();
    v.sort();
    v
}

/// `cs` with a volumeClaimTemplate `data` (label tier=storage), mounted at /data.
fn with_claims(mut cs: CloneSet) -> CloneSet {
    cs.spec.volume_claim_templates = vec![
        serde_json::from_value(json!({
            "metadata": {"name": "data", "labels": {"tier": "storage"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap(),
    ];
    if let Some(c) = cs
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.volume_mounts = Some(vec![
            serde_json::from_value(json!({"name": "data", "mountPath": "/data"})).unwrap(),
        ]);
    }
    cs
}

#[test]
fn pvcs_follow_their_pods_through_scale_down_and_in_place_update() {
    run(async {
        let h = Harness::start(21).await;
        let cs = with_claims(cloneset("vols", 3));
        h.create(&cs).await;
        h.wait_ready("vols", 3, None, 180).await;
        h.wait_for("3 bound PVCs, one per pod", 60, || async {
            let pods = h.pods("vols").await;
            let pvcs = pvcs(&h, "vols").await;
            pvcs.len() == 3
                && pvcs.values().all(|(_, phase)| phase == "Bound")
                && claims(&pods) == pvcs.keys().cloned().collect::<Vec<_>>()
        })
        .await;
        let pods = h.pods("vols").await;
        for p in &pods {
            let id = &p.labels()[keys::INSTANCE_ID_LABEL];
            assert_eq!(p.name_any(), format!("vols-{id}"));
            assert_eq!(claims(std::slice::from_ref(p)), [format!("data-vols-{id}")]);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), "default");
        let one = api.get(&claims(&pods)[0]).await.expect("get pvc");
        let labels = one.labels();
        assert_eq!(labels.get("tier").map(String::as_str), Some("storage"));
        assert!(labels.contains_key(keys::INSTANCE_ID_LABEL));
        let refs = one.owner_references();
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (refs[0].kind.as_str(), refs[0].name.as_str()),
            ("CloneSet", "vols")
        );
        assert_eq!(refs[0].controller, Some(true));

        // Scale down: the victim's PVC goes with it, the others stay as they are.
        let before = pvcs(&h, "vols").await;
        h.merge_patch("vols", json!({"spec": {"replicas": 2}})).await;
        h.wait_ready("vols", 2, None, 300).await;
        h.wait_for("the victim's PVC deleted", 120, || async {
            let pvcs = pvcs(&h, "vols").await;
            pvcs.len() == 2 && claims(&h.pods("vols").await) == pvcs.keys().cloned().collect::<Vec<_>>()
        })
        .await;
        let after = pvcs(&h, "vols").await;
        assert!(
            after.iter().all(|(name, v)| before.get(name) == Some(v)),
            "kept PVCs untouched"
        );

        // In-place image update: same pods, same PVCs (names and UIDs).
        let uids: Vec<String> = h.pods("vols").await.iter().map(uid).collect();
        h.set_image("vols", "nginx:1.21.0").await;
        h.wait_ready("vols", 2, Some("nginx:1.21.0"), 600).await;
        let pods = h.pods("vols").await;
        assert_eq!(pods.iter().map(uid).collect::<Vec<_>>(), uids, "updated in place");
        assert_eq!(
            pvcs(&h, "vols").await,
            after,
            "PVCs kept through the in-place update"
        );
    });
}

#[test]
fn deleted_pods_get_their_pvcs_back_unless_reuse_is_disabled() {
    run(async {
        let h = Harness::start(22).await;
        h.create(&with_claims(cloneset("reuse", 2))).await;
        h.wait_ready("reuse", 2, None, 180).await;
        h.wait_for("2 bound PVCs", 60, || async {
            let p = pvcs(&h, "reuse").await;
            p.len() == 2 && p.values().all(|(_, phase)| phase == "Bound")
        })
        .await;
        let before = pvcs(&h, "reuse").await;
        let names: Vec<String> = h.pods("reuse").await.iter().map(|p| p.name_any()).collect();
        let victim = h.pods("reuse").await[0].clone();

        // Reuse (the default): the replacement waits for the old pod to go, then takes its name and claim.
        h.pods_api()
            .delete(&victim.name_any(), &DeleteParams::default())
            .await
            .expect("delete pod");
        h.wait_for("the pod replaced under the same name", 300, || async {
            let pods = h.pods("reuse").await;
            pods.len() == 2
                && pods.iter().all(is_ready)
                && pods.iter().map(|p| p.name_any()).collect::<Vec<_>>() == names
                && !pods.iter().any(|p| uid(p) == uid(&victim))
        })
        .await;
        assert_eq!(pvcs(&h, "reuse").await, before, "same claims, same UIDs");

        // disablePVCReuse: the claim is handed over to the deleted pod and goes with it; the replacement is new.
        h.merge_patch(
            "reuse",
            json!({"spec": {"scaleStrategy": {"disablePVCReuse": true}}}),
        )
        .await;
        let victim = h.pods("reuse").await[1].clone();
        let victim_claim = claims(std::slice::from_ref(&victim))[0].clone();
        h.pods_api()
            .delete(&victim.name_any(), &DeleteParams::default())
            .await
            .expect("delete pod");
        h.wait_for("a new pod with a new claim; the old claim gone", 300, || async {
            let pods = h.pods("reuse").await;
            let p = pvcs(&h, "reuse").await;
            pods.len() == 2
                && pods.iter().all(is_ready)
                && !pods.iter().any(|p| p.name_any() == victim.name_any())
                && p.len() == 2
                && !p.contains_key(&victim_claim)
                && claims(&pods) == p.keys().cloned().collect::<Vec<_>>()
        })
        .await;

        // Handed over while the pod was terminating (one PVC patch), then collected with the pod.
        let m = h.metrics.render();
        assert!(
            m.contains(r#"insitu_api_writes_total{verb="patch",resource="persistentvolumeclaims"} 1"#),
            "{m}"
        );

        // The CloneSet's deletion takes its claims along (garbage collector).
        h.clonesets()
            .delete("reuse", &DeleteParams::default())
            .await
            .expect("delete cloneset");
        h.wait_for("no claims left", 300, || async {
            pvcs(&h, "reuse").await.is_empty()
        })
        .await;
    });
}
