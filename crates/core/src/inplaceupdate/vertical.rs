//! In-place vertical scaling (Kruise `inplace_update_vertical.go`, gate `InPlaceWorkloadVerticalScaling`).
//!
//! Only a `replace` of `spec.containers[i].resources.{requests,limits}.{cpu,memory}` resizes in place; the
//! resize goes through `pods/resize` (servers ≥ 1.32) and completes when the container statuses report
//! the spec's resources.

use std::collections::BTreeMap;

use insitu_api::quantity::{parse_quantity, qos_class};
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value, json};

/// Resources Kruise (and the kubelet) resize in place (`allowedResizeResourceKey`).
pub(crate) fn resizable(name: &str) -> bool {
    name == "cpu" || name == "memory"
}

/// `/spec/containers/<i>/resources/<limits|requests>/<name>` → (i, kind, name); `None` for other paths.
pub(crate) fn resource_path(path: &str) -> Option<(&str, &str, &str)> {
    let rest = path.strip_prefix("/spec/containers/")?;
    let (idx, tail) = rest.split_once('/')?;
    if idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let tail = tail.strip_prefix("resources")?;
    if !(tail.is_empty() || tail.starts_with('/')) {
        return None;
    }
    let mut words = tail.split('/').skip(1);
    let kind = words.next().unwrap_or("");
    let name = words.next().unwrap_or("");
    Some((idx, kind, if words.next().is_some() { "" } else { name }))
}

/// Kruise `UpdateInplaceUpdateMetadata` for one template-diff op on a container's resources: records the
/// new quantity, or says why the change cannot be a resize (→ recreate).
pub(crate) fn record_op(
    op: &str,
    path: &str,
    old_tpl: &Value,
    new_tpl: &Value,
    out: &mut BTreeMap<String, ResourceRequirements>,
) -> Result<(), String> {
    let Some((idx, kind, name)) = resource_path(path) else {
        return Err(format!("invalid resource path: {path}"));
    };
    if name.is_empty() || !matches!(kind, "limits" | "requests") {
        // e.g. `/spec/containers/0/resources/limits` added as a whole: Kruise's 7-word rule.
        return Err(format!(
            "template change `{op} {path}`: can not add or remove resources"
        ));
    }
    let container = idx
        .parse::<usize>()
        .ok()
        .and_then(|i| old_tpl.pointer("/spec/containers")?.as_array()?.get(i))
        .and_then(|c| c.get("name")?.as_str())
        .ok_or_else(|| format!("invalid container index: {path}"))?;
    if op != "replace" {
        return Err(format!(
            "template change `{op} {path}`: can not add or remove resources"
        ));
    }
    let value = match new_tpl.pointer(path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(format!(
                "template change `replace {path}`: json patch value is nil"
            ));
        }
    };
    if parse_quantity(&value).is_none() {
        return Err(format!(
            "template change `replace {path}`: parse quantity error: {value:?}"
        ));
    }
    if !resizable(name) {
        return Err(format!(
            "template change `replace {path}`: disallowed inplace update resource: {name}"
        ));
    }
    let r = out.entry(container.to_string()).or_default();
    let list = if kind == "limits" {
        &mut r.limits
    } else {
        &mut r.requests
    };
    list.get_or_insert_with(BTreeMap::new)
        .insert(name.to_string(), Quantity(value));
    Ok(())
}

/// `c1{limits.cpu=1,requests.memory=1Gi}` for explanations and events.
pub fn describe(resources: &BTreeMap<String, ResourceRequirements>) -> String {
    let mut out = Vec::new();
    for (c, r) in resources {
        let mut kv = Vec::new();
        for (kind, m) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (k, q) in m.iter().flatten() {
                kv.push(format!("{kind}.{k}={}", q.0));
            }
        }
        out.push(format!("{c}{{{}}}", kv.join(",")));
    }
    out.join(" ")
}

/// Kruise `IsPodQoSChanged` on two revision templates.
pub(crate) fn qos_changed(old_tpl: &Value, new_tpl: &Value) -> Option<(&'static str, &'static str)> {
    let (a, b) = (qos_class(old_tpl), qos_class(new_tpl));
    (a != b).then_some((a, b))
}

/// Semantic quantity equality (`Quantity.Equal`: `1` = `1000m`); unparsable quantities compare as text.
pub(crate) fn quantity_eq(a: &Quantity, b: &Quantity) -> bool {
    match (parse_quantity(&a.0), parse_quantity(&b.0)) {
        (Some(x), Some(y)) => x == y,
        _ => a.0 == b.0,
    }
}

fn lists_equal(a: Option<&BTreeMap<String, Quantity>>, b: Option<&BTreeMap<String, Quantity>>) -> bool {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k).is_some_and(|r| quantity_eq(q, r)))
}

/// Kruise `IsUpdateCompleted`: every container reports a status whose resources equal its spec.
pub(crate) fn resources_completed(pod: &Pod) -> Result<(), String> {
    let spec = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    if statuses.len() != spec.len() {
        return Err("some container status is not reported".into());
    }
    for cs in statuses {
        let done = spec.iter().find(|c| c.name == cs.name).is_some_and(|c| {
            let (want, got) = (c.resources.as_ref(), cs.resources.as_ref());
            got.is_some()
                && lists_equal(
                    want.and_then(|r| r.limits.as_ref()),
                    got.and_then(|r| r.limits.as_ref()),
                )
                && lists_equal(
                    want.and_then(|r| r.requests.as_ref()),
                    got.and_then(|r| r.requests.as_ref()),
                )
        });
        if !done {
            return Err(format!("container {} resources not changed", cs.name));
        }
    }
    Ok(())
}

/// The kubelet's `PodResizePending` condition (reason `Deferred` or `Infeasible`, message), if set.
pub fn resize_pending(pod: &Pod) -> Option<(String, String)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodResizePending" && c.status == "True")?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// Kruise `GenerateResourcePatch`: the strategic-merge patch for `pods/resize` with only the cpu/memory
/// quantities that differ from the pod's current spec; `None` when there is nothing left to resize.
pub fn resize_patch(pod: &Pod, resources: &BTreeMap<String, ResourceRequirements>) -> Option<Value> {
    let mut containers = Vec::new();
    for c in pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
    {
        let Some(want) = resources.get(&c.name) else {
            continue;
        };
        let cur = c.resources.as_ref();
        let mut res = Map::new();
        for (kind, want, cur) in [
            (
                "limits",
                want.limits.as_ref(),
                cur.and_then(|r| r.limits.as_ref()),
            ),
            (
                "requests",
                want.requests.as_ref(),
                cur.and_then(|r| r.requests.as_ref()),
            ),
        ] {
            let changed: Map<String, Value> = want
                .into_iter()
                .flatten()
                .filter(|(k, q)| {
                    resizable(k) && !cur.and_then(|m| m.get(*k)).is_some_and(|c| quantity_eq(c, q))
                })
                .map(|(k, q)| (k.clone(), Value::String(q.0.clone())))
                .collect();
            if !changed.is_empty() {
                res.insert(kind.into(), Value::Object(changed));
            }
        }
        if !res.is_empty() {
            containers.push(json!({"name": c.name, "resources": res}));
        }
    }
    (!containers.is_empty()).then(|| json!({"spec": {"containers": containers}}))
}

/// Writes the resources into the pod's spec (Kruise `UpdateResource`, servers before 1.32, and the
/// in-memory view of a resized pod).
pub fn apply(pod: &mut Pod, resources: &BTreeMap<String, ResourceRequirements>) {
    let Some(spec) = pod.spec.as_mut() else { return };
    for c in &mut spec.containers {
        let Some(want) = resources.get(&c.name) else {
            continue;
        };
        let r = c.resources.get_or_insert_with(Default::default);
        for (dst, src) in [(&mut r.limits, &want.limits), (&mut r.requests, &want.requests)] {
            for (k, q) in src.iter().flatten().filter(|(k, _)| resizable(k)) {
                // An equal quantity stays as the server wrote it (`1000m` may read back as `1`).
                let list = dst.get_or_insert_with(BTreeMap::new);
                if !list.get(k).is_some_and(|cur| quantity_eq(cur, q)) {
                    list.insert(k.clone(), q.clone());
                }
            }
        }
    }
}

/// Kruise `ShouldUpdateResourceByResize`: whether the server (its `gitVersion`, e.g. `v1.32.0`,
/// `v1.32.3-gke.1`, `v1.33+`) has the `pods/resize` subresource (1.32+). Unparsable → false, as Kruise.
pub fn resize_subresource(git_version: &str) -> bool {
    let v = git_version.strip_prefix('v').unwrap_or(git_version);
    let mut parts = v.splitn(3, '.').map(|p| {
        let digits: &str = &p[..p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len())];
        digits.parse::<u64>().ok()
    });
    let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) else {
        return false;
    };
    // go-semver needs a patch number too ("1.32" does not parse).
    if !matches!(parts.next(), Some(Some(_))) {
        return false;
    }
    (major, minor) >= (1, 32)
}

/// Kruise `defaultCheckPodNeedsBeUnready` for a resize-only update (no image, no env-from-metadata): the
/// pod goes NotReady only if a changed resource has `resizePolicy: RestartContainer`.
pub(crate) fn resize_needs_restart(pod: &Pod, resources: &BTreeMap<String, ResourceRequirements>) -> bool {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    containers.iter().any(|c| {
        let Some(r) = resources.get(&c.name) else {
            return false;
        };
        let touched = |name: &str| {
            [&r.limits, &r.requests]
                .into_iter()
                .any(|m| m.as_ref().is_some_and(|m| m.contains_key(name)))
        };
        c.resize_policy.iter().flatten().any(|p| {
            p.restart_policy == "RestartContainer" && resizable(&p.resource_name) && touched(&p.resource_name)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerResizePolicy, ContainerStatus, PodSpec, PodStatus};

    fn rr(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ResourceRequirements {
        let m = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        ResourceRequirements {
            limits: m(limits),
            requests: m(requests),
            claims: None,
        }
    }

    fn pod(spec: ResourceRequirements, status: Option<ResourceRequirements>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c1".into(),
                    resources: Some(spec),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "c1".into(),
                    resources: status,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn server_versions() {
        for (v, want) in [
            ("v1.37.2", true),
            ("v1.32.0", true),
            ("v1.31.9", false),
            ("v1.32.3-gke.1200", true),
            ("v1.33.1-eks-abc", true),
            ("1.34.0", true),
            ("v2.0.0", true),
            ("v1.32", false),
            ("", false),
            ("weird", false),
        ] {
            assert_eq!(resize_subresource(v), want, "{v}");
        }
    }

    #[test]
    fn paths() {
        assert_eq!(
            resource_path("/spec/containers/0/resources/limits/cpu"),
            Some(("0", "limits", "cpu"))
        );
        assert_eq!(
            resource_path("/spec/containers/1/resources/limits"),
            Some(("1", "limits", ""))
        );
        assert_eq!(resource_path("/spec/containers/0/image"), None);
        assert_eq!(resource_path("/spec/containers/0/resourcesX/limits/cpu"), None);
        assert_eq!(resource_path("/spec/containers/0/resources"), Some(("0", "", "")));
        assert_eq!(resource_path("/spec/containers/x/resources/limits/cpu"), None);
    }

    #[test]
    fn completion_is_semantic_and_per_container() {
        let spec = rr(&[("cpu", "1")], &[("cpu", "500m"), ("memory", "1Gi")]);
        let same = rr(&[("cpu", "1000m")], &[("cpu", "0.5"), ("memory", "1024Mi")]);
        assert_eq!(resources_completed(&pod(spec.clone(), Some(same))), Ok(()));
        let old = rr(&[("cpu", "1")], &[("cpu", "200m"), ("memory", "1Gi")]);
        assert_eq!(
            resources_completed(&pod(spec.clone(), Some(old))),
            Err("container c1 resources not changed".into())
        );
        assert!(resources_completed(&pod(spec.clone(), None)).is_err());
        let mut p = pod(spec, None);
        p.status = None;
        assert_eq!(
            resources_completed(&p),
            Err("some container status is not reported".into())
        );
    }

    #[test]
    fn patch_has_only_changed_cpu_memory() {
        let p = pod(rr(&[("cpu", "1"), ("memory", "1Gi")], &[("cpu", "200m")]), None);
        let mut want = BTreeMap::new();
        want.insert(
            "c1".to_string(),
            rr(
                &[("cpu", "1000m"), ("memory", "2Gi")],
                &[("cpu", "100m"), ("ephemeral-storage", "1Gi")],
            ),
        );
        assert_eq!(
            resize_patch(&p, &want),
            Some(json!({"spec": {"containers": [
                {"name": "c1", "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "100m"}}}
            ]}}))
        );
        let mut done = p.clone();
        apply(&mut done, &want);
        assert_eq!(resize_patch(&done, &want), None);
        let r = done.spec.unwrap().containers[0].resources.clone().unwrap();
        assert!(!r.requests.unwrap().contains_key("ephemeral-storage"));
    }

    #[test]
    fn restart_only_for_a_changed_resource_with_restart_container() {
        let mut p = pod(rr(&[], &[("cpu", "1")]), None);
        let mut want = BTreeMap::new();
        want.insert("c1".to_string(), rr(&[], &[("cpu", "2")]));
        assert!(!resize_needs_restart(&p, &want));
        let policy = |r: &str, pol: &str| ContainerResizePolicy {
            resource_name: r.into(),
            restart_policy: pol.into(),
        };
        p.spec.as_mut().unwrap().containers[0].resize_policy =
            Some(vec![policy("memory", "RestartContainer")]);
        assert!(
            !resize_needs_restart(&p, &want),
            "memory restarts, but only cpu changed"
        );
        p.spec.as_mut().unwrap().containers[0].resize_policy = Some(vec![policy("cpu", "RestartContainer")]);
        assert!(resize_needs_restart(&p, &want));
        p.spec.as_mut().unwrap().containers[0].resize_policy = Some(vec![policy("cpu", "NotRequired")]);
        assert!(!resize_needs_restart(&p, &want));
    }
}
