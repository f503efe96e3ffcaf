//! Kruise's container-launch-priority controller for the pods insitu creates: the barrier ConfigMap
//! `<pod>-barrier` gains key `p_<priority>` as the higher-priority containers become ready (kubelet holds a
//! container in `CreateContainerConfigError` until its key exists).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use insitu_api::CloneSet;
use insitu_core::launch_priority::{self, BarrierStep};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::Context;

/// Barrier keys known to exist, per pod UID (saves a GET per reconcile; lost on restart, then re-read).
#[derive(Default)]
pub struct BarrierCache {
    keys: Mutex<HashMap<String, HashSet<String>>>,
}

impl BarrierCache {
    fn has(&self, uid: &str, key: &str) -> bool {
        self.lock().get(uid).is_some_and(|k| k.contains(key))
    }

    fn add(&self, uid: &str, key: &str) {
        self.lock()
            .entry(uid.to_string())
            .or_default()
            .insert(key.to_string());
    }

    fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether any template this CloneSet's pods may come from asks for launch priority (only then are its
/// pods looked at: the others never carry the barrier env).
fn cloneset_uses_priority(ctx: &Context, cs: &CloneSet) -> bool {
    let tpl = &cs.spec.template;
    if launch_priority::template_uses_priority(
        tpl.spec.as_ref(),
        tpl.metadata.as_ref().and_then(|m| m.annotations.as_ref()),
    ) {
        return true;
    }
    let uid = cs.uid().unwrap_or_default();
    ctx.revisions.state().iter().any(|r| {
        r.owner_references().iter().any(|o| o.uid == uid)
            && r.data.as_ref().is_some_and(|d| {
                let Some(tpl) = d.0.pointer("/spec/template") else {
                    return false;
                };
                // Cheap look first (this runs every reconcile): decode only a template that mentions priority.
                if !mentions_priority(tpl) {
                    return false;
                }
                let spec = tpl
                    .get("spec")
                    .and_then(|s| serde_json::from_value(s.clone()).ok());
                let ann: Option<BTreeMap<String, String>> = tpl
                    .pointer("/metadata/annotations")
                    .and_then(|a| serde_json::from_value(a.clone()).ok());
                launch_priority::template_uses_priority(spec.as_ref(), ann.as_ref())
            })
    })
}

/// A revision template with the launch-priority annotation or a `KRUISE_CONTAINER_PRIORITY` env.
fn mentions_priority(tpl: &serde_json::Value) -> bool {
    tpl.pointer("/metadata/annotations")
        .and_then(|a| a.get(launch_priority::PRIORITY_ANNOTATION))
        .is_some()
        || tpl
            .pointer("/spec/containers")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("env").and_then(serde_json::Value::as_array))
            .flatten()
            .any(|e| e.get("name").and_then(serde_json::Value::as_str) == Some(launch_priority::PRIORITY_ENV))
}

/// Runs the barrier steps for the CloneSet's pods still launching. Errors are logged and retried on the
/// next reconcile (each step is idempotent).
pub async fn sync(ctx: &Context, cs: &CloneSet) {
    if !cloneset_uses_priority(ctx, cs) {
        return;
    }
    let uid = cs.uid().unwrap_or_default();
    let ns = cs.namespace().unwrap_or_default();
    let launching: Vec<Pod> = ctx
        .pods
        .state()
        .iter()
        .filter(|p| {
            p.meta().namespace.as_deref() == Some(ns.as_str())
                && p.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
                && p.meta().deletion_timestamp.is_none()
                && p.annotations()
                    .get(launch_priority::COMPLETED_ANNOTATION)
                    .is_none_or(|v| v != "true")
        })
        .map(|p| p.unpack())
        .collect();
    for pod in launching {
        let Some(step) = launch_priority::next_step(&pod) else {
            continue;
        };
        if let Err(e) = apply(ctx, &pod, &step).await {
            tracing::debug!(pod = %pod.name_any(), error = %e, "launch-priority barrier step failed; retried next reconcile");
        }
    }
}

async fn apply(ctx: &Context, pod: &Pod, step: &BarrierStep) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let pod_uid = pod.uid().unwrap_or_default();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let barrier = launch_priority::barrier_name(&name);
    if !ctx.barriers.has(&pod_uid, &step.key) {
        match cms.get_opt(&barrier).await? {
            None => {
                // Kruise creates the ConfigMap empty (owned by the pod, so it goes with it) and adds the
                // key on its requeue; one create with the key ends in the same state.
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(barrier.clone()),
                        namespace: Some(ns.clone()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: name.clone(),
                            uid: pod_uid.clone(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    data: Some([(step.key.clone(), "true".to_string())].into()),
                    ..Default::default()
                };
                ctx.metrics.write("create", "configmaps");
                match cms.create(&PostParams::default(), &cm).await {
                    Ok(_) => {}
                    Err(e) if crate::error::is_already_exists(&e) => {
                        add_key(ctx, &cms, &barrier, &step.key).await?
                    }
                    Err(e) => return Err(e),
                }
            }
            Some(cm) if cm.data.as_ref().is_some_and(|d| d.contains_key(&step.key)) => {}
            Some(_) => add_key(ctx, &cms, &barrier, &step.key).await?,
        }
        ctx.barriers.add(&pod_uid, &step.key);
    }
    if step.complete {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let body =
            serde_json::json!({"metadata": {"annotations": {launch_priority::COMPLETED_ANNOTATION: "true"}}});
        ctx.metrics.write("patch", "pods");
        pods.patch(&name, &PatchParams::default(), &Patch::Strategic(body))
            .await?;
        ctx.barriers.forget(&pod_uid);
    }
    Ok(())
}

async fn add_key(ctx: &Context, cms: &Api<ConfigMap>, barrier: &str, key: &str) -> Result<(), kube::Error> {
    ctx.metrics.write("patch", "configmaps");
    let body = serde_json::json!({"data": {key: "true"}});
    cms.patch(barrier, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .map(|_| ())
}
