//! Stable identity of an Advanced StatefulSet's pods: ordinals, names, the pods and PVCs it creates
//! (Kruise `pkg/controller/statefulset/stateful_set_utils.go`: `getParentNameAndOrdinal`,
//! `getStatefulSetReplicasRange`, `newStatefulSetPod`, `getPersistentVolumeClaims`, `updateStorage`).

use std::collections::{BTreeMap, BTreeSet};

use insitu_api::keys;
use insitu_api::statefulset::StatefulSet;
use insitu_api::statefulset::validation::parse_range;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The label naming a pod of a StatefulSet (k8s `apps.StatefulSetPodNameLabel`).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label carrying a pod's ordinal (k8s `apps.PodIndexLabel`, Kruise gate `PodIndexLabel`, on by default).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// Kruise `getParentNameAndOrdinal`: the ordinal after the last `-` of the name (regex `(.*)-([0-9]+)$`,
/// parsed as a 32-bit integer), or `None`.
pub fn ordinal(pod_name: &str) -> Option<i32> {
    let (_, digits) = pod_name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i32>().ok()
}

/// Kruise `GetReserveOrdinalIntSet`: integers and `a-b` ranges (inclusive); unreadable entries are ignored
/// (validation refuses them).
pub(super) fn reserve_ordinals(set: &StatefulSet) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for r in &set.spec.reserve_ordinals {
        match r {
            IntOrString::Int(n) => {
                out.insert(*n);
            }
            IntOrString::String(s) => {
                if let Ok(n) = s.parse::<i32>() {
                    out.insert(n);
                } else if let Ok((a, b)) = parse_range(s) {
                    // Capped: a range so large is an error the user sees in validation, not a plan.
                    for n in a..=b.min(a.saturating_add(100_000)) {
                        if let Ok(n) = i32::try_from(n) {
                            out.insert(n);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Kruise `getStatefulSetReplicasRange`: `[start, end)` holds `replicas` ordinals that are not reserved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrdinalRange {
    pub start: i32,
    pub end: i32,
    pub reserved: BTreeSet<i32>,
}

impl OrdinalRange {
    pub fn of(set: &StatefulSet) -> Self {
        let reserved = reserve_ordinals(set);
        // Kruise `getStartOrdinal` (gate StatefulSetStartOrdinal, on in Kruise master).
        let start = set.spec.ordinals.as_ref().map_or(0, |o| o.start);
        let replicas = set.spec.replicas.unwrap_or(1).max(0);
        let mut end = start;
        let mut counted = 0;
        while counted < replicas {
            if !reserved.contains(&end) {
                counted += 1;
            }
            end = end.saturating_add(1);
        }
        OrdinalRange { start, end, reserved }
    }

    /// Kruise `podInOrdinalRangeWithParams`.
    pub fn holds(&self, ord: i32) -> bool {
        ord >= self.start && ord < self.end && !self.reserved.contains(&ord)
    }
}

/// Kruise `getPodName`.
pub fn pod_name(set_name: &str, ord: i32) -> String {
    format!("{set_name}-{ord}")
}

/// Kruise `getPersistentVolumeClaimName`: `<template>-<set>-<ordinal>`.
pub fn pvc_name(template: &str, set_name: &str, ord: i32) -> String {
    format!("{template}-{set_name}-{ord}")
}

/// The set's controller reference on its pods (Kruise `controllerKind`: `apps.kruise.io/v1beta1`).
pub fn controller_ref(set: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: insitu_api::conversion::V1BETA1.into(),
        kind: "StatefulSet".into(),
        name: set.metadata.name.clone().unwrap_or_default(),
        uid: set.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Kruise `getPersistentVolumeClaims`: one PVC per volumeClaimTemplate, named for the ordinal, labelled with
/// the template's labels and the selector's matchLabels. No ownerReference: the retention policy
/// `Retain`/`Retain` (the default) leaves claims unowned (k8s `updateClaimOwnerRefForSetAndPod`).
pub fn claims(set: &StatefulSet, ord: i32) -> Vec<PersistentVolumeClaim> {
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    let match_labels = set.spec.selector.match_labels.clone().unwrap_or_default();
    set.spec
        .volume_claim_templates
        .iter()
        .filter_map(|vct| {
            let tname = vct.metadata.name.as_deref()?;
            let mut meta = vct.metadata.clone();
            let mut labels = meta.labels.take().unwrap_or_default();
            labels.extend(match_labels.clone());
            Some(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(pvc_name(tname, set_name, ord)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: meta.annotations,
                    finalizers: meta.finalizers,
                    ..Default::default()
                },
                spec: vct.spec.clone(),
                status: None,
            })
        })
        .collect()
}

/// Kruise `newVersionedStatefulSetPod` for one ordinal at one revision: k8s `GetPodFromTemplate`, then
/// `initIdentity` (name, hostname, subdomain, pod-name and pod-index labels), `updateStorage` (one PVC
/// volume per volumeClaimTemplate, replacing a template volume of that name), `setPodRevision`, and the
/// lifecycle state Kruise's `processReplica` sets before creating it (`Normal`, or `PreparingNormal`
/// while a preNormal hook is not all there). No `InPlaceUpdateReady` readiness gate is added: Kruise's
/// StatefulSet leaves that to the user's template (docs/advanced-statefulset.md).
pub fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    revision: &str,
    ord: i32,
    now_rfc3339: &str,
) -> Pod {
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    let name = pod_name(set_name, ord);
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = tmeta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ord.to_string());
    labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), revision.into());
    let pre_normal = set.spec.lifecycle.as_ref().and_then(|l| l.pre_normal.as_ref());
    let probe = ObjectMeta {
        finalizers: tmeta.finalizers.clone(),
        ..Default::default()
    };
    let lm = Some(labels.clone());
    let state = if pre_normal.is_none() || crate::lifecycle::is_all_hooked(pre_normal, (&lm).into(), &probe) {
        keys::lifecycle::NORMAL
    } else {
        keys::lifecycle::PREPARING_NORMAL
    };
    labels.insert(keys::LIFECYCLE_STATE_LABEL.into(), state.into());
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(keys::LIFECYCLE_TIMESTAMP_ANNOTATION.into(), now_rfc3339.into());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    spec.subdomain = set.spec.service_name.clone().filter(|s| !s.is_empty());
    let mut volumes: Vec<Volume> = Vec::new();
    for vct in &set.spec.volume_claim_templates {
        let Some(vname) = vct.metadata.name.as_deref() else {
            continue;
        };
        volumes.push(Volume {
            name: vname.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name(vname, set_name, ord),
                read_only: Some(false),
            }),
            ..Default::default()
        });
    }
    for v in spec.volumes.take().unwrap_or_default() {
        if !volumes.iter().any(|c| c.name == v.name) {
            volumes.push(v);
        }
    }
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            generate_name: Some(format!("{set_name}-")),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![controller_ref(set)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: serde_json::Value) -> StatefulSet {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn ordinals_from_names() {
        assert_eq!(ordinal("web-0"), Some(0));
        assert_eq!(ordinal("my-web-12"), Some(12));
        assert_eq!(ordinal("web"), None);
        assert_eq!(ordinal("web-x1"), None);
        assert_eq!(ordinal("web-"), None);
        assert_eq!(ordinal("web-99999999999"), None, "not a 32-bit integer");
    }

    // Kruise's own example (`getStatefulSetReplicasRange`): replicas 4, reserve {1, 3}, start 2 →
    // [2, 7) with 3 skipped.
    #[test]
    fn range_with_start_and_reserved() {
        let s = set(
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {"replicas": 4, "reserveOrdinals": [1, "3-3"], "ordinals": {"start": 2},
                     "selector": {}, "template": {}}}),
        );
        let r = OrdinalRange::of(&s);
        assert_eq!((r.start, r.end), (2, 7));
        assert_eq!(r.reserved, BTreeSet::from([1, 3]));
        let held: Vec<i32> = (0..9).filter(|&o| r.holds(o)).collect();
        assert_eq!(held, vec![2, 4, 5, 6]);
    }

    #[test]
    fn pod_and_claims_carry_identity() {
        let s = set(
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"replicas": 1, "serviceName": "svc", "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                           "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
                                               "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        );
        let pod = new_pod(&s, &s.spec.template, "web-abc", 2, "2026-01-01T00:00:00Z");
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let l = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(l[POD_NAME_LABEL], "web-2");
        assert_eq!(l[POD_INDEX_LABEL], "2");
        assert_eq!(l[keys::CONTROLLER_REVISION_HASH_LABEL], "web-abc");
        assert_eq!(l[keys::LIFECYCLE_STATE_LABEL], "Normal");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("svc"));
        let vols = spec.volumes.as_ref().unwrap();
        assert_eq!(vols.len(), 2, "the template's `data` is replaced by the claim");
        assert_eq!(
            vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-web-2"
        );
        assert_eq!(vols[1].name, "tmp");
        assert_eq!(
            pod.metadata.owner_references.as_ref().unwrap()[0].kind,
            "StatefulSet"
        );
        let c = claims(&s, 2);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].metadata.name.as_deref(), Some("data-web-2"));
        let cl = c[0].metadata.labels.as_ref().unwrap();
        assert_eq!((cl["tier"].as_str(), cl["app"].as_str()), ("db", "web"));
        assert!(c[0].metadata.owner_references.is_none());
    }
}
