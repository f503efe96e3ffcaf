//! Pure decisions for one pod (Kruise `pkg/daemon/containermeta/container_meta_controller.go`,
//! `manageContainerMetaSet`): the pod and what the runtime says of its containers in, the
//! `apps.kruise.io/runtime-containers-meta` value and the containers to restart out. No I/O, no clock.

use std::collections::{BTreeMap, HashSet};

use insitu_api::containermeta::{
    self, RUNTIME_CONTAINERS_META_ANNOTATION, RuntimeContainerHashes, RuntimeContainerMeta,
    RuntimeContainerMetaSet,
};
use insitu_api::keys::INPLACE_UPDATE_READY;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The kubelet's labels and annotations on the containers it creates (`pkg/kubelet/kuberuntime/labels.go`).
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
const ANNOTATION_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
const ANNOTATION_HASH: &str = "io.kubernetes.container.hash";

/// The kubelet's floor on a kill's grace period (`minimumGracePeriodInSeconds`, also Kruise
/// `pkg/daemon/kuberuntime/kuberuntime_container.go`, `KillContainer`).
pub const MIN_GRACE_SECONDS: i64 = 2;

/// One runtime container as CRI `ListContainers` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeContainer {
    /// The runtime's id (without the `containerd://` prefix).
    pub id: String,
    /// The kubelet's container name (`io.kubernetes.container.name`).
    pub name: String,
    pub running: bool,
    /// Nanoseconds since the epoch.
    pub created_at: i64,
    pub annotations: BTreeMap<String, String>,
}

/// Per container name, the running container, else the newest one (as the kubelet's `GetPodStatus` sorts
/// them newest first and `FindContainerStatusByName` takes the first).
pub fn pick(containers: Vec<RuntimeContainer>) -> BTreeMap<String, RuntimeContainer> {
    let mut out: BTreeMap<String, RuntimeContainer> = BTreeMap::new();
    for c in containers {
        let better = match out.get(&c.name) {
            None => true,
            Some(have) => (c.running, c.created_at) > (have.running, have.created_at),
        };
        if better {
            out.insert(c.name.clone(), c);
        }
    }
    out
}

/// What the agent knows of one app container: its runtime container and, when read, the environment the
/// running process was started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub container: RuntimeContainer,
    /// `None` when not read (not running, or the runtime did not say).
    pub env: Option<BTreeMap<String, String>>,
}

/// The preStop hook to run before a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreStop {
    Exec(Vec<String>),
    Sleep(i64),
    /// An `httpGet` hook, resolved as the kubelet does (`pkg/kubelet/lifecycle/handlers.go`, `runHTTPHandler`):
    /// the host defaults to the pod's IP, a named port is the container's port of that name.
    HttpGet(HttpGet),
}

/// A resolved `httpGet` preStop hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpGet {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

/// A container to restart in place: preStop, then CRI StopContainer with the rest of the grace period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub name: String,
    /// The runtime's id.
    pub id: String,
    pub pre_stop: Option<PreStop>,
    /// The whole grace period, preStop included.
    pub grace_seconds: i64,
}

/// The decisions for one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The annotation's new value, when it differs from the pod's.
    pub annotation: Option<String>,
    pub restarts: Vec<Restart>,
    /// A running container's environment could not be read: look again soon (Kruise re-queues after 3 s).
    pub retry: bool,
}

/// The annotation SidecarSet puts on the pods it injects (Kruise `pkg/control/sidecarcontrol/util.go`).
const SIDECARSET_HASH_ANNOTATION: &str = "kruise.io/sidecarset-hash";

/// Kruise's `eventFilter`: a pod whose controller is an `apps.kruise.io` workload, or one SidecarSet injected.
/// Pods of other workloads (a Deployment's with a downward-API env) are left alone: no annotation is written on
/// them, and nothing would ever restart them (no `InPlaceUpdateReady` condition).
fn kruise_pod(pod: &Pod) -> bool {
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.api_version
                .split_once('/')
                .is_some_and(|(group, _)| group == "apps.kruise.io")
    });
    let injected = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(SIDECARSET_HASH_ANNOTATION));
    owned || injected
}

/// Whether the agent serves this pod: a Kruise workload's (`kruise_pod`), not deleting, a container has started
/// (Kruise's `enqueueAfter`), and an app container reads pod labels or annotations through the downward API.
pub fn serves(pod: &Pod) -> bool {
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|l| {
            l.iter()
                .any(|s| s.container_id.as_deref().is_some_and(|id| !id.is_empty()))
        });
    kruise_pod(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && started
        && app_containers(pod).any(|c| containermeta::env_from_metadata(c).next().is_some())
}

fn app_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|s| s.containers.iter())
}

/// The env-from-metadata hash of the values the container runs with (Kruise `GetCurrentHash`: each
/// referencing env read from the container's environment, missing = empty).
pub fn current_env_hash(c: &Container, env: &BTreeMap<String, String>) -> u64 {
    let mut vals: Vec<(String, String)> = containermeta::env_from_metadata(c)
        .map(|(name, _, _)| (name.to_string(), env.get(name).cloned().unwrap_or_default()))
        .collect();
    vals.sort_by(|a, b| a.0.cmp(&b.0));
    containermeta::hash_envs(&vals)
}

/// Whether the container's env must be read to hash it (only when it has env from metadata).
pub fn needs_env(pod: &Pod, name: &str) -> bool {
    app_containers(pod)
        .find(|c| c.name == name)
        .is_some_and(|c| containermeta::env_from_metadata(c).next().is_some())
}

/// Kruise restarts only while an in-place update runs (`InPlaceUpdateReady` False), never on a plain label
/// change (`manageContainerMetaSet`: "Trigger restarting only if it is in-place updating").
fn in_place_updating(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == INPLACE_UPDATE_READY && c.status == "False")
}

/// The kill's grace period (Kruise `KillContainer`): the deletion's, else the pod's, else the minimum.
fn grace_seconds(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(MIN_GRACE_SECONDS)
}

fn pre_stop(pod: &Pod, c: &Container) -> Option<PreStop> {
    let h = c.lifecycle.as_ref()?.pre_stop.as_ref()?;
    if let Some(e) = &h.exec {
        return Some(PreStop::Exec(e.command.clone().unwrap_or_default()));
    }
    if let Some(s) = &h.sleep {
        return Some(PreStop::Sleep(s.seconds));
    }
    let g = h.http_get.as_ref()?;
    let port = match &g.port {
        IntOrString::Int(p) => u16::try_from(*p).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .or_else(|| name.parse().ok()),
    };
    let host = g
        .host
        .clone()
        .filter(|h| !h.is_empty())
        .or_else(|| pod.status.as_ref().and_then(|s| s.pod_ip.clone()))
        .unwrap_or_default();
    let path = g.path.clone().unwrap_or_default();
    Some(PreStop::HttpGet(HttpGet {
        https: g
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("https")),
        host,
        port: port.unwrap_or(0),
        path: if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        },
        headers: g
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
    }))
}

/// The meta entry for one app container and whether its env hash is unknown although it runs.
fn meta_entry(
    pod: &Pod,
    spec: &Container,
    obs: &Observed,
    runtime_name: &str,
    old: Option<&RuntimeContainerMetaSet>,
) -> (RuntimeContainerMeta, bool) {
    let uri = format!("{runtime_name}://{}", obs.container.id);
    let old = old.and_then(|m| m.containers.iter().find(|e| e.container_id == uri));
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|l| l.iter().find(|s| s.name == spec.name));
    let ann = &obs.container.annotations;
    // The kubelet's own figures, recorded on the container when it created it, as Kruise reads them
    // (`pkg/daemon/kuberuntime/labels.go`); the pod status's restartCount lags a restart.
    let restart_count = ann
        .get(ANNOTATION_RESTART_COUNT)
        .and_then(|v| v.parse().ok())
        .or(old.map(|o| o.restart_count))
        .or(status.map(|s| s.restart_count))
        .unwrap_or_default();
    let plain_hash = ann
        .get(ANNOTATION_HASH)
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .or(old.map(|o| o.hashes.plain_hash))
        .unwrap_or_else(|| {
            // No annotation (not a kubelet's container?): the status's image is what runs.
            let image = status.map_or(spec.image.as_deref().unwrap_or_default(), |s| s.image.as_str());
            containermeta::plain_hash(&spec.name, image)
        });
    let has_env = containermeta::env_from_metadata(spec).next().is_some();
    let computed = match (&obs.env, has_env) {
        _ if !obs.container.running => None,
        (_, false) => Some(containermeta::hash_envs(&[])),
        (Some(env), true) => Some(current_env_hash(spec, env)),
        (None, true) => None,
    };
    let unknown = obs.container.running && computed.is_none();
    let env_hash = computed
        .or(old.map(|o| o.hashes.extracted_env_from_metadata_hash))
        .unwrap_or(0);
    let entry = RuntimeContainerMeta {
        name: spec.name.clone(),
        container_id: uri,
        restart_count,
        hashes: RuntimeContainerHashes {
            plain_hash,
            extracted_env_from_metadata_hash: env_hash,
        },
    };
    (entry, unknown)
}

/// The annotation and the restarts for a served pod. `observed` holds the picked runtime container of each
/// app container by name; `stopped` the runtime ids this agent already stopped (one restart per container).
pub fn decide(
    pod: &Pod,
    runtime_name: &str,
    observed: &BTreeMap<String, Observed>,
    stopped: &HashSet<String>,
) -> Decision {
    let old = RuntimeContainerMetaSet::of(pod).ok().flatten();
    let updating = in_place_updating(pod);
    let mut meta = RuntimeContainerMetaSet::default();
    let mut out = Decision::default();
    for spec in app_containers(pod) {
        let Some(obs) = observed.get(&spec.name) else {
            continue;
        };
        let (entry, unknown) = meta_entry(pod, spec, obs, runtime_name, old.as_ref());
        out.retry |= unknown;
        let hash = entry.hashes.extracted_env_from_metadata_hash;
        if updating
            && obs.container.running
            && hash > 0
            && hash != containermeta::expected_env_hash(spec, pod)
            && !stopped.contains(&obs.container.id)
        {
            out.restarts.push(Restart {
                name: spec.name.clone(),
                id: obs.container.id.clone(),
                pre_stop: pre_stop(pod, spec),
                grace_seconds: grace_seconds(pod),
            });
        }
        meta.containers.push(entry);
    }
    if old.as_ref() != Some(&meta) && !meta.containers.is_empty() {
        out.annotation = Some(meta.to_json());
    }
    out
}

/// The merge patch that publishes the annotation (Kruise `reportContainerMetaSet`, on `pods/status`).
pub fn annotation_patch(value: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {RUNTIME_CONTAINERS_META_ANNOTATION: value}}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerStatus, EnvVar, EnvVarSource, ExecAction, Lifecycle, LifecycleHandler, ObjectFieldSelector,
        PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(label: &str, updating: bool) -> Pod {
        let env = EnvVar {
            name: "TEST_ENV".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.labels['test-env']".into(),
                    api_version: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut p = Pod::default();
        p.metadata.labels = Some([("test-env".to_string(), label.to_string())].into());
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps.kruise.io/v1alpha1".into(),
            kind: "CloneSet".into(),
            name: "web".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        p.spec = Some(PodSpec {
            termination_grace_period_seconds: Some(10),
            containers: vec![
                Container {
                    name: "app".into(),
                    image: Some("nginx:1.20.0".into()),
                    env: Some(vec![env]),
                    lifecycle: Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(vec!["sh".into(), "-c".into(), "sleep 1".into()]),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Container {
                    name: "side".into(),
                    image: Some("busybox".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        p.status = Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                container_id: Some("containerd://c1".into()),
                image: "nginx:1.20.0".into(),
                restart_count: 3,
                ..Default::default()
            }]),
            conditions: updating.then(|| {
                vec![PodCondition {
                    type_: INPLACE_UPDATE_READY.into(),
                    status: "False".into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        p
    }

    fn observed(id: &str, name: &str, env: Option<&str>, running: bool) -> Observed {
        Observed {
            container: RuntimeContainer {
                id: id.into(),
                name: name.into(),
                running,
                created_at: 1,
                annotations: [
                    (ANNOTATION_RESTART_COUNT.to_string(), "1".to_string()),
                    (ANNOTATION_HASH.to_string(), format!("{:x}", 0xabcd_u64)),
                ]
                .into(),
            },
            env: env.map(|v| {
                [
                    ("TEST_ENV".to_string(), v.to_string()),
                    ("PATH".into(), "/bin".into()),
                ]
                .into()
            }),
        }
    }

    fn set_of(list: Vec<Observed>) -> BTreeMap<String, Observed> {
        list.into_iter().map(|o| (o.container.name.clone(), o)).collect()
    }

    #[test]
    fn publishes_the_hashes_the_container_runs_with() {
        let p = pod("v1", false);
        let obs = set_of(vec![
            observed("c1", "app", Some("v1"), true),
            observed("s1", "side", None, true),
        ]);
        let d = decide(&p, "containerd", &obs, &HashSet::new());
        assert!(d.restarts.is_empty() && !d.retry);
        let meta: RuntimeContainerMetaSet =
            serde_json::from_str(d.annotation.as_deref().unwrap_or("")).unwrap();
        assert_eq!(meta.containers.len(), 2);
        let app = &meta.containers[0];
        assert_eq!(app.container_id, "containerd://c1");
        assert_eq!(app.restart_count, 1);
        assert_eq!(app.hashes.plain_hash, 0xabcd);
        assert_eq!(
            app.hashes.extracted_env_from_metadata_hash,
            containermeta::hash_envs(&[("TEST_ENV".into(), "v1".into())])
        );
        assert_eq!(
            app.hashes.extracted_env_from_metadata_hash,
            containermeta::expected_env_hash(&p.spec.as_ref().unwrap().containers[0], &p)
        );
        // A container without env from metadata: Kruise's hash of no envs.
        assert_eq!(
            meta.containers[1].hashes.extracted_env_from_metadata_hash,
            containermeta::hash_envs(&[])
        );
        // Published once: the same facts again change nothing.
        let mut p2 = p.clone();
        p2.metadata.annotations = Some(
            [(
                RUNTIME_CONTAINERS_META_ANNOTATION.to_string(),
                d.annotation.unwrap_or_default(),
            )]
            .into(),
        );
        assert_eq!(
            decide(&p2, "containerd", &obs, &HashSet::new()),
            Decision::default()
        );
    }

    #[test]
    fn restarts_a_stale_container_once_and_only_while_updating() {
        let obs = set_of(vec![observed("c1", "app", Some("v1"), true)]);
        // The label changed but no in-place update runs: Kruise leaves the container alone.
        assert!(
            decide(&pod("v2", false), "containerd", &obs, &HashSet::new())
                .restarts
                .is_empty()
        );
        let d = decide(&pod("v2", true), "containerd", &obs, &HashSet::new());
        assert_eq!(
            d.restarts,
            vec![Restart {
                name: "app".into(),
                id: "c1".into(),
                pre_stop: Some(PreStop::Exec(vec!["sh".into(), "-c".into(), "sleep 1".into()])),
                grace_seconds: 10,
            }]
        );
        let stopped: HashSet<String> = ["c1".to_string()].into();
        assert!(
            decide(&pod("v2", true), "containerd", &obs, &stopped)
                .restarts
                .is_empty()
        );
        // The new container runs the new value: nothing to restart.
        let new = set_of(vec![observed("c2", "app", Some("v2"), true)]);
        assert!(
            decide(&pod("v2", true), "containerd", &new, &stopped)
                .restarts
                .is_empty()
        );
    }

    #[test]
    fn unreadable_env_keeps_the_old_hash_and_retries() {
        let mut p = pod("v1", true);
        let old = RuntimeContainerMetaSet {
            containers: vec![RuntimeContainerMeta {
                name: "app".into(),
                container_id: "containerd://c1".into(),
                restart_count: 1,
                hashes: RuntimeContainerHashes {
                    plain_hash: 0xabcd,
                    extracted_env_from_metadata_hash: 42,
                },
            }],
        };
        p.metadata.annotations =
            Some([(RUNTIME_CONTAINERS_META_ANNOTATION.to_string(), old.to_json())].into());
        let d = decide(
            &p,
            "containerd",
            &set_of(vec![observed("c1", "app", None, true)]),
            &HashSet::new(),
        );
        assert!(d.retry);
        assert_eq!(d.annotation, None);
        // The kept hash (42) differs from the pod's: restart.
        assert_eq!(d.restarts.len(), 1);
        // An exited container reports no env hash and is never restarted.
        let d = decide(
            &pod("v2", true),
            "containerd",
            &set_of(vec![observed("c9", "app", None, false)]),
            &HashSet::new(),
        );
        assert!(d.restarts.is_empty() && !d.retry);
        assert!(
            d.annotation
                .is_some_and(|a| !a.contains("extractedEnvFromMetadataHash"))
        );
    }

    #[test]
    fn http_get_hooks_resolve_the_pod_ip_and_named_ports() {
        use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, HTTPHeader};
        let mut p = pod("v1", true);
        if let Some(st) = p.status.as_mut() {
            st.pod_ip = Some("10.0.0.7".into());
        }
        if let Some(spec) = p.spec.as_mut() {
            let c = &mut spec.containers[0];
            c.ports = Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]);
            c.lifecycle = Some(Lifecycle {
                pre_stop: Some(LifecycleHandler {
                    http_get: Some(HTTPGetAction {
                        port: IntOrString::String("http".into()),
                        path: Some("drain".into()),
                        http_headers: Some(vec![HTTPHeader {
                            name: "X-A".into(),
                            value: "1".into(),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let obs = set_of(vec![observed("c1", "app", Some("v1"), true)]);
        let d = decide(&pod_relabel(p, "v2"), "containerd", &obs, &HashSet::new());
        assert_eq!(
            d.restarts[0].pre_stop,
            Some(PreStop::HttpGet(HttpGet {
                https: false,
                host: "10.0.0.7".into(),
                port: 8080,
                path: "/drain".into(),
                headers: vec![("X-A".into(), "1".into())],
            }))
        );
    }

    fn pod_relabel(mut p: Pod, v: &str) -> Pod {
        p.metadata.labels = Some([("test-env".to_string(), v.to_string())].into());
        p
    }

    #[test]
    fn picks_the_running_container_else_the_newest() {
        let c = |id: &str, running, created_at| RuntimeContainer {
            id: id.into(),
            name: "app".into(),
            running,
            created_at,
            annotations: BTreeMap::new(),
        };
        let picked = pick(vec![c("old", false, 1), c("run", true, 2), c("new", false, 3)]);
        assert_eq!(picked.get("app").map(|c| c.id.as_str()), Some("run"));
        let picked = pick(vec![c("old", false, 1), c("new", false, 3)]);
        assert_eq!(picked.get("app").map(|c| c.id.as_str()), Some("new"));
    }

    #[test]
    fn serves_only_started_kruise_pods_with_env_from_metadata() {
        assert!(serves(&pod("v1", false)));
        let mut p = pod("v1", false);
        if let Some(s) = p.spec.as_mut() {
            s.containers[0].env = None;
        }
        assert!(!serves(&p));
        let mut p = pod("v1", false);
        p.status = None;
        assert!(!serves(&p));
        // A Deployment's pod: not Kruise's, unless a SidecarSet injected it.
        let mut p = pod("v1", false);
        if let Some(o) = p.metadata.owner_references.as_mut() {
            o[0].api_version = "apps/v1".into();
            o[0].kind = "ReplicaSet".into();
        }
        assert!(!serves(&p));
        p.metadata.annotations = Some([(SIDECARSET_HASH_ANNOTATION.to_string(), "{}".to_string())].into());
        assert!(serves(&p));
    }
}
