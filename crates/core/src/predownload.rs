//! Kruise's image pre-download for in-place updates (`PreDownloadImageForInPlaceUpdate`,
//! `cloneset_predownload_image.go`): which ImagePullJobs a CloneSet owns for its update revision, planned
//! from the revisions alone (pure).
//!
//! Kruise's CloneSet controller, each reconcile, before scaling and updating: while the current and update
//! revisions differ, and once `status.updatedReadyReplicas` reaches `imagePreDownloadMinUpdatedReadyPods`, it
//! looks at the update revision once — labelled `apps.kruise.io/image-predownload-ignored` when pre-downloading
//! cannot help (ReCreate updates, ≤ 3 replicas, every pod in one batch, not in place), else one ImagePullJob per
//! container whose image changed (named `<revision>-<container>`, selecting the CloneSet's pods not yet at the
//! revision) and the label `apps.kruise.io/pre-predownload-created`. Once the revisions agree again, it deletes
//! the jobs it controls. A kruise-daemon (or `insitu nodes`) executes the jobs; the CloneSet controller only
//! owns them.

use std::collections::BTreeMap;

use insitu_api::validation::intstr::scaled_value;
use insitu_api::{CloneSet, CloneSetUpdateStrategyType, keys};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::revision;

/// Kruise `minimumReplicasToPreDownloadImage`: CloneSets of at most this many replicas never pre-download.
pub(crate) const MINIMUM_REPLICAS: i32 = 3;
/// Kruise's ImagePullJob defaults for workloads: a 300 s pull timeout, one pull at a time, one retry, and
/// the finished job kept 600 s.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: i32 = 300;
pub(crate) const DEFAULT_PARALLELISM: i32 = 1;
const BACKOFF_LIMIT: i32 = 1;
const TTL_SECONDS_AFTER_FINISHED: i32 = 600;

/// The revision label Kruise writes once the jobs of a revision are created.
pub const CREATED_LABEL: &str = "apps.kruise.io/pre-predownload-created";
/// The revision label Kruise writes when a revision's images are not worth pre-downloading.
pub(crate) const IGNORED_LABEL: &str = "apps.kruise.io/image-predownload-ignored";
/// The v1alpha1 annotations (v1beta1: `updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownload*`,
/// converted to these).
pub(crate) const PARALLELISM_ANNOTATION: &str = "apps.kruise.io/image-predownload-parallelism";
pub(crate) const TIMEOUT_ANNOTATION: &str = "apps.kruise.io/image-predownload-timeout-seconds";
pub(crate) const MIN_UPDATED_READY_PODS_ANNOTATION: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";

/// What the controller knows for one CloneSet's pre-download step.
pub(crate) struct Input<'a> {
    /// The CloneSet as the controller plans it (v1alpha1 view).
    pub cs: &'a CloneSet,
    /// The revisions the plan settled on (`None`: not in the cache yet, e.g. created this round).
    pub current: Option<&'a ControllerRevision>,
    pub update: Option<&'a ControllerRevision>,
    /// Names of the ImagePullJobs whose controller reference is this CloneSet.
    pub owned_jobs: &'a [String],
    /// `InPlaceWorkloadVerticalScaling`: whether a resource change still counts as in place.
    pub vertical: bool,
}

/// The writes of the pre-download step.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PreDownload {
    /// ImagePullJobs to create (`apps.kruise.io/v1beta1` objects), in container order.
    pub create: Vec<Value>,
    /// `(revision name, label)` to set to `"true"` on the update revision.
    pub label_revision: Option<(String, &'static str)>,
    /// Owned ImagePullJobs to delete (the revisions agree again).
    pub delete: Vec<String>,
    /// Why, for the log and `insitu explain`.
    pub why: String,
}

fn annotation<'a>(cs: &'a CloneSet, key: &str) -> Option<&'a str> {
    cs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Kruise parses these with `strconv.Atoi`/`ParseInt`: anything else keeps the default.
fn int_annotation(cs: &CloneSet, key: &str) -> Option<i32> {
    annotation(cs, key).and_then(|s| s.parse::<i32>().ok())
}

/// Plans the pre-download step (Kruise `createImagePullJobsForInPlaceUpdate` and `DeleteJobsForWorkload`).
pub(crate) fn plan(i: &Input) -> PreDownload {
    let mut out = PreDownload::default();
    let (Some(cur), Some(upd)) = (i.current, i.update) else {
        out.why = "pre-download: the revisions are not in the cache yet".into();
        return out;
    };
    let upd_name = upd.metadata.name.clone().unwrap_or_default();
    if cur.metadata.name == upd.metadata.name {
        out.delete = i.owned_jobs.to_vec();
        out.why = if out.delete.is_empty() {
            "pre-download: revisions agree, no ImagePullJob to clean up".into()
        } else {
            format!(
                "pre-download: revisions agree, deleting ImagePullJobs {}",
                out.delete.join(", ")
            )
        };
        return out;
    }
    let replicas = i.cs.spec.replicas();
    let status = i.cs.status.as_ref();
    // Kruise reads `updatedReadyReplicas` only while the status speaks of this update revision.
    let updated_ready = status
        .filter(|s| s.update_revision == upd_name)
        .map_or(0, |s| s.updated_ready_replicas);
    let min_ready = int_annotation(i.cs, MIN_UPDATED_READY_PODS_ANNOTATION).map_or(0, |m| {
        scaled_value(&IntOrString::Int(m), replicas, true).unwrap_or(0)
    });
    if min_ready > updated_ready {
        out.why = format!(
            "pre-download: waiting for {min_ready} updated ready pods ({updated_ready} now, {MIN_UPDATED_READY_PODS_ANNOTATION})"
        );
        return out;
    }
    let labels = upd.metadata.labels.as_ref();
    if labels.is_some_and(|l| l.contains_key(CREATED_LABEL) || l.contains_key(IGNORED_LABEL)) {
        out.why = format!("pre-download: revision {upd_name} already handled");
        return out;
    }
    if let Some(reason) = ignore_reason(i, cur, upd, replicas) {
        out.label_revision = Some((upd_name.clone(), IGNORED_LABEL));
        out.why = format!("pre-download: revision {upd_name} ignored ({reason})");
        return out;
    }
    let hash = labels
        .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_KEY))
        .cloned()
        .unwrap_or_default();
    let images = changed_images(cur, upd);
    for (container, image) in &images {
        out.create.push(job(
            i.cs,
            &format!("{upd_name}-{container}"),
            image,
            &upd_name,
            &hash,
        ));
    }
    out.label_revision = Some((upd_name.clone(), CREATED_LABEL));
    out.why = format!(
        "pre-download: revision {upd_name}: ImagePullJobs for {}",
        images
            .iter()
            .map(|(c, img)| format!("{c}={img}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}

/// Kruise's reasons to skip pre-downloading a revision, in its order.
fn ignore_reason(
    i: &Input,
    cur: &ControllerRevision,
    upd: &ControllerRevision,
    replicas: i32,
) -> Option<String> {
    let us = i.cs.spec.update_strategy.as_ref();
    let stype = us.and_then(|u| u.strategy_type());
    if stype == Some(CloneSetUpdateStrategyType::ReCreate)
        || stype.is_none()
        || us.is_some_and(|u| !u.has_rolling_update())
    {
        return Some("pods are recreated, not updated in place".into());
    }
    if replicas <= MINIMUM_REPLICAS {
        return Some(format!("replicas {replicas} ≤ {MINIMUM_REPLICAS}"));
    }
    let partition = crate::sync::budget::partition(us.and_then(|u| u.partition.as_ref()), replicas);
    let max_unavailable = us
        .and_then(|u| u.max_unavailable.clone())
        .unwrap_or_else(|| IntOrString::String("20%".into()));
    let max_unavailable = scaled_value(&max_unavailable, replicas, false).unwrap_or(0);
    if partition == 0 && max_unavailable >= replicas {
        return Some(format!(
            "every pod updates in one batch (maxUnavailable {max_unavailable} ≥ replicas {replicas})"
        ));
    }
    let can = match (revision::template_value(cur), revision::template_value(upd)) {
        (Some(o), Some(n)) => crate::inplaceupdate::calculate(o, n, i.vertical).err(),
        _ => Some("a revision has no template".into()),
    };
    can.map(|why| format!("not an in-place update: {why}"))
}

/// Kruise `diffImagesBetweenRevisions`: containers of the update revision whose image differs from the current
/// revision's, or that it does not have.
pub(crate) fn changed_images(cur: &ControllerRevision, upd: &ControllerRevision) -> BTreeMap<String, String> {
    let images = |r: &ControllerRevision| -> Vec<(String, String)> {
        revision::template_value(r)
            .and_then(|t| t.pointer("/spec/containers"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                        (s("name"), s("image"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let old = images(cur);
    images(upd)
        .into_iter()
        .filter(|(name, image)| !old.iter().any(|(n, i)| n == name && i == image))
        .collect()
}

/// One ImagePullJob as Kruise's `CreateJobForWorkloadWithStrategy` writes it: the template's labels plus the
/// revision hash (everything a CloneSet owns matches its selector), the CloneSet's selector narrowed to pods not
/// at the update revision, the pull settings from the annotations.
fn job(cs: &CloneSet, name: &str, image: &str, revision: &str, hash: &str) -> Value {
    let tpl_meta = cs.spec.template.metadata.as_ref();
    let mut labels: BTreeMap<String, String> = tpl_meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.insert(keys::CONTROLLER_REVISION_HASH_KEY.into(), hash.into());
    let annotations: BTreeMap<String, String> =
        tpl_meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    let mut selector = serde_json::to_value(&cs.spec.selector).unwrap_or_else(|_| json!({}));
    let not_in = json!({
        "key": keys::CONTROLLER_REVISION_HASH_LABEL,
        "operator": "NotIn",
        "values": [revision, hash],
    });
    if let Value::Object(m) = &mut selector {
        match m.get_mut("matchExpressions").and_then(Value::as_array_mut) {
            Some(exprs) => exprs.push(not_in),
            None => {
                m.insert("matchExpressions".into(), json!([not_in]));
            }
        }
    }
    let parallelism = int_annotation(cs, PARALLELISM_ANNOTATION).unwrap_or(DEFAULT_PARALLELISM);
    let timeout = int_annotation(cs, TIMEOUT_ANNOTATION).unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let secrets: Vec<&str> = cs
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    let mut sandbox = serde_json::Map::new();
    if !annotations.is_empty() {
        sandbox.insert("annotations".into(), json!(annotations));
    }
    sandbox.insert("labels".into(), json!(labels));
    let mut spec = json!({
        "image": image,
        "podSelector": selector,
        "parallelism": parallelism,
        "pullPolicy": {"backoffLimit": BACKOFF_LIMIT, "timeoutSeconds": timeout},
        "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED},
        "sandboxConfig": sandbox,
    });
    if !secrets.is_empty() {
        spec["pullSecrets"] = json!(secrets);
    }
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ImagePullJob",
        "metadata": {
            "name": name,
            "namespace": cs.metadata.namespace,
            "labels": labels,
            "ownerReferences": [revision::controller_ref(cs)],
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests;
