//! The conversion webhook's answer: a `ConversionReview` of CloneSets and Advanced StatefulSets (both CRDs name
//! the same webhook), each object converted by its kind's conversion (`crate::conversion`,
//! `crate::statefulset::conversion`) in bounded memory.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::conversion::ConversionError;
use crate::jsondepth;

/// Converts a CloneSet or an Advanced StatefulSet (by its `kind`: `StatefulSet` goes to
/// `crate::statefulset::conversion`, anything else is taken for a CloneSet) to `desired_api_version`: what the
/// conversion webhook does for each object, since both CRDs name the same webhook.
pub fn convert_kind(obj: &Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    if obj.get("kind").and_then(Value::as_str) == Some(crate::statefulset::defaults::KIND) {
        crate::statefulset::conversion::convert(obj, desired_api_version)
    } else {
        crate::conversion::convert(obj, desired_api_version)
    }
}

/// Answers an `apiextensions.k8s.io/v1` `ConversionReview` (what the apiserver POSTs to the conversion webhook):
/// every object converted to `request.desiredAPIVersion`, or a `Failure` result naming the object and the fix.
/// The same as [`review_json`], on a parsed body.
pub fn review(body: &Value) -> Value {
    let text = serde_json::to_vec(body).unwrap_or_default();
    match review_json(&text) {
        Ok(out) => serde_json::from_slice(&out).unwrap_or(Value::Null),
        Err(message) => {
            let mut out = review_head(body.get("apiVersion").and_then(Value::as_str), None);
            failure_tail(&mut out, &message);
            serde_json::from_slice(&out).unwrap_or(Value::Null)
        }
    }
}

/// A ConversionReview as read by [`review_json`]: the objects stay unparsed slices of the body.
#[derive(serde::Deserialize)]
struct ReviewIn<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(serde::Deserialize)]
struct RequestIn<'a> {
    #[serde(default, borrow)]
    uid: Option<&'a RawValue>,
    #[serde(rename = "desiredAPIVersion", default, borrow)]
    desired: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    objects: Option<Vec<&'a RawValue>>,
}

/// Answers a ConversionReview given as JSON bytes, with the answer as JSON bytes, in bounded memory: the
/// objects are located in the body without being parsed (a slice each), then parsed, converted and written
/// out one at a time, so at any moment the body, the answer written so far and one object are held. A whole
/// parsed review of 80,000 small CloneSets took ~50 times the body's size.
///
/// Objects nest up to [`jsondepth::MAX_DEPTH`] levels as in Kubernetes; a deep object needs a thread with a
/// [`jsondepth::DEEP_STACK`]. `Err` when the body is not a ConversionReview at all (the server answers 400).
pub fn review_json(body: &[u8]) -> Result<Vec<u8>, String> {
    let review: ReviewIn<'_> =
        serde_json::from_slice(body).map_err(|e| format!("the body is not a ConversionReview: {e}"))?;
    let uid = review.request.as_ref().and_then(|r| r.uid);
    let mut out = review_head(review.api_version.as_deref(), uid);
    let head = out.len();
    // The answer is about as large as the body (v1beta1 spells the update strategy ~20% longer): sized up
    // front, then grown in steps, never doubled (a doubling holds the old and the new buffer at once).
    out.reserve_exact(body.len() + body.len() / 4);
    match convert_objects(review.request.as_ref(), &mut out) {
        Ok(()) => out.extend_from_slice(br#"],"result":{"status":"Success"}}}"#),
        Err(message) => {
            out.truncate(head);
            out.shrink_to_fit();
            failure_tail(&mut out, &message);
        }
    }
    Ok(out)
}

/// `{"apiVersion":…,"kind":"ConversionReview","response":{"uid":…,"convertedObjects":[`
fn review_head(api_version: Option<&str>, uid: Option<&RawValue>) -> Vec<u8> {
    let api_version = api_version.unwrap_or("apiextensions.k8s.io/v1");
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(br#"{"apiVersion":"#);
    write_json(&mut out, &api_version);
    out.extend_from_slice(br#","kind":"ConversionReview","response":{"uid":"#);
    out.extend_from_slice(uid.map_or("\"\"", RawValue::get).as_bytes());
    out.extend_from_slice(br#","convertedObjects":["#);
    out
}

fn failure_tail(out: &mut Vec<u8>, message: &str) {
    out.extend_from_slice(br#"],"result":{"status":"Failure","message":"#);
    write_json(out, &message);
    out.extend_from_slice(b"}}}");
}

fn write_json(out: &mut Vec<u8>, v: &impl serde::Serialize) {
    // Writing JSON into a Vec fails only for values that are not JSON (map keys that are not strings).
    if serde_json::to_writer(&mut *out, v).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// Converts and writes each object of `request` (comma-separated) into `out`; the first failure stops it.
fn convert_objects(request: Option<&RequestIn<'_>>, out: &mut Vec<u8>) -> Result<(), String> {
    let request = request.ok_or("the ConversionReview has no request")?;
    let desired = request
        .desired
        .as_deref()
        .ok_or("the ConversionReview request has no desiredAPIVersion")?;
    for (i, raw) in request.objects.iter().flatten().enumerate() {
        let failed = |e: &dyn std::fmt::Display| format!("CloneSet {}: {e}", object_name(raw));
        let obj: Value = jsondepth::from_slice(raw.get().as_bytes()).map_err(|e| failed(&e))?;
        let converted = convert_kind(&obj, desired).map_err(|e| {
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("CloneSet");
            format!("{kind} {}: {e}", object_name(raw))
        })?;
        drop(obj);
        if out.capacity() - out.len() < 2 * raw.get().len() + 1 {
            out.reserve_exact((out.capacity() / 8).max(2 * raw.get().len() + 1));
        }
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, &converted).map_err(|e| failed(&e))?;
    }
    Ok(())
}

/// `metadata.name` of an unparsed object, or `?` (read without parsing the rest, so any depth).
fn object_name(raw: &RawValue) -> String {
    #[derive(serde::Deserialize)]
    struct Named {
        metadata: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: Option<String>,
    }
    serde_json::from_str::<Named>(raw.get())
        .ok()
        .and_then(|n| n.metadata?.name)
        .unwrap_or_else(|| "?".to_string())
}
