//! e2e scenarios for env from metadata (the node agent restarts the container in place) and container launch
//! priority (barrier ConfigMap at creation, in-place batches by priority).

use std::time::Duration;

use anyhow::Context as _;
use insitu_api::containermeta::{self, RuntimeContainerMetaSet};
use insitu_api::inplace::InPlaceUpdateState;
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Event, Pod};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::Env;
use crate::util::*;

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

fn started(s: &ContainerStatus) -> Option<i64> {
    Some(
        s.state
            .as_ref()?
            .running
            .as_ref()?
            .started_at
            .as_ref()?
            .0
            .as_second(),
    )
}

/// The pod's Events, oldest first, as `reason (source): message` (for a failure's diagnosis).
async fn pod_events(env: &Env, ns: &str, pod: &str) -> String {
    let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={pod}"));
    match events.list(&lp).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            let lines: Vec<String> = items
                .iter()
                .map(|e| {
                    format!(
                        "{} ({}): {}",
                        e.reason.as_deref().unwrap_or_default(),
                        e.source
                            .as_ref()
                            .and_then(|s| s.component.as_deref())
                            .unwrap_or_default(),
                        e.message.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            lines.join("; ")
        }
        Err(e) => format!("(not listed: {e})"),
    }
}

fn state(p: &Pod) -> anyhow::Result<InPlaceUpdateState> {
    let s = p
        .annotations()
        .get(insitu_api::keys::INPLACE_UPDATE_STATE_ANNOTATION)
        .context("no inplace-update-state")?;
    Ok(serde_json::from_str(s)?)
}

/// A label read by a downward-API env changes: same pod, the container restarted once, running with the new
/// value (as the node agent reports in `apps.kruise.io/runtime-containers-meta`).
pub async fn env_from_label(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "envlabel";
    let mut cs = fast_cloneset(name, 1, 1);
    cs["spec"]["template"]["metadata"]["labels"]["test-env"] = json!("foo");
    cs["spec"]["template"]["spec"]["containers"][0]["env"] = json!([
        {"name": "TEST_ENV", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['test-env']"}}}
    ]);
    create_cloneset(env, ns, cs).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 1, IMAGE_V1, Duration::from_secs(60)).await?;
    let before = &before[0];
    let old_id = container(before, "app").and_then(|c| c.container_id.clone());
    json_patch(
        env,
        ns,
        name,
        json!([{"op": "replace", "path": "/spec/template/metadata/labels/test-env", "value": "bar"}]),
    )
    .await?;
    let (_, after) = wait_rolled_out(env, ns, name, 1, IMAGE_V1, Duration::from_secs(90)).await?;
    let p = &after[0];
    ensure(uid(p) == uid(before), || "the pod was recreated".into())?;
    let c = container(p, "app").context("no status of container app")?;
    if c.restart_count != 1 {
        anyhow::bail!(
            "restartCount {} (want 1); the pod's events: {}",
            c.restart_count,
            pod_events(env, ns, &p.name_any()).await
        );
    }
    ensure(c.container_id != old_id, || {
        "same containerID: not restarted".into()
    })?;
    let st = state(p)?;
    ensure(st.update_env_from_metadata, || {
        format!("state without updateEnvFromMetadata: {st:?}")
    })?;
    let meta = RuntimeContainerMetaSet::of(p)
        .map_err(anyhow::Error::msg)?
        .context("no runtime-containers-meta")?;
    let m = meta
        .containers
        .iter()
        .find(|m| m.name == "app")
        .context("app not in runtime-containers-meta")?;
    let want = containermeta::hash_envs(&[("TEST_ENV".into(), "bar".into())]);
    ensure(
        m.hashes.extracted_env_from_metadata_hash == want && Some(&m.container_id) == c.container_id.as_ref(),
        || format!("runtime-containers-meta does not show the container running with TEST_ENV=bar: {m:?}"),
    )?;
    cleanup(env, ns, name).await;
    Ok(())
}

/// Launch priority: `sidecar` (KRUISE_CONTAINER_PRIORITY 10, postStart `sleep 2`) starts before `app`, through
/// the `<pod>-barrier` ConfigMap; an image change of both goes in two batches, `sidecar` first.
pub async fn launch_priority(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "priority";
    let mut cs = fast_cloneset(name, 1, 1);
    cs["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .context("containers")?
        .push(json!({
            "name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "999"],
            "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}],
            "lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "-c", "sleep 2"]}}}
        }));
    create_cloneset(env, ns, cs).await?;
    let (_, pods) = wait_rolled_out(env, ns, name, 1, IMAGE_V1, Duration::from_secs(90)).await?;
    let p = &pods[0];
    let pod_name = p.name_any();
    for (i, key) in [(0, "p_0"), (1, "p_10")] {
        let c = &p.spec.as_ref().context("spec")?.containers[i];
        let barrier = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "KRUISE_CONTAINER_BARRIER")
            .and_then(|e| e.value_from.as_ref()?.config_map_key_ref.as_ref())
            .with_context(|| format!("container {} has no KRUISE_CONTAINER_BARRIER", c.name))?;
        ensure(
            barrier.name == format!("{pod_name}-barrier") && barrier.key == key,
            || {
                format!(
                    "container {}: barrier {barrier:?}, want {pod_name}-barrier/{key}",
                    c.name
                )
            },
        )?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), ns);
    let cm = cms.get(&format!("{pod_name}-barrier")).await?;
    let keys: Vec<String> = cm.data.unwrap_or_default().into_keys().collect();
    ensure(keys == ["p_0", "p_10"], || format!("barrier keys {keys:?}"))?;
    let (app, side) = (
        container(p, "app").and_then(started),
        container(p, "sidecar").and_then(started),
    );
    ensure(matches!((app, side), (Some(a), Some(s)) if a > s), || {
        format!("app started at {app:?}, not after sidecar at {side:?}")
    })?;

    json_patch(
        env,
        ns,
        name,
        json!([
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2},
            {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "busybox:1.37"}
        ]),
    )
    .await?;
    let (_, after) = wait_rolled_out(env, ns, name, 1, IMAGE_V2, Duration::from_secs(120)).await?;
    let q = &after[0];
    ensure(uid(q) == uid(p), || "the pod was recreated".into())?;
    let st = state(q)?;
    let batches: Vec<Vec<String>> = st
        .container_batches_record
        .iter()
        .map(|b| b.containers.clone())
        .collect();
    ensure(
        batches == [vec!["sidecar".to_string()], vec!["app".to_string()]],
        || format!("batches {batches:?}, want [[sidecar], [app]]"),
    )?;
    for c in ["app", "sidecar"] {
        let n = container(q, c).map_or(-1, |s| s.restart_count);
        ensure(n == 1, || format!("{c} restartCount {n}, want 1"))?;
    }
    cleanup(env, ns, name).await;
    Ok(())
}
