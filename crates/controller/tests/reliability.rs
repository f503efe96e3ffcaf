//! Issue 9 regressions on the simulated cluster, virtual time: no input or fault stops the controller.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use insitu_controller::health::{CACHES, Health};
use insitu_controller::{Config, Metrics};
use insitu_sim::apiserver::faults::{Fault, Rule, Verb};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

fn nested(depth: usize) -> serde_json::Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

async fn events(h: &Harness) -> Vec<Event> {
    Api::<Event>::namespaced(h.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
}

fn deep_revision(name: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
           "metadata": {"name": name, "namespace": "default"}, "revision": 1, "data": nested(125)})
}

/// A ControllerRevision nesting 125 deep is valid for kube-apiserver and decodes on its own, but inside a LIST it
/// passes serde_json's recursion limit (128): kube's watcher failed the whole list, the revision cache never
/// synced and no CloneSet was reconciled. Decoded per item, the list syncs and the revision is kept (it is not
/// undecodable). Objects that are (nested past the limit alone, a pod with a numeric label value) are covered by
/// the `lenient` unit tests: the embedded cluster cannot hold the first, and the second also stops its own
/// kubelet and scheduler, which decode pods as client-go does.
#[test]
fn a_list_with_a_deeply_nested_revision_syncs() {
    run(async {
        let mut h = Harness::without_controller(91).await;
        // In the store before the controller's first LIST.
        h.cluster
            .apiserver
            .create_unvalidated(
                "apps",
                "v1",
                "controllerrevisions",
                "default",
                deep_revision("deep"),
            )
            .expect("deep revision stored");
        h.start_controller();
        h.create(&cloneset("healthy", 3)).await;
        h.wait_ready("healthy", 3, None, 300).await;
        // One that arrives through the watch does not stop the next rollout either.
        h.cluster
            .apiserver
            .create_unvalidated(
                "apps",
                "v1",
                "controllerrevisions",
                "default",
                deep_revision("deep-2"),
            )
            .expect("second deep revision stored");
        h.set_image("healthy", "nginx:1.21.0").await;
        h.wait_ready("healthy", 3, Some("nginx:1.21.0"), 600).await;
        let metrics = h.metrics.render();
        assert!(
            !metrics.contains("insitu_undecodable_objects_total{resource=\"controllerrevisions\"}"),
            "decodable alone: kept, not reported\n{metrics}"
        );
    });
}

#[test]
fn a_pod_relabelled_out_of_the_selector_is_released_and_survives_the_cloneset() {
    run(async {
        let h = Harness::start(92).await;
        h.create(&cloneset("rel", 3)).await;
        h.wait_ready("rel", 3, None, 300).await;
        let victim = h.pods("rel").await[0].clone();
        let name = victim.metadata.name.clone().unwrap();
        h.pods_api()
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": "detached"}}})),
            )
            .await
            .expect("relabel");
        // Kruise claimPods: the ownerReference goes, and a replacement comes.
        h.wait_for("pod released and replaced", 300, || async {
            let p: Pod = h.pods_api().get(&name).await.unwrap();
            let refs = p.metadata.owner_references.unwrap_or_default();
            refs.is_empty() && h.pods("rel").await.iter().filter(|p| is_ready(p)).count() == 3
        })
        .await;
        // Deleting the CloneSet (background propagation) garbage-collects its pods, not the released one.
        h.clonesets()
            .delete("rel", &Default::default())
            .await
            .expect("delete cloneset");
        h.wait_for("owned pods collected", 300, || async {
            h.pods("rel").await.is_empty()
        })
        .await;
        let p: Pod = h.pods_api().get(&name).await.expect("released pod still exists");
        assert!(p.metadata.deletion_timestamp.is_none());
        assert_eq!(p.metadata.uid, victim.metadata.uid);
    });
}

#[test]
fn an_orphan_referencing_the_cloneset_is_adopted() {
    run(async {
        let h = Harness::start(93).await;
        h.create(&cloneset("adopt", 2)).await;
        h.wait_ready("adopt", 2, None, 300).await;
        let p = h.pods("adopt").await[0].clone();
        let name = p.metadata.name.clone().unwrap();
        // Turn its controller reference into a plain one: the pod is an orphan that names the CloneSet.
        let mut r = p.metadata.owner_references.clone().unwrap()[0].clone();
        r.controller = None;
        h.pods_api()
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"ownerReferences": [r]}})),
            )
            .await
            .expect("orphan");
        h.wait_for("pod adopted", 120, || async {
            let p: Pod = h.pods_api().get(&name).await.unwrap();
            p.metadata
                .owner_references
                .unwrap_or_default()
                .iter()
                .any(|r| r.controller == Some(true) && r.name == "adopt")
        })
        .await;
        assert_eq!(h.pods("adopt").await.len(), 2, "adopted, not replaced");
    });
}

#[test]
fn a_stale_grace_annotation_is_recovered_with_a_warning() {
    run(async {
        let h = Harness::start(94).await;
        h.create(&cloneset("grace", 2)).await;
        h.wait_ready("grace", 2, None, 300).await;
        let p = h.pods("grace").await[0].clone();
        let name = p.metadata.name.clone().unwrap();
        // What a half-written start leaves: the pod at the new revision with the grace spec, but no state.
        h.clonesets()
            .patch(
                "grace",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"updateStrategy": {"paused": true}}})),
            )
            .await
            .unwrap();
        h.set_image("grace", "nginx:1.21.0").await;
        h.sleep(5).await;
        let cs = h.clonesets().get_status("grace").await.unwrap();
        let rev = cs.status.unwrap().update_revision;
        let grace =
            json!({"revision": rev, "containerImages": {"nginx": "nginx:1.21.0"}, "graceSeconds": 10});
        h.pods_api()
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {
                    "labels": {"controller-revision-hash": rev, "pod-template-hash": insitu_core::revision::short_hash(&rev)},
                    "annotations": {"apps.kruise.io/inplace-update-grace": grace.to_string()}}})),
            )
            .await
            .unwrap();
        h.merge_patch("grace", json!({"spec": {"updateStrategy": {"paused": false}}}))
            .await;
        // Before: the pod counted as updated, its grace never finished (no state), the image stayed old.
        h.wait_ready("grace", 2, Some("nginx:1.21.0"), 600).await;
        let evs = events(&h).await;
        assert!(
            evs.iter()
                .any(|e| e.reason.as_deref() == Some("StaleInPlaceUpdateGrace")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref().unwrap_or("").contains(&name)),
            "no StaleInPlaceUpdateGrace warning"
        );
        let after: Pod = h.pods_api().get(&name).await.unwrap();
        assert_eq!(after.metadata.uid, p.metadata.uid, "updated in place");
    });
}

#[test]
fn shutdown_is_bounded_and_readiness_follows_the_caches_when_a_list_is_refused() {
    run(async {
        let h = Harness::without_controller(95).await;
        h.create(&cloneset("stuck", 1)).await;
        // Every pod LIST fails: the pod cache cannot sync.
        h.cluster
            .apiserver
            .faults()
            .add(Rule::always(&[Verb::List], &["pods"], Fault::Status(500)));
        let clock: Arc<dyn insitu_controller::Clock> = Arc::new(common::SharedClock(h.cluster.clock.clone()));
        let config = Config::default();
        let health = Arc::new(Health::new(clock.clone(), config.wedged_after));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let controller = tokio::spawn(insitu_controller::run_with(
            h.client.clone(),
            config.clone(),
            clock,
            Arc::new(Metrics::new()),
            health.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        h.sleep(60).await;
        let ready = health.ready();
        assert!(!ready.ok);
        assert!(
            ready.reasons.iter().any(|r| r == "cache pods has not synced"),
            "{ready:?}"
        );
        assert!(health.live().ok, "a refused list is not a wedged loop");
        // SIGTERM: before, the reconcile waiting for the pod cache held the graceful shutdown forever.
        tx.send(()).unwrap();
        let bound = config.shutdown_timeout + Duration::from_secs(1);
        tokio::time::timeout(bound, controller)
            .await
            .expect("controller stops within the shutdown timeout")
            .unwrap();
        // Lists served again: a new controller syncs every cache and is ready.
        h.cluster.apiserver.faults().clear();
        let clock: Arc<dyn insitu_controller::Clock> = Arc::new(common::SharedClock(h.cluster.clock.clone()));
        let health = Arc::new(Health::new(clock.clone(), config.wedged_after));
        tokio::spawn(insitu_controller::run_with(
            h.client.clone(),
            config,
            clock,
            Arc::new(Metrics::new()),
            health.clone(),
            std::future::pending(),
        ));
        h.wait_ready("stuck", 1, None, 300).await;
        assert!(health.ready().ok, "{:?}", health.ready());
        assert_eq!(CACHES.len(), 4);
    });
}

#[test]
fn the_first_recreate_event_names_the_new_revision() {
    run(async {
        let h = Harness::start(96).await;
        h.create(&cloneset("recr", 2)).await;
        h.wait_ready("recr", 2, None, 300).await;
        // An env change cannot go in place: pods are marked specified-delete (SuccessfulUpdatePodReCreate).
        h.json_patch(
            "recr",
            json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "v9"}]),
        )
        .await;
        h.wait_for("a recreate event", 120, || async {
            events(&h)
                .await
                .iter()
                .any(|e| e.reason.as_deref() == Some("SuccessfulUpdatePodReCreate"))
        })
        .await;
        let rev = h.status("recr").await.update_revision;
        let evs = events(&h).await;
        let first = evs
            .iter()
            .filter(|e| e.reason.as_deref() == Some("SuccessfulUpdatePodReCreate"))
            .min_by_key(|e| e.first_timestamp.clone().map(|t| t.0))
            .unwrap();
        let msg = first.message.clone().unwrap_or_default();
        assert!(
            msg.contains(&format!("(revision {rev})")),
            "{msg} should name {rev}"
        );
    });
}

/// A 409 `Conflict` on a create means nothing was written (kube-apiserver answers `AlreadyExists`, also 409, when
/// the object is there). Taken for "already there", the revision's create expectation waited for an object that
/// never came: the first rollout stalled until the 5-minute expectation timeout (`insitu torture` seed 11).
#[test]
fn a_conflict_on_the_revision_create_is_retried_not_awaited() {
    run(async {
        let h = Harness::start(96).await;
        h.cluster.apiserver.faults().add(Rule {
            budget: Some(1),
            ..Rule::always(&[Verb::Create], &["controllerrevisions"], Fault::Status(409))
        });
        h.create(&cloneset("conflicted", 2)).await;
        h.wait_ready("conflicted", 2, None, 60).await;
        assert_eq!(h.cluster.apiserver.faults().injected().statuses, 1);
    });
}

/// `scaleStrategy.podsToDelete` (Kruise): the named pod is replaced and its name leaves the list. The list is
/// trimmed with a patch guarded by the CloneSet's resourceVersion, so a stale cache gets a 409 and a new round,
/// never a 422 (a JSON-patch `test` failure, which `insitu torture` flagged in seeds 3058 and 3214).
#[test]
fn pods_to_delete_replaces_the_pod_and_trims_the_list() {
    run(async {
        let h = Harness::start(93).await;
        h.create(&cloneset("ptd", 3)).await;
        h.wait_ready("ptd", 3, None, 120).await;
        let victim = h.pods("ptd").await.remove(0);
        let (name, old_uid) = (victim.metadata.name.clone().unwrap(), uid(&victim));
        h.merge_patch(
            "ptd",
            json!({"spec": {"scaleStrategy": {"podsToDelete": [name]}}}),
        )
        .await;
        h.wait_for("the named pod replaced and the list trimmed", 300, || async {
            let pods = h.pods("ptd").await;
            let cs = h.clonesets().get("ptd").await.expect("get cloneset");
            let listed = cs
                .spec
                .scale_strategy
                .as_ref()
                .map(|s| s.pods_to_delete.len())
                .unwrap_or(0);
            pods.len() == 3 && pods.iter().all(|p| is_ready(p) && uid(p) != old_uid) && listed == 0
        })
        .await;
    });
}

/// A 429 with `Retry-After: 20` on a pod create: the next round waits the 20 s the server asked for (the error
/// requeue was a flat 1 s; Kruise's rate limiter alone would retry after 5 ms). Nothing else wakes the CloneSet
/// meanwhile: the refused round wrote nothing.
#[test]
fn a_429_with_retry_after_delays_the_retry_accordingly() {
    run(async {
        let h = Harness::start(97).await;
        h.create(&cloneset("throttled", 1)).await;
        h.wait_ready("throttled", 1, None, 60).await;
        let faults = h.cluster.apiserver.faults();
        faults.add(Rule {
            budget: Some(1),
            ..Rule::always(
                &[Verb::Create],
                &["pods"],
                Fault::RetryAfter {
                    code: 429,
                    seconds: 20,
                },
            )
        });
        h.merge_patch("throttled", json!({"spec": {"replicas": 2}})).await;
        h.wait_for("the pod create refused with 429", 10, || async {
            faults.injected().by_code.get(&429) == Some(&1)
        })
        .await;
        let refused = tokio::time::Instant::now();
        h.wait_for("the second pod created", 60, || async {
            h.pods("throttled").await.len() == 2
        })
        .await;
        let waited = refused.elapsed();
        // `wait_for` polls once a virtual second: the refusal was seen up to 1 s late, the pod up to 1 s late.
        assert!(
            waited >= Duration::from_secs(19) && waited <= Duration::from_secs(22),
            "second create {waited:?} after the 429 with Retry-After: 20"
        );
    });
}

/// Failed rounds back off exponentially per CloneSet (Kruise's rate limiter: 5 ms doubling, not a flat 1 s): a
/// minute of refused pod creates (500, no Retry-After) is ~14 attempts, not 60; once the server recovers the
/// CloneSet converges, and its back-off starts over.
#[test]
fn reconcile_errors_back_off_exponentially_and_recover() {
    run(async {
        let h = Harness::start(98).await;
        let faults = h.cluster.apiserver.faults();
        faults.add(Rule::always(&[Verb::Create], &["pods"], Fault::Status(500)));
        h.create(&cloneset("backoff", 2)).await;
        h.sleep(60).await;
        let attempts = faults.injected().by_code.get(&500).copied().unwrap_or(0);
        // 5 ms · (2^n − 1) ≤ 60 s: n ≤ 13, plus the rounds the CloneSet's own events started.
        assert!(
            (8..=20).contains(&attempts),
            "{attempts} pod creates refused in 60 s"
        );
        faults.clear();
        // The pending retry is at most 5 ms · 2^13 ≈ 41 s away.
        h.wait_ready("backoff", 2, None, 120).await;
    });
}
