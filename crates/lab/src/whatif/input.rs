//! What a what-if starts from: the CloneSet, its pods, revisions and PVCs, the nodes and what else runs on
//! them, and the image pull times the kubelets reported; read from a dump or (read-only) from the cluster.

use std::collections::BTreeMap;

use anyhow::Context as _;
use insitu_api::CloneSet;
use insitu_core::{FeatureGates, input};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

/// The live state a what-if simulates.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The CloneSet as v1alpha1 JSON (status included: its revisions and collision count).
    pub cloneset: Value,
    /// Its pods (terminating ones left out: they are on their way out either way).
    pub pods: Vec<Pod>,
    pub revisions: Vec<ControllerRevision>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// Every node given (all of them may receive recreated pods).
    pub nodes: Vec<Node>,
    /// Other pods bound to those nodes: their requests are capacity the CloneSet cannot use.
    pub others: Vec<Pod>,
    /// Image → pull seconds the kubelets reported (`Pulled` events; the median when several).
    pub pulls: BTreeMap<String, f64>,
    /// Notes on what was read or left out.
    pub notes: Vec<String>,
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn name(v: &Value) -> &str {
    v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

/// Reads a dump (`-` for stdin): a kubectl List or multi-document YAML/JSON, as `insitu plan -f` takes.
pub fn read_dump(path: &std::path::Path) -> anyhow::Result<Vec<Value>> {
    use std::io::Read as _;
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
    } else {
        text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    }
    // kubectl's `-o json` (and `insitu bench whatif-dump`) is one JSON document: parsed as JSON, much faster
    // than as YAML for a large CloneSet.
    if text.trim_start().starts_with('{')
        && let Ok(v) = serde_json::from_str::<Value>(&text)
    {
        return Ok(vec![v]);
    }
    serde_saphyr::from_multiple(&text)
        .map_err(|e| anyhow::anyhow!("{} is not valid YAML/JSON: {e}", path.display()))
}

/// A Go duration as the kubelet prints it (`1.5s`, `350ms`, `1m2.5s`, `2h0m1s`), in seconds.
pub fn go_duration(s: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&i| i > 0)?;
        let num: f64 = rest[..end].parse().ok()?;
        let unit_end = rest[end..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |i| end + i);
        let scale = match &rest[end..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += num * scale;
        rest = &rest[unit_end..];
    }
    Some(total)
}

/// The image and pull time of a kubelet `Pulled` event's message (kubelet `image_manager.go`,
/// `EnsureImageExists`: `Successfully pulled image "X" in 1.2s (1.2s including waiting)...`). Messages for an
/// image already present (`... already present on machine`) carry no time.
pub fn pulled(message: &str) -> Option<(String, f64)> {
    let rest = message.strip_prefix("Successfully pulled image \"")?;
    let (image, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(" in ")?;
    let dur = rest.split(' ').next()?;
    Some((image.to_string(), go_duration(dur)?))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Picks the CloneSet `name` (any, when `None` and only one is given) and everything the what-if needs from
/// loose objects.
pub fn from_docs(docs: Vec<Value>, name: Option<&str>) -> anyhow::Result<Inputs> {
    let mut objs = Vec::new();
    for d in docs {
        input::flatten(d, &mut objs);
    }
    if let Some(n) = name {
        objs.retain(|o| kind(o) != "CloneSet" || self::name(o) == n);
    }
    let picked = input::snapshot_from_objects(objs.clone(), Timestamp::now(), FeatureGates::default())
        .map_err(|e| anyhow::anyhow!(e))?;
    let s = &picked.snapshot;
    // Nodes, other pods and events are what the what-if reads beside the planner's objects.
    let mut notes: Vec<String> = picked
        .notes
        .iter()
        .filter(|n| !n.contains("of other kinds") && !n.contains("that do not belong to CloneSet"))
        .cloned()
        .collect();
    let mut cloneset = serde_json::to_value(&*s.cloneset).context("the CloneSet")?;
    if cloneset.get("kind").is_none() {
        cloneset["kind"] = "CloneSet".into();
        cloneset["apiVersion"] = "apps.kruise.io/v1alpha1".into();
    }
    let mine: std::collections::BTreeSet<String> =
        s.pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
    let pods: Vec<Pod> = s
        .pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (**p).clone())
        .collect();
    if pods.len() < s.pods.len() {
        notes.push(format!(
            "left out {} terminating pod(s)",
            s.pods.len() - pods.len()
        ));
    }
    let ns = s.cloneset.metadata.namespace.clone().unwrap_or_default();
    let mut nodes = Vec::new();
    let mut others = Vec::new();
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for o in &objs {
        match kind(o) {
            "Node" => nodes.push(serde_json::from_value::<Node>(o.clone()).context("a Node")?),
            "Pod" => {
                let p: Pod = serde_json::from_value(o.clone()).context("a Pod")?;
                let same = p.metadata.namespace.as_deref().unwrap_or(&ns) == ns;
                let done = matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                );
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                if !(same && mine.contains(self::name(o))) && bound && !done {
                    others.push(p);
                }
            }
            "Event" if o.get("reason").and_then(Value::as_str) == Some("Pulled") => {
                let msg = o
                    .get("message")
                    .or_else(|| o.get("note"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if let Some((image, secs)) = pulled(msg) {
                    samples.entry(image).or_default().push(secs);
                }
            }
            _ => {}
        }
    }
    let pulls = samples
        .into_iter()
        .map(|(k, mut v)| (k, median(&mut v)))
        .collect();
    if nodes.is_empty() {
        notes.push("no Node objects given: the pods' nodes get the simulator's default capacity".into());
    }
    Ok(Inputs {
        cloneset,
        pods,
        revisions: s.revisions.iter().map(|r| (**r).clone()).collect(),
        pvcs: s.pvcs.iter().map(|r| (**r).clone()).collect(),
        nodes,
        others,
        pulls,
        notes,
    })
}

fn docs_of<T: serde::Serialize>(items: Vec<T>, kind: &str, api_version: &str) -> anyhow::Result<Vec<Value>> {
    items
        .into_iter()
        .map(|i| {
            let mut v = serde_json::to_value(i)?;
            v["kind"] = kind.into();
            v["apiVersion"] = api_version.into();
            Ok(v)
        })
        .collect()
}

/// Reads the CloneSet and what goes with it from the cluster. Read-only: `get` on the CloneSet and `list` on
/// pods (all namespaces: what else runs on the nodes), controllerrevisions, persistentvolumeclaims and events
/// (the namespace) and nodes.
pub async fn from_cluster(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<Inputs> {
    let cs: CloneSet = Api::namespaced(client.clone(), ns)
        .get(name)
        .await
        .with_context(|| format!("reading CloneSet {ns}/{name}"))?;
    let lp = ListParams::default();
    let pods: Vec<Pod> = Api::all(client.clone())
        .list(&lp.clone().fields("status.phase!=Succeeded,status.phase!=Failed"))
        .await
        .context("listing pods")?
        .items;
    let revs: Vec<ControllerRevision> = Api::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .context("listing controllerrevisions")?
        .items;
    let pvcs: Vec<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .context("listing persistentvolumeclaims")?
        .items;
    let nodes: Vec<Node> = Api::all(client.clone())
        .list(&lp)
        .await
        .context("listing nodes")?
        .items;
    let events: Vec<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns)
        .list(&lp.clone().fields("reason=Pulled"))
        .await
        .context("listing events")?
        .items;
    let mut docs = docs_of(vec![cs], "CloneSet", "apps.kruise.io/v1alpha1")?;
    docs.extend(docs_of(pods, "Pod", "v1")?);
    docs.extend(docs_of(revs, "ControllerRevision", "apps/v1")?);
    docs.extend(docs_of(pvcs, "PersistentVolumeClaim", "v1")?);
    docs.extend(docs_of(nodes, "Node", "v1")?);
    docs.extend(docs_of(events, "Event", "v1")?);
    from_docs(docs, Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("1.5s"), Some(1.5));
        assert!((go_duration("350ms").unwrap() - 0.35).abs() < 1e-12);
        assert_eq!(go_duration("1m2.5s"), Some(62.5));
        assert_eq!(go_duration("2h0m1s"), Some(7201.0));
        assert_eq!(go_duration("abc"), None);
        assert_eq!(go_duration(""), None);
    }

    #[test]
    fn pulled_messages() {
        let m = "Successfully pulled image \"nginx:1.20.0\" in 2.003s (2.003s including waiting). Image size: 100 bytes.";
        assert_eq!(pulled(m), Some(("nginx:1.20.0".into(), 2.003)));
        assert_eq!(
            pulled("Container image \"nginx:1.20.0\" already present on machine"),
            None
        );
    }

    #[test]
    fn picks_the_cloneset_its_pods_and_the_rest() {
        let owner = json!([{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                            "uid": "u1", "controller": true}]);
        let docs = vec![json!({"kind": "List", "items": [
            {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
             "metadata": {"name": "web", "namespace": "d", "uid": "u1"},
             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                      "template": {"metadata": {"labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web-a", "namespace": "d", "labels": {"app": "web"}, "ownerReferences": owner},
             "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i:1"}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "namespace": "other"},
             "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "db"}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job", "namespace": "other"},
             "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "j"}]},
             "status": {"phase": "Succeeded"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
            {"apiVersion": "v1", "kind": "Event", "reason": "Pulled", "metadata": {"name": "e1"},
             "message": "Successfully pulled image \"i:1\" in 3s (3s including waiting)"},
            {"apiVersion": "v1", "kind": "Event", "reason": "Pulled", "metadata": {"name": "e2"},
             "message": "Successfully pulled image \"i:1\" in 5s (5s including waiting)"},
            {"apiVersion": "v1", "kind": "Event", "reason": "Pulled", "metadata": {"name": "e3"},
             "message": "Successfully pulled image \"i:1\" in 4s (4s including waiting)"}
        ]})];
        let inp = from_docs(docs, Some("web")).unwrap();
        assert_eq!(inp.pods.len(), 1);
        assert_eq!(inp.others.len(), 1, "the Succeeded job holds nothing");
        assert_eq!(inp.others[0].metadata.name.as_deref(), Some("db"));
        assert_eq!(inp.nodes.len(), 1);
        assert_eq!(inp.pulls.get("i:1"), Some(&4.0));
        assert_eq!(inp.cloneset["kind"], "CloneSet");
        let e = from_docs(vec![json!({"kind": "List", "items": []})], Some("web")).unwrap_err();
        assert!(e.to_string().contains("no CloneSet"), "{e}");
    }
}
