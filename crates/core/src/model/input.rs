//! Builds a snapshot from loose objects (`kubectl get -o yaml` output) for `insitu plan`; pure, no I/O.

use std::sync::Arc;

use insitu_api::CloneSet;
use insitu_api::validation::selector_matches;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::{FeatureGates, Snapshot, revision};

/// A snapshot assembled from a file, with notes on what was assumed.
#[derive(Debug)]
pub struct Input {
    pub snapshot: Snapshot,
    /// `status.currentRevision` as stored (the plan reports it even when its revision is not in the input).
    pub stored_current_revision: Option<String>,
    pub notes: Vec<String>,
}

/// Flattens kubectl `List`s (`kind: List` / `*List` with `items`) into single objects (`insitu plan` and
/// `insitu whatif` read their files through it).
pub fn flatten(v: Value, out: &mut Vec<Value>) {
    match v {
        Value::Null => {}
        Value::Array(items) => items.into_iter().for_each(|i| flatten(i, out)),
        Value::Object(mut m)
            if m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List")) =>
        {
            if let Some(items) = m.remove("items") {
                flatten(items, out);
            }
        }
        other => out.push(other),
    }
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn owned_by(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    cs: &CloneSet,
) -> Option<bool> {
    let refs = meta.owner_references.as_ref()?;
    let c = refs.iter().find(|r| r.controller == Some(true))?;
    let uid_ok = match (cs.metadata.uid.as_deref(), c.uid.as_str()) {
        (Some(a), b) if !b.is_empty() => a == b,
        _ => true,
    };
    Some(c.kind == "CloneSet" && c.name == cs.metadata.name.clone().unwrap_or_default() && uid_ok)
}

/// Picks exactly one CloneSet and the Pods/ControllerRevisions that belong to it (controller ownerReference,
/// or no controller and matching labels, in the same namespace), and the PersistentVolumeClaims it owns.
/// With no ControllerRevisions in the input, the update revision is computed from the template, as the
/// controller would create it.
pub fn snapshot_from_objects(docs: Vec<Value>, now: Timestamp, gates: FeatureGates) -> Result<Input, String> {
    let mut objs = Vec::new();
    for d in docs {
        flatten(d, &mut objs);
    }
    let mut notes = Vec::new();
    let clonesets: Vec<&Value> = objs.iter().filter(|o| kind(o) == "CloneSet").collect();
    let cs: CloneSet = match clonesets.as_slice() {
        [one] => {
            // Either served version (kubectl prints the preferred one, v1beta1); plans read v1alpha1.
            let alpha = match one.get("apiVersion").and_then(Value::as_str) {
                Some(insitu_api::conversion::V1BETA1) => {
                    insitu_api::conversion::to_v1alpha1(one).map_err(|e| format!("the CloneSet: {e}"))?
                }
                _ => (*one).clone(),
            };
            serde_json::from_value(alpha).map_err(|e| format!("the CloneSet does not parse: {e}"))?
        }
        [] => {
            return Err(
                "no CloneSet in the input: give one CloneSet with its Pods (and ControllerRevisions)".into(),
            );
        }
        many => {
            let names: Vec<&str> = many
                .iter()
                .map(|c| c.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?"))
                .collect();
            return Err(format!(
                "{} CloneSets in the input ({}): give exactly one (e.g. {{ kubectl get cloneset NAME -o yaml; echo ---; kubectl get pods,controllerrevisions,pvc,nodes -o yaml; }})",
                many.len(),
                names.join(", ")
            ));
        }
    };
    let ns = cs.metadata.namespace.clone();
    let same_ns = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        ns.is_none() || m.namespace.is_none() || m.namespace == ns
    };
    let empty = Default::default();
    let mut pods = Vec::new();
    let mut revisions = Vec::new();
    // Node labels, for the topology-spread scale-down ranker (`kubectl get nodes -o yaml` in the input).
    let mut nodes = crate::model::snapshot::NodeLabels::new();
    let mut pvcs = Vec::new();
    // ImagePullJobs the CloneSet controls: the pre-download step plans with them when its gates are on (as the
    // controller, which then also needs the server to serve ImagePullJobs).
    let mut jobs = Vec::new();
    let (mut skipped_pods, mut skipped_revs, mut skipped_pvcs, mut other) = (0usize, 0usize, 0usize, 0usize);
    for o in &objs {
        match kind(o) {
            "Pod" => {
                let p: Pod = serde_json::from_value(o.clone()).map_err(|e| {
                    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?");
                    format!("pod {name} does not parse: {e}")
                })?;
                let mine = same_ns(&p.metadata)
                    && owned_by(&p.metadata, &cs).unwrap_or_else(|| {
                        selector_matches(&cs.spec.selector, p.metadata.labels.as_ref().unwrap_or(&empty))
                    });
                if mine {
                    pods.push(Arc::new(p));
                } else {
                    skipped_pods += 1;
                }
            }
            "ControllerRevision" => {
                let r: ControllerRevision = serde_json::from_value(o.clone()).map_err(|e| {
                    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?");
                    format!("controllerrevision {name} does not parse: {e}")
                })?;
                let mine = same_ns(&r.metadata)
                    && owned_by(&r.metadata, &cs).unwrap_or_else(|| {
                        selector_matches(&cs.spec.selector, r.metadata.labels.as_ref().unwrap_or(&empty))
                    });
                if mine {
                    revisions.push(Arc::new(r));
                } else {
                    skipped_revs += 1;
                }
            }
            "Node" => {
                if let Some(name) = o.pointer("/metadata/name").and_then(Value::as_str) {
                    let labels = o
                        .pointer("/metadata/labels")
                        .and_then(|l| serde_json::from_value(l.clone()).ok())
                        .unwrap_or_default();
                    nodes.insert(name.to_string(), labels);
                }
            }
            "PersistentVolumeClaim" => {
                let c: PersistentVolumeClaim = serde_json::from_value(o.clone()).map_err(|e| {
                    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?");
                    format!("persistentvolumeclaim {name} does not parse: {e}")
                })?;
                // Kruise never adopts PVCs: only those the CloneSet owns count (an orphan with matching
                // labels is ignored, as in Kruise's TestReconcile).
                if same_ns(&c.metadata) && owned_by(&c.metadata, &cs) == Some(true) {
                    pvcs.push(Arc::new(c));
                } else {
                    skipped_pvcs += 1;
                }
            }
            "CloneSet" => {}
            "ImagePullJob" => {
                let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
                    serde_json::from_value(o.get("metadata").cloned().unwrap_or_default())
                        .map_err(|e| format!("an ImagePullJob's metadata does not parse: {e}"))?;
                let controlled = meta
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && Some(&r.uid) == cs.metadata.uid.as_ref());
                if same_ns(&meta) && controlled {
                    jobs.push(meta.name.unwrap_or_default());
                }
            }
            _ => other += 1,
        }
    }
    if skipped_pods + skipped_revs > 0 {
        notes.push(format!(
            "ignored {skipped_pods} pod(s) and {skipped_revs} revision(s) that do not belong to CloneSet {}",
            cs.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    if skipped_pvcs > 0 {
        notes.push(format!(
            "ignored {skipped_pvcs} PersistentVolumeClaim(s) that CloneSet {} does not own",
            cs.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    if other > 0 {
        notes.push(format!("ignored {other} object(s) of other kinds"));
    }
    let stored_current = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.clone())
        .filter(|s| !s.is_empty());
    if revisions.is_empty() {
        let ar = revision::active_revisions(&cs, &[]);
        notes.push(format!(
            "no ControllerRevisions in the input: update revision {} computed from the template",
            ar.update.metadata.name.as_deref().unwrap_or_default()
        ));
        revisions.push(ar.update);
    }
    Ok(Input {
        snapshot: Snapshot {
            cloneset: Arc::new(cs),
            pods,
            summaries: None,
            revisions,
            pvcs,
            now,
            image_pull_jobs: (gates.pre_download_image_for_in_place_update && gates.kruise_daemon).then(
                || {
                    jobs.sort();
                    jobs
                },
            ),
            gates,
            nodes,
        },
        stored_current_revision: stored_current,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cs(name: &str) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
               "metadata": {"name": name, "namespace": "d", "uid": "u1"},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    #[test]
    fn exactly_one_cloneset() {
        let now = Timestamp::UNIX_EPOCH;
        let e = snapshot_from_objects(vec![], now, FeatureGates::default()).unwrap_err();
        assert!(e.contains("no CloneSet"));
        let e = snapshot_from_objects(
            vec![json!({"kind": "List", "items": [cs("a"), cs("b")]})],
            now,
            FeatureGates::default(),
        )
        .unwrap_err();
        assert!(e.contains("2 CloneSets in the input (a, b)"), "{e}");
    }

    #[test]
    fn list_pods_and_computed_revision() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a-x", "namespace": "d", "labels": {"app": "a"},
                         "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "a", "uid": "u1", "controller": true}]},
            "spec": {"containers": []}});
        let other = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "z", "namespace": "d", "labels": {"app": "z"}}, "spec": {"containers": []}});
        let input = snapshot_from_objects(
            vec![json!({"kind": "List", "items": [cs("a"), pod, other]})],
            Timestamp::UNIX_EPOCH,
            FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(input.snapshot.pods.len(), 1);
        assert_eq!(input.snapshot.revisions.len(), 1);
        assert!(
            input
                .notes
                .iter()
                .any(|n| n.contains("computed from the template"))
        );
        let plan = crate::plan(&input.snapshot);
        assert!(
            !plan
                .actions
                .iter()
                .any(|a| matches!(a, crate::Action::CreateRevision { .. }))
        );
    }

    #[test]
    fn nodes_give_their_labels() {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}}});
        let input = snapshot_from_objects(
            vec![json!({"kind": "List", "items": [cs("a"), node]})],
            Timestamp::UNIX_EPOCH,
            FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(input.snapshot.nodes["n1"]["topology.kubernetes.io/zone"], "z1");
        assert!(
            !input.notes.iter().any(|n| n.contains("other kinds")),
            "{:?}",
            input.notes
        );
    }

    #[test]
    fn owned_pvcs_only() {
        let owned = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-a-x", "namespace": "d", "labels": {"app": "a"},
                         "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "a", "uid": "u1", "controller": true}]}});
        let orphan = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-a-y", "namespace": "d", "labels": {"app": "a"}}});
        let input = snapshot_from_objects(
            vec![json!({"kind": "List", "items": [cs("a"), owned, orphan]})],
            Timestamp::UNIX_EPOCH,
            FeatureGates::default(),
        )
        .unwrap();
        let names: Vec<_> = input
            .snapshot
            .pvcs
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("data-a-x".to_string())]);
        assert!(
            input
                .notes
                .iter()
                .any(|n| n.contains("1 PersistentVolumeClaim(s)"))
        );
    }
}
