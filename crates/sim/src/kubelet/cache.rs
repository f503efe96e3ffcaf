//! What the kubelet keeps of a pod between watch events: its metadata and status whole, of its spec only what status building reads.
//!
//! The runtime (`PodRt`) takes what it needs from each new spec as the event arrives (`PodRt::new`,
//! `update_spec`, `restart_stale_env`), so the cached copy is only read to build the next status (container
//! names, sidecar restart policy, readiness gates, restart policy), to write it (metadata) and by the
//! ImagePullJob executor (labels, phase). A decoded pod's spec (probes, lifecycle, env, resources, volumes,
//! tolerations) was most of the ~13 KB each cached pod took; at 100k pods that was over a GiB. What is read is
//! kept apart (`KeptSpec`): even an empty `PodSpec` is 1.5 KB inline and each `Container` 2.1 KB, another
//! ~400 MB at 100k pods for a few names.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

/// What status building reads of a pod's spec (`status::build_status_kept`). Container names, sidecar
/// restart policies, readiness gates and the restart policy are immutable on a pod, so any version of it gives
/// the same.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptSpec {
    pub(super) containers: Box<[KeptContainer]>,
    pub(super) init_containers: Box<[KeptContainer]>,
    pub(super) restart_policy: Option<String>,
    /// The readiness gates' condition types.
    pub(super) readiness_gates: Box<[String]>,
}

/// A container's name and `restartPolicy` (`Always` on an init container: a sidecar).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptContainer {
    pub(super) name: String,
    pub(super) restart_policy: Option<String>,
}

impl KeptSpec {
    /// What status building reads of `spec` (none: an empty spec).
    pub fn of(spec: Option<&PodSpec>) -> Self {
        let Some(spec) = spec else {
            return Self::default();
        };
        let containers = |cs: &[Container]| -> Box<[KeptContainer]> {
            cs.iter()
                .map(|c| KeptContainer {
                    name: c.name.clone(),
                    restart_policy: c.restart_policy.clone(),
                })
                .collect()
        };
        Self {
            containers: containers(&spec.containers),
            init_containers: containers(spec.init_containers.as_deref().unwrap_or_default()),
            restart_policy: spec.restart_policy.clone(),
            readiness_gates: spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| g.condition_type.clone())
                .collect(),
        }
    }
}

/// `pod` without its spec, and the little of the spec the kubelet reads again after the runtime took it.
pub(super) fn kept(mut pod: Pod) -> (Pod, KeptSpec) {
    let spec = KeptSpec::of(pod.spec.take().as_ref());
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
    (pod, spec)
}

fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(l) = list {
        l.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::status::{PodView, build_status, build_status_kept};
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
        let (small, spec) = kept(pod.clone());
        assert!(small.spec.is_none(), "the spec is not cached whole");
        assert_eq!(spec.containers[0].name, "main");
        assert_eq!(spec.init_containers[0].restart_policy.as_deref(), Some("Always"));
        assert_eq!(&*spec.readiness_gates, ["InPlaceUpdateReady".to_string()]);
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
                build_status_kept(&small, &spec, &view, now),
                build_status(&pod, &view, now),
                "ready {ready}"
            );
        }
    }
}
