//! Events on the simulated cluster: Kruise's reasons and messages, shaped by client-go's event correlator.

mod common;

use common::{Harness, cloneset, run};
use insitu_api::CloneSet;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;

const COMBINED: &str = "(combined from similar events): ";

async fn events_of(h: &Harness, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let mut evs: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .collect();
    evs.sort_by_key(|e| e.metadata.name.clone());
    evs
}

fn with_reason<'e>(evs: &'e [Event], reason: &str) -> Vec<&'e Event> {
    evs.iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

fn show(evs: &[&Event]) -> Vec<String> {
    evs.iter()
        .map(|e| {
            format!(
                "{} {:?} x{}",
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default(),
                e.count.unwrap_or_default()
            )
        })
        .collect()
}

fn event_writes(h: &Harness) -> u64 {
    let text = h.metrics.render();
    text.lines()
        .filter(|l| l.starts_with("insitu_api_writes_total{") && l.contains("resource=\"events\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_rollout_of_many_pods_writes_kruises_events_within_client_gos_budget() {
    run(async {
        let h = Harness::start(23).await;
        let mut cs = cloneset("noisy", 20);
        // All 20 at once, no grace period: the whole rollout takes less than the spam filter's 300 s refill.
        let mut v = serde_json::to_value(&cs).unwrap();
        v["spec"]["updateStrategy"]["maxUnavailable"] = "100%".into();
        v["spec"]["updateStrategy"]["inPlaceUpdateStrategy"] = serde_json::Value::Null;
        cs = serde_json::from_value::<CloneSet>(v).unwrap();
        h.create(&cs).await;
        h.wait_ready("noisy", 20, None, 120).await;
        h.sleep(5).await;

        // Scale-up: 20 "succeed to create pod" occurrences. The first 9 are Events of their own; from the
        // 10th, distinct messages of one reason are one combined Event counted up (client-go aggregation).
        let evs = events_of(&h, "noisy").await;
        let creates = with_reason(&evs, "SuccessfulCreate");
        let (combined, single): (Vec<&Event>, Vec<&Event>) = creates
            .iter()
            .partition(|e| e.message.as_deref().unwrap_or_default().starts_with(COMBINED));
        assert_eq!(
            single.len(),
            9,
            "individual SuccessfulCreate events: {:#?}",
            show(&creates)
        );
        for e in &single {
            let msg = e.message.as_deref().unwrap_or_default();
            assert!(msg.starts_with("succeed to create pod noisy-"), "{msg}");
            assert_eq!(e.count, Some(1));
            assert_eq!(e.type_.as_deref(), Some("Normal"));
            assert_eq!(e.involved_object.kind.as_deref(), Some("CloneSet"));
            // Kruise master's controller records on the v1beta1 object (written here through v1alpha1).
            assert_eq!(
                e.involved_object.api_version.as_deref(),
                Some("apps.kruise.io/v1beta1")
            );
            assert_eq!(
                e.source.as_ref().and_then(|s| s.component.as_deref()),
                Some("cloneset-controller")
            );
        }
        assert_eq!(
            combined.len(),
            1,
            "one combined SuccessfulCreate event: {:#?}",
            show(&creates)
        );
        assert_eq!(combined[0].count, Some(11), "occurrences 10..=20 counted on it");
        assert_eq!(
            event_writes(&h),
            20,
            "9 creates + 1 combined create + 10 count patches"
        );

        // The rollout: 20 more occurrences, but the object's budget of 25 writes has 5 left and refills
        // one per 300 s, so most are dropped (and counted in insitu_events_skipped_total).
        h.set_image("noisy", "nginx:1.21.0").await;
        h.wait_ready("noisy", 20, Some("nginx:1.21.0"), 600).await;
        h.sleep(5).await;
        let evs = events_of(&h, "noisy").await;
        let in_place = with_reason(&evs, "SuccessfulUpdatePodInPlace");
        assert_eq!(in_place.len(), 5, "{:#?}", show(&evs.iter().collect::<Vec<_>>()));
        for e in &in_place {
            let msg = e.message.as_deref().unwrap_or_default();
            assert!(
                msg.starts_with("successfully update pod noisy-")
                    && msg.contains(" in-place(revision noisy-"),
                "{msg}"
            );
        }
        assert_eq!(event_writes(&h), 25, "client-go's burst per object");
        let skipped = h
            .metrics
            .render()
            .lines()
            .find(|l| l.starts_with("insitu_events_skipped_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or_default();
        assert!(skipped >= 15, "skipped {skipped}");
    });
}

#[test]
fn a_change_that_cannot_go_in_place_names_its_fields_in_a_warning_and_the_metric() {
    run(async {
        let h = Harness::start(29).await;
        h.create(&cloneset("why", 2)).await;
        h.wait_ready("why", 2, None, 120).await;
        let before: Vec<String> = h.pods("why").await.iter().map(common::uid).collect();
        // A plain env value: a pod's env is immutable, so InPlaceIfPossible recreates both pods.
        h.json_patch(
            "why",
            serde_json::json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value",
                                 "value": "v2.0"}]),
        )
        .await;
        // While old pods remain, `insitu explain` names the field for each.
        h.wait_for("explain naming the env field", 30, || async {
            h.explain("why")
                .await
                .contains("next update: recreate — spec.containers[nginx].env[VERSION] changed")
        })
        .await;
        h.wait_for("both pods recreated", 240, || async {
            let pods = h.pods("why").await;
            pods.len() == 2
                && pods
                    .iter()
                    .all(|p| !before.contains(&common::uid(p)) && common::is_ready(p))
        })
        .await;
        h.sleep(2).await;

        let evs = events_of(&h, "why").await;
        let warned = with_reason(&evs, "RecreateForUpdate");
        assert!(
            !warned.is_empty(),
            "events: {:#?}",
            show(&evs.iter().collect::<Vec<_>>())
        );
        let msg = warned[0].message.as_deref().unwrap_or_default();
        assert!(
            msg.contains("spec.containers[nginx].env[VERSION] changed: a pod's env is immutable"),
            "{msg}"
        );
        assert_eq!(warned[0].type_.as_deref(), Some("Warning"));
        // The pod gets the same Warning (its name in the message); it is gone now, its Event stays.
        let pod_name = msg.split_whitespace().nth(1).unwrap_or_default().to_string();
        let on_pod = events_of(&h, &pod_name).await;
        assert!(
            on_pod
                .iter()
                .any(|e| e.reason.as_deref() == Some("RecreateForUpdate")),
            "pod {pod_name}: {:#?}",
            show(&on_pod.iter().collect::<Vec<_>>())
        );
        let metrics = h.metrics.render();
        assert!(
            metrics.contains("insitu_recreate_total{reason=\"spec.containers.env\"} 2"),
            "{}",
            metrics
                .lines()
                .filter(|l| l.contains("recreate"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    });
}
