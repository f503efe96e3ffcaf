//! Kruise's container-launch-priority controller for the pods insitu creates, the I/O half: the barrier
//! ConfigMap `<pod>-barrier` gains key `p_<priority>` as the higher-priority containers become ready (kubelet
//! holds a container in `CreateContainerConfigError` until its key exists). The plan's `LaunchBarrier` steps say
//! which key each pod needs (`insitu_core::launch_priority`); this carries them out.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use insitu_api::CloneSet;
use insitu_core::launch_priority::COMPLETED_ANNOTATION;
use insitu_core::{Action, Plan};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::Context;

/// Barrier keys known to exist, per pod UID (saves a GET per reconcile; lost on restart, then re-read), and the
/// CloneSets (UIDs) whose last plan said they use launch priority.
#[derive(Default)]
pub struct BarrierCache {
    keys: Mutex<HashMap<String, HashSet<String>>>,
    in_use: Mutex<HashSet<String>>,
}

impl BarrierCache {
    /// Whether the CloneSet's last plan said it uses launch priority (then a round planned while waiting for
    /// the cache still runs its barrier steps).
    pub fn uses_priority(&self, cs_uid: &str) -> bool {
        lock(&self.in_use).contains(cs_uid)
    }

    pub fn set_uses_priority(&self, cs_uid: &str, yes: bool) {
        let mut in_use = lock(&self.in_use);
        if yes {
            in_use.insert(cs_uid.to_string());
        } else {
            in_use.remove(cs_uid);
        }
    }

    pub fn forget_cloneset(&self, cs_uid: &str) {
        lock(&self.in_use).remove(cs_uid);
    }

    fn has(&self, uid: &str, key: &str) -> bool {
        lock(&self.keys).get(uid).is_some_and(|k| k.contains(key))
    }

    fn add(&self, uid: &str, key: &str) {
        lock(&self.keys)
            .entry(uid.to_string())
            .or_default()
            .insert(key.to_string());
    }

    fn forget(&self, uid: &str) {
        lock(&self.keys).remove(uid);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One barrier step of the plan.
struct Step<'a> {
    pod: &'a str,
    uid: &'a str,
    barrier: &'a str,
    key: &'a str,
    complete: bool,
}

/// Runs the plan's barrier steps for the CloneSet's pods still launching. Errors are logged and retried on the
/// next reconcile (each step is idempotent).
pub async fn run(ctx: &Context, cache: &BarrierCache, cs: &CloneSet, plan: &Plan) {
    let ns = cs.namespace().unwrap_or_default();
    for action in &plan.actions {
        let Action::LaunchBarrier {
            pod,
            uid,
            barrier,
            key,
            complete,
        } = action
        else {
            continue;
        };
        let step = Step {
            pod,
            uid,
            barrier,
            key,
            complete: *complete,
        };
        if let Err(e) = apply(ctx, cache, &ns, &step).await {
            tracing::debug!(pod = %pod, error = %e, "launch-priority barrier step failed; retried next reconcile");
        }
    }
}

async fn apply(ctx: &Context, cache: &BarrierCache, ns: &str, step: &Step<'_>) -> Result<(), kube::Error> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let (name, pod_uid, barrier, key) = (step.pod, step.uid, step.barrier, step.key);
    if !cache.has(pod_uid, key) {
        match cms.get_opt(barrier).await? {
            None => {
                // Kruise creates the ConfigMap empty (owned by the pod, so it goes with it) and adds the
                // key on its requeue; one create with the key ends in the same state.
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(barrier.to_string()),
                        namespace: Some(ns.to_string()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: name.to_string(),
                            uid: pod_uid.to_string(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    data: Some([(key.to_string(), "true".to_string())].into()),
                    ..Default::default()
                };
                ctx.metrics.write("create", "configmaps");
                match cms.create(&PostParams::default(), &cm).await {
                    Ok(_) => {}
                    Err(e) if crate::error::is_already_exists(&e) => add_key(ctx, &cms, barrier, key).await?,
                    Err(e) => return Err(e),
                }
            }
            Some(cm) if cm.data.as_ref().is_some_and(|d| d.contains_key(key)) => {}
            Some(_) => add_key(ctx, &cms, barrier, key).await?,
        }
        cache.add(pod_uid, key);
    }
    if step.complete {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
        let body = serde_json::json!({"metadata": {"annotations": {COMPLETED_ANNOTATION: "true"}}});
        ctx.metrics.write("patch", "pods");
        pods.patch(name, &PatchParams::default(), &Patch::Strategic(body))
            .await?;
        cache.forget(pod_uid);
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
