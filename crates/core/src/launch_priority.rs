//! Container launch priority (Kruise `pkg/webhook/pod/mutating/container_launch_priority_initialization.go`,
//! `pkg/controller/containerlaunchpriority`): the `KRUISE_CONTAINER_BARRIER` env Kruise's pod webhook
//! injects, and the steps of Kruise's container-launch-priority controller over the pod's barrier ConfigMap.
//!
//! insitu has no pod webhook: it injects the env itself when it builds a pod (`pods::new_pod`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMapKeySelector, Container, EnvVar, EnvVarSource, Pod, PodSpec};

/// Env a user sets on a container to give it a launch priority (`apps/pub` `ContainerLaunchPriorityEnvName`).
pub const PRIORITY_ENV: &str = "KRUISE_CONTAINER_PRIORITY";
/// Env injected into every container of a prioritised pod (`ContainerLaunchBarrierEnvName`).
pub(crate) const BARRIER_ENV: &str = "KRUISE_CONTAINER_BARRIER";
/// Pod annotation asking for launch in container order (`ContainerLaunchPriorityKey`).
pub(crate) const PRIORITY_ANNOTATION: &str = "apps.kruise.io/container-launch-priority";
/// Value of [`PRIORITY_ANNOTATION`] for container order.
pub(crate) const ORDERED: &str = "Ordered";
/// Pod annotation set once every priority is in the barrier (`ContainerLaunchPriorityCompletedKey`).
pub const COMPLETED_ANNOTATION: &str = "apps.kruise.io/container-launch-priority-completed";

/// The barrier ConfigMap of a pod.
pub(crate) fn barrier_name(pod_name: &str) -> String {
    format!("{pod_name}-barrier")
}

/// The barrier key of a priority (`GetKey`).
pub fn key(priority: i64) -> String {
    format!("p_{priority}")
}

/// Kruise `GetContainerPriority`: the priority from the injected barrier env, if any.
pub(crate) fn container_priority(c: &Container) -> Option<i64> {
    let env = c.env.as_ref()?.iter().find(|e| e.name == BARRIER_ENV)?;
    let k = &env.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
    // Kruise: strconv.Atoi of key[2:], errors ignored (→ 0).
    Some(k.get(2..).and_then(|s| s.parse().ok()).unwrap_or(0))
}

/// Kruise's webhook `containerLaunchPriorityInitialization`: the priority of each container, or `None` when
/// the pod needs no barrier (one container; no `Ordered` annotation and the `KRUISE_CONTAINER_PRIORITY`
/// values all equal or all zero). `Err` names a non-integer priority.
pub(crate) fn priorities(
    spec: &PodSpec,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Option<Vec<i64>>, String> {
    if spec.containers.len() <= 1 {
        return Ok(None);
    }
    if annotations
        .and_then(|a| a.get(PRIORITY_ANNOTATION))
        .map(String::as_str)
        == Some(ORDERED)
    {
        return Ok(Some((0..spec.containers.len() as i64).map(|i| -i).collect()));
    }
    let mut prios = vec![0i64; spec.containers.len()];
    let mut any = false;
    for (i, c) in spec.containers.iter().enumerate() {
        for e in c.env.iter().flatten().filter(|e| e.name == PRIORITY_ENV) {
            let v = e.value.as_deref().unwrap_or_default();
            let p: i64 = v.parse().map_err(|_| {
                format!(
                    "spec.containers[{}].env[{PRIORITY_ENV}]: {v:?} is not an integer (launch priority)",
                    c.name
                )
            })?;
            prios[i] = p;
            any |= p != 0;
        }
    }
    if !any || prios.iter().all(|p| *p == prios[0]) {
        return Ok(None);
    }
    Ok(Some(prios))
}

/// Appends the barrier env to every container (Kruise `setPodEnv`).
pub(crate) fn inject(spec: &mut PodSpec, prios: &[i64], pod_name: &str) {
    for (c, p) in spec.containers.iter_mut().zip(prios) {
        c.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: BARRIER_ENV.into(),
            value: None,
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: barrier_name(pod_name),
                    key: key(*p),
                    optional: None,
                }),
                ..Default::default()
            }),
        });
    }
}

/// What Kruise's container-launch-priority controller does next for a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BarrierStep {
    /// The key to have in the barrier (the highest priority among containers not ready yet).
    pub key: String,
    /// After that key, every priority is released: mark the pod completed.
    pub complete: bool,
}

/// Kruise `shouldEnqueue` + `handle` without the ConfigMap: `None` when the pod is completed, its containers
/// are all ready, or no unready container has a priority. The controller then makes sure `key` is in the
/// barrier (creating the ConfigMap if needed) and, when `complete`, sets [`COMPLETED_ANNOTATION`]. Kruise
/// also marks the pod completed when its *lowest* pending priority is already in the barrier; that case
/// follows one step later here, after the highest is added (it is then the same key).
pub(crate) fn next_step(pod: &Pod) -> Option<BarrierStep> {
    if pod.metadata.deletion_timestamp.is_some()
        || pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(COMPLETED_ANNOTATION))
            .is_some_and(|v| v == "true")
    {
        return None;
    }
    let status = pod.status.as_ref();
    let containers_ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "ContainersReady" && c.status == "True");
    if containers_ready {
        return None;
    }
    let ready: BTreeSet<&str> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|s| s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let mut pending: Vec<i64> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| !ready.contains(c.name.as_str()))
        .filter_map(container_priority)
        .collect();
    pending.sort_unstable();
    let (first, last) = (*pending.first()?, *pending.last()?);
    Some(BarrierStep {
        key: key(last),
        complete: first == last,
    })
}

/// Whether any template this CloneSet's pods may come from asks for launch priority: its own, or an owned
/// revision's (only then are its pods looked at: the others never carry the barrier env).
pub(crate) fn cloneset_uses_priority(
    cs: &insitu_api::CloneSet,
    revisions: &[std::sync::Arc<k8s_openapi::api::apps::v1::ControllerRevision>],
) -> bool {
    let tpl = &cs.spec.template;
    if template_uses_priority(
        tpl.spec.as_ref(),
        tpl.metadata.as_ref().and_then(|m| m.annotations.as_ref()),
    ) {
        return true;
    }
    let uid = cs.metadata.uid.as_deref().unwrap_or_default();
    revisions.iter().any(|r| {
        r.metadata.owner_references.iter().flatten().any(|o| o.uid == uid)
            && r.data.as_ref().is_some_and(|d| {
                let Some(tpl) = d.0.pointer("/spec/template") else {
                    return false;
                };
                // Cheap look first (this runs every round): decode only a template that mentions priority.
                if !mentions_priority(tpl) {
                    return false;
                }
                let spec = tpl
                    .get("spec")
                    .and_then(|s| serde_json::from_value(s.clone()).ok());
                let ann: Option<std::collections::BTreeMap<String, String>> = tpl
                    .pointer("/metadata/annotations")
                    .and_then(|a| serde_json::from_value(a.clone()).ok());
                template_uses_priority(spec.as_ref(), ann.as_ref())
            })
    })
}

/// A revision template with the launch-priority annotation or a `KRUISE_CONTAINER_PRIORITY` env.
fn mentions_priority(tpl: &serde_json::Value) -> bool {
    tpl.pointer("/metadata/annotations")
        .and_then(|a| a.get(PRIORITY_ANNOTATION))
        .is_some()
        || tpl
            .pointer("/spec/containers")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("env").and_then(serde_json::Value::as_array))
            .flatten()
            .any(|e| e.get("name").and_then(serde_json::Value::as_str) == Some(PRIORITY_ENV))
}

/// Whether a template asks for launch priority (so its pods may need barrier steps).
pub(crate) fn template_uses_priority(
    spec: Option<&PodSpec>,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    spec.is_some_and(|s| matches!(priorities(s, annotations), Ok(Some(_))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};
    use std::collections::BTreeMap;

    fn c(name: &str, prio: Option<&str>) -> Container {
        Container {
            name: name.into(),
            env: prio.map(|p| {
                vec![EnvVar {
                    name: PRIORITY_ENV.into(),
                    value: Some(p.into()),
                    value_from: None,
                }]
            }),
            ..Default::default()
        }
    }

    fn spec(cs: Vec<Container>) -> PodSpec {
        PodSpec {
            containers: cs,
            ..Default::default()
        }
    }

    #[test]
    fn priorities_as_the_webhook_decides() {
        assert_eq!(priorities(&spec(vec![c("a", Some("10"))]), None), Ok(None));
        assert_eq!(
            priorities(&spec(vec![c("a", None), c("b", Some("10"))]), None),
            Ok(Some(vec![0, 10]))
        );
        assert_eq!(
            priorities(&spec(vec![c("a", Some("5")), c("b", Some("5"))]), None),
            Ok(None)
        );
        assert_eq!(
            priorities(&spec(vec![c("a", None), c("b", None)]), None),
            Ok(None)
        );
        let ann: BTreeMap<String, String> = [(PRIORITY_ANNOTATION.to_string(), ORDERED.to_string())].into();
        assert_eq!(
            priorities(&spec(vec![c("a", None), c("b", None), c("c", None)]), Some(&ann)),
            Ok(Some(vec![0, -1, -2]))
        );
        let err = priorities(&spec(vec![c("a", None), c("b", Some("x"))]), None).unwrap_err();
        assert!(
            err.contains("spec.containers[b].env[KRUISE_CONTAINER_PRIORITY]"),
            "{err}"
        );
    }

    #[test]
    fn inject_appends_the_barrier_env() {
        let mut s = spec(vec![c("a", Some("1")), c("b", Some("10"))]);
        inject(&mut s, &[0, 10], "web-x");
        let e = &s.containers[1].env.as_ref().unwrap()[1];
        assert_eq!(e.name, BARRIER_ENV);
        let r = e
            .value_from
            .as_ref()
            .unwrap()
            .config_map_key_ref
            .as_ref()
            .unwrap();
        assert_eq!((r.name.as_str(), r.key.as_str()), ("web-x-barrier", "p_10"));
        assert_eq!(container_priority(&s.containers[1]), Some(10));
        assert_eq!(container_priority(&s.containers[0]), Some(0));
    }

    fn pod(ready: &[&str], containers_ready: bool) -> Pod {
        let mut s = spec(vec![c("a", None), c("b", None), c("c", None)]);
        inject(&mut s, &[0, 10, -5], "p");
        Pod {
            spec: Some(s),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "ContainersReady".into(),
                    status: if containers_ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                container_statuses: Some(
                    ["a", "b", "c"]
                        .iter()
                        .map(|n| ContainerStatus {
                            name: n.to_string(),
                            ready: ready.contains(n),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn barrier_steps_follow_readiness() {
        let step = |k: &str, complete| {
            Some(BarrierStep {
                key: k.into(),
                complete,
            })
        };
        assert_eq!(next_step(&pod(&[], false)), step("p_10", false));
        assert_eq!(next_step(&pod(&["b"], false)), step("p_0", false));
        assert_eq!(next_step(&pod(&["b", "a"], false)), step("p_-5", true));
        assert_eq!(next_step(&pod(&["a", "b", "c"], true)), None);
        let mut done = pod(&[], false);
        done.metadata.annotations = Some([(COMPLETED_ANNOTATION.to_string(), "true".to_string())].into());
        assert_eq!(next_step(&done), None);
    }
}
