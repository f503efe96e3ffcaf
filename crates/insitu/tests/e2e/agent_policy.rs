//! `agent_least_privilege`: the node agent's ServiceAccount, with RBAC and the ValidatingAdmissionPolicy of
//! deploy/agent/ (the files as shipped), may patch only the `apps.kruise.io/runtime-containers-meta` annotation
//! of pods on the node its token is bound to (docs/install.md, "What the node agent may do"); the apiserver
//! refuses the rest with the policy's message.

use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Api, ResourceExt as _};
use serde_json::{Value, json};

use crate::Env;
use crate::util::{IMAGE_V1, ensure, wait_until};

const AGENT_NS: &str = "insitu-agent";
const AGENT_SA: &str = "insitu-agent";
const META: &str = "apps.kruise.io/runtime-containers-meta";

/// The objects of a deploy/agent/ file, as the repository ships it.
fn deploy_objects(file: &str) -> anyhow::Result<Vec<Value>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/agent")
        .join(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).with_context(|| format!("parsing {file}")))
        .collect()
}

/// Server-side apply of one manifest object, whatever its kind.
async fn apply(client: &kube::Client, obj: &Value) -> anyhow::Result<()> {
    let (group, version) = match obj["apiVersion"].as_str().unwrap_or_default().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            obj["apiVersion"].as_str().unwrap_or_default().to_string(),
        ),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, obj["kind"].as_str().unwrap_or_default());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let name = obj["metadata"]["name"]
        .as_str()
        .context("object without a name")?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        Scope::Cluster => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        name,
        &PatchParams::apply("insitu-e2e").force(),
        &Patch::Apply(obj),
    )
    .await
    .with_context(|| format!("applying {} {name}", gvk.kind))?;
    Ok(())
}

/// A client authenticating with `token` (server and CA from the e2e's ServiceAccount kubeconfig).
async fn token_client(env: &Env, token: &str) -> anyhow::Result<kube::Client> {
    let real = env.real.as_ref().context("real cluster only")?;
    let kc = kube::config::Kubeconfig::read_from(&real.sa_kubeconfig)?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    cfg.auth_info = serde_json::from_value(json!({ "token": token }))?;
    Ok(kube::Client::try_from(cfg)?)
}

/// A token of the agent's ServiceAccount, bound to `pod` (then it carries the pod's node) or to nothing.
async fn mint(env: &Env, pod: Option<&Pod>) -> anyhow::Result<String> {
    let sas: Api<ServiceAccount> = Api::namespaced(env.client.clone(), AGENT_NS);
    let bound = pod.map(|p| json!({"kind": "Pod", "apiVersion": "v1", "name": p.name_any(), "uid": p.uid()}));
    let req: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": 600, "boundObjectRef": bound}
    }))?;
    let got = sas
        .create_subresource::<TokenRequest, TokenRequest>("token", AGENT_SA, &PostParams::default(), &req)
        .await
        .context("TokenRequest")?;
    Ok(got.status.context("TokenRequest without status")?.token)
}

async fn create_pod(env: &Env, ns: &str, name: &str, node: &str, sa: Option<&str>) -> anyhow::Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "agent-least-privilege"}},
        "spec": {
            "nodeName": node,
            "serviceAccountName": sa,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": IMAGE_V1}],
        },
    }))?;
    match pods.create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            pods.delete(name, &Default::default()).await?;
            wait_until(
                &format!("old pod {ns}/{name} gone"),
                Duration::from_secs(60),
                || async {
                    Ok(match pods.get_opt(name).await? {
                        None => Ok(()),
                        Some(_) => Err("still there".to_string()),
                    })
                },
            )
            .await?;
            Ok(pods.create(&PostParams::default(), &pod).await?)
        }
        other => Ok(other?),
    }
}

/// The agent's write (`watch.rs`: a merge patch of pods/status) with an arbitrary body.
async fn patch_status(client: &kube::Client, ns: &str, pod: &str, body: Value) -> Result<Pod, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(body))
        .await
}

fn meta_patch(value: &str) -> Value {
    json!({"metadata": {"annotations": {META: value}}})
}

/// The refusal's message when `res` is a 403, else an error saying what came instead.
fn refused(what: &str, res: Result<Pod, kube::Error>) -> anyhow::Result<String> {
    match res {
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(s.message),
        Err(e) => bail!("{what}: expected 403 Forbidden, got {e}"),
        Ok(_) => bail!("{what}: expected 403 Forbidden, the apiserver accepted it"),
    }
}

/// An Event about node A's pod as the agent records it (`watch.rs`, `Agent::event`), reported as `instance`.
async fn agent_event(client: &kube::Client, ns: &str, instance: &str) -> Result<Event, kube::Error> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "on-a-"},
        "eventTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        "reportingController": "insitu-agent",
        "reportingInstance": instance,
        "action": "Restart",
        "reason": "Killing",
        "type": "Normal",
        "note": "agent_least_privilege",
        "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": "on-a"},
    }))
    .map_err(kube::Error::SerdeError)?;
    events.create(&PostParams::default(), &ev).await
}

/// Two nodes of the cluster (the simulated nodes of `e2e/run`; the real-node tier skips the scenario).
async fn two_nodes(env: &Env) -> anyhow::Result<(String, String)> {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let mut names: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .iter()
        .map(|n| n.name_any())
        .collect();
    names.sort();
    match names.as_slice() {
        [a, b, ..] => Ok((a.clone(), b.clone())),
        _ => bail!("two nodes needed, the cluster has {names:?}"),
    }
}

pub async fn agent_least_privilege(env: &Env, ns: &str) -> anyhow::Result<()> {
    // The agent's Namespace, ServiceAccount and RBAC (not its DaemonSet: no agent runs here), and the policy.
    for obj in deploy_objects("agent.yaml")? {
        if obj["kind"] != "DaemonSet" {
            apply(&env.client, &obj).await?;
        }
    }
    for obj in deploy_objects("admission.yaml")? {
        apply(&env.client, &obj).await?;
    }
    let (node_a, node_b) = two_nodes(env).await?;
    // The agent's own pod on node A (its token is bound to it), and one app pod on each node.
    let agent_pod = create_pod(env, AGENT_NS, "e2e-agent-a", &node_a, Some(AGENT_SA)).await?;
    create_pod(env, ns, "on-a", &node_a, None).await?;
    create_pod(env, ns, "on-b", &node_b, None).await?;
    let agent = token_client(env, &mint(env, Some(&agent_pod)).await?).await?;

    // The policy applies once the apiserver has loaded it: the write to node B's pod is refused then.
    let msg = wait_until(
        "the policy refusing node B's pod",
        Duration::from_secs(60),
        || async {
            Ok(match patch_status(&agent, ns, "on-b", meta_patch("b")).await {
                Err(kube::Error::Api(s)) if s.code == 403 => Ok(s.message),
                other => Err(format!("{:?}", other.map(|_| "accepted"))),
            })
        },
    )
    .await?;
    println!("agent_least_privilege: node B's pod: {msg}");
    let want = format!("insitu-agent of node {node_a} may not change pod {ns}/on-b on node {node_b}");
    ensure(
        msg.contains(&want) && msg.contains("only pods on its own node"),
        || format!("node B's pod refused with {msg:?}, wanted {want:?}"),
    )?;

    // Node A's pod: the annotation is the agent's to write.
    let value = r#"{"containers":[]}"#;
    let pod = patch_status(&agent, ns, "on-a", meta_patch(value))
        .await
        .context("the agent's annotation on its own node's pod must be allowed")?;
    ensure(
        pod.annotations().get(META).map(String::as_str) == Some(value),
        || format!("annotation after the patch: {:?}", pod.annotations().get(META)),
    )?;

    // Node A's pod, anything else: refused, naming what.
    let msg = refused(
        "a label on node A's pod",
        patch_status(
            &agent,
            ns,
            "on-a",
            json!({"metadata": {"labels": {"app": "moved"}}}),
        )
        .await,
    )?;
    println!("agent_least_privilege: a label: {msg}");
    ensure(
        msg.contains("may not change labels") && msg.contains("(app)"),
        || format!("label change refused with {msg:?}"),
    )?;
    let msg = refused(
        "another annotation on node A's pod",
        patch_status(
            &agent,
            ns,
            "on-a",
            json!({"metadata": {"annotations": {"x": "y"}}}),
        )
        .await,
    )?;
    println!("agent_least_privilege: another annotation: {msg}");
    ensure(
        msg.contains("may not change annotations") && msg.contains("(x)"),
        || format!("annotation change refused with {msg:?}"),
    )?;

    // A token of the same ServiceAccount bound to no pod carries no node: refused even on node A.
    let unbound = token_client(env, &mint(env, None).await?).await?;
    let msg = refused(
        "a token without a node claim",
        patch_status(&unbound, ns, "on-a", meta_patch("unbound")).await,
    )?;
    println!("agent_least_privilege: no node claim: {msg}");
    ensure(msg.contains("no node claim"), || {
        format!("unbound token refused with {msg:?}")
    })?;

    // Events: as insitu-agent on its own node, accepted; in another node's name, refused.
    let ok = agent_event(&agent, ns, &node_a).await;
    ensure(ok.is_ok(), || format!("the agent's own Event refused: {ok:?}"))?;
    let msg = match agent_event(&agent, ns, &node_b).await {
        Err(kube::Error::Api(s)) if s.code == 403 => s.message,
        other => bail!("an Event as node B's agent: expected 403 Forbidden, got {other:?}"),
    };
    println!("agent_least_privilege: an Event as node B's agent: {msg}");
    ensure(
        msg.contains(&format!("its token's node ({node_a}), not as {node_b}")),
        || format!("Event refused with {msg:?}"),
    )?;

    // What the refusals left: node A's pod as the allowed patch wrote it.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let a = pods.get("on-a").await?;
    ensure(
        a.annotations().get(META).map(String::as_str) == Some(value)
            && a.labels().get("app").map(String::as_str) == Some("agent-least-privilege")
            && !a.annotations().contains_key("x"),
        || {
            format!(
                "node A's pod after the refusals: {:?} {:?}",
                a.labels(),
                a.annotations()
            )
        },
    )?;
    let agent_pods: Api<Pod> = Api::namespaced(env.client.clone(), AGENT_NS);
    if let Err(e) = agent_pods
        .delete(&agent_pod.name_any(), &Default::default())
        .await
    {
        println!("agent_least_privilege: deleting {AGENT_NS}/e2e-agent-a: {e}");
    }
    Ok(())
}
