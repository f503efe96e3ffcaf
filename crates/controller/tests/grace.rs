//! Sim-backed grace-period and completion edge cases (Kruise `pkg/util/inplaceupdate/inplace_update.go`,
//! `Refresh` and `finishGracePeriod`) on virtual time: a template changed again or rolled back during the
//! grace period, and a new tag of the same digest.

mod common;

use common::*;
use insitu_sim::cluster::SimConfig;
use insitu_sim::kubelet::ImageProfiles;
use k8s_openapi::api::core::v1::Pod;

fn status(p: &Pod) -> (String, String, i32) {
    let s = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    (
        s.image_id.clone(),
        s.container_id.clone().unwrap_or_default(),
        s.restart_count,
    )
}

fn in_grace(p: &Pod) -> bool {
    p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(insitu_api::keys::INPLACE_UPDATE_GRACE_ANNOTATION))
}

/// Kruise skips a pod in its grace period when choosing pods to update; when the grace ends it applies the
/// revision it started (the pod carries that revision's label), then updates the pod again to the newest.
#[test]
fn template_changed_again_during_grace_applies_both_in_turn() {
    run(async {
        let h = Harness::start(41).await;
        h.create(&cloneset("again", 1)).await; // grace 10 s
        h.wait_ready("again", 1, Some("nginx:1.19.0"), 120).await;
        let before = uid(&h.pods("again").await[0]);
        h.set_image("again", "nginx:1.20.0").await;
        h.wait_for("the pod in its grace period", 30, || async {
            h.pods("again").await.first().is_some_and(in_grace)
        })
        .await;
        h.sleep(2).await;
        h.set_image("again", "nginx:1.21.0").await;
        h.sleep(3).await;
        let p = &h.pods("again").await[0];
        assert!(in_grace(p), "still in the first grace period");
        assert_eq!(
            insitu_core::explain::podtable::image(p),
            "nginx:1.19.0",
            "nothing applied during the grace period"
        );
        h.wait_ready("again", 1, Some("nginx:1.21.0"), 300).await;
        let p = &h.pods("again").await[0];
        assert_eq!(uid(p), before, "in place");
        assert_eq!(
            status(p).2,
            2,
            "1.20.0 applied at the end of its grace, then 1.21.0"
        );
    });
}

/// A rollback during the grace period: the same rule, so the pod runs the abandoned version once before it
/// goes back (Kruise's behaviour; no recreate).
#[test]
fn rollback_during_grace_goes_back_in_place() {
    run(async {
        let h = Harness::start(42).await;
        h.create(&cloneset("back", 1)).await;
        h.wait_ready("back", 1, Some("nginx:1.19.0"), 120).await;
        let before = uid(&h.pods("back").await[0]);
        h.set_image("back", "nginx:1.20.0").await;
        h.wait_for("the pod in its grace period", 30, || async {
            h.pods("back").await.first().is_some_and(in_grace)
        })
        .await;
        h.set_image("back", "nginx:1.19.0").await;
        h.wait_for(
            "back on 1.19.0 after running 1.20.0, status settled",
            300,
            || async {
                let pods = h.pods("back").await;
                let st = h.status("back").await;
                pods.len() == 1
                    && is_ready(&pods[0])
                    && insitu_core::explain::podtable::image(&pods[0]) == "nginx:1.19.0"
                    && status(&pods[0]).2 == 2
                    && st.update_revision == st.current_revision
                    && st.updated_ready_replicas == 1
            },
        )
        .await;
        let p = &h.pods("back").await[0];
        assert_eq!(uid(p), before, "in place");
    });
}

/// Two tags of one digest: the kubelet reports the same imageID, so Kruise's completion check sees the new
/// tag in `status.image` of a new container (new containerID), not a new imageID.
#[test]
fn new_tag_of_the_same_digest_completes() {
    run(async {
        let digest = format!("sha256:{}", "5e".repeat(32));
        let images = ImageProfiles::default()
            .with_digest("nginx:1.19.0", &digest)
            .unwrap()
            .with_digest("nginx:1.19", &digest)
            .unwrap();
        let h = Harness::start_with(SimConfig {
            nodes: 2,
            seed: 43,
            images,
            ..Default::default()
        })
        .await;
        h.create(&cloneset("digest", 2)).await;
        h.wait_ready("digest", 2, Some("nginx:1.19.0"), 120).await;
        let before: Vec<(String, (String, String, i32))> = h
            .pods("digest")
            .await
            .iter()
            .map(|p| (uid(p), status(p)))
            .collect();
        h.set_image("digest", "nginx:1.19").await;
        h.wait_for("both pods updated and ready", 300, || async {
            let st = h.status("digest").await;
            let pods = h.pods("digest").await;
            st.updated_ready_replicas == 2
                && pods.iter().all(|p| {
                    is_ready(p)
                        && insitu_core::explain::podtable::image(p) == "nginx:1.19"
                        && p.metadata.labels.as_ref().unwrap()[insitu_api::keys::LIFECYCLE_STATE_LABEL]
                            == "Normal"
                })
        })
        .await;
        for p in h.pods("digest").await {
            let (old_uid, (old_image_id, old_cid, _)) =
                before.iter().find(|(u, _)| *u == uid(&p)).unwrap().clone();
            assert_eq!(old_uid, uid(&p));
            let (image_id, cid, restarts) = status(&p);
            assert_eq!(image_id, old_image_id, "same digest, same imageID");
            assert!(image_id.ends_with(&digest));
            assert_ne!(cid, old_cid, "a new container");
            assert_eq!(restarts, 1);
        }
    });
}
