//! `fieldValidation` (Strict/Warn/Ignore) and the decoding checks behind it, as kube-apiserver does them:
//! unknown fields found by the CloneSet's structural schema (the CRD handler's pruning) or by decoding a built-in
//! kind into its typed form (the strict JSON decoder), duplicate fields of the body or patch document, type
//! errors (CloneSet: 422 `FieldValueTypeInvalid`; built-ins: 400 `<Kind> in version "v1" cannot be handled as a
//! <Kind>`), `Warning` headers for Warn. No parameter means Warn (the apiserver's `fieldValidation("")`), for
//! every client: kubectl sends Strict, in-process controllers send nothing and get warnings.
//!
//! Under every directive an unknown field of a built-in kind is dropped from what is stored, as kube-apiserver
//! loses it decoding into its Go type: the fields known are k8s-openapi's (v1_35) plus [`NEWER_FIELDS`].

use std::fmt::Write as _;
use std::sync::Mutex;

use axum::response::Response;
use serde_json::{Value, json};

use super::ApiRequest;
use super::dryrun;
use super::duplicates::{self, push_key};
use super::errors::{ApiError, ApiResult, FieldErr, quote};
use super::resources::ResourceType;
use super::structural;

/// The `fieldValidation` directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Directive {
    Ignore,
    Warn,
    Strict,
}

/// One write's field validation: its directive and the warnings it collected.
pub(super) struct FieldCheck {
    directive: Directive,
    /// The strict decoder's messages for the fields the body or patch repeats (`duplicate field "a"`).
    duplicates: Vec<String>,
    /// A JSON create or update body, parsed by the duplicate scan ([`FieldCheck::take_body`]).
    body: Mutex<Option<Value>>,
    /// That body's bytes, walked again for the order of a built-in kind's strict-decoding messages.
    raw: Option<bytes::Bytes>,
    warnings: Mutex<Vec<String>>,
    /// The unknown fields dropped from built-in kinds' objects (for [`super::ApiStats::pruned`]).
    pruned: Mutex<Vec<String>>,
}

/// Where the checked object came from: the error shapes differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// A create or update body: 400 BadRequest.
    Body,
    /// The result of a patch: 422 `patch: Invalid value: "<object>"`.
    Patch,
}

impl FieldCheck {
    /// From the request's `fieldValidation` parameter; an unknown value is `ValidateFieldValidation`'s 422.
    pub(super) fn from_request(req: &ApiRequest) -> ApiResult<Self> {
        let raw = req.q("fieldValidation").unwrap_or("");
        let directive = match raw {
            "" | "Warn" => Directive::Warn,
            "Ignore" => Directive::Ignore,
            "Strict" => Directive::Strict,
            other => {
                let message = format!(
                    "fieldValidation: Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    quote(other)
                );
                return Err(dryrun::options_invalid(
                    dryrun::options_kind(&req.method),
                    "fieldValidation",
                    "FieldValueNotSupported",
                    &message,
                ));
            }
        };
        // Protobuf has no strict decoding: kube-apiserver's strict serializer for it is the plain one, so
        // unknown and duplicate fields cannot be reported (prost skips unknown tags, as Go's decoder does).
        let protobuf = super::protobuf::is_protobuf(req.content_type());
        let directive = if protobuf { Directive::Ignore } else { directive };
        let (duplicates, body) = if directive == Directive::Ignore {
            (Vec::new(), None)
        } else {
            duplicates::scan_request(&req.method, req.content_type(), &req.body)
        };
        let raw = body.is_some().then(|| req.body.clone());
        Ok(Self {
            directive,
            duplicates,
            raw,
            body: Mutex::new(body),
            warnings: Mutex::new(Vec::new()),
            pruned: Mutex::new(Vec::new()),
        })
    }

    /// Checks `obj` (in the version `view` serves, before pruning or conversion): type errors always fail,
    /// unknown fields fail under Strict, become warnings under Warn; those of a built-in kind are then removed
    /// from `obj` (the CloneSet's are pruned by its structural schema when stored).
    pub(super) fn check(&self, view: &ResourceType, obj: &mut Value, source: Source) -> ApiResult<()> {
        let typed = self.check_fields(view, obj, source)?;
        if let Some(typed) = typed {
            let mut pruned = Vec::new();
            prune(view, obj, &typed, &mut String::new(), &mut pruned);
            let tagged = pruned.into_iter().map(|p| format!("{} {p}", view.qualified()));
            lock(&self.pruned).extend(tagged);
        }
        Ok(())
    }

    /// The request body as the duplicate scan parsed it (once; `None` if it did not, or it was taken).
    pub(super) fn take_body(&self) -> Option<Value> {
        lock(&self.body).take()
    }

    /// Whether the request's JSON body repeats a field (found by the duplicate scan; not looked for under
    /// `fieldValidation=Ignore`).
    pub(super) fn repeats_fields(&self) -> bool {
        !self.duplicates.is_empty()
    }

    /// The unknown fields this request's objects lost (`<resource> <field path>`).
    pub(super) fn pruned(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.pruned))
    }

    /// [`FieldCheck::check`] without the pruning; returns a built-in object's typed round trip.
    fn check_fields(&self, view: &ResourceType, obj: &Value, source: Source) -> ApiResult<Option<Value>> {
        let mut unknown = Vec::new();
        let mut typed_out = None;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if view.is_kruise_workload() {
            let schema = structural::schema(view.kind, &view.api_version());
            let mut errs = Vec::new();
            walk_schema(obj, schema, "", &mut unknown, &mut errs);
            if !errs.is_empty() {
                return Err(ApiError::invalid(view, name, &errs));
            }
        } else {
            if view.is_secret()
                && let Some(why) = super::secrets::base64_error(obj)
            {
                return Err(decode_message(view, obj, source, &why));
            }
            // The typed decode alone says whether the decoder ignored anything; only then is the object encoded
            // back and compared to name (and later prune) the fields it lost. Nearly every write ignores nothing.
            let ignored = match typed_decode(view, obj) {
                None if self.duplicates.is_empty() => return Ok(None),
                None => false,
                Some(Ok(ignored)) => ignored,
                Some(Err(e)) => return Err(decode_error(view, obj, source, &e)),
            };
            match ignored.then(|| typed_roundtrip(view, obj)).flatten() {
                None => {}
                Some(Ok(typed)) => {
                    dropped(obj, Some(&typed), &mut String::new(), &mut unknown);
                    unknown.retain(|f| !is_newer_field(view, f));
                    typed_out = Some(typed);
                }
                Some(Err(e)) => return Err(decode_error(view, obj, source, &e)),
            }
        }
        if view.is_kruise_workload() || view.resource != "customresourcedefinitions" {
            metadata_unknown(obj, &mut unknown);
        }
        let duplicated = &self.duplicates;
        if (unknown.is_empty() && duplicated.is_empty()) || self.directive == Directive::Ignore {
            return Ok(typed_out);
        }
        unknown.sort();
        unknown.dedup();
        // sigs.k8s.io/json keeps the first 100 strict errors (`saveStrictError`): a built-in kind's duplicates
        // and unknown fields together; a custom resource's decoder only finds duplicates, and the CRD handler
        // adds every field its pruning dropped (apiextensions-apiserver `schemaCoercingDecoder.Decode`).
        const DECODER_STRICT_ERRORS: usize = 100;
        let unknown_cap = if view.is_kruise_workload() {
            usize::MAX
        } else {
            DECODER_STRICT_ERRORS.saturating_sub(duplicated.len().min(DECODER_STRICT_ERRORS))
        };
        let walked = match (view.is_cloneset(), source, &self.raw) {
            (false, Source::Body, Some(raw)) => duplicates::key_order(raw),
            _ => None,
        };
        let msgs: Vec<String> = match walked {
            Some(keys) => in_document_order(&keys, &unknown, DECODER_STRICT_ERRORS),
            None => duplicated
                .iter()
                .take(DECODER_STRICT_ERRORS)
                .cloned()
                .chain(
                    unknown
                        .iter()
                        .take(unknown_cap)
                        .map(|f| format!("unknown field {}", quote(f))),
                )
                .collect(),
        };
        if self.directive == Directive::Warn {
            lock(&self.warnings).extend(msgs);
            return Ok(typed_out);
        }
        let strict = format!("strict decoding error: {}", msgs.join(", "));
        Err(match source {
            Source::Body => ApiError::bad_request(format!(
                "{} in version {} cannot be handled as a {}: {strict}",
                view.kind,
                quote(view.version),
                view.kind
            )),
            Source::Patch => patch_invalid(obj, &strict),
        })
    }

    /// Records warnings from admission (the defaulting webhook's, `insitu_api::defaults::warnings`).
    pub(super) fn warn(&self, msgs: Vec<String>) {
        lock(&self.warnings).extend(msgs);
    }

    /// Adds the collected warnings to a response as kube-apiserver's warning recorder writes them
    /// ([`super::warnings::Recorder`]: de-duplicated, bounded, truncated).
    pub(super) fn finish(&self, mut resp: Response) -> Response {
        let warnings = std::mem::take(&mut *lock(&self.warnings));
        let mut recorder = super::warnings::Recorder::default();
        for w in &warnings {
            recorder.add(w);
        }
        recorder.write(resp.headers_mut());
        resp
    }
}

/// The 422 a patch whose result does not decode gets: `"" is invalid: patch: Invalid value: "<object>": <why>`.
pub(super) fn patch_invalid(obj: &Value, why: &str) -> ApiError {
    let rendered = quote(&obj.to_string());
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("\"\" is invalid: patch: Invalid value: {rendered}: {why}"),
        details: Some(json!({"causes": [{
            "reason": "FieldValueInvalid",
            "message": format!("Invalid value: {rendered}: {why}"),
            "field": "patch",
        }]})),
    }
}

fn decode_error(view: &ResourceType, obj: &Value, source: Source, e: &serde_json::Error) -> ApiError {
    decode_message(view, obj, source, &e.to_string())
}

fn decode_message(view: &ResourceType, obj: &Value, source: Source, e: &str) -> ApiError {
    let why = format!(
        "{} in version {} cannot be handled as a {}: {e}",
        view.kind,
        quote(view.version),
        view.kind
    );
    match source {
        Source::Body => ApiError::bad_request(why),
        Source::Patch => patch_invalid(obj, e),
    }
}

/// Calls `$f::<T>($obj)` with `T` the k8s-openapi type of a built-in kind; `None` for a kind without one.
macro_rules! with_typed {
    ($view:expr, $f:ident, $obj:expr) => {{
        use k8s_openapi::api::{admissionregistration, apps, coordination, core, events};
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
        Some(match ($view.group, $view.resource) {
            ("", "pods") => $f::<core::v1::Pod>($obj),
            ("", "namespaces") => $f::<core::v1::Namespace>($obj),
            ("", "nodes") => $f::<core::v1::Node>($obj),
            ("", "events") => $f::<core::v1::Event>($obj),
            ("", "persistentvolumeclaims") => $f::<core::v1::PersistentVolumeClaim>($obj),
            ("", "configmaps") => $f::<core::v1::ConfigMap>($obj),
            ("", "secrets") => $f::<core::v1::Secret>($obj),
            ("events.k8s.io", "events") => $f::<events::v1::Event>($obj),
            ("apps", "controllerrevisions") => $f::<apps::v1::ControllerRevision>($obj),
            ("coordination.k8s.io", "leases") => $f::<coordination::v1::Lease>($obj),
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
                $f::<admissionregistration::v1::MutatingWebhookConfiguration>($obj)
            }
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
                $f::<admissionregistration::v1::ValidatingWebhookConfiguration>($obj)
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                $f::<apiext::CustomResourceDefinition>($obj)
            }
            _ => return None,
        })
    }};
}

/// Decodes a built-in kind into its k8s-openapi type (the strict decoder's type errors): `Ok(true)` when the
/// decoder ignored a field (an unknown field, or a null one), `None` for a kind without a typed form.
fn typed_decode(view: &ResourceType, obj: &Value) -> Option<Result<bool, serde_json::Error>> {
    fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> Result<bool, serde_json::Error> {
        let mut ignored = false;
        let _: T = serde_ignored::deserialize(v, |_| ignored = true)?;
        Ok(ignored)
    }
    with_typed!(view, decode, obj)
}

/// Decodes a built-in kind into its k8s-openapi type and encodes it back (`None`: a kind without a typed form).
fn typed_roundtrip(view: &ResourceType, obj: &Value) -> Option<Result<Value, serde_json::Error>> {
    fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Result<Value, serde_json::Error> {
        // From a borrowed `Value`: no deep copy of the object before decoding it.
        let typed = T::deserialize(v)?;
        serde_json::to_value(typed)
    }
    with_typed!(view, rt, obj)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Paths present (non-null) in `input` but gone from its typed round trip: the fields the typed decoder ignored.
/// `path` is a scratch buffer (restored on return), so only a dropped field's path is allocated: this runs on
/// every built-in write.
fn dropped(input: &Value, output: Option<&Value>, path: &mut String, out: &mut Vec<String>) {
    let base = path.len();
    match input {
        Value::Object(m) => {
            for (k, v) in m {
                if v.is_null() || (base == 0 && matches!(k.as_str(), "apiVersion" | "kind")) {
                    continue;
                }
                push_key(path, k);
                match output.and_then(|o| o.get(k)) {
                    None if output.is_some_and(Value::is_object) => out.push(path.clone()),
                    None => {}
                    Some(o) => dropped(v, Some(o), path, out),
                }
                path.truncate(base);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let _ = write!(path, "[{i}]");
                dropped(v, output.and_then(|o| o.get(i)), path, out);
                path.truncate(base);
            }
        }
        _ => {}
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fields kube-apiserver v1.37's Go types have that k8s-openapi's v1_35 types lack, by (group, resource) and
/// path with list indices removed: neither reported nor pruned. Empty while nothing the sim serves, the
/// controller or kubectl writes needs one (checked by `ApiStats::pruned` staying empty over the rollout and
/// resize suites).
pub(super) const NEWER_FIELDS: &[(&str, &str, &str)] = &[];

/// `spec.containers[0].x` → `spec.containers.x`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut skipping = false;
    for c in path.chars() {
        match c {
            '[' => skipping = true,
            ']' => skipping = false,
            c if !skipping => out.push(c),
            _ => {}
        }
    }
    out
}

fn is_newer_field(view: &ResourceType, path: &str) -> bool {
    let bare = without_indices(path);
    NEWER_FIELDS
        .iter()
        .any(|(g, r, p)| *g == view.group && *r == view.resource && *p == bare)
}

/// Removes from `input` what its typed round trip `output` lost (the Go decoder's pruning), except
/// [`NEWER_FIELDS`]; nulls stay (the store's null handling is per kind). Records each removed path. `path` is a
/// scratch buffer restored on return: a path is built only for a field that is looked up or removed.
fn prune(view: &ResourceType, input: &mut Value, output: &Value, path: &mut String, out: &mut Vec<String>) {
    let base = path.len();
    match (input, output) {
        (Value::Object(m), Value::Object(o)) => {
            m.retain(|k, v| {
                if v.is_null()
                    || (base == 0 && matches!(k.as_str(), "apiVersion" | "kind"))
                    || o.contains_key(k)
                {
                    return true;
                }
                push_key(path, k);
                let keep = is_newer_field(view, path);
                if !keep {
                    out.push(path.clone());
                }
                path.truncate(base);
                keep
            });
            for (k, v) in m.iter_mut() {
                if let Some(o) = o.get(k)
                    && (v.is_object() || v.is_array())
                {
                    push_key(path, k);
                    prune(view, v, o, path, out);
                    path.truncate(base);
                }
            }
        }
        (Value::Array(items), Value::Array(o)) => {
            for (i, (v, o)) in items.iter_mut().zip(o).enumerate() {
                if v.is_object() || v.is_array() {
                    let _ = write!(path, "[{i}]");
                    prune(view, v, o, path, out);
                    path.truncate(base);
                }
            }
        }
        _ => {}
    }
}

/// ObjectMeta's fields (unknown ones under `metadata` are reported for every kind, as `objectmeta.Coerce` and
/// the typed decoder do).
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn metadata_unknown(obj: &Value, out: &mut Vec<String>) {
    if let Some(m) = obj.get("metadata").and_then(Value::as_object) {
        for (k, v) in m {
            if !v.is_null() && !OBJECT_META_FIELDS.contains(&k.as_str()) {
                out.push(format!("metadata.{k}"));
            }
        }
    }
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// JSON type name as go-openapi reports it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(v: &Value, schema: &Value) -> bool {
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        return matches!(type_name(v), "integer" | "string");
    }
    let Some(want) = schema.get("type").and_then(Value::as_str) else {
        return true;
    };
    // Nulls are dropped (or kept, if nullable) by the structural pass, never a type error.
    match (want, type_name(v)) {
        (_, "null") => true,
        ("number", "integer") => true,
        (w, got) => w == got,
    }
}

/// A built-in kind's strict-decoding messages as sigs.k8s.io/json saves them: one per repeated key and per unknown
/// field, in the order the decoder meets them in the body (`keys`), the first `cap`. Unknown fields the walk did
/// not meet (inside a repeated key's value) follow, sorted.
fn in_document_order(keys: &[duplicates::Key], unknown: &[String], cap: usize) -> Vec<String> {
    let wanted: std::collections::HashSet<&str> = unknown.iter().map(String::as_str).collect();
    let mut said = std::collections::HashSet::new();
    let mut out = Vec::new();
    for key in keys {
        if out.len() >= cap {
            return out;
        }
        if key.repeated {
            out.push(format!("duplicate field {}", quote(&key.path)));
        } else if wanted.contains(key.path.as_str()) && said.insert(key.path.as_str()) {
            out.push(format!("unknown field {}", quote(&key.path)));
        }
    }
    let rest = unknown.iter().filter(|u| !said.contains(u.as_str()));
    out.extend(rest.map(|u| format!("unknown field {}", quote(u))));
    out.truncate(cap);
    out
}

/// Walks a CloneSet against its structural schema: unknown fields (what pruning would drop) and type errors
/// (`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`).
fn walk_schema(v: &Value, schema: &Value, path: &str, unknown: &mut Vec<String>, errs: &mut Vec<FieldErr>) {
    if !path.is_empty() && !type_ok(v, schema) {
        let want = schema.get("type").and_then(Value::as_str).unwrap_or("string");
        let got = type_name(v);
        errs.push(FieldErr {
            field: path.to_string(),
            reason: "FieldValueTypeInvalid",
            message: format!(
                "{path}: Invalid value: {}: {path} in body must be of type {want}: {}",
                quote(got),
                quote(got)
            ),
        });
        return;
    }
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let p = join(path, k);
                match (props.and_then(|ps| ps.get(k)), additional) {
                    (Some(sub), _) => walk_schema(child, sub, &p, unknown, errs),
                    (None, Some(add)) => walk_schema(child, add, &p, unknown, errs),
                    (None, None) if props.is_some() && !preserves(schema) && !child.is_null() => {
                        unknown.push(p)
                    }
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk_schema(item, item_schema, &format!("{path}[{i}]"), unknown, errs);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_roundtrip_finds_dropped_fields() {
        let input = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "imagee": "y"}], "nodeSelecter": {}}});
        let rt = resources_pods();
        let out = typed_roundtrip(rt, &input).and_then(Result::ok);
        let mut unknown = Vec::new();
        dropped(&input, out.as_ref(), &mut String::new(), &mut unknown);
        unknown.sort();
        assert_eq!(unknown, vec!["spec.containers[0].imagee", "spec.nodeSelecter"]);
    }

    #[test]
    fn typed_decode_says_whether_anything_was_ignored() {
        let rt = resources_pods();
        let clean = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(!typed_decode(rt, &clean).and_then(Result::ok).unwrap_or(true));
        for (path, v) in [
            ("/spec/containers/0/imagee", json!("y")),
            ("/status/nodeNam", json!(null)),
        ] {
            let mut dirty = clean.clone();
            let (parent, key) = path.rsplit_once('/').unwrap_or_default();
            if let Some(m) = dirty.pointer_mut(parent).and_then(Value::as_object_mut) {
                m.insert(key.to_string(), v);
            }
            assert_eq!(
                typed_decode(rt, &dirty).and_then(Result::ok),
                Some(true),
                "{path}"
            );
        }
        let wrong = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": 1}]}});
        assert!(typed_decode(rt, &wrong).is_some_and(|r| r.is_err()));
        assert!(typed_decode(resources_clonesets(), &clean).is_none());
    }

    #[test]
    fn warned_fields_are_pruned_and_clean_writes_untouched() {
        let rt = resources_pods();
        let check = FieldCheck {
            directive: Directive::Warn,
            duplicates: Vec::new(),
            body: Mutex::new(None),
            raw: None,
            warnings: Mutex::new(Vec::new()),
            pruned: Mutex::new(Vec::new()),
        };
        let clean = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let mut obj = clean.clone();
        assert!(check.check(rt, &mut obj, Source::Body).is_ok());
        assert_eq!(obj, clean);
        assert!(check.pruned().is_empty());
        obj["spec"]["containers"][0]["imagee"] = json!("y");
        obj["spec"]["nodeSelecter"] = json!({});
        assert!(check.check(rt, &mut obj, Source::Body).is_ok());
        assert_eq!(obj, clean);
        assert_eq!(
            check.pruned(),
            vec!["pods spec.nodeSelecter", "pods spec.containers[0].imagee"]
        );
    }

    fn resources_clonesets() -> &'static ResourceType {
        super::super::resources::RESOURCES
            .iter()
            .find(|r| r.is_cloneset())
            .unwrap_or(&super::super::resources::RESOURCES[0])
    }

    fn resources_pods() -> &'static ResourceType {
        super::super::resources::find("", "v1", "pods").unwrap_or(&super::super::resources::RESOURCES[1])
    }
}
