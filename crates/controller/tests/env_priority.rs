//! Sim-backed scenarios on virtual time: env from metadata in place (the node agent restarts the container),
//! container launch priority at creation (barrier ConfigMap) and in-place batches by priority.

mod common;

use common::*;
use insitu_api::CloneSet;
use insitu_api::containermeta::{self, RuntimeContainerMetaSet};
use insitu_api::inplace::InPlaceUpdateState;
use insitu_sim::cluster::SimConfig;
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Pod};
use kube::Api;
use serde_json::json;

fn cloneset(v: serde_json::Value) -> CloneSet {
    serde_json::from_value(v).expect("cloneset json")
}

fn status<'a>(p: &'a Pod, name: &str) -> &'a ContainerStatus {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|l| l.iter().find(|c| c.name == name))
        .unwrap_or_else(|| panic!("no status for container {name}"))
}

fn annotation<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

fn state(p: &Pod) -> InPlaceUpdateState {
    serde_json::from_str(annotation(p, insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION).expect("state"))
        .expect("state json")
}

fn started_at(s: &ContainerStatus) -> i64 {
    s.state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref())
        .map(|t| t.0.as_second())
        .expect("running")
}

#[test]
fn env_from_label_restarts_the_container_in_place_with_the_new_value() {
    run(async {
        let h = Harness::start(21).await;
        h.create(&cloneset(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "envlbl", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "envlbl"}},
                "updateStrategy": {"type": "InPlaceIfPossible"},
                "template": {
                    "metadata": {"labels": {"app": "envlbl", "test-env": "foo"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx:1.19.0",
                        "env": [{"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}]
                    }]}
                }
            }
        })))
        .await;
        h.wait_ready("envlbl", 1, None, 120).await;
        let before = h.pods("envlbl").await.remove(0);
        let old_id = status(&before, "nginx").container_id.clone();
        assert_eq!(status(&before, "nginx").restart_count, 0);

        // Only the label changes: a downward-API env reads it, so the container must restart in place.
        h.json_patch(
            "envlbl",
            json!([{"op": "replace", "path": "/spec/template/metadata/labels/test-env", "value": "bar"}]),
        )
        .await;
        h.wait_for("the pod updated in place and ready", 300, || async {
            let st = h.status("envlbl").await;
            let pods = h.pods("envlbl").await;
            st.updated_ready_replicas == 1
                && pods.len() == 1
                && is_ready(&pods[0])
                && status(&pods[0], "nginx").restart_count == 1
        })
        .await;
        let after = h.pods("envlbl").await.remove(0);
        assert_eq!(uid(&after), uid(&before), "same pod");
        let c = status(&after, "nginx");
        assert_eq!(c.restart_count, 1, "restarted once");
        assert_ne!(c.container_id, old_id, "a new container");
        assert_eq!(after.metadata.labels.as_ref().unwrap()["test-env"], "bar");
        let st = state(&after);
        assert!(st.update_env_from_metadata, "{st:?}");
        assert!(!st.update_images);
        assert_eq!(st.container_batches_record.len(), 1);
        assert_eq!(st.container_batches_record[0].containers, ["nginx"]);
        // The node agent reports the env the running container started with: TEST_ENV=bar.
        let meta = RuntimeContainerMetaSet::of(&after)
            .unwrap()
            .expect("runtime-containers-meta");
        let m = meta.containers.iter().find(|m| m.name == "nginx").unwrap();
        assert_eq!(Some(m.container_id.clone()), c.container_id);
        assert_eq!(
            m.hashes.extracted_env_from_metadata_hash,
            containermeta::hash_envs(&[("TEST_ENV".into(), "bar".into())])
        );
        let ex = h.explain("envlbl").await;
        assert!(
            ex.contains("stage None") && ex.contains("next update: up to date"),
            "{ex}"
        );
        // It stays settled: no second restart.
        h.sleep(60).await;
        assert_eq!(status(&h.pods("envlbl").await[0], "nginx").restart_count, 1);
    });
}

/// Kruise's e2e "in-place update two container images with priorities": redis (priority 10, postStart
/// `sleep 10`) goes first, nginx only once the new redis is ready.
fn prioritised(name: &str, redis_command: bool) -> CloneSet {
    let mut redis = json!({
        "name": "redis", "image": "redis:6.0.8-alpine",
        "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}],
        "lifecycle": {"postStart": {"exec": {"command": ["sleep", "10"]}}}
    });
    if redis_command {
        redis["command"] = json!(["sleep", "999"]);
    }
    cloneset(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "InPlaceIfPossible"},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 3,
                    "containers": [{"name": "nginx", "image": "nginx:1.19.0"}, redis]
                }
            }
        }
    }))
}

fn busybox_exits() -> SimConfig {
    SimConfig {
        nodes: 2,
        seed: 23,
        images: ImageProfiles::default().with(
            "*busybox*",
            ImageProfile {
                fail: ImageFailure::ExitsAtOnce,
                ..ImageProfile::default()
            },
        ),
        ..Default::default()
    }
}

#[test]
fn priority_barrier_at_creation_then_two_batches_in_order() {
    run(async {
        let h = Harness::start_with(busybox_exits()).await;
        h.create(&prioritised("prio", true)).await;
        h.wait_ready("prio", 1, None, 180).await;
        let pod = h.pods("prio").await.remove(0);
        let name = pod.metadata.name.clone().unwrap();
        // The barrier env insitu injected (Kruise's webhook does this): p_0 for nginx, p_10 for redis.
        let spec = pod.spec.as_ref().unwrap();
        for (i, key) in [(0, "p_0"), (1, "p_10")] {
            let e = spec.containers[i].env.as_ref().unwrap().last().unwrap();
            assert_eq!(e.name, "KRUISE_CONTAINER_BARRIER");
            let r = e
                .value_from
                .as_ref()
                .unwrap()
                .config_map_key_ref
                .as_ref()
                .unwrap();
            assert_eq!(
                (r.name.as_str(), r.key.as_str()),
                (format!("{name}-barrier").as_str(), key)
            );
        }
        let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
        let barrier = cms
            .get(&format!("{name}-barrier"))
            .await
            .expect("barrier configmap");
        let keys: Vec<&String> = barrier.data.as_ref().unwrap().keys().collect();
        assert_eq!(keys, ["p_0", "p_10"]);
        assert_eq!(
            barrier.metadata.owner_references.as_ref().unwrap()[0].uid,
            uid(&pod),
            "owned by its pod"
        );
        assert_eq!(
            annotation(&pod, "apps.kruise.io/container-launch-priority-completed"),
            Some("true")
        );
        // redis (higher priority) started first; nginx waited for its key (after redis's 10 s hook).
        assert!(
            started_at(status(&pod, "nginx")) >= started_at(status(&pod, "redis")) + 10,
            "nginx started after redis was ready"
        );

        // Both images change: redis is the first batch, nginx the second.
        h.json_patch(
            "prio",
            json!([
                {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.20.0"},
                {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "busybox:1.36"}
            ]),
        )
        .await;
        let saw_held = std::cell::Cell::new(false);
        h.wait_for("both containers updated in place", 300, || {
            let h = &h;
            let saw_held = &saw_held;
            async move {
                let pods = h.pods("prio").await;
                let Some(p) = pods.first() else { return false };
                let redis = status(p, "redis");
                let nginx_spec = p.spec.as_ref().unwrap().containers[0].image.as_deref();
                if redis.restart_count == 1 && !redis.ready {
                    // The second batch waits while the first is not ready.
                    assert_eq!(
                        nginx_spec,
                        Some("nginx:1.19.0"),
                        "nginx patched before redis was ready"
                    );
                    if !saw_held.get() {
                        let ex = h.explain("prio").await;
                        assert!(
                            ex.contains("stage Updating") && ex.contains("in-place update in next batches"),
                            "{ex}"
                        );
                    }
                    saw_held.set(true);
                }
                h.status("prio").await.updated_ready_replicas == 1
                    && status(p, "nginx").restart_count == 1
                    && redis.restart_count == 1
            }
        })
        .await;
        assert!(saw_held.get(), "never saw redis restarted but not ready yet");
        let p = h.pods("prio").await.remove(0);
        assert_eq!(uid(&p), uid(&pod));
        let st = state(&p);
        let batches: Vec<&Vec<String>> = st
            .container_batches_record
            .iter()
            .map(|b| &b.containers)
            .collect();
        assert_eq!(batches, [&vec!["redis".to_string()], &vec!["nginx".to_string()]]);
        let nginx_stopped = status(&p, "nginx")
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.finished_at.as_ref())
            .map(|t| t.0.as_second())
            .expect("nginx last termination");
        assert!(
            nginx_stopped > started_at(status(&p, "redis")) + 10,
            "nginx stopped after the new redis had started 10 s (its postStart hook)"
        );
    });
}

#[test]
fn a_failing_first_batch_stops_the_second() {
    run(async {
        let h = Harness::start_with(busybox_exits()).await;
        // redis without a command: busybox's default command exits at once → CrashLoopBackOff.
        h.create(&prioritised("prifail", false)).await;
        h.wait_ready("prifail", 1, None, 180).await;
        let pod = h.pods("prifail").await.remove(0);
        h.json_patch(
            "prifail",
            json!([
                {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.20.0"},
                {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "busybox:1.36"}
            ]),
        )
        .await;
        h.wait_for("redis crash-looping", 120, || async {
            let pods = h.pods("prifail").await;
            pods.first().is_some_and(|p| {
                let r = status(p, "redis");
                r.last_state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some()
                    && r.state.as_ref().and_then(|s| s.waiting.as_ref()).is_some()
            })
        })
        .await;
        h.sleep(60).await;
        let p = h.pods("prifail").await.remove(0);
        assert_eq!(uid(&p), uid(&pod));
        assert_eq!(status(&p, "nginx").restart_count, 0, "nginx never updated");
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("nginx:1.19.0")
        );
        let st = state(&p);
        assert_eq!(st.container_batches_record.len(), 1);
        assert_eq!(st.container_batches_record[0].containers, ["redis"]);
        assert_eq!(
            st.next_container_images,
            std::collections::BTreeMap::from([("nginx".to_string(), "nginx:1.20.0".to_string())])
        );
        assert_eq!(h.status("prifail").await.updated_ready_replicas, 0);
        // The second batch waits behind the first (Kruise's check names the pending batch first).
        let ex = h.explain("prifail").await;
        assert!(ex.contains("stage Updating"), "{ex}");
        assert!(ex.contains("in-place update in next batches"), "{ex}");
    });
}

#[test]
fn without_a_node_agent_the_env_update_waits_and_one_warning_says_why() {
    run(async {
        let h = Harness::start_with(SimConfig {
            nodes: 2,
            seed: 24,
            kruise_daemon: false,
            ..Default::default()
        })
        .await;
        h.create(&cloneset(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "noagent", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "noagent"}},
                "updateStrategy": {"type": "InPlaceIfPossible"},
                "template": {
                    "metadata": {"labels": {"app": "noagent", "test-env": "foo"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx:1.19.0",
                        "env": [{"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}]
                    }]}
                }
            }
        })))
        .await;
        h.wait_ready("noagent", 1, None, 120).await;
        h.json_patch(
            "noagent",
            json!([{"op": "replace", "path": "/spec/template/metadata/labels/test-env", "value": "bar"}]),
        )
        .await;
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(h.client.clone(), "default");
        let warnings = || async {
            events
                .list(&Default::default())
                .await
                .expect("list events")
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("EnvFromMetadataWithoutNodeAgent"))
                .collect::<Vec<_>>()
        };
        h.wait_for("the no-node-agent Warning", 120, || async {
            !warnings().await.is_empty()
        })
        .await;
        h.sleep(60).await;
        let w = warnings().await;
        assert_eq!(w.len(), 1, "once per CloneSet");
        assert_eq!(w[0].type_.as_deref(), Some("Warning"));
        assert_eq!(w[0].involved_object.name.as_deref(), Some("noagent"));
        assert!(w[0].count.unwrap_or(1) == 1, "{:?}", w[0].count);
        let p = h.pods("noagent").await.remove(0);
        assert_eq!(status(&p, "nginx").restart_count, 0, "nothing restarts it");
        assert_eq!(h.status("noagent").await.updated_ready_replicas, 0);
        let ex = h.explain("noagent").await;
        assert!(ex.contains("stage Updating"), "{ex}");
        assert!(
            ex.contains("waits for: a node agent (kruise-daemon) to restart the containers"),
            "{ex}"
        );
    });
}
