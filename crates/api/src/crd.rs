//! CRD generation: the CloneSet CustomResourceDefinition (v1alpha1 and v1beta1, storage v1beta1) as YAML.
//!
//! On top of what the types derive, [`crd`] post-processes the `.spec` schema:
//!
//! - **Template schema.** Kruise's CRD stores `template` and `volumeClaimTemplates` schemaless
//!   (`x-kubernetes-preserve-unknown-fields`). CEL cannot read unknown fields, so the few fields the validation
//!   rules need are declared (template labels, restartPolicy, activeDeadlineSeconds, ephemeralContainers,
//!   container name/image/restartPolicy/ports/probe and hook handler kinds, volume names, VCT names), each
//!   object still preserving unknown fields: nothing is pruned, and server-side apply still treats these lists
//!   as atomic, as before. Declared fields get type checks (e.g. a non-string label value is rejected, as the
//!   Go types in Kruise's webhook would).
//! - **Bounds.** Lists, maps and strings that CEL rules iterate get `maxItems`/`maxProperties`/`maxLength` so the
//!   apiserver's static cost estimate fits its budget. Where Kubernetes itself limits a value (label values 63,
//!   DNS labels 63, pod names 253) the bound is that limit; counts are above anything a real CloneSet uses,
//!   except `podsToDelete`, capped at 256 names per edit (its uniqueness rule is quadratic).
//! - **Defaults** (Kruise's mutating webhook: `apis/apps/defaults/v1alpha1.go`, `SetDefaultsCloneSet`) that
//!   are static: `replicas: 1`, `revisionHistoryLimit: 10`, `updateStrategy: {}` and inside it
//!   `type: ReCreate`, `partition: 0`, `maxUnavailable: "20%"`, `maxSurge: 0`. They only fill absent fields,
//!   never `template`, so revision hashes (computed from the template alone) are unaffected, and they equal
//!   the values the code assumes for absent fields (`CloneSetSpec::replicas()` etc.), so an object reads the
//!   same with or without them.
//!   Not expressible as CRD defaults, hence left to the controller: `inPlaceUpdateStrategy: {}` for in-place
//!   types (conditional; the controller treats absent as zero grace) and the pod template defaults
//!   (`imagePullPolicy: Always` etc., which must not be written into the CloneSet's template by a CRD).
//! - **CEL rules** (`validation::cel`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::CloneSet;
use crate::validation::cel::{self, Version};

/// Schema for `template`: Kruise stores it schemaless (`x-kubernetes-preserve-unknown-fields`).
/// [`crd`] replaces it with [`template_schema`].
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema for `volumeClaimTemplates`: a list of schemaless objects.
pub fn preserve_unknown_array(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// Bounds on lists/maps/strings that CEL rules read (see the module docs).
pub mod bounds {
    pub const CONTAINERS: u64 = 64;
    pub const PORTS: u64 = 1024;
    pub const VOLUMES: u64 = 256;
    pub const VCTS: u64 = 64;
    pub const SELECTOR_LABELS: u64 = 64;
    pub const SELECTOR_EXPRESSIONS: u64 = 32;
    pub const SELECTOR_VALUES: u64 = 64;
    pub const PODS_TO_DELETE: u64 = 256;
    pub const STRATEGY_TERMS: u64 = 32;
    /// A label key: 253-character prefix, `/`, 63-character name.
    pub const LABEL_KEY: u64 = 317;
    pub const LABEL_VALUE: u64 = 63;
    pub const DNS_LABEL: u64 = 63;
    pub const DNS_SUBDOMAIN: u64 = 253;
    pub const SHORT_STRING: u64 = 64;
}

/// An object whose unknown fields are kept.
fn open_object(properties: Value) -> Value {
    json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": properties })
}

fn opaque() -> Value {
    json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn string(max: u64) -> Value {
    json!({ "type": "string", "maxLength": max })
}

fn int32() -> Value {
    json!({ "type": "integer", "format": "int32" })
}

fn list(max: u64, items: Value) -> Value {
    json!({ "type": "array", "maxItems": max, "items": items })
}

fn handler(kinds: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = kinds.iter().map(|k| (k.to_string(), opaque())).collect();
    open_object(Value::Object(props))
}

fn container_schema() -> Value {
    use bounds::*;
    let probe = handler(&["exec", "httpGet", "tcpSocket", "grpc"]);
    let hook = handler(&["exec", "httpGet", "tcpSocket", "sleep"]);
    let mut port = open_object(json!({
        "containerPort": int32(),
        "hostPort": int32(),
        "protocol": string(SHORT_STRING),
    }));
    port["required"] = json!(["containerPort"]);
    open_object(json!({
        "name": string(DNS_LABEL),
        "image": { "type": "string" },
        "restartPolicy": string(SHORT_STRING),
        "ports": list(PORTS, port),
        "livenessProbe": probe.clone(),
        "readinessProbe": probe.clone(),
        "startupProbe": probe,
        "lifecycle": open_object(json!({ "postStart": hook.clone(), "preStop": hook })),
    }))
}

/// The partial, unknown-preserving schema of `spec.template` (see the module docs).
pub fn template_schema() -> Value {
    use bounds::*;
    let mut schema = open_object(json!({
        "metadata": open_object(json!({
            "labels": {
                "type": "object",
                "additionalProperties": { "type": "string" },
            },
        })),
        "spec": open_object(json!({
            "restartPolicy": string(SHORT_STRING),
            "activeDeadlineSeconds": { "type": "integer", "format": "int64" },
            "containers": list(CONTAINERS, container_schema()),
            "initContainers": list(CONTAINERS, container_schema()),
            "ephemeralContainers": { "type": "array", "items": opaque() },
            "volumes": list(VOLUMES, open_object(json!({ "name": string(DNS_LABEL) }))),
        })),
    }));
    schema["description"] = json!(
        "Pod template. Stored as Kruise does (unknown fields preserved); only the fields validation reads are declared."
    );
    schema
}

/// Sets `key: value` on the schema node at `path` (a `validation::cel` path). Panics on a missing node (a bug).
fn set(spec: &mut Value, path: &str, key: &str, value: Value) {
    let node = cel::node_mut(spec, path).unwrap_or_else(|| panic!("no schema node spec.{path}"));
    node[key] = value;
}

/// Applies the template schema, bounds and defaults of v1alpha1 to a `.spec` schema (as JSON).
pub fn shape_spec_schema(spec: &mut Value) {
    shape_spec_schema_for(spec, Version::V1alpha1);
}

/// Applies the template schema, bounds and defaults of `version` to its `.spec` schema (as JSON).
pub fn shape_spec_schema_for(spec: &mut Value, version: Version) {
    use bounds::*;
    let rp = match version {
        Version::V1alpha1 => "updateStrategy",
        Version::V1beta1 => "updateStrategy.rollingUpdate",
    };
    spec["properties"]["template"] = template_schema();
    set(
        spec,
        "volumeClaimTemplates",
        "items",
        open_object(json!({ "metadata": open_object(json!({ "name": string(DNS_LABEL) })) })),
    );
    let max_items = [
        ("volumeClaimTemplates".to_string(), VCTS),
        ("selector.matchExpressions".into(), SELECTOR_EXPRESSIONS),
        ("selector.matchExpressions[].values".into(), SELECTOR_VALUES),
        ("scaleStrategy.podsToDelete".into(), PODS_TO_DELETE),
        (format!("{rp}.scatterStrategy"), STRATEGY_TERMS),
        (format!("{rp}.priorityStrategy.weightPriority"), STRATEGY_TERMS),
        (format!("{rp}.priorityStrategy.orderPriority"), STRATEGY_TERMS),
        (
            format!("{rp}.priorityStrategy.weightPriority[].matchSelector.matchExpressions"),
            SELECTOR_EXPRESSIONS,
        ),
        (
            format!("{rp}.priorityStrategy.weightPriority[].matchSelector.matchExpressions[].values"),
            SELECTOR_VALUES,
        ),
    ];
    for (path, max) in max_items {
        set(spec, &path, "maxItems", json!(max));
    }
    set(
        spec,
        "selector.matchLabels",
        "maxProperties",
        json!(SELECTOR_LABELS),
    );
    let mut max_len = vec![
        (
            "selector.matchLabels.additionalProperties".to_string(),
            LABEL_VALUE,
        ),
        ("selector.matchExpressions[].key".into(), LABEL_KEY),
        ("selector.matchExpressions[].operator".into(), SHORT_STRING),
        ("selector.matchExpressions[].values[]".into(), LABEL_VALUE),
        ("scaleStrategy.podsToDelete[]".into(), DNS_SUBDOMAIN),
        ("updateStrategy.type".into(), SHORT_STRING),
        (format!("{rp}.partition"), SHORT_STRING),
        (format!("{rp}.maxUnavailable"), SHORT_STRING),
        (format!("{rp}.maxSurge"), SHORT_STRING),
        (format!("{rp}.scatterStrategy[].key"), LABEL_KEY),
        (format!("{rp}.scatterStrategy[].value"), LABEL_VALUE),
        (
            format!("{rp}.priorityStrategy.orderPriority[].orderedKey"),
            LABEL_KEY,
        ),
        (
            format!("{rp}.priorityStrategy.weightPriority[].matchSelector.matchExpressions[].operator"),
            SHORT_STRING,
        ),
    ];
    if version == Version::V1beta1 {
        max_len.push((format!("{rp}.podUpdatePolicy"), SHORT_STRING));
        max_len.push((
            format!("{rp}.inPlaceUpdateStrategy.imagePreDownloadParallelism"),
            SHORT_STRING,
        ));
    }
    for (path, max) in max_len {
        match path.strip_suffix(".additionalProperties") {
            Some(map) => {
                let node = cel::node_mut(spec, map).unwrap_or_else(|| panic!("no schema node spec.{map}"));
                node["additionalProperties"]["maxLength"] = json!(max);
            }
            None => set(spec, &path, "maxLength", json!(max)),
        }
    }
    let defaults: Vec<(String, Value)> = match version {
        Version::V1alpha1 => vec![
            ("replicas".into(), json!(1)),
            ("revisionHistoryLimit".into(), json!(10)),
            ("updateStrategy".into(), json!({})),
            ("updateStrategy.type".into(), json!("ReCreate")),
            ("updateStrategy.partition".into(), json!(0)),
            ("updateStrategy.maxUnavailable".into(), json!("20%")),
            ("updateStrategy.maxSurge".into(), json!(0)),
        ],
        // Kruise's v1beta1 CRD defaults only `enablePVCReuse: false`; its webhook (`SetDefaultsCloneSetV1beta1`)
        // does the rest, of which these are static. `rollingUpdate` itself is created by Kruise only for
        // `RollingUpdate` (not `OnDelete`), which a schema cannot say: its fields are defaulted when it is there.
        Version::V1beta1 => vec![
            ("replicas".into(), json!(1)),
            ("revisionHistoryLimit".into(), json!(10)),
            ("updateStrategy".into(), json!({})),
            ("updateStrategy.type".into(), json!("RollingUpdate")),
            (format!("{rp}.podUpdatePolicy"), json!("ReCreate")),
            (format!("{rp}.partition"), json!(0)),
            (format!("{rp}.maxUnavailable"), json!("20%")),
            (format!("{rp}.maxSurge"), json!(0)),
            ("scaleStrategy.enablePVCReuse".into(), json!(false)),
        ],
    };
    for (path, value) in defaults {
        set(spec, &path, "default", value);
    }
}

/// Where the apiserver reaches the conversion webhook: the in-cluster Service (`deploy/webhook.yaml`) or a URL
/// (an out-of-cluster `insitu run --webhook-url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookTarget {
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    Url(String),
}

/// The Service `deploy/` creates for the webhook.
pub fn default_webhook_target() -> WebhookTarget {
    WebhookTarget::Service {
        namespace: "insitu-system".into(),
        name: "insitu-webhook".into(),
        port: 443,
    }
}

/// Path of the conversion endpoint on the webhook server.
pub const CONVERT_PATH: &str = "/convert";

/// Path of the CloneSet defaulting (mutating admission) endpoint on the webhook server.
pub const MUTATE_PATH: &str = "/mutate-cloneset";

/// Name of the CloneSet defaulting webhook in [`MUTATING_CONFIG_NAME`] (what the apiserver names when it
/// reports the webhook's denial).
pub const MUTATING_WEBHOOK_NAME: &str = "mcloneset.insitu.io";

pub use crate::keys::MUTATING_CONFIG_NAME;

/// A webhook `clientConfig` reaching `path` on `target`: the Service with that path, or the URL's scheme and
/// authority with that path (`--webhook-url` names the conversion endpoint; the other endpoints share its
/// server). `ca_bundle_b64`: base64 PEM, absent until `insitu run` patches it in.
pub fn client_config(target: &WebhookTarget, path: &str, ca_bundle_b64: Option<&str>) -> Value {
    let mut client = match target {
        WebhookTarget::Service {
            namespace,
            name,
            port,
        } => json!({
            "service": { "namespace": namespace, "name": name, "path": path, "port": port }
        }),
        WebhookTarget::Url(url) if path == CONVERT_PATH => json!({ "url": url }),
        WebhookTarget::Url(url) => json!({ "url": format!("{}{path}", url_base(url)) }),
    };
    if let Some(ca) = ca_bundle_b64 {
        client["caBundle"] = json!(ca);
    }
    client
}

/// `https://host:port` of a URL (the path cut off).
fn url_base(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// The MutatingWebhookConfiguration sending CloneSet and Advanced StatefulSet CREATE/UPDATE (both versions, in
/// the version the client wrote) to [`MUTATE_PATH`], as Kruise's `mcloneset.kb.io` and `mstatefulset.kb.io`
/// (failurePolicy Fail, sideEffects None): an object written while no replica answers is refused rather than
/// stored without Kruise's defaults.
pub fn mutating_webhook_configuration(target: &WebhookTarget, ca_bundle_b64: Option<&str>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": { "name": MUTATING_CONFIG_NAME, "labels": { "app.kubernetes.io/name": "insitu" } },
        "webhooks": [{
            "name": MUTATING_WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config(target, MUTATE_PATH, ca_bundle_b64),
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "rules": [{
                "apiGroups": ["apps.kruise.io"],
                "apiVersions": ["v1alpha1", "v1beta1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["clonesets", "statefulsets"],
                "scope": "Namespaced"
            }]
        }]
    })
}

/// `spec.conversion` for a target and CA bundle (base64 PEM; empty until `insitu run` patches it in).
pub fn conversion_config(target: &WebhookTarget, ca_bundle_b64: Option<&str>) -> Value {
    let client = client_config(target, CONVERT_PATH, ca_bundle_b64);
    json!({
        "strategy": "Webhook",
        "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": client }
    })
}

fn shaped_version(crd: &CustomResourceDefinition, version: Version) -> Option<Value> {
    let v = serde_json::to_value(crd).ok()?;
    let mut ver = v.pointer("/spec/versions/0")?.clone();
    if let Some(spec) = ver.pointer_mut("/schema/openAPIV3Schema/properties/spec") {
        shape_spec_schema_for(spec, version);
        if version == Version::V1beta1 {
            accept_legacy_spelling(spec);
        }
        cel::attach_to_spec(spec, version);
    }
    ver["served"] = json!(true);
    ver["storage"] = json!(version == Version::V1beta1);
    Some(ver)
}

/// Declares v1alpha1's spelling of the rolling-update fields on v1beta1's `updateStrategy` (v1alpha1's schema of
/// each, without its defaults and rules), so that pruning keeps them for the defaulting webhook to move
/// (`defaults::legacy`); a CEL rule (`validation::cel`) refuses them if they are still there after admission.
fn accept_legacy_spelling(beta_spec: &mut Value) {
    let Some(mut alpha) = serde_json::to_value(CloneSet::crd()).ok().and_then(|v| {
        v.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
            .cloned()
    }) else {
        return;
    };
    shape_spec_schema_for(&mut alpha, Version::V1alpha1);
    let fields = crate::defaults::legacy::MOVED_FIELDS
        .iter()
        .copied()
        .chain(["inPlaceUpdateStrategy"]);
    let Some(props) = beta_spec.pointer_mut("/properties/updateStrategy/properties") else {
        return;
    };
    for field in fields {
        let Some(mut schema) = alpha
            .pointer(&format!("/properties/updateStrategy/properties/{field}"))
            .cloned()
        else {
            continue;
        };
        strip(&mut schema, &["default", "x-kubernetes-validations"]);
        schema["description"] = json!(format!(
            "apps.kruise.io/v1alpha1 spelling of rollingUpdate.{field}: accepted on writes and moved there by \
             insitu's defaulting webhook; never stored."
        ));
        props[field] = schema;
    }
}

/// Removes `keys` from a schema node and every node under it.
fn strip(node: &mut Value, keys: &[&str]) {
    match node {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            m.values_mut().for_each(|v| strip(v, keys));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| strip(v, keys)),
        _ => {}
    }
}

/// The CloneSet CRD as served to a real apiserver: v1alpha1 and v1beta1 (storage, as in Kruise master), converted
/// by the webhook `insitu run` serves at the default target.
///
/// Built once per process (schema generation is not free, and the embedded cluster installs it at every start:
/// `insitu torture` starts one per seed).
pub fn crd() -> CustomResourceDefinition {
    static CRD: std::sync::OnceLock<CustomResourceDefinition> = std::sync::OnceLock::new();
    CRD.get_or_init(|| crd_for(&default_webhook_target())).clone()
}

/// The CRD with the conversion webhook at `target`.
pub fn crd_for(target: &WebhookTarget) -> CustomResourceDefinition {
    let alpha = CloneSet::crd();
    let Ok(mut v) = serde_json::to_value(&alpha) else {
        return alpha;
    };
    let (Some(a), Some(b)) = (
        shaped_version(&alpha, Version::V1alpha1),
        shaped_version(&crate::v1beta1::CloneSet::crd(), Version::V1beta1),
    ) else {
        return alpha;
    };
    v["spec"]["versions"] = json!([a, b]);
    v["spec"]["conversion"] = conversion_config(target, None);
    serde_json::from_value(v).unwrap_or(alpha)
}
