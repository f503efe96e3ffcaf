//! Non-resource endpoints: discovery (aggregated v2 and legacy), OpenAPI stubs, `/version` and health checks.

use std::collections::{BTreeMap, HashMap};

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::errors::ApiError;
use super::resources::{RESOURCES, ResourceType, verbs};
use super::{ApiServer, value_response};

const AGGREGATED_CT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const OPENAPI_V2_CT: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn sub_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "binding" => vec!["create"],
        _ => vec!["get", "patch", "update"],
    }
}

fn sub_kind(rt: &ResourceType, sub: &str) -> (String, String, String) {
    match sub {
        "scale" => ("autoscaling".into(), "v1".into(), "Scale".into()),
        "binding" => (String::new(), "v1".into(), "Binding".into()),
        _ => (rt.group.into(), rt.version.into(), rt.kind.into()),
    }
}

/// Group → versions (in order of preference) served.
fn groups() -> BTreeMap<&'static str, Vec<&'static str>> {
    let mut g: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
    for rt in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        let vs = g.entry(rt.group).or_default();
        if !vs.contains(&rt.version) {
            vs.push(rt.version);
        }
    }
    g
}

fn legacy_resources(group: &str, version: &str) -> Value {
    let mut list = Vec::new();
    for rt in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut e = json!({
            "name": rt.resource,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": verbs(),
        });
        if !rt.short_names.is_empty() {
            e["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            e["categories"] = json!(rt.categories);
        }
        list.push(e);
        for sub in rt.subresources {
            let (g, v, k) = sub_kind(rt, sub);
            let mut e = json!({
                "name": format!("{}/{}", rt.resource, sub),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": k,
                "verbs": sub_verbs(sub),
            });
            if *sub == "scale" {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            list.push(e);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
}

fn aggregated_version(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for rt in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let subs: Vec<Value> = rt
            .subresources
            .iter()
            .map(|sub| {
                let (g, v, k) = sub_kind(rt, sub);
                json!({"subresource": sub, "responseKind": {"group": g, "version": v, "kind": k}, "verbs": sub_verbs(sub)})
            })
            .collect();
        let mut e = json!({
            "resource": rt.resource,
            "singularResource": rt.singular,
            "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
            "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "verbs": verbs(),
        });
        if !rt.short_names.is_empty() {
            e["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            e["categories"] = json!(rt.categories);
        }
        if !subs.is_empty() {
            e["subresources"] = Value::Array(subs);
        }
        resources.push(e);
    }
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

fn aggregated(core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![json!({"metadata": {"creationTimestamp": null}, "versions": [aggregated_version("", "v1")]})]
    } else {
        groups()
            .into_iter()
            .map(|(g, vs)| {
                json!({
                    "metadata": {"name": g, "creationTimestamp": null},
                    "versions": vs.iter().map(|v| aggregated_version(g, v)).collect::<Vec<_>>(),
                })
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn api_group(g: &str, vs: &[&str]) -> Value {
    let versions: Vec<Value> = vs
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": g, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

fn wants_aggregated(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()) else {
        return false;
    };
    accept.split(',').any(|range| {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        params.contains(&"as=APIGroupDiscoveryList")
            && params.contains(&"v=v2")
            && params.contains(&"g=apidiscovery.k8s.io")
    })
}

fn aggregated_response(v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (StatusCode::OK, [(header::CONTENT_TYPE, AGGREGATED_CT)], body).into_response()
}

fn text(s: &'static str) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        s,
    )
        .into_response()
}

/// Answers non-resource paths; `None` for resource paths.
pub(super) fn serve(
    _server: &ApiServer,
    method: &Method,
    seg: &[&str],
    headers: &HeaderMap,
    _query: &HashMap<String, String>,
) -> Option<Response> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    let resp = match seg {
        ["version"] => value_response(
            StatusCode::OK,
            &json!({
                "major": "1",
                "minor": "37",
                "emulationMajor": "1",
                "emulationMinor": "37",
                "minCompatibilityMajor": "1",
                "minCompatibilityMinor": "36",
                "gitVersion": "v1.37.2-insitu-sim",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2025-12-17T00:00:00Z",
                "goVersion": "go1.26.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }),
        ),
        ["healthz" | "readyz" | "livez", ..] => text("ok"),
        ["api"] => {
            if wants_aggregated(headers) {
                aggregated_response(&aggregated(true))
            } else {
                value_response(
                    StatusCode::OK,
                    &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
                )
            }
        }
        ["apis"] => {
            if wants_aggregated(headers) {
                aggregated_response(&aggregated(false))
            } else {
                let groups: Vec<Value> = groups().iter().map(|(g, vs)| api_group(g, vs)).collect();
                value_response(
                    StatusCode::OK,
                    &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
                )
            }
        }
        ["api", "v1"] => value_response(StatusCode::OK, &legacy_resources("", "v1")),
        ["apis", g] => match groups().get(g) {
            Some(vs) => {
                let mut v = api_group(g, vs);
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                value_response(StatusCode::OK, &v)
            }
            None => ApiError::no_route().into_response(),
        },
        ["apis", g, v] => {
            if groups().get(g).is_some_and(|vs| vs.contains(v)) {
                value_response(StatusCode::OK, &legacy_resources(g, v))
            } else {
                ApiError::no_route().into_response()
            }
        }
        ["openapi", "v2"] => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, OPENAPI_V2_CT)],
            Vec::<u8>::new(),
        )
            .into_response(),
        ["openapi", "v3", rest @ ..] => super::openapi::serve(rest),
        _ => return None,
    };
    Some(resp)
}
