//! `as=Table` rendering for `kubectl get`: built-in printers for pods and friends, CRD printer columns for CloneSets.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::ApiRequest;
use super::resources::ResourceType;

mod pod;

use pod::pod_cells;

pub const CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// A Table response for a list (or a single object).
pub fn list(req: &ApiRequest, objs: &[Value], rv: &str, now: Timestamp) -> Value {
    table(
        req.rt,
        objs,
        rv,
        now,
        req.q("includeObject").unwrap_or("Metadata"),
        true,
    )
}

pub fn response(t: &Value) -> Response {
    let body = serde_json::to_vec(t).unwrap_or_default();
    (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

struct Col {
    name: String,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: String,
}

fn col(name: &str, ty: &'static str, format: &'static str, priority: i64, description: &str) -> Col {
    Col {
        name: name.into(),
        ty,
        format,
        priority,
        description: description.into(),
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// CRD printer columns: (column, jsonPath), computed once per CRD (`statefulsets`: the Advanced StatefulSet's,
/// anything else the CloneSet's).
fn crd_columns(resource: &str) -> &'static [(Col, String)] {
    static CLONESET: std::sync::OnceLock<Vec<(Col, String)>> = std::sync::OnceLock::new();
    static STATEFULSET: std::sync::OnceLock<Vec<(Col, String)>> = std::sync::OnceLock::new();
    if resource == "statefulsets" {
        STATEFULSET.get_or_init(|| build_crd_columns(&insitu_api::statefulset::crd::crd()))
    } else {
        CLONESET.get_or_init(|| build_crd_columns(&insitu_api::crd::crd()))
    }
}

fn build_crd_columns(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Vec<(Col, String)> {
    let mut out = Vec::new();
    if let Some(v) = crd.spec.versions.first() {
        for c in v.additional_printer_columns.iter().flatten() {
            let ty: &'static str = match c.type_.as_str() {
                "integer" => "integer",
                "number" => "number",
                "boolean" => "boolean",
                "date" => "date",
                _ => "string",
            };
            let desc = c.description.clone().unwrap_or_else(|| {
                format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    c.json_path
                )
            });
            out.push((
                Col {
                    name: c.name.clone(),
                    ty,
                    format: "",
                    priority: i64::from(c.priority.unwrap_or(0)),
                    description: desc,
                },
                c.json_path.clone(),
            ));
        }
    }
    out
}

fn columns(rt: &ResourceType) -> Vec<Col> {
    let mut cols = vec![col("Name", "string", "name", 0, NAME_DESC)];
    match (rt.group, rt.resource) {
        ("", "pods") => {
            cols.push(col(
                "Ready",
                "string",
                "",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ));
            cols.push(col(
                "Status",
                "string",
                "",
                0,
                "The aggregate status of the containers in this pod.",
            ));
            cols.push(col("Restarts", "string", "", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
            cols.push(col("IP", "string", "", 1, "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."));
            cols.push(col("Node", "string", "", 1, "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements."));
            cols.push(col("Nominated Node", "string", "", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."));
            cols.push(col("Readiness Gates", "string", "", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"));
        }
        ("apps.kruise.io", "clonesets" | "statefulsets") => {
            cols.extend(crd_columns(rt.resource).iter().map(|(c, _)| Col {
                name: c.name.clone(),
                description: c.description.clone(),
                ..*c
            }))
        }
        ("", "secrets") => {
            cols.push(col("Type", "string", "", 0, "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"));
            cols.push(col("Data", "string", "", 0, "Data contains the secret data."));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
        }
        ("", "namespaces") => {
            cols.push(col("Status", "string", "", 0, "The status of the namespace"));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
        }
        ("", "nodes") => {
            cols.push(col("Status", "string", "", 0, "The status of the node"));
            cols.push(col("Roles", "string", "", 0, "The roles of the node"));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
            cols.push(col(
                "Version",
                "string",
                "",
                0,
                "Kubelet Version reported by the node.",
            ));
            cols.push(col(
                "Internal-IP",
                "string",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ));
        }
        ("", "events") => {
            cols = vec![
                col(
                    "Last Seen",
                    "string",
                    "",
                    0,
                    "The time at which the most recent occurrence of this event was recorded.",
                ),
                col(
                    "Type",
                    "string",
                    "",
                    0,
                    "Type of this event (Normal, Warning), new types could be added in the future.",
                ),
                col(
                    "Reason",
                    "string",
                    "",
                    0,
                    "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                ),
                col("Object", "string", "", 0, "The object that this event is about."),
                col(
                    "Message",
                    "string",
                    "",
                    0,
                    "A human-readable description of the status of this operation.",
                ),
                col("Name", "string", "name", 1, NAME_DESC),
            ];
        }
        ("apps", "controllerrevisions") => {
            cols.push(col("Controller", "string", "", 0, "Controller of the object"));
            cols.push(col(
                "Revision",
                "integer",
                "",
                0,
                "Revision indicates the revision of the state represented by Data.",
            ));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
        }
        ("coordination.k8s.io", _) => {
            cols.push(col(
                "Holder",
                "string",
                "",
                0,
                "holderIdentity contains the identity of the holder of a current lease.",
            ));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
        }
        ("apiextensions.k8s.io", _) => {
            cols.push(col("Created At", "date", "", 0, AGE_DESC));
        }
        ("admissionregistration.k8s.io", _) => {
            cols.push(col(
                "Webhooks",
                "integer",
                "",
                0,
                "Webhooks indicates the number of webhooks registered in this configuration",
            ));
            cols.push(col("Age", "string", "", 0, AGE_DESC));
        }
        _ => cols.push(col("Age", "string", "", 0, AGE_DESC)),
    }
    cols
}

/// `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(v: Option<&Value>, now: Timestamp) -> String {
    match v.and_then(Value::as_str) {
        None | Some("") => "<unknown>".into(),
        Some(s) => match s.parse::<Timestamp>() {
            Ok(t) => human_duration(now.as_second() - t.as_second()),
            Err(_) => "<invalid>".into(),
        },
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn or_none(x: &str) -> String {
    if x.is_empty() { "<none>".into() } else { x.into() }
}

/// A minimal JSONPath for printer columns: `.a.b`, `.a[0].b`, `.a[*].b` (first result only, like the real convertor).
fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path.trim_start_matches('.').split('.').filter(|p| !p.is_empty()) {
        let (key, idx) = match part.split_once('[') {
            Some((k, rest)) => (k, Some(rest.trim_end_matches(']'))),
            None => (part, None),
        };
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        if let Some(i) = idx {
            let n = if i == "*" { 0 } else { i.parse::<usize>().ok()? };
            cur = cur.get(n)?;
        }
    }
    Some(cur)
}

fn crd_cells(resource: &str, obj: &Value, now: Timestamp) -> Vec<Value> {
    let mut cells = vec![json!(s(obj, "/metadata/name"))];
    for (c, path) in crd_columns(resource) {
        let v = json_path(obj, path);
        cells.push(match (c.ty, v) {
            (_, None) | (_, Some(Value::Null)) => Value::Null,
            ("date", v) => json!(age(v, now)),
            ("integer" | "number" | "boolean", Some(v)) => v.clone(),
            (_, Some(Value::String(x))) => json!(x),
            (_, Some(other)) => json!(other.to_string()),
        });
    }
    cells
}

fn cells(rt: &ResourceType, obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(s(obj, "/metadata/name"));
    let created = obj.pointer("/metadata/creationTimestamp");
    match (rt.group, rt.resource) {
        ("", "pods") => pod_cells(obj, now),
        ("apps.kruise.io", "clonesets" | "statefulsets") => crd_cells(rt.resource, obj, now),
        ("", "namespaces") => vec![name, json!(s(obj, "/status/phase")), json!(age(created, now))],
        ("", "secrets") => {
            let n = obj.get("data").and_then(Value::as_object).map_or(0, |d| d.len());
            vec![name, json!(s(obj, "/type")), json!(n), json!(age(created, now))]
        }
        ("", "nodes") => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| s(c, "/type") == "Ready"))
                .map(|c| {
                    if s(c, "/status") == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                })
                .unwrap_or("Unknown");
            let mut status = ready.to_string();
            if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<String> = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/").map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let ip = obj
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|x| s(x, "/type") == "InternalIP"))
                .map(|x| s(x, "/address").to_string())
                .unwrap_or_default();
            vec![
                name,
                json!(status),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                json!(age(created, now)),
                json!(s(obj, "/status/nodeInfo/kubeletVersion")),
                json!(or_none(&ip)),
            ]
        }
        ("", "events") => {
            let last = ["/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"]
                .iter()
                .find_map(|p| {
                    obj.pointer(p)
                        .filter(|v| v.as_str().is_some_and(|x| !x.is_empty()))
                });
            let object = format!(
                "{}/{}",
                s(obj, "/involvedObject/kind").to_lowercase(),
                s(obj, "/involvedObject/name")
            );
            vec![
                json!(age(last, now)),
                json!(s(obj, "/type")),
                json!(s(obj, "/reason")),
                json!(object),
                json!(s(obj, "/message")),
                name,
            ]
        }
        ("apps", "controllerrevisions") => {
            let owner = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|o| {
                    o.iter()
                        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
                })
                .map(|r| format!("{}/{}", s(r, "/kind").to_lowercase(), s(r, "/name")))
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(owner),
                obj.get("revision").cloned().unwrap_or(json!(0)),
                json!(age(created, now)),
            ]
        }
        ("coordination.k8s.io", _) => vec![
            name,
            json!(or_none(s(obj, "/spec/holderIdentity"))),
            json!(age(created, now)),
        ],
        ("apiextensions.k8s.io", _) => vec![name, created.cloned().unwrap_or(Value::Null)],
        ("admissionregistration.k8s.io", _) => {
            let hooks = obj.get("webhooks").and_then(Value::as_array).map_or(0, Vec::len);
            vec![name, json!(hooks), json!(age(created, now))]
        }
        _ => vec![name, json!(age(created, now))],
    }
}

fn row_object(rt: &ResourceType, obj: &Value, include: &str) -> Option<Value> {
    match include {
        "None" => None,
        "Object" => {
            let mut o = obj.clone();
            if let Some(m) = o.as_object_mut() {
                m.insert("kind".into(), json!(rt.kind));
                m.insert("apiVersion".into(), json!(rt.api_version()));
            }
            Some(o)
        }
        _ => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
        })),
    }
}

/// A Table of `objs`; `headers` false omits columnDefinitions (watch events after the first).
pub fn table(
    rt: &ResourceType,
    objs: &[Value],
    rv: &str,
    now: Timestamp,
    include: &str,
    headers: bool,
) -> Value {
    let cols: Vec<Value> = if headers {
        columns(rt)
            .into_iter()
            .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(rt, o, now)});
            if let Some(obj) = row_object(rt, o, include) {
                row["object"] = obj;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": cols,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
    }

    #[test]
    fn json_paths() {
        let v = json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}]}});
        assert_eq!(json_path(&v, ".spec.containers[*].image"), Some(&json!("a")));
        assert_eq!(json_path(&v, ".spec.missing"), None);
    }
}
