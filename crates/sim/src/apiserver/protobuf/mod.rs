//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), which kubectl's typed clients send for
//! `kubectl create namespace|configmap`, `kubectl run`: Kubernetes' envelope (`k8s\0` then a `runtime.Unknown`
//! holding typeMeta and the object's message) is decoded with k8s-pb's prost types and turned into the JSON
//! object the store keeps, as kube-apiserver decodes the message into its Go type and serves that as JSON.
//!
//! Why k8s-pb's prost types and a table, not k8s-openapi: k8s-pb 0.9 has no serde or JSON mapping, only prost
//! messages with snake_case Rust names; the JSON names and Go zero-value rules come from the Go API types' tags
//! (joined on the protobuf tag number by `scripts/gen-protobuf-fields.py` into `gen_*.rs`). The tables' `msg!`
//! destructures every prost field, so a k8s-pb upgrade that adds a field fails to compile until it is generated.
//! Responses stay JSON (the sim encodes no protobuf): kubectl accepts both; a client accepting only protobuf gets
//! kube-apiserver's 406 (see [`check_accept`]).

mod gen_apps;
mod gen_coordination;
mod gen_core_container;
mod gen_core_node;
mod gen_core_pod;
mod gen_core_volume;
mod gen_events;
mod gen_meta;
pub(crate) mod json;

use axum::http::{HeaderMap, header};
use prost::Message;
use serde_json::{Value, json};

use super::errors::{ApiError, ApiResult};
use json::{ToJson, apps, coordination, core, events, meta};
use k8s_pb::apimachinery::pkg::runtime::Unknown;

/// Kubernetes' protobuf media type.
pub(super) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The 4-byte prefix of every protobuf-encoded object.
const MAGIC: &[u8] = b"k8s\0";

/// The media types the simulated apiserver serves responses in.
const SERVED: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

/// Whether a `Content-Type` is Kubernetes' protobuf.
pub(super) fn is_protobuf(content_type: &str) -> bool {
    content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with(MEDIA_TYPE)
}

/// Decodes a protobuf body into the JSON object (with `apiVersion` and `kind` from its typeMeta).
pub(super) fn decode(body: &[u8]) -> ApiResult<Value> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return Err(ApiError::bad_request(
            "the protobuf body does not start with the \"k8s\\x00\" prefix",
        ));
    };
    let unknown = Unknown::decode(rest)
        .map_err(|e| ApiError::bad_request(format!("unable to decode the protobuf envelope: {e}")))?;
    if let Some(enc) = unknown.content_encoding.as_deref().filter(|e| !e.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "unsupported protobuf content encoding {enc:?}"
        )));
    }
    let tm = unknown.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let obj = decode_kind(&api_version, &kind, &raw)?;
    let mut obj = match obj {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

fn decode_kind(api_version: &str, kind: &str, raw: &[u8]) -> ApiResult<Value> {
    fn one<M: Message + Default + ToJson>(kind: &str, raw: &[u8]) -> ApiResult<Value> {
        let m = M::decode(raw)
            .map_err(|e| ApiError::bad_request(format!("unable to decode the protobuf {kind}: {e}")))?;
        Ok(m.to_json().unwrap_or_else(|| json!({})))
    }
    match (api_version, kind) {
        ("v1", "Pod") => one::<core::Pod>(kind, raw),
        ("v1", "Namespace") => one::<core::Namespace>(kind, raw),
        ("v1", "ConfigMap") => one::<core::ConfigMap>(kind, raw),
        ("v1", "Secret") => one::<core::Secret>(kind, raw),
        ("v1", "Node") => one::<core::Node>(kind, raw),
        ("v1", "Event") => one::<core::Event>(kind, raw),
        ("v1", "PersistentVolumeClaim") => one::<core::PersistentVolumeClaim>(kind, raw),
        ("apps/v1", "ControllerRevision") => one::<apps::ControllerRevision>(kind, raw),
        ("coordination.k8s.io/v1", "Lease") => one::<coordination::Lease>(kind, raw),
        ("events.k8s.io/v1", "Event") => one::<events::Event>(kind, raw),
        // A typed client's DELETE body, in whichever group-version the client was built for.
        (_, "DeleteOptions") => one::<meta::DeleteOptions>(kind, raw),
        _ => Err(undecodable(api_version, kind)),
    }
}

/// The 415 for a kind the sim has no protobuf table for (custom resources never accept protobuf, as on a real
/// apiserver): it names the kind and the media types to send instead.
pub(super) fn undecodable(api_version: &str, kind: &str) -> ApiError {
    let what = if kind.is_empty() {
        "this object".to_string()
    } else {
        format!("{kind} ({api_version})")
    };
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (the simulated apiserver decodes protobuf only for Pod, Namespace, ConfigMap, Secret, Node, Event, PersistentVolumeClaim, ControllerRevision and Lease; send {what} as JSON or YAML, e.g. `kubectl apply -f`)"
        ),
    )
}

/// kube-apiserver's 406 when no media type of `Accept` can be served: the sim writes JSON (and YAML, watch
/// streams), never protobuf, so a client that accepts only protobuf (or CBOR) is refused as a real apiserver
/// refuses an unsupported type. A missing `Accept`, `*/*` or any JSON type is fine.
pub(super) fn check_accept(headers: &HeaderMap) -> ApiResult<()> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()) else {
        return Ok(());
    };
    let only_binary = accept
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .fold(None, |acc, r| {
            let binary = r.starts_with(MEDIA_TYPE) || r.starts_with("application/cbor");
            Some(acc.unwrap_or(true) && binary)
        });
    if only_binary == Some(true) {
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: {}",
                SERVED.join(", ")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
