//! Lifecycle hooks through the whole stack on virtual time: `markPodNotReady` holds a hooked pod out of service.

mod common;

use common::*;
use insitu_api::keys;
use insitu_core::explain::podtable::condition;
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn lifecycle(p: &k8s_openapi::api::core::v1::Pod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::LIFECYCLE_STATE_LABEL))
        .map_or("", String::as_str)
}

#[test]
fn mark_pod_not_ready_holds_hooked_pods_until_released() {
    run(async {
        let h = Harness::start(21).await;
        let mut cs = cloneset("hooked", 2);
        // Every pod carries the hook label from its template: the in-place update waits for it to go.
        cs.spec
            .template
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("hold".into(), "true".into());
        cs.spec.lifecycle = Some(
            serde_json::from_value(
                json!({"inPlaceUpdate": {"labelsHandler": {"hold": "true"}, "markPodNotReady": true}}),
            )
            .unwrap(),
        );
        h.create(&cs).await;
        h.wait_ready("hooked", 2, None, 120).await;
        let pods = h.pods("hooked").await;
        assert!(
            pods.iter()
                .all(|p| condition(p, keys::KRUISE_POD_READY) == Some("True"))
        );
        let before: Vec<String> = pods.iter().map(uid).collect();

        h.set_image("hooked", "nginx:1.21.0").await;
        // maxUnavailable 1: one pod is taken out of service at a time, and it waits for its hook.
        h.wait_for("a pod held in PreparingUpdate, not ready", 120, || async {
            let pods = h.pods("hooked").await;
            pods.iter().any(|p| {
                lifecycle(p) == "PreparingUpdate"
                    && condition(p, keys::KRUISE_POD_READY) == Some("False")
                    && !is_ready(p)
            })
        })
        .await;
        h.sleep(60).await;
        let pods = h.pods("hooked").await;
        assert!(
            pods.iter()
                .all(|p| insitu_core::explain::podtable::image(p) == "nginx:1.19.0"),
            "hooked pods are not updated"
        );
        let held = pods.iter().filter(|p| lifecycle(p) == "PreparingUpdate").count();
        assert_eq!(held, 1, "one at a time (maxUnavailable 1)");

        // The hook owner's protocol (Kruise): remove the label to let the held pod update, put it back once
        // the pod is `Updated` so it returns to `Normal`; then the next pod gets its turn.
        for round in 0..2 {
            let held = h
                .pods("hooked")
                .await
                .into_iter()
                .find(|p| lifecycle(p) == "PreparingUpdate");
            let held = held.unwrap_or_else(|| panic!("round {round}: no pod in PreparingUpdate"));
            let name = held.metadata.name.clone().unwrap();
            set_hold(&h, &name, false).await;
            h.wait_for("the released pod updated in place and ready", 120, || async {
                let pods = h.pods("hooked").await;
                pods.iter().any(|p| {
                    p.metadata.name.as_deref() == Some(name.as_str())
                        && lifecycle(p) == "Updated"
                        && insitu_core::explain::podtable::image(p) == "nginx:1.21.0"
                        && condition(p, keys::KRUISE_POD_READY) == Some("True")
                        && is_ready(p)
                })
            })
            .await;
            set_hold(&h, &name, true).await;
            if round == 0 {
                h.wait_for("the next pod held", 120, || async {
                    let pods = h.pods("hooked").await;
                    pods.iter().any(|p| lifecycle(p) == "PreparingUpdate")
                })
                .await;
            }
        }
        h.wait_ready("hooked", 2, Some("nginx:1.21.0"), 120).await;
        h.wait_for("both pods Normal", 60, || async {
            h.pods("hooked").await.iter().all(|p| lifecycle(p) == "Normal")
        })
        .await;
        let pods = h.pods("hooked").await;
        assert!(pods.iter().all(|p| before.contains(&uid(p))), "updated in place");
        assert!(
            pods.iter()
                .all(|p| condition(p, keys::KRUISE_POD_READY) == Some("True"))
        );
    });
}

async fn set_hold(h: &Harness, pod: &str, on: bool) {
    let value = if on { json!("true") } else { json!(null) };
    let patch = json!({"metadata": {"labels": {"hold": value}}});
    h.pods_api()
        .patch(pod, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}
