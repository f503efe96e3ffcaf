//! The e2e scenarios. Each runs in its own namespace and asserts on real API state (and on what a pod watch
//! observed in between). Real-time budgets: pulls 2 s, start 1 s, readiness per the CloneSet's probes.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use insitu_api::CloneSet;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::time::Instant;

use crate::Env;
pub use crate::inplace_meta::{env_from_label, launch_priority};
use crate::util::*;

const SETTLE: Duration = Duration::from_secs(8);

/// The seed tutorial: examples/cloneset-demo.yaml unchanged, image-only change by JSON patch → every pod keeps
/// name/UID/IP, restarts once, goes through grace → InPlaceUpdateReady=False → Ready, one pod at a time.
pub async fn seed(env: &Env, ns: &str) -> anyhow::Result<()> {
    let cs: CloneSet =
        serde_saphyr::from_str(insitu_lab::demo::SEED_YAML).context("parsing the seed YAML")?;
    let name = cs.name_any();
    create_cloneset(env, ns, serde_json::to_value(&cs)?).await?;
    let (_, before) = wait_rolled_out(env, ns, &name, 3, IMAGE_V1, Duration::from_secs(90)).await?;
    ensure(before.iter().all(|p| restarts(p) == 0), || {
        "fresh pods restarted".into()
    })?;
    // Pods carry the readiness gate from creation (readiness gates are immutable afterwards).
    ensure(
        before.iter().all(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.readiness_gates.as_ref())
                .is_some_and(|g| {
                    g.iter()
                        .any(|g| g.condition_type == insitu_api::keys::INPLACE_UPDATE_READY)
                })
        }),
        || "pods lack the InPlaceUpdateReady readiness gate".into(),
    )?;
    let old_ids: Vec<(String, Option<String>)> = before
        .iter()
        .map(|p| (uid(p), crate::realnode::container_id(p, "nginx")))
        .collect();
    let observer = Observer::start(env, ns, &name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_image(env, ns, &name, IMAGE_V2).await?;
    // Per pod: grace 10 s + preStop 5 s + pull 2 s + start 1 s + readiness ≥ 5 s, one at a time.
    let (cs, after) = wait_rolled_out(env, ns, &name, 3, IMAGE_V2, Duration::from_secs(240)).await?;
    ensure(identities(&before) == identities(&after), || {
        format!(
            "pod identity changed: {:?} -> {:?}",
            identities(&before),
            identities(&after)
        )
    })?;
    for p in &after {
        ensure(restarts(p) == 1, || {
            format!("{} restarted {} times, expected 1", p.name_any(), restarts(p))
        })?;
    }
    let seen = observer.snapshot();
    for p in &after {
        let h = seen.pods.get(&uid(p)).cloned().unwrap_or_default();
        ensure(h.grace_annotation, || {
            format!("{}: grace annotation never seen", p.name_any())
        })?;
        ensure(h.inplace_ready_false, || {
            format!("{}: InPlaceUpdateReady=False never seen", p.name_any())
        })?;
        let state = p
            .annotations()
            .get(insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION)
            .cloned();
        let state: serde_json::Value = serde_json::from_str(state.as_deref().unwrap_or("null"))?;
        let update_revision = cs
            .status
            .as_ref()
            .map(|s| s.update_revision.clone())
            .unwrap_or_default();
        ensure(state["revision"] == json!(update_revision), || {
            format!(
                "{}: state annotation {state} does not name revision {update_revision}",
                p.name_any()
            )
        })?;
        ensure(
            condition(p, insitu_api::keys::INPLACE_UPDATE_READY).as_deref() == Some("True"),
            || format!("{}: InPlaceUpdateReady not True at the end", p.name_any()),
        )?;
        // The readiness gate holds the pod out of Ready while InPlaceUpdateReady is False.
        ensure(!h.ready_with_gate_false, || {
            format!("{}: Ready=True while InPlaceUpdateReady=False", p.name_any())
        })?;
        if let Some(node) = &env.real_node {
            let old = old_ids
                .iter()
                .find(|(u, _)| *u == uid(p))
                .and_then(|(_, id)| id.as_deref());
            crate::realnode::check_image_change(node, p, "nginx", old, IMAGE_V2).await?;
            // preStop (`sleep 5`) ran between the image patch and the old container's exit.
            let st: insitu_api::inplace::InPlaceUpdateState = serde_json::from_value(state.clone())?;
            let finished = crate::realnode::status_of(p, "nginx")?
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.finished_at.clone())
                .context("no lastState.terminated.finishedAt")?;
            let secs = finished.0.as_second() - st.update_timestamp.0.as_second();
            ensure(secs >= 4, || {
                format!(
                    "{}: the old container exited {secs} s after the image patch; preStop `sleep 5` did not run",
                    p.name_any()
                )
            })?;
        }
    }
    ensure(seen.max_out_of_service == 1, || {
        format!(
            "expected exactly 1 pod out of service at a time (maxUnavailable 1), saw {}",
            seen.max_out_of_service
        )
    })?;
    ensure(seen.pods.values().all(|h| !h.deleted), || {
        "a pod was deleted during an in-place update".into()
    })?;
    cleanup(env, ns, &name).await;
    Ok(())
}

/// An env change cannot be applied in place: pods are recreated (new UIDs), none restarted.
pub async fn recreate(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "recreate";
    create_cloneset(env, ns, fast_cloneset(name, 2, 1)).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 2, IMAGE_V1, Duration::from_secs(60)).await?;
    let old: BTreeSet<String> = before.iter().map(uid).collect();
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "v2"}]),
    )
    .await?;
    let (_, after) = wait_rolled_out(env, ns, name, 2, IMAGE_V1, Duration::from_secs(120)).await?;
    for p in &after {
        ensure(!old.contains(&uid(p)), || {
            format!("{} kept its UID: not recreated", p.name_any())
        })?;
        ensure(env_value(p, "VERSION").as_deref() == Some("v2"), || {
            format!("{} env not updated", p.name_any())
        })?;
        ensure(restarts(p) == 0, || format!("{} restarted", p.name_any()))?;
    }
    cleanup(env, ns, name).await;
    Ok(())
}

/// Canary: 10 replicas, partition 8 → exactly 2 updated (and it stays 2); partition 0 → all 10, in place.
pub async fn partition(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "canary";
    create_cloneset(env, ns, fast_cloneset(name, 10, 2)).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 10, IMAGE_V1, Duration::from_secs(90)).await?;
    json_patch(
        env,
        ns,
        name,
        json!([
            {"op": "add", "path": "/spec/updateStrategy/partition", "value": 8},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2}
        ]),
    )
    .await?;
    let counts = |pods: &[Pod], cs: &CloneSet| {
        let rev = cs
            .status
            .as_ref()
            .map(|s| s.update_revision.clone())
            .unwrap_or_default();
        let updated = pods
            .iter()
            .filter(|p| revision(p) == rev && spec_image(p) == IMAGE_V2)
            .count();
        let ready = pods
            .iter()
            .filter(|p| revision(p) == rev && is_ready(p) && runs_image(p, IMAGE_V2))
            .count();
        (updated, ready)
    };
    wait_until(
        "2 canary pods updated and Ready",
        Duration::from_secs(60),
        || async move {
            let cs = clonesets(env, ns).get(name).await?;
            let pods = live_pods(env, ns, name).await?;
            let (updated, ready) = counts(&pods, &cs);
            let st = cs.status.clone().unwrap_or_default();
            if updated == 2 && ready == 2 && st.updated_ready_replicas == 2 {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("updated {updated}, ready {ready}, status {st:?}")))
            }
        },
    )
    .await?;
    let hold = Instant::now();
    while hold.elapsed() < SETTLE {
        let cs = clonesets(env, ns).get(name).await?;
        let pods = live_pods(env, ns, name).await?;
        let (updated, _) = counts(&pods, &cs);
        let st = cs.status.clone().unwrap_or_default();
        ensure(updated == 2 && pods.len() == 10, || {
            format!(
                "partition 8 of 10 must update exactly 2 pods, now {updated} of {}",
                pods.len()
            )
        })?;
        ensure(st.updated_replicas == 2, || {
            format!("status.updatedReplicas {} != 2", st.updated_replicas)
        })?;
        ensure(st.expected_updated_replicas == 2, || {
            format!(
                "status.expectedUpdatedReplicas {} != 2",
                st.expected_updated_replicas
            )
        })?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/updateStrategy/partition", "value": 0}]),
    )
    .await?;
    let (_, after) = wait_rolled_out(env, ns, name, 10, IMAGE_V2, Duration::from_secs(120)).await?;
    ensure(identities(&before) == identities(&after), || {
        "pods were recreated, not updated in place".into()
    })?;
    ensure(after.iter().all(|p| restarts(p) == 1), || {
        "every pod should have restarted exactly once".into()
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// `paused: true` holds the rollout (no pod touched while the new revision is known); resuming completes it.
pub async fn pause_resume(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "paused";
    create_cloneset(env, ns, fast_cloneset(name, 4, 1)).await?;
    let (cs0, before) = wait_rolled_out(env, ns, name, 4, IMAGE_V1, Duration::from_secs(60)).await?;
    let rev1 = cs0.status.clone().unwrap_or_default().update_revision;
    let rev1_ref = rev1.as_str();
    json_patch(
        env,
        ns,
        name,
        json!([
            {"op": "add", "path": "/spec/updateStrategy/paused", "value": true},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2}
        ]),
    )
    .await?;
    wait_until(
        "the controller to observe the paused update",
        Duration::from_secs(30),
        || async move {
            let cs = clonesets(env, ns).get(name).await?;
            let st = cs.status.clone().unwrap_or_default();
            if Some(st.observed_generation) == cs.metadata.generation && st.update_revision != rev1_ref {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("status {st:?}")))
            }
        },
    )
    .await?;
    let hold = Instant::now();
    while hold.elapsed() < SETTLE {
        let pods = live_pods(env, ns, name).await?;
        let cs = clonesets(env, ns).get(name).await?;
        let st = cs.status.clone().unwrap_or_default();
        ensure(identities(&pods) == identities(&before), || {
            "pods changed while paused".into()
        })?;
        ensure(
            pods.iter()
                .all(|p| spec_image(p) == IMAGE_V1 && restarts(p) == 0 && revision(p) == rev1),
            || {
                format!(
                    "a pod was updated while paused: {}",
                    describe(&pods, &st.update_revision)
                )
            },
        )?;
        ensure(st.updated_replicas == 0, || {
            format!("status.updatedReplicas {} while paused", st.updated_replicas)
        })?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/updateStrategy/paused", "value": false}]),
    )
    .await?;
    let (_, after) = wait_rolled_out(env, ns, name, 4, IMAGE_V2, Duration::from_secs(90)).await?;
    ensure(identities(&before) == identities(&after), || {
        "resume recreated pods".into()
    })?;
    ensure(after.iter().all(|p| restarts(p) == 1), || {
        "every pod should have restarted exactly once".into()
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// v1 → v2 → v1: the rollback reuses the first ControllerRevision and goes in place (same UIDs, 2 restarts).
pub async fn rollback(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "rollback";
    create_cloneset(env, ns, fast_cloneset(name, 3, 1)).await?;
    let (cs1, before) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(60)).await?;
    let rev1 = cs1.status.clone().unwrap_or_default().update_revision;
    set_image(env, ns, name, IMAGE_V2).await?;
    let (cs2, mid) = wait_rolled_out(env, ns, name, 3, IMAGE_V2, Duration::from_secs(90)).await?;
    let rev2 = cs2.status.clone().unwrap_or_default().update_revision;
    ensure(rev1 != rev2, || {
        "image change did not create a new revision".into()
    })?;
    ensure(identities(&before) == identities(&mid), || {
        "v2 rollout recreated pods".into()
    })?;
    set_image(env, ns, name, IMAGE_V1).await?;
    let (cs3, after) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(90)).await?;
    let st = cs3.status.clone().unwrap_or_default();
    ensure(st.update_revision == rev1, || {
        format!(
            "rollback revision {} is not the original {rev1}",
            st.update_revision
        )
    })?;
    ensure(identities(&before) == identities(&after), || {
        "rollback recreated pods".into()
    })?;
    ensure(after.iter().all(|p| restarts(p) == 2), || {
        format!(
            "every pod should have restarted twice: {}",
            describe(&after, &st.update_revision)
        )
    })?;
    let revs: Api<ControllerRevision> = Api::namespaced(env.client.clone(), ns);
    let owned: Vec<String> = revs
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.kind == "CloneSet" && o.name == name)
        })
        .map(|r| r.name_any())
        .collect();
    ensure(owned.len() == 2, || {
        format!("expected 2 ControllerRevisions (v1 reused), found {owned:?}")
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// 2 → 5 → 1 replicas: scale-up keeps the existing pods; scale-down leaves exactly one pod, the rest gone.
pub async fn scale(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "scale";
    create_cloneset(env, ns, fast_cloneset(name, 2, 1)).await?;
    let (_, two) = wait_rolled_out(env, ns, name, 2, IMAGE_V1, Duration::from_secs(60)).await?;
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/replicas", "value": 12}]),
    )
    .await?;
    let (_, twelve) = wait_rolled_out(env, ns, name, 12, IMAGE_V1, Duration::from_secs(90)).await?;
    let twelve_uids: BTreeSet<String> = twelve.iter().map(uid).collect();
    ensure(two.iter().all(|p| twelve_uids.contains(&uid(p))), || {
        "scale-up replaced existing pods".into()
    })?;
    // 12 "succeed to create pod" events, through client-go's correlator as Kruise's recorder: 9 Events of
    // their own, then one "(combined from similar events)" Event created by the 10th and counted up (patched)
    // by the 11th and 12th.
    let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
    wait_until(
        "the combined SuccessfulCreate event",
        Duration::from_secs(20),
        || async {
            let evs: Vec<Event> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| {
                    e.involved_object.name.as_deref() == Some(name)
                        && e.reason.as_deref() == Some("SuccessfulCreate")
                })
                .collect();
            let combined: Vec<&Event> = evs
                .iter()
                .filter(|e| {
                    e.message.as_deref().is_some_and(|m| {
                        m.starts_with("(combined from similar events): succeed to create pod scale-")
                    })
                })
                .collect();
            let single = evs.len() - combined.len();
            let counts: Vec<i32> = combined.iter().filter_map(|e| e.count).collect();
            Ok(if single == 9 && counts == [3] {
                Ok(())
            } else {
                Err(format!(
                    "{single} single SuccessfulCreate events, combined counts {counts:?}"
                ))
            })
        },
    )
    .await?;
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/replicas", "value": 1}]),
    )
    .await?;
    let (_, one) = wait_rolled_out(env, ns, name, 1, IMAGE_V1, Duration::from_secs(60)).await?;
    ensure(twelve_uids.contains(&uid(&one[0])), || {
        "scale-down created a pod".into()
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// PVCs from volumeClaimTemplates: one per pod, named `<vct>-<cloneset>-<instance-id>` and owned by the
/// CloneSet; kept (same UIDs) across an in-place update; the scaled-down pod's PVC is deleted with it (on a
/// bare control plane the `kubernetes.io/pvc-protection` finalizer keeps it Terminating: no controller-manager).
pub async fn pvc(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "pvc";
    let mut manifest = fast_cloneset(name, 3, 1);
    manifest["spec"]["volumeClaimTemplates"] = json!([{
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }]);
    manifest["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "data", "mountPath": "/data"}]);
    let cs = create_cloneset(env, ns, manifest).await?;
    let cs_uid = cs.uid().unwrap_or_default();
    let (_, before) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(90)).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), ns);
    let claim_of = |p: &Pod| format!("data-{}", p.name_any());
    let mut claim_uids = Vec::new();
    for p in &before {
        let want = claim_of(p);
        let vol = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .and_then(|v| v.iter().find(|v| v.name == "data"))
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone());
        ensure(vol.as_deref() == Some(want.as_str()), || {
            format!("pod {} mounts claim {vol:?}, want {want}", p.name_any())
        })?;
        let c = claims.get(&want).await.with_context(|| format!("PVC {want}"))?;
        let owned = c
            .owner_references()
            .iter()
            .any(|r| r.uid == cs_uid && r.kind == "CloneSet" && r.controller == Some(true));
        ensure(owned, || format!("PVC {want} is not controlled by the CloneSet"))?;
        let id = p.labels().get("apps.kruise.io/cloneset-instance-id").cloned();
        ensure(
            c.labels().get("apps.kruise.io/cloneset-instance-id") == id.as_ref(),
            || format!("PVC {want} instance-id label differs from its pod's ({id:?})"),
        )?;
        claim_uids.push(c.uid().unwrap_or_default());
    }

    set_image(env, ns, name, IMAGE_V2).await?;
    let (_, after) = wait_rolled_out(env, ns, name, 3, IMAGE_V2, Duration::from_secs(120)).await?;
    let before_uids: BTreeSet<String> = before.iter().map(uid).collect();
    ensure(after.iter().all(|p| before_uids.contains(&uid(p))), || {
        "in-place update replaced a pod".into()
    })?;
    for (p, old_uid) in before.iter().zip(&claim_uids) {
        let c = claims.get(&claim_of(p)).await?;
        ensure(c.uid().as_deref() == Some(old_uid.as_str()), || {
            format!("PVC {} was replaced during the in-place update", claim_of(p))
        })?;
    }

    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/replicas", "value": 2}]),
    )
    .await?;
    let (_, two) = wait_rolled_out(env, ns, name, 2, IMAGE_V2, Duration::from_secs(90)).await?;
    let kept: BTreeSet<String> = two.iter().map(|p| p.name_any()).collect();
    let victim = before
        .iter()
        .find(|p| !kept.contains(&p.name_any()))
        .context("no pod was scaled down")?;
    let victim_claim = claim_of(victim);
    wait_until(
        &format!("PVC {victim_claim} deleted with its pod"),
        Duration::from_secs(30),
        || {
            let claims = claims.clone();
            let victim_claim = victim_claim.clone();
            async move {
                Ok(match claims.get_opt(&victim_claim).await? {
                    None => Ok(()),
                    Some(c) if c.metadata.deletion_timestamp.is_some() => Ok(()),
                    Some(_) => Err("still there, not terminating".to_string()),
                })
            }
        },
    )
    .await?;
    for p in &two {
        let c = claims.get(&claim_of(p)).await?;
        ensure(c.metadata.deletion_timestamp.is_none(), || {
            format!("PVC {} of a kept pod is being deleted", claim_of(p))
        })?;
    }
    cleanup(env, ns, name).await;
    let lp = ListParams::default().labels(&format!("app={name}"));
    let _ = claims.delete_collection(&Default::default(), &lp).await;
    Ok(())
}

/// A crashing image: the rollout stops after maxUnavailable (2) pods and touches no more; rolling the image
/// back recovers the broken pods in place (same UIDs) and the untouched ones are never restarted.
pub async fn broken_image(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "broken";
    let crash = env.crash_image.clone();
    create_cloneset(env, ns, fast_cloneset(name, 6, 2)).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 6, IMAGE_V1, Duration::from_secs(60)).await?;
    let observer = Observer::start(env, ns, name);
    set_image(env, ns, name, &crash).await?;
    let crash_ref = crash.as_str();
    let observer_ref = &observer;
    // Each broken pod must have been seen in CrashLoopBackOff, not both at one poll: a real kubelet shows the
    // exited container as `terminated` between back-offs, and two pods' back-off windows need not overlap.
    let broken: Vec<Pod> = wait_until(
        "2 pods on the new image, not ready, each seen in CrashLoopBackOff",
        Duration::from_secs(90),
        || async move {
            let pods = live_pods(env, ns, name).await?;
            let on_new: Vec<Pod> = pods
                .iter()
                .filter(|p| spec_image(p) == crash_ref)
                .cloned()
                .collect();
            let seen = observer_ref.snapshot();
            let looped = |p: &Pod| {
                waiting_reason(p).as_deref() == Some("CrashLoopBackOff")
                    || seen.pods.get(&uid(p)).is_some_and(|h| h.crash_loop)
            };
            if on_new.len() == 2 && on_new.iter().all(|p| !is_ready(p) && looped(p)) {
                Ok(Ok(on_new))
            } else {
                Ok(Err(describe(&pods, "")))
            }
        },
    )
    .await?;
    let broken_uids: BTreeSet<String> = broken.iter().map(uid).collect();
    let hold = Instant::now();
    while hold.elapsed() < Duration::from_secs(15) {
        let pods = live_pods(env, ns, name).await?;
        let cs = clonesets(env, ns).get(name).await?;
        let st = cs.status.clone().unwrap_or_default();
        ensure(identities(&pods) == identities(&before), || {
            "pods were recreated".into()
        })?;
        for p in &pods {
            if broken_uids.contains(&uid(p)) {
                ensure(spec_image(p) == crash, || {
                    format!("{} left the broken image", p.name_any())
                })?;
            } else {
                ensure(
                    spec_image(p) == IMAGE_V1 && restarts(p) == 0 && is_ready(p),
                    || {
                        format!(
                            "rollout went past maxUnavailable: {}",
                            describe(&pods, &st.update_revision)
                        )
                    },
                )?;
            }
        }
        ensure(st.updated_replicas == 2 && st.updated_ready_replicas == 0, || {
            format!(
                "status updated={} updatedReady={} (want 2/0)",
                st.updated_replicas, st.updated_ready_replicas
            )
        })?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    set_image(env, ns, name, IMAGE_V1).await?;
    let (_, after) = wait_rolled_out(env, ns, name, 6, IMAGE_V1, Duration::from_secs(120)).await?;
    ensure(identities(&before) == identities(&after), || {
        "rollback recreated pods instead of updating in place".into()
    })?;
    for p in &after {
        if broken_uids.contains(&uid(p)) {
            ensure(restarts(p) >= 2, || {
                format!("{} restarted {} times", p.name_any(), restarts(p))
            })?;
        } else {
            ensure(restarts(p) == 0, || {
                format!("untouched pod {} restarted", p.name_any())
            })?;
        }
    }
    let seen = observer.snapshot();
    ensure(
        broken_uids
            .iter()
            .all(|u| seen.pods.get(u).is_some_and(|h| h.crash_loop)),
        || "CrashLoopBackOff not observed on the broken pods".into(),
    )?;
    if env.real_node.is_some() {
        // The kubelet's crash back-off starts at 10 s and doubles (kubelet's initial/max 10 s/300 s).
        let saw = |d: &str| {
            broken_uids
                .iter()
                .any(|u| seen.pods.get(u).is_some_and(|h| h.backoffs.contains(d)))
        };
        let all: Vec<_> = broken_uids
            .iter()
            .filter_map(|u| seen.pods.get(u))
            .map(|h| &h.backoffs)
            .collect();
        ensure(saw("10s") && saw("20s"), || {
            format!("CrashLoopBackOff back-offs seen {all:?}, want 10s then 20s")
        })?;
    }
    cleanup(env, ns, name).await;
    Ok(())
}

/// RBAC: the controller's ServiceAccount may do what the controller needs and nothing else (no secrets but the
/// webhook's certificate Secret; no CRD but the CloneSet one, to patch its conversion CA bundle; no webhook
/// configuration but insitu's defaulting one).
pub async fn rbac(env: &Env, _ns: &str) -> anyhow::Result<()> {
    let real = env.real.as_ref().context("real cluster only")?;
    let sa_client = real.sa_client().await?;
    let secrets: Api<Secret> = Api::namespaced(sa_client.clone(), "insitu-system");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => {
            bail!("listing secrets with the ServiceAccount token: expected 403 Forbidden, got {other:?}")
        }
    }
    let all_secrets: Api<Secret> = Api::all(sa_client.clone());
    match all_secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => bail!("listing all secrets: expected 403 Forbidden, got {other:?}"),
    }
    let pods: Api<Pod> = Api::all(sa_client.clone());
    pods.list(&ListParams::default().limit(1))
        .await
        .context("the ServiceAccount must list pods")?;
    let css: Api<CloneSet> = Api::all(sa_client);
    css.list(&ListParams::default().limit(1))
        .await
        .context("the ServiceAccount must list clonesets")?;

    let sa = "system:serviceaccount:insitu-system:insitu";
    let allowed: &[(&str, &str, &str, &str, &str)] = &[
        // (group, resource, subresource, verb, namespace)
        ("", "pods", "", "watch", ""),
        ("", "pods", "", "create", "default"),
        ("", "pods", "", "update", "default"),
        ("", "pods", "", "patch", "default"),
        ("", "pods", "", "delete", "default"),
        ("", "pods", "status", "update", "default"),
        ("", "pods", "resize", "patch", "default"),
        ("", "pods", "finalizers", "update", "default"),
        ("", "persistentvolumeclaims", "", "watch", ""),
        ("", "persistentvolumeclaims", "", "create", "default"),
        ("", "persistentvolumeclaims", "", "delete", "default"),
        ("", "persistentvolumeclaims", "", "patch", "default"),
        ("", "events", "", "create", "default"),
        // client-go's correlator counts repeated events up with a patch.
        ("", "events", "", "patch", "default"),
        ("apps.kruise.io", "clonesets", "", "watch", ""),
        ("apps.kruise.io", "clonesets", "", "patch", "default"),
        ("apps.kruise.io", "clonesets", "status", "patch", "default"),
        ("apps.kruise.io", "clonesets", "finalizers", "update", "default"),
        ("apps", "controllerrevisions", "", "create", "default"),
        ("apps", "controllerrevisions", "", "delete", "default"),
        // Node labels for the topology-spread scale-down ranker: read-only.
        ("", "nodes", "", "watch", ""),
        ("coordination.k8s.io", "leases", "", "update", "insitu-system"),
        ("coordination.k8s.io", "leases", "", "create", "insitu-system"),
        // Launch-priority barriers (`<pod>-barrier`): read, created, keys patched in; nothing else.
        ("", "configmaps", "", "get", "default"),
        ("", "configmaps", "", "create", "default"),
        ("", "configmaps", "", "patch", "default"),
        // Image pre-download: the CloneSet's ImagePullJobs (cached, created, deleted; never updated).
        ("apps.kruise.io", "imagepulljobs", "", "watch", ""),
        ("apps.kruise.io", "imagepulljobs", "", "create", "default"),
        ("apps.kruise.io", "imagepulljobs", "", "delete", "default"),
    ];
    let denied: &[(&str, &str, &str, &str, &str)] = &[
        ("", "secrets", "", "get", "insitu-system"),
        ("", "secrets", "", "list", ""),
        ("", "configmaps", "", "list", ""),
        ("", "configmaps", "", "watch", ""),
        ("", "configmaps", "", "update", "default"),
        ("", "configmaps", "", "delete", "default"),
        ("", "nodes", "", "get", ""),
        ("", "nodes", "", "patch", ""),
        ("", "pods", "exec", "create", "default"),
        ("", "pods", "eviction", "create", "default"),
        ("", "serviceaccounts", "token", "create", "insitu-system"),
        ("apps.kruise.io", "clonesets", "", "create", "default"),
        ("apps.kruise.io", "clonesets", "", "delete", "default"),
        ("apps.kruise.io", "imagepulljobs", "", "update", "default"),
        ("apps.kruise.io", "imagepulljobs", "status", "update", "default"),
        ("apps.kruise.io", "nodeimages", "", "list", ""),
        ("apps", "deployments", "", "list", ""),
        ("coordination.k8s.io", "leases", "", "update", "kube-node-lease"),
        ("coordination.k8s.io", "leases", "", "delete", "insitu-system"),
        ("rbac.authorization.k8s.io", "clusterroles", "", "update", ""),
    ];
    let sar: Api<SubjectAccessReview> = Api::all(env.client.clone());
    let mut wrong = Vec::new();
    for (expect, list) in [(true, allowed), (false, denied)] {
        for (group, resource, sub, verb, ns) in list {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(sa.into()),
                    groups: Some(vec![
                        "system:serviceaccounts".into(),
                        "system:serviceaccounts:insitu-system".into(),
                    ]),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some((*group).into()),
                        resource: Some((*resource).into()),
                        subresource: (!sub.is_empty()).then(|| (*sub).into()),
                        verb: Some((*verb).into()),
                        namespace: (!ns.is_empty()).then(|| (*ns).into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let res = sar.create(&PostParams::default(), &review).await?;
            let got = res.status.map(|s| s.allowed).unwrap_or(false);
            if got != expect {
                wrong.push(format!(
                    "{verb} {group}/{resource}{}{} in '{ns}': allowed={got}, want {expect}",
                    if sub.is_empty() { "" } else { "/" },
                    sub
                ));
            }
        }
    }
    // Named objects: the webhook's own Secret and the CloneSet CRD, and nothing beside them.
    let named: &[(bool, &str, &str, &str, &str, &str)] = &[
        // (allowed, group, resource, verb, namespace, name)
        (
            true,
            "",
            "secrets",
            "get",
            "insitu-system",
            "insitu-webhook-certs",
        ),
        (
            true,
            "",
            "secrets",
            "update",
            "insitu-system",
            "insitu-webhook-certs",
        ),
        (false, "", "secrets", "get", "insitu-system", "other"),
        (false, "", "secrets", "update", "default", "insitu-webhook-certs"),
        (
            false,
            "",
            "secrets",
            "delete",
            "insitu-system",
            "insitu-webhook-certs",
        ),
        (
            true,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "patch",
            "",
            "clonesets.apps.kruise.io",
        ),
        (
            true,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "get",
            "",
            "clonesets.apps.kruise.io",
        ),
        (
            false,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "patch",
            "",
            "other.example.io",
        ),
        (
            false,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "delete",
            "",
            "clonesets.apps.kruise.io",
        ),
        // The defaulting webhook's own configuration (CA bundle), no other.
        (
            true,
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "patch",
            "",
            "insitu-cloneset-defaults",
        ),
        (
            false,
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "patch",
            "",
            "kruise-mutating-webhook-configuration",
        ),
    ];
    for (expect, group, resource, verb, ns, name) in named {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(sa.into()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:insitu-system".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some((*group).into()),
                    resource: Some((*resource).into()),
                    verb: Some((*verb).into()),
                    namespace: (!ns.is_empty()).then(|| (*ns).into()),
                    name: Some((*name).into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let res = sar.create(&PostParams::default(), &review).await?;
        let got = res.status.map(|s| s.allowed).unwrap_or(false);
        if got != *expect {
            wrong.push(format!(
                "{verb} {group}/{resource} {name} in '{ns}': allowed={got}, want {expect}"
            ));
        }
    }
    ensure(wrong.is_empty(), || {
        format!("RBAC mismatch: {}", wrong.join("; "))
    })
}

/// Kill the leader (SIGKILL) in the middle of a rollout: the standby takes the Lease within the lease duration
/// and completes the rollout with the invariants held (in place, one pod at a time, one restart each).
pub async fn leader_kill(env: &Env, ns: &str) -> anyhow::Result<()> {
    let real = env.real.as_ref().context("real cluster only")?;
    let name = "leader";
    create_cloneset(env, ns, fast_cloneset(name, 8, 1)).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 8, IMAGE_V1, Duration::from_secs(90)).await?;
    let observer = Observer::start(env, ns, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_image(env, ns, name, IMAGE_V2).await?;
    wait_until(
        "2 pods updated (mid-rollout)",
        Duration::from_secs(60),
        || async move {
            let pods = live_pods(env, ns, name).await?;
            let n = pods
                .iter()
                .filter(|p| spec_image(p) == IMAGE_V2 && is_ready(p) && runs_image(p, IMAGE_V2))
                .count();
            if (2..8).contains(&n) {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("{n} updated")))
            }
        },
    )
    .await?;
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &real.lease_namespace);
    let holder = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default()
    };
    let old = holder(&leases.get(&real.lease_name).await.context("leader Lease")?);
    let pid = real.controller_pid(&old)?;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    ensure(status.success(), || format!("kill -KILL {pid} ({old}) failed"))?;
    let killed = Instant::now();
    eprintln!("    leader_kill: killed leader {old} (pid {pid})");
    let leases_ref = &leases;
    let old_ref = old.as_str();
    let new = wait_until(
        "the standby to take the Lease",
        Duration::from_secs(45),
        || async move {
            let h = holder(&leases_ref.get(&real.lease_name).await?);
            if !h.is_empty() && h != old_ref {
                Ok(Ok(h))
            } else {
                Ok(Err(format!("holder {h:?}")))
            }
        },
    )
    .await?;
    let takeover = killed.elapsed();
    eprintln!(
        "    leader_kill: {new} took over after {:.1}s",
        takeover.as_secs_f64()
    );
    ensure(real.identities.contains(&new), || {
        format!("unknown new leader {new}")
    })?;
    // Lease duration 15 s + one retry period (2 s) + observation lag (≤ 2 s) + slack.
    ensure(takeover <= Duration::from_secs(25), || {
        format!("takeover took {takeover:?} (> lease duration + retry)")
    })?;
    let alive = std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ensure(!alive, || format!("old leader pid {pid} still alive"))?;
    let (_, after) = wait_rolled_out(env, ns, name, 8, IMAGE_V2, Duration::from_secs(150)).await?;
    ensure(identities(&before) == identities(&after), || {
        "pods were recreated across the failover".into()
    })?;
    ensure(after.iter().all(|p| restarts(p) == 1), || {
        format!("each pod must restart exactly once: {}", describe(&after, ""))
    })?;
    let seen = observer.snapshot();
    ensure(seen.max_out_of_service <= 1, || {
        format!(
            "{} pods out of service at once across the failover (maxUnavailable 1)",
            seen.max_out_of_service
        )
    })?;
    ensure(
        seen.pods.values().all(|h| !h.deleted && h.max_restarts <= 1),
        || "a pod was deleted or restarted twice".into(),
    )?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// `422` as a number of its own (not inside a timestamp such as `15:02:50.374422Z`).
fn mentions_status_422(line: &str) -> bool {
    line.match_indices("422").any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + 3..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// The controller's own requests (audit log, user = the ServiceAccount): none answered 422 (a pod update the
/// apiserver forbids) and none 403 (RBAC too tight); and its logs mention no 422 either.
pub async fn api_hygiene(env: &Env, _ns: &str) -> anyhow::Result<()> {
    let real = env.real.as_ref().context("real cluster only")?;
    let audit = std::fs::read_to_string(real.workdir.join("audit.log")).context("reading audit.log")?;
    let user = "system:serviceaccount:insitu-system:insitu";
    let (mut total, mut writes) = (0usize, BTreeSet::new());
    let mut bad = Vec::new();
    let mut infeasible_resizes = 0usize;
    for line in audit.lines() {
        let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if ev["user"]["username"] != json!(user) || ev["stage"] != json!("ResponseComplete") {
            continue;
        }
        // Only the controller (`insitu/<version> (controller)`), not the e2e's own probes with this token.
        let ua = ev["userAgent"].as_str().unwrap_or_default();
        if !(ua.starts_with("insitu/") && ua.ends_with("(controller)")) {
            continue;
        }
        total += 1;
        let code = ev["responseStatus"]["code"].as_i64().unwrap_or(0);
        let res = ev["objectRef"]["resource"].as_str().unwrap_or_default();
        let sub = ev["objectRef"]["subresource"].as_str().unwrap_or_default();
        let verb = ev["verb"].as_str().unwrap_or_default();
        if code < 300 && !matches!(verb, "get" | "list" | "watch") {
            writes.insert(format!(
                "{verb} {res}{}{sub}",
                if sub.is_empty() { "" } else { "/" }
            ));
        }
        // A resize beyond the node's allocatable is refused at admission (403, kube-apiserver >= 1.33): that is
        // the answer the `resize` scenario asks for on purpose (Kruise gets the same), not RBAC being too tight.
        let msg = ev["responseStatus"]["message"].as_str().unwrap_or_default();
        if code == 403 && sub == "resize" && msg.contains("didn't have enough allocatable resources") {
            infeasible_resizes += 1;
            continue;
        }
        if code == 422 || code == 403 {
            bad.push(format!(
                "{code} {verb} {}: {}",
                ev["requestURI"].as_str().unwrap_or_default(),
                ev["responseStatus"]["message"].as_str().unwrap_or_default()
            ));
        }
    }
    eprintln!(
        "    api_hygiene: {total} controller requests audited ({infeasible_resizes} resizes refused for node \
         capacity); successful writes: {writes:?}"
    );
    ensure(total > 50, || {
        format!("only {total} controller requests in the audit log: is it running as the ServiceAccount?")
    })?;
    for w in [
        "update pods",
        "update pods/status",
        "patch clonesets/status",
        "create pods",
        "create controllerrevisions",
    ] {
        ensure(writes.contains(w), || {
            format!("no successful '{w}' by the controller's ServiceAccount")
        })?;
    }
    ensure(bad.is_empty(), || {
        format!(
            "{} forbidden/invalid requests: {}",
            bad.len(),
            bad.iter().take(5).cloned().collect::<Vec<_>>().join(" | ")
        )
    })?;
    let mut log_hits = Vec::new();
    for log in real.controller_logs()? {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for l in text
            .lines()
            .filter(|l| mentions_status_422(l) || l.contains("Unprocessable"))
        {
            log_hits.push(format!("{}: {l}", log.display()));
        }
    }
    ensure(log_hits.is_empty(), || {
        format!("422s in controller logs: {}", log_hits.join(" | "))
    })
}

/// The CRD's validation rules (structural schema + CEL) on the apiserver reject invalid CloneSets with the same
/// field paths and messages as the Rust validator (`insitu_api::validation`), on create and on update.
pub async fn crd_validation(env: &Env, ns: &str) -> anyhow::Result<()> {
    use insitu_api::validation::{validate_create, validate_update};
    let base = || {
        let mut v = fast_cloneset("valid", 0, 1);
        v["metadata"]["namespace"] = json!(ns);
        v
    };
    let cases: Vec<(&str, serde_json::Value)> = vec![
        ("negative replicas", {
            let mut v = base();
            v["spec"]["replicas"] = json!(-1);
            v
        }),
        ("selector does not match the template labels", {
            let mut v = base();
            v["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
            v
        }),
        ("activeDeadlineSeconds", {
            let mut v = base();
            v["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(10);
            v
        }),
        ("unknown update strategy type", {
            let mut v = base();
            v["spec"]["updateStrategy"]["type"] = json!("Sideways");
            v
        }),
        ("InPlaceOnly with maxSurge", {
            let mut v = base();
            v["spec"]["updateStrategy"]["type"] = json!("InPlaceOnly");
            v["spec"]["updateStrategy"]["maxSurge"] = json!(1);
            v
        }),
        ("maxUnavailable and maxSurge both 0", {
            let mut v = base();
            v["spec"]["replicas"] = json!(2);
            v["spec"]["updateStrategy"]["maxUnavailable"] = json!(0);
            v["spec"]["updateStrategy"]["maxSurge"] = json!(0);
            v
        }),
    ];
    let api = clonesets(env, ns);
    let mut problems = Vec::new();
    for (what, manifest) in cases {
        let cs: CloneSet = serde_json::from_value(manifest)?;
        let expected = validate_create(&cs);
        if expected.is_empty() {
            problems.push(format!(
                "{what}: the Rust validator accepts it (test case is wrong)"
            ));
            continue;
        }
        match api.create(&PostParams::default(), &cs).await {
            Err(kube::Error::Api(s)) if s.code == 422 => {
                for e in &expected {
                    if !(s.message.contains(&e.field) && s.message.contains(&e.detail)) {
                        problems.push(format!(
                            "{what}: apiserver said {:?}, Rust expects {e}",
                            s.message
                        ));
                    }
                }
            }
            Ok(_) => {
                let _ = api.delete("valid", &Default::default()).await;
                problems.push(format!(
                    "{what}: accepted by the apiserver, Rust says {expected:?}"
                ));
            }
            Err(e) => problems.push(format!("{what}: expected 422, got {e}")),
        }
    }
    // A valid one is accepted; then an update of an immutable field is rejected like the Rust update rules.
    let valid: CloneSet = serde_json::from_value(base())?;
    ensure(validate_create(&valid).is_empty(), || {
        "the base CloneSet is invalid in Rust".into()
    })?;
    let created = api
        .create(&PostParams::default(), &valid)
        .await
        .context("creating a valid CloneSet")?;
    let mut changed = created.clone();
    changed.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "valid", "tier": "x"}}))?;
    if let Some(labels) = changed
        .spec
        .template
        .metadata
        .as_mut()
        .and_then(|m| m.labels.as_mut())
    {
        labels.insert("tier".into(), "x".into());
    }
    let expected = validate_update(&changed, &created);
    match api.replace("valid", &PostParams::default(), &changed).await {
        Err(kube::Error::Api(s)) if s.code == 422 => {
            for e in &expected {
                if !(s.message.contains(&e.field) && s.message.contains(&e.detail)) {
                    problems.push(format!(
                        "selector update: apiserver said {:?}, Rust expects {e}",
                        s.message
                    ));
                }
            }
            if expected.is_empty() {
                problems.push(format!(
                    "selector update: rejected ({}) but Rust accepts it",
                    s.message
                ));
            }
        }
        other => problems.push(format!(
            "selector update: expected 422, got {:?}",
            other.map(|c| c.name_any())
        )),
    }
    let _ = api.delete("valid", &Default::default()).await;
    ensure(problems.is_empty(), || problems.join("\n      "))
}

/// cpu of the first container: (spec request, status request).
fn cpu_request(p: &Pod) -> (String, String) {
    let q = |r: Option<&k8s_openapi::api::core::v1::ResourceRequirements>| {
        r.and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    };
    let spec = q(p
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref()));
    let status = q(p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.first())
        .and_then(|s| s.resources.as_ref()));
    (spec, status)
}

/// Rolled out, and every pod's spec and status report the cpu request `want`, lifecycle Normal.
async fn wait_resized(env: &Env, ns: &str, name: &str, want: &str) -> anyhow::Result<Vec<Pod>> {
    wait_rolled_out(env, ns, name, 2, IMAGE_V1, Duration::from_secs(120)).await?;
    let what = format!("{ns}/{name}: cpu requests resized to {want}");
    wait_until(&what, Duration::from_secs(120), || async {
        let pods = live_pods(env, ns, name).await?;
        let done = pods.iter().all(|p| {
            cpu_request(p) == (want.to_string(), want.to_string())
                && is_ready(p)
                && p.labels()
                    .get(insitu_api::keys::LIFECYCLE_STATE_LABEL)
                    .map(String::as_str)
                    == Some("Normal")
        });
        Ok(if done {
            Ok(pods)
        } else {
            Err(format!(
                "(spec, status) cpu: {:?}",
                pods.iter().map(cpu_request).collect::<Vec<_>>()
            ))
        })
    })
    .await
}

/// In-place resize through `pods/resize` (Kruise InPlaceWorkloadVerticalScaling): a cpu change with
/// resizePolicy NotRequired keeps every pod (UID, IP), restarts nothing and never takes a pod out of
/// service; the kubelet reports PodResizeInProgress and then the new resources. A resize beyond the node's
/// allocatable is refused by the apiserver: FailedUpdatePodInPlace, nothing changes, until a fix resizes.
pub async fn resize(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "resize";
    let mut cs = fast_cloneset(name, 2, 1);
    cs["spec"]["updateStrategy"]["inPlaceUpdateStrategy"] = json!({});
    let c = &mut cs["spec"]["template"]["spec"]["containers"][0];
    c["resources"] =
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}});
    c["resizePolicy"] = json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"}]);
    create_cloneset(env, ns, cs).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 2, IMAGE_V1, Duration::from_secs(90)).await?;
    let observer = Observer::start(env, ns, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu_path = "/spec/template/spec/containers/0/resources/requests/cpu";
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": cpu_path, "value": "200m"}]),
    )
    .await?;
    let after = wait_resized(env, ns, name, "200m").await?;
    ensure(identities(&before) == identities(&after), || {
        format!(
            "pod identity changed: {:?} -> {:?}",
            identities(&before),
            identities(&after)
        )
    })?;
    ensure(after.iter().all(|p| restarts(p) == 0), || {
        "a NotRequired resize restarted a container".into()
    })?;
    // The same containers, not new ones (a runtime that recreated them would report new containerIDs).
    let ids = |pods: &[Pod]| -> Vec<Option<String>> {
        pods.iter()
            .map(|p| crate::realnode::container_id(p, "app"))
            .collect()
    };
    ensure(ids(&before) == ids(&after), || {
        format!(
            "containerIDs changed on resize: {:?} -> {:?}",
            ids(&before),
            ids(&after)
        )
    })?;
    let seen = observer.snapshot();
    ensure(seen.max_out_of_service == 0, || {
        format!(
            "a resize-only update took {} pod(s) out of service",
            seen.max_out_of_service
        )
    })?;
    for p in &after {
        let h = seen.pods.get(&uid(p)).cloned().unwrap_or_default();
        ensure(!h.inplace_ready_false, || {
            format!(
                "{}: InPlaceUpdateReady=False on a resize without RestartContainer",
                p.name_any()
            )
        })?;
        // A real kubelet that actuates a resize between two status writes never shows PodResizeInProgress
        // (seen on kubelet v1.37.2: the condition is set and cleared within one sync); its ResizeCompleted
        // Event is what it always reports.
        if !h.resize_in_progress {
            let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
            let pod_uid = uid(p);
            wait_until(
                &format!("{}: PodResizeInProgress or a ResizeCompleted event", p.name_any()),
                Duration::from_secs(20),
                || {
                    let (events, pod_uid) = (events.clone(), pod_uid.clone());
                    async move {
                        let list = events.list(&ListParams::default()).await?;
                        let hit = list.items.iter().any(|e| {
                            e.reason.as_deref() == Some("ResizeCompleted")
                                && e.involved_object.uid.as_deref() == Some(pod_uid.as_str())
                        });
                        Ok(if hit {
                            Ok(())
                        } else {
                            Err("no ResizeCompleted event".to_string())
                        })
                    }
                },
            )
            .await?;
        }
        let state: serde_json::Value = serde_json::from_str(
            p.annotations()
                .get(insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION)
                .map_or("null", String::as_str),
        )?;
        ensure(state["updateResources"] == json!(true), || {
            format!("{}: state annotation {state} lacks updateResources", p.name_any())
        })?;
    }
    // Beyond any node: the resize is Forbidden (PodResizeValidator); the pods stay as they are.
    json_patch(
        env,
        ns,
        name,
        // The limit too: kube-apiserver validates requests <= limits before the node check (422).
        json!([
            {"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/cpu", "value": "100k"},
            {"op": "replace", "path": cpu_path, "value": "100k"}
        ]),
    )
    .await?;
    let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
    wait_until(
        "a FailedUpdatePodInPlace event naming the node's allocatable",
        Duration::from_secs(60),
        || {
            let events = events.clone();
            async move {
                let list = events.list(&ListParams::default()).await?;
                let hit = list.items.iter().any(|e| {
                    e.reason.as_deref() == Some("FailedUpdatePodInPlace")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("node didn't have enough allocatable resources"))
                });
                Ok(if hit {
                    Ok(())
                } else {
                    Err("no such event yet".to_string())
                })
            }
        },
    )
    .await?;
    let pods = live_pods(env, ns, name).await?;
    ensure(
        pods.iter().all(|p| cpu_request(p).0 == "200m" && is_ready(p)),
        || "a refused resize changed a pod".into(),
    )?;
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": cpu_path, "value": "300m"}]),
    )
    .await?;
    let fixed = wait_resized(env, ns, name, "300m").await?;
    ensure(identities(&before) == identities(&fixed), || {
        "a resize recreated a pod".into()
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}
