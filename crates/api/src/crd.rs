//! CRD generation: the CloneSet CustomResourceDefinition as YAML.
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
//! - **Defaults** (Kruise's mutating webhook, research §1.5) that are static: `replicas: 1`,
//!   `revisionHistoryLimit: 10`, `updateStrategy: {}` and inside it `type: ReCreate`, `partition: 0`,
//!   `maxUnavailable: "20%"`, `maxSurge: 0`. They only fill absent fields, never `template`, so revision hashes
//!   (computed from the template alone) are unaffected, and they equal the values the code assumes for absent
//!   fields (`CloneSetSpec::replicas()` etc.), so an object reads the same with or without them.
//!   Not expressible as CRD defaults, hence left to the controller: `inPlaceUpdateStrategy: {}` for in-place
//!   types (conditional; the controller treats absent as zero grace) and the pod template defaults
//!   (`imagePullPolicy: Always` etc., which must not be written into the CloneSet's template by a CRD).
//! - **CEL rules** (`validation::cel`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::CloneSet;
use crate::validation::cel;

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

/// Applies the template schema, bounds and defaults to a `.spec` schema (as JSON).
pub fn shape_spec_schema(spec: &mut Value) {
    use bounds::*;
    spec["properties"]["template"] = template_schema();
    set(
        spec,
        "volumeClaimTemplates",
        "items",
        open_object(json!({ "metadata": open_object(json!({ "name": string(DNS_LABEL) })) })),
    );
    let max_items = [
        ("volumeClaimTemplates", VCTS),
        ("selector.matchExpressions", SELECTOR_EXPRESSIONS),
        ("selector.matchExpressions[].values", SELECTOR_VALUES),
        ("scaleStrategy.podsToDelete", PODS_TO_DELETE),
        ("updateStrategy.scatterStrategy", STRATEGY_TERMS),
        ("updateStrategy.priorityStrategy.weightPriority", STRATEGY_TERMS),
        ("updateStrategy.priorityStrategy.orderPriority", STRATEGY_TERMS),
        (
            "updateStrategy.priorityStrategy.weightPriority[].matchSelector.matchExpressions",
            SELECTOR_EXPRESSIONS,
        ),
        (
            "updateStrategy.priorityStrategy.weightPriority[].matchSelector.matchExpressions[].values",
            SELECTOR_VALUES,
        ),
    ];
    for (path, max) in max_items {
        set(spec, path, "maxItems", json!(max));
    }
    set(
        spec,
        "selector.matchLabels",
        "maxProperties",
        json!(SELECTOR_LABELS),
    );
    let max_len = [
        ("selector.matchLabels.additionalProperties", LABEL_VALUE),
        ("selector.matchExpressions[].key", LABEL_KEY),
        ("selector.matchExpressions[].operator", SHORT_STRING),
        ("selector.matchExpressions[].values[]", LABEL_VALUE),
        ("scaleStrategy.podsToDelete[]", DNS_SUBDOMAIN),
        ("updateStrategy.type", SHORT_STRING),
        ("updateStrategy.partition", SHORT_STRING),
        ("updateStrategy.maxUnavailable", SHORT_STRING),
        ("updateStrategy.maxSurge", SHORT_STRING),
        ("updateStrategy.scatterStrategy[].key", LABEL_KEY),
        ("updateStrategy.scatterStrategy[].value", LABEL_VALUE),
        (
            "updateStrategy.priorityStrategy.orderPriority[].orderedKey",
            LABEL_KEY,
        ),
        (
            "updateStrategy.priorityStrategy.weightPriority[].matchSelector.matchExpressions[].operator",
            SHORT_STRING,
        ),
    ];
    for (path, max) in max_len {
        match path.strip_suffix(".additionalProperties") {
            Some(map) => {
                let node = cel::node_mut(spec, map).unwrap_or_else(|| panic!("no schema node spec.{map}"));
                node["additionalProperties"]["maxLength"] = json!(max);
            }
            None => set(spec, path, "maxLength", json!(max)),
        }
    }
    let defaults = [
        ("replicas", json!(1)),
        ("revisionHistoryLimit", json!(10)),
        ("updateStrategy", json!({})),
        ("updateStrategy.type", json!("ReCreate")),
        ("updateStrategy.partition", json!(0)),
        ("updateStrategy.maxUnavailable", json!("20%")),
        ("updateStrategy.maxSurge", json!(0)),
    ];
    for (path, value) in defaults {
        set(spec, path, "default", value);
    }
}

/// The CloneSet CRD as served to a real apiserver.
pub fn crd() -> CustomResourceDefinition {
    let crd = CloneSet::crd();
    let Ok(mut v) = serde_json::to_value(&crd) else {
        return crd;
    };
    for version in v["spec"]["versions"].as_array_mut().into_iter().flatten() {
        if let Some(spec) = version.pointer_mut("/schema/openAPIV3Schema/properties/spec") {
            shape_spec_schema(spec);
            cel::attach_to_spec(spec);
        }
    }
    serde_json::from_value(v).unwrap_or(crd)
}

/// The CRD rendered as YAML (what `insitu crd` prints and `deploy/crd.yaml` holds).
pub fn crd_yaml() -> String {
    serde_saphyr::to_string(&crd()).unwrap_or_default()
}
