//! Volume binder: the cluster's default dynamic provisioner, binding every new PVC at once (Immediate mode).
//!
//! A real cluster with a default StorageClass provisions a volume for each claim and the PV controller binds
//! them: `spec.volumeName` is set, then `status.phase: Bound` with the capacity and access modes. Here no
//! PersistentVolume object is made (the sim serves none); only the claim shows what a cluster would show.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::Clock;

/// Delay before retrying a failed bind.
const RETRY: Duration = Duration::from_secs(1);

fn key_of(pvc: &PersistentVolumeClaim) -> (String, String) {
    (
        pvc.metadata.namespace.clone().unwrap_or_default(),
        pvc.metadata.name.clone().unwrap_or_default(),
    )
}

/// Not bound yet and not going away.
fn wants_binding(pvc: &PersistentVolumeClaim) -> bool {
    pvc.metadata.deletion_timestamp.is_none()
        && pvc.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound")
}

/// The volume name a provisioner gives the claim's volume: `pvc-<claim uid>`, as the CSI provisioners do.
pub fn volume_name(pvc: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", pvc.metadata.uid.as_deref().unwrap_or_default())
}

/// Binds one claim: `spec.volumeName`, then the status (both guarded by the claim's UID).
async fn bind(client: &Client, pvc: &PersistentVolumeClaim) -> Result<(), kube::Error> {
    let (ns, name) = key_of(pvc);
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let uid = pvc.metadata.uid.clone();
    let spec = pvc.spec.clone().unwrap_or_default();
    let volume = spec.volume_name.clone().filter(|v| !v.is_empty());
    if volume.is_none() {
        let patch = json!({"metadata": {"uid": uid}, "spec": {"volumeName": volume_name(pvc)}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| json!({"storage": q}));
    let status = json!({"metadata": {"uid": uid}, "status": {
        "phase": "Bound",
        "accessModes": spec.access_modes.unwrap_or_default(),
        "capacity": capacity,
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Runs the binder until the future is dropped.
pub async fn run(client: Client, clock: Arc<dyn Clock>) {
    let api = Api::<PersistentVolumeClaim>::all(client.clone());
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    // Claims waiting to be bound, in name order (deterministic).
    let mut todo: BTreeMap<(String, String), PersistentVolumeClaim> = BTreeMap::new();
    // UIDs bound but not yet seen Bound: the echo of our own spec write is not bound again.
    let mut bound: HashSet<String> = HashSet::new();
    let mut retry: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            biased;
            next = events.next() => match next {
                None => return,
                Some(Err(e)) => tracing::debug!(error = %e, "volume binder watch error"),
                Some(Ok(watcher::Event::InitApply(pvc) | watcher::Event::Apply(pvc))) => {
                    let uid = pvc.metadata.uid.clone().unwrap_or_default();
                    if !wants_binding(&pvc) {
                        bound.remove(&uid);
                        todo.remove(&key_of(&pvc));
                    } else if !bound.contains(&uid) {
                        todo.insert(key_of(&pvc), pvc);
                    }
                }
                Some(Ok(watcher::Event::Delete(pvc))) => {
                    bound.remove(pvc.metadata.uid.as_deref().unwrap_or_default());
                    todo.remove(&key_of(&pvc));
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
            },
            () = async {
                match retry.as_mut() {
                    Some(sleep) => sleep.await,
                    None => std::future::pending().await,
                }
            } => retry = None,
        }
        if retry.is_some() {
            continue;
        }
        let batch = std::mem::take(&mut todo);
        for (key, pvc) in batch {
            match bind(&client, &pvc).await {
                Ok(()) => {
                    bound.insert(pvc.metadata.uid.clone().unwrap_or_default());
                }
                // Gone meanwhile: its own watch event says what to do next. A 409 is retried (with the claim
                // as the watch last showed it): a conflict may come with no watch event after it.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::debug!(pvc = ?key, error = %e, "volume binding failed; will retry");
                    todo.insert(key, pvc);
                    retry.get_or_insert_with(|| Box::pin(clock.sleep(RETRY)));
                }
            }
        }
    }
}
