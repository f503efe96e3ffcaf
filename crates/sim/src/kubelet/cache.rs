//! What the kubelet keeps of a pod between watch events: its metadata and status whole, of its spec only what status building reads.
//!
//! The runtime (`PodRt`) takes what it needs from each new spec as the event arrives (`PodRt::new`,
//! `update_spec`, `restart_stale_env`), so the cached copy is only read to build the next status (container
//! names, sidecar restart policy, readiness gates, restart policy), to write it (metadata) and by the
//! ImagePullJob executor (labels, phase). A decoded pod's spec (probes, lifecycle, env, resources, volumes,
//! tolerations) was most of the ~13 KB each cached pod took; at 100k pods that was over a GiB.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

/// `pod` with its spec cut down to what the kubelet reads again after the runtime took the spec.
pub(super) fn kept(mut pod: Pod) -> Pod {
    pod.spec = pod.spec.map(kept_spec);
    // A decoded list grows by doubling from 4 (serde_json gives no length): one container's status in a list
    // of capacity 4 is ~3 KB of nothing, per pod, for as long as the pod is cached.
    if let Some(s) = &mut pod.status {
        shrink(&mut s.conditions);
        shrink(&mut s.container_statuses);
        shrink(&mut s.init_container_statuses);
        shrink(&mut s.host_ips);
        shrink(&mut s.pod_ips);
    }
    shrink(&mut pod.metadata.owner_references);
    shrink(&mut pod.metadata.finalizers);
    pod
}

fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(l) = list {
        l.shrink_to_fit();
    }
}

fn kept_spec(spec: PodSpec) -> PodSpec {
    // Exhaustive on the kept fields only: the rest is dropped, and `status::build_status` must read
    // nothing else (the test below builds a status from a kept pod and from the whole one).
    let PodSpec {
        containers,
        init_containers,
        restart_policy,
        readiness_gates,
        host_network,
        node_name,
        ..
    } = spec;
    PodSpec {
        containers: containers.into_iter().map(kept_container).collect(),
        init_containers: init_containers.map(|cs| cs.into_iter().map(kept_container).collect()),
        restart_policy,
        readiness_gates,
        host_network,
        node_name,
        ..PodSpec::default()
    }
}

fn kept_container(c: Container) -> Container {
    Container {
        name: c.name,
        restart_policy: c.restart_policy,
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::status::{PodView, build_status};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStatus};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn status(name: &str, ready: bool) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            image: "nginx:1.19.0".into(),
            ready,
            started: Some(true),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_kept_pod_builds_the_same_status_as_the_whole_one() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "7",
                "labels": {"app": "a"}, "annotations": {"x": "y"}},
            "spec": {
                "nodeName": "n1",
                "restartPolicy": "Always",
                "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                "initContainers": [
                    {"name": "side", "image": "busybox", "restartPolicy": "Always",
                     "readinessProbe": {"exec": {"command": ["true"]}}},
                    {"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}
                ],
                "containers": [{"name": "main", "image": "nginx:1.19.0",
                    "env": [{"name": "E", "value": "1"}],
                    "resources": {"requests": {"cpu": "100m"}},
                    "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {"phase": "Running",
                "conditions": [{"type": "InPlaceUpdateReady", "status": "True"}]}
        }))
        .expect("pod");
        let small = kept(pod.clone());
        let spec = small.spec.as_ref().expect("spec");
        assert_eq!(spec.containers[0].name, "main");
        assert!(spec.containers[0].env.is_none() && spec.containers[0].lifecycle.is_none());
        assert!(spec.tolerations.is_none() && spec.volumes.is_none());
        assert_eq!(small.metadata, pod.metadata);
        assert_eq!(small.status, pod.status);
        let conditions = small.status.as_ref().and_then(|s| s.conditions.as_ref());
        assert_eq!(conditions.map(Vec::capacity), Some(1), "no spare capacity kept");
        for ready in [true, false] {
            let view = PodView {
                host_ip: "10.0.0.1".into(),
                pod_ip: "10.1.0.2".into(),
                start_time: Timestamp::UNIX_EPOCH,
                sandbox_ready: true,
                init_statuses: vec![status("side", ready), status("init", false)],
                statuses: vec![status("main", ready)],
                terminal: false,
                runtime_meta: None,
                resize_conditions: Vec::new(),
            };
            let now = Timestamp::UNIX_EPOCH;
            assert_eq!(
                build_status(&small, &view, now),
                build_status(&pod, &view, now),
                "ready {ready}"
            );
        }
    }
}
