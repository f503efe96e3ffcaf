//! Both served CloneSet versions: a v1beta1 CloneSet read back as v1alpha1 (and again as v1beta1), rolled in
//! place through v1beta1, its pods owned through the storage version. On a real apiserver every v1alpha1 read
//! here goes through the controllers' conversion webhook.

use std::time::Duration;

use anyhow::Context as _;
use insitu_api::v1beta1;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::Env;
use crate::util::*;

fn beta_api(env: &Env, ns: &str) -> Api<v1beta1::CloneSet> {
    Api::namespaced(env.client.clone(), ns)
}

/// Create v1beta1, get v1alpha1 (Kruise's mapping) and v1beta1 back unchanged, roll a new image in place
/// through v1beta1: same pods, one restart each, ownerReferences with apps.kruise.io/v1beta1.
pub async fn v1beta1(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "beta";
    let mut manifest = fast_cloneset(name, 3, 1);
    manifest["apiVersion"] = json!(insitu_api::conversion::V1BETA1);
    manifest["spec"]["updateStrategy"] = json!({
        "type": "RollingUpdate",
        "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible",
            "maxUnavailable": 1,
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 1, "imagePreDownloadParallelism": 2}
        }
    });
    manifest["spec"]["scaleStrategy"] = json!({"excludePreparingDelete": true});
    let cs: v1beta1::CloneSet = serde_json::from_value(manifest).context("v1beta1 manifest")?;
    let created = beta_api(env, ns)
        .create(&PostParams::default(), &cs)
        .await
        .context("create a v1beta1 CloneSet")?;
    let created_spec = serde_json::to_value(&created.spec)?;
    ensure(
        created_spec["updateStrategy"]["rollingUpdate"]["partition"] == json!(0)
            && created_spec["updateStrategy"]["rollingUpdate"]["maxSurge"] == json!(0)
            && created_spec["scaleStrategy"]["enablePVCReuse"] == json!(false),
        || {
            format!(
                "v1beta1 defaults (partition 0, maxSurge 0, enablePVCReuse false) missing: {created_spec}"
            )
        },
    )?;

    // The same object through v1alpha1.
    let alpha = clonesets(env, ns)
        .get(name)
        .await
        .context("get the CloneSet as v1alpha1")?;
    let a = serde_json::to_value(&alpha)?;
    let us = &a["spec"]["updateStrategy"];
    ensure(
        us["type"] == json!("InPlaceIfPossible")
            && us["maxUnavailable"] == json!(1)
            && us["partition"] == json!(0)
            && us["inPlaceUpdateStrategy"] == json!({"gracePeriodSeconds": 1}),
        || format!("v1alpha1 updateStrategy: {us}"),
    )?;
    ensure(
        a["spec"]["scaleStrategy"]["disablePVCReuse"] == json!(true),
        || {
            format!(
                "enablePVCReuse=false must read as disablePVCReuse=true: {}",
                a["spec"]["scaleStrategy"]
            )
        },
    )?;
    let labels = alpha.labels();
    ensure(
        labels
            .get(insitu_api::keys::SCALING_EXCLUDE_PREPARING_DELETE_LABEL)
            .map(String::as_str)
            == Some("true"),
        || format!("excludePreparingDelete must read as the v1alpha1 label: {labels:?}"),
    )?;
    let anns = alpha.annotations();
    ensure(
        anns.get(insitu_api::conversion::PREDOWNLOAD_PARALLELISM)
            .map(String::as_str)
            == Some("2"),
        || format!("imagePreDownloadParallelism must read as the v1alpha1 annotation: {anns:?}"),
    )?;

    let (_, before) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(90)).await?;
    for p in &before {
        let refs = p.owner_references();
        ensure(
            refs.iter().any(|r| {
                r.api_version == insitu_api::conversion::V1BETA1
                    && r.kind == "CloneSet"
                    && r.controller == Some(true)
            }),
            || {
                format!(
                    "{}: ownerReferences not through the storage version: {refs:?}",
                    p.name_any()
                )
            },
        )?;
    }

    // Back as v1beta1: the spec as created (a round trip through v1alpha1 loses nothing).
    let again = beta_api(env, ns).get(name).await?;
    ensure(serde_json::to_value(&again.spec)? == created_spec, || {
        format!(
            "v1beta1 spec changed: {created_spec} -> {}",
            serde_json::to_value(&again.spec).unwrap_or(Value::Null)
        )
    })?;
    let alpha_status = serde_json::to_value(clonesets(env, ns).get(name).await?.status)?;
    let beta_status = serde_json::to_value(beta_api(env, ns).get(name).await?.status)?;
    ensure(
        alpha_status["updateRevision"] == beta_status["updateRevision"],
        || format!("status differs between versions: {alpha_status} vs {beta_status}"),
    )?;

    // An in-place rollout driven through v1beta1.
    let observer = Observer::start(env, ns, name);
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2}
    ]))?;
    beta_api(env, ns)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .context("json patch through v1beta1")?;
    let (_, after) = wait_rolled_out(env, ns, name, 3, IMAGE_V2, Duration::from_secs(120)).await?;
    ensure(identities(&before) == identities(&after), || {
        format!(
            "pods changed: {:?} -> {:?}",
            identities(&before),
            identities(&after)
        )
    })?;
    ensure(after.iter().all(|p| restarts(p) == 1), || {
        format!("each pod must restart exactly once: {}", describe(&after, ""))
    })?;
    let seen = observer.snapshot();
    ensure(seen.pods.values().all(|h| !h.deleted), || {
        "a pod was deleted".into()
    })?;
    let st = beta_api(env, ns).get(name).await?.status.unwrap_or_default();
    ensure(st.updated_ready_replicas == 3, || {
        format!("v1beta1 status: {st:?}")
    })?;
    cleanup(env, ns, name).await;
    Ok(())
}
