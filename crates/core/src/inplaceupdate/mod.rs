//! In-place update rules (Kruise `pkg/util/inplaceupdate`: `defaultCalculateInPlaceUpdateSpec` and the rest):
//! eligibility from the revision diff (here), then start and grace ([`start`]), container batches by launch
//! priority ([`batch`]), completion ([`complete`]) and the restart a kubelet had already decided
//! ([`restart`]).

mod batch;
mod complete;
mod diff;
pub(crate) mod envmeta;
mod image;
mod restart;
mod start;
pub mod vertical;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::inplaceupdate::envmeta::RefMetadata;

pub(crate) use batch::parse_state;
pub use batch::{has_next_batch, restamp_last_container_statuses};
pub(crate) use complete::check_completed;
pub use complete::{containers_completed, next_batch};
pub(crate) use diff::{Op, diff};
use diff::{container_image_index, map_changes, meta_patch_json, str_map};
pub use restart::record_pending_restarts;
pub use start::StartTemplate;
pub(crate) use start::{Grace, finish_grace};

/// What an in-place update changes (Kruise `UpdateSpec` minus the fields we do not support).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InPlaceSpec {
    /// container name → new image.
    pub images: BTreeMap<String, String>,
    /// Metadata changes of the template (labels/annotations set or removed, finalizers added/removed).
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub finalizers: BTreeMap<String, bool>,
    /// Strategic-merge patch JSON of the metadata change (Go bytes), if any.
    pub meta_patch: Option<String>,
    /// container name → the changed labels/annotations it reads through the downward API (Kruise
    /// `containerRefMetadata`); these keys are not in `labels`/`annotations`/`meta_patch` but reach the pod
    /// with their container's batch, and the node agent restarts the container.
    pub ref_metadata: RefMetadata,
    /// Kruise `updateEnvFromMetadata`: some container must restart for env from metadata.
    pub update_env_from_metadata: bool,
    /// container name → the cpu/memory quantities that change (Kruise `containerResources`).
    pub resources: BTreeMap<String, ResourceRequirements>,
}

impl InPlaceSpec {
    /// Kruise `VerticalUpdateOnly`: a resize, no image, no env from metadata.
    pub(crate) fn vertical_only(&self) -> bool {
        !self.resources.is_empty() && self.images.is_empty() && !self.update_env_from_metadata
    }

    /// Kruise `defaultCheckPodNeedsBeUnready` (gate present is checked by the caller): every in-place update
    /// marks the pod NotReady, except a resize where no changed resource has `RestartContainer`.
    pub(crate) fn needs_unready(&self, pod: &Pod) -> bool {
        !self.vertical_only() || crate::inplaceupdate::vertical::resize_needs_restart(pod, &self.resources)
    }
}

/// Kruise `defaultCalculateInPlaceUpdateSpec` on two revision templates (with `$patch`). `Err` says why the
/// change cannot be applied in place (→ recreate, or refusal under InPlaceOnly). `vertical` is the
/// `InPlaceWorkloadVerticalScaling` gate: cpu/memory changes resize in place (`inplace_update_vertical.go`).
pub fn calculate(old_tpl: &Value, new_tpl: &Value, vertical: bool) -> Result<InPlaceSpec, String> {
    let mut ops = Vec::new();
    diff(old_tpl, new_tpl, "", &mut ops);
    let old_containers = old_tpl.pointer("/spec/containers").and_then(Value::as_array);
    let mut spec = InPlaceSpec::default();
    let mut meta_changed = false;
    for op in &ops {
        if op.path.starts_with("/spec/") {
            if crate::inplaceupdate::vertical::resource_path(&op.path).is_some() {
                if !vertical {
                    return Err(format!(
                        "template change `{} {}`: resources change in place only with the InPlaceWorkloadVerticalScaling gate",
                        op.op, op.path
                    ));
                }
                crate::inplaceupdate::vertical::record_op(
                    op.op,
                    &op.path,
                    old_tpl,
                    new_tpl,
                    &mut spec.resources,
                )?;
                continue;
            }
            if op.op != "replace" {
                return Err(format!(
                    "template change `{} {}` is not an in-place change",
                    op.op, op.path
                ));
            }
            let Some(i) = container_image_index(&op.path) else {
                return Err(format!(
                    "template change `replace {}`: only container images and cpu/memory resources can change in place",
                    op.path
                ));
            };
            let name = old_containers
                .and_then(|c| c.get(i))
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str);
            let image = new_tpl.pointer(&op.path).and_then(Value::as_str);
            match (name, image) {
                (Some(n), Some(img)) => {
                    spec.images.insert(n.to_string(), img.to_string());
                }
                _ => {
                    return Err(format!(
                        "template change `replace {}` names no container",
                        op.path
                    ));
                }
            }
        } else if op.path.starts_with("/metadata/") {
            meta_changed = true;
        } else {
            return Err(format!(
                "template change `{} {}` is not an in-place change",
                op.op, op.path
            ));
        }
    }
    if !spec.resources.is_empty()
        && let Some((from, to)) = crate::inplaceupdate::vertical::qos_changed(old_tpl, new_tpl)
    {
        // Kruise #1212: a resize may not change the QoS class (kube-apiserver rejects it too).
        return Err(format!(
            "resources change the pod QoS class ({from} → {to}), which a resize cannot do"
        ));
    }
    if meta_changed {
        // Kruise applies the metadata as a strategic-merge patch (labels/annotations/finalizers).
        // Without a node agent, env-from-metadata is a plain metadata change (docs/in-place.md, "Env from
        // metadata").
        let om = old_tpl.get("metadata");
        let nm = new_tpl.get("metadata");
        spec.labels = map_changes(&str_map(om, "labels"), &str_map(nm, "labels"));
        spec.annotations = map_changes(&str_map(om, "annotations"), &str_map(nm, "annotations"));
        // Kruise gate InPlaceUpdateEnvFromMetadata (default on): downward-API keys go to their containers.
        let containers: Vec<k8s_openapi::api::core::v1::Container> = new_tpl
            .pointer("/spec/containers")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        for (kind, key, changes) in [
            (
                insitu_api::containermeta::MetaKind::Labels,
                "labels",
                &mut spec.labels,
            ),
            (
                insitu_api::containermeta::MetaKind::Annotations,
                "annotations",
                &mut spec.annotations,
            ),
        ] {
            let old_has_map = om.and_then(|m| m.get(key)).is_some_and(Value::is_object);
            envmeta::extract(&containers, old_has_map, kind, changes, &mut spec.ref_metadata);
        }
        spec.update_env_from_metadata = !spec.ref_metadata.is_empty();
        let fins = |m: Option<&Value>| -> Vec<String> {
            m.and_then(|m| m.get("finalizers"))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let (fo, fnew) = (fins(om), fins(nm));
        for f in &fnew {
            if !fo.contains(f) {
                spec.finalizers.insert(f.clone(), true);
            }
        }
        for f in &fo {
            if !fnew.contains(f) {
                spec.finalizers.insert(f.clone(), false);
            }
        }
        spec.meta_patch = meta_patch_json(&spec, &fnew);
    }
    Ok(spec)
}

pub fn time(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tpl(image: &str, env: Option<&str>) -> Value {
        let mut c = json!({"name": "c1", "image": image, "resources": {}});
        if let Some(e) = env {
            c["env"] = json!([{"name": "E", "value": e}]);
        }
        json!({"$patch": "replace", "metadata": {"creationTimestamp": null, "labels": {"app": "a"}},
               "spec": {"containers": [c]}})
    }

    #[test]
    fn image_only_is_in_place() {
        let s = calculate(&tpl("foo1", None), &tpl("foo2", None), true).unwrap();
        assert_eq!(s.images.get("c1").map(String::as_str), Some("foo2"));
        assert!(s.labels.is_empty() && s.meta_patch.is_none());
    }

    #[test]
    fn env_change_is_recreate() {
        let e = calculate(&tpl("foo1", Some("a")), &tpl("foo2", Some("b")), true).unwrap_err();
        assert!(e.contains("/spec/containers/0/env/0/value"), "{e}");
        assert!(calculate(&tpl("foo1", None), &tpl("foo1", Some("b")), true).is_err());
    }

    #[test]
    fn label_change_is_metadata_in_place() {
        let mut new = tpl("foo2", None);
        new["metadata"]["labels"]["k1"] = json!("v1");
        let s = calculate(&tpl("foo1", None), &new, true).unwrap();
        assert_eq!(s.labels.get("k1"), Some(&Some("v1".to_string())));
        assert_eq!(
            s.meta_patch.as_deref(),
            Some(r#"{"metadata":{"labels":{"k1":"v1"}}}"#)
        );
    }

    /// A template with container `c1` (and optionally `c2`) and the given resources JSON.
    pub(super) fn rtpl(image: &str, res: Value) -> Value {
        json!({"$patch": "replace", "metadata": {"labels": {"app": "a"}},
               "spec": {"containers": [{"name": "c1", "image": image, "resources": res}]}})
    }

    pub(super) fn burstable(cpu: &str, mem: &str) -> Value {
        json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": "2", "memory": "2Gi"}})
    }

    // Kruise TestCalculateInPlaceUpdateSpec's resource rows
    // (`pkg/util/inplaceupdate/inplace_update_test.go`).
    #[test]
    fn cpu_only_is_a_resize() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("500m", "1Gi")),
            true,
        )
        .unwrap();
        assert!(s.images.is_empty());
        let r = &s.resources["c1"];
        assert_eq!(r.requests.as_ref().unwrap()["cpu"].0, "500m");
        assert!(r.limits.is_none() && !r.requests.as_ref().unwrap().contains_key("memory"));
        assert!(s.vertical_only());
    }

    #[test]
    fn image_and_cpu_go_together() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo2", burstable("1500m", "1Gi")),
            true,
        )
        .unwrap();
        assert_eq!(s.images["c1"], "foo2");
        assert_eq!(s.resources["c1"].requests.as_ref().unwrap()["cpu"].0, "1500m");
        assert!(!s.vertical_only());
    }

    #[test]
    fn cpu_and_memory_within_burstable_is_a_resize() {
        let s = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("100m", "100Mi")),
            true,
        )
        .unwrap();
        assert_eq!(s.resources["c1"].requests.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn other_field_with_cpu_recreates() {
        let old = rtpl("foo1", burstable("1", "1Gi"));
        let mut new = rtpl("foo1", burstable("2", "1Gi"));
        new["spec"]["containers"][0]["command"] = json!(["sh"]);
        assert!(calculate(&old, &new, true).is_err());
        let mut new = rtpl("foo1", burstable("2", "1Gi"));
        new["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "b"}]);
        assert!(calculate(&old, &new, true).is_err());
    }

    #[test]
    fn qos_change_recreates_with_the_reason() {
        let old = rtpl("foo1", burstable("1", "1Gi"));
        let new = rtpl(
            "foo1",
            json!({"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}),
        );
        let e = calculate(&old, &new, true).unwrap_err();
        assert!(e.contains("QoS class (Burstable → Guaranteed)"), "{e}");
    }

    #[test]
    fn add_remove_and_other_resources_recreate() {
        let old = rtpl("foo1", json!({"requests": {"cpu": "1"}}));
        let add = rtpl("foo1", json!({"requests": {"cpu": "1", "memory": "1Gi"}}));
        let e = calculate(&old, &add, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let e = calculate(&add, &old, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let limits = rtpl("foo1", json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}));
        let e = calculate(&old, &limits, true).unwrap_err();
        assert!(e.contains("can not add or remove resources"), "{e}");
        let eph = |q: &str| rtpl("foo1", json!({"requests": {"cpu": "1", "ephemeral-storage": q}}));
        let e = calculate(&eph("1Gi"), &eph("2Gi"), true).unwrap_err();
        assert!(
            e.contains("disallowed inplace update resource: ephemeral-storage"),
            "{e}"
        );
        let bad = rtpl("foo1", json!({"requests": {"cpu": "lots"}}));
        assert!(
            calculate(&old, &bad, true)
                .unwrap_err()
                .contains("parse quantity")
        );
    }

    #[test]
    fn gate_off_recreates_on_resources() {
        let e = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            false,
        )
        .unwrap_err();
        assert!(e.contains("InPlaceWorkloadVerticalScaling"), "{e}");
    }

    pub(super) fn pod_with(policies: Value, priorities: &[(&str, Option<i64>)]) -> Pod {
        let containers: Vec<Value> = priorities
            .iter()
            .map(|(n, p)| {
                let mut c = json!({"name": n, "image": "foo1", "resizePolicy": policies.clone(),
                                   "resources": burstable("1", "1Gi")});
                if let Some(p) = p {
                    c["env"] = json!([{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "b", "key": format!("p_{p}")}}}]);
                }
                c
            })
            .collect();
        let statuses: Vec<Value> = priorities
            .iter()
            .map(|(n, _)| json!({"name": n, "image": "foo1", "imageID": format!("id-{n}"), "ready": true, "restartCount": 0}))
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers},
                                      "status": {"containerStatuses": statuses}}),
        )
        .unwrap()
    }

    // Kruise TestDefaultCheckPodNeedsBeUnready rows (`inplace_update_defaults_test.go`).
    #[test]
    fn unready_only_when_a_changed_resource_restarts() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let none = pod_with(json!([]), &[("c1", None)]);
        assert!(
            !spec.needs_unready(&none),
            "resource-only without RestartContainer stays ready"
        );
        let mem = pod_with(
            json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]),
            &[("c1", None)],
        );
        assert!(!spec.needs_unready(&mem), "memory restarts, but only cpu changed");
        let cpu = pod_with(
            json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]),
            &[("c1", None)],
        );
        assert!(spec.needs_unready(&cpu));
        let with_image = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo2", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        assert!(with_image.needs_unready(&none), "an image change restarts anyway");
    }
}
