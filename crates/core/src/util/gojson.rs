//! Go `encoding/json` compatible output (sorted keys, HTML escaping, omitempty) for byte-exact revision data.

use serde_json::{Map, Value};

/// Marshals `v` exactly as Go's `json.Marshal` of the equivalent `map[string]interface{}` would:
/// keys sorted bytewise, `<`, `>`, `&`, U+2028/U+2029 escaped, integers without a fraction.
/// Kruise: revision data is unmarshalled into `map[string]interface{}` and re-marshalled
/// (`pkg/controller/cloneset/revision/cloneset_revision.go`, `getPatch`).
pub fn marshal(v: &Value) -> String {
    let mut out = String::with_capacity(1024);
    write_value(v, &mut out);
    out
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            // Sort explicitly: robust even if some crate turns on serde_json's `preserve_order`.
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                if let Some(x) = m.get(k) {
                    write_value(x, out);
                }
            }
            out.push('}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut String) {
    use std::fmt::Write;
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        // Go round-trips numbers through float64 and prints integral values below 1e21 without a fraction.
        if f.fract() == 0.0 && f.abs() < 1e21 {
            let _ = write!(out, "{f:.0}");
        } else {
            let _ = write!(out, "{f}");
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let n = c as u32;
                out.push_str("\\u");
                for shift in [12u32, 8, 4, 0] {
                    out.push(HEX[((n >> shift) & 0xf) as usize] as char);
                }
            }
            c if (c as u32) < 0x20 => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Rewrites a serde-serialised `PodTemplateSpec` into what Go's typed structs would marshal: drops the
/// zero values that Go fields tagged `omitempty` leave out (k8s-openapi keeps `Some("")`, `Some(vec![])`, …),
/// adds what Go always writes (`creationTimestamp: null`, `resources: {}` of every container) and writes
/// resource quantities in Go's canonical form (`0.5` → `500m`: `resource.Quantity` marshals its value, not
/// the text it was parsed from).
pub(crate) fn normalize_pod_template(v: &mut Value) {
    insitu_api::quantity::canonicalize_in(v);
    let Value::Object(tpl) = v else { return };
    normalize_object(tpl, "");
    let meta = tpl.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = meta {
        m.entry("creationTimestamp").or_insert(Value::Null);
    }
    let spec = tpl.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(spec) = spec {
        spec.entry("containers").or_insert(Value::Null);
        for key in ["containers", "initContainers", "ephemeralContainers"] {
            if let Some(Value::Array(cs)) = spec.get_mut(key) {
                for c in cs.iter_mut() {
                    if let Value::Object(c) = c {
                        c.entry("resources").or_insert_with(|| Value::Object(Map::new()));
                    }
                }
            }
        }
        if let Some(Value::Array(vols)) = spec.get_mut("volumes") {
            for vol in vols.iter_mut() {
                let claim = vol.pointer_mut("/ephemeral/volumeClaimTemplate");
                if let Some(Value::Object(claim)) = claim {
                    if let Value::Object(m) = claim
                        .entry("metadata")
                        .or_insert_with(|| Value::Object(Map::new()))
                    {
                        m.entry("creationTimestamp").or_insert(Value::Null);
                    }
                    if let Value::Object(s) = claim.entry("spec").or_insert_with(|| Value::Object(Map::new()))
                    {
                        s.entry("resources").or_insert_with(|| Value::Object(Map::new()));
                    }
                }
            }
        }
    }
}

/// Keys whose empty string Go still writes (fields without `omitempty`); `parent` is the enclosing key.
fn keeps_empty_string(parent: &str, key: &str) -> bool {
    match key {
        "name" | "mountPath" | "topologyKey" | "whenUnsatisfiable" | "fieldPath" | "resource"
        | "claimName" | "ip" | "server" | "driver" | "type" => true,
        "key" | "operator" => parent != "tolerations",
        "path" => parent != "httpGet",
        "value" => matches!(parent, "httpHeaders" | "sysctls"),
        _ => false,
    }
}

/// Plain (non-pointer) Go bools tagged omitempty: `false` is not written.
const OMIT_FALSE: &[&str] = &[
    "stdin",
    "stdinOnce",
    "tty",
    "readOnly",
    "hostNetwork",
    "hostPID",
    "hostIPC",
];
/// Plain Go ints tagged omitempty: `0` is not written.
const OMIT_ZERO: &[&str] = &[
    "hostPort",
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
];
/// Go slices without omitempty: an empty list is still written.
const KEEP_EMPTY_ARRAY: &[&str] = &["containers", "nodeSelectorTerms", "sources"];
/// Go maps tagged omitempty: an empty map is not written (other empty objects are pointer structs: kept).
const OMIT_EMPTY_MAP: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "limits",
    "requests",
    "overhead",
    "matchLabels",
    "volumeAttributes",
    "options",
];

fn normalize_object(m: &mut Map<String, Value>, parent: &str) {
    let mut drop: Vec<String> = Vec::new();
    for (k, v) in m.iter_mut() {
        match v {
            Value::Object(inner) => {
                normalize_object(inner, k);
                if inner.is_empty() && OMIT_EMPTY_MAP.contains(&k.as_str()) {
                    drop.push(k.clone());
                }
            }
            Value::Array(items) => {
                for it in items.iter_mut() {
                    if let Value::Object(inner) = it {
                        normalize_object(inner, k);
                    }
                }
                if items.is_empty() && !KEEP_EMPTY_ARRAY.contains(&k.as_str()) {
                    drop.push(k.clone());
                }
            }
            Value::Null => {
                if k != "creationTimestamp" {
                    drop.push(k.clone());
                }
            }
            Value::String(s) => {
                if s.is_empty() && !keeps_empty_string(parent, k) {
                    drop.push(k.clone());
                }
            }
            Value::Bool(false) => {
                if OMIT_FALSE.contains(&k.as_str()) {
                    drop.push(k.clone());
                }
            }
            Value::Number(n) => {
                if n.as_i64() == Some(0) && OMIT_ZERO.contains(&k.as_str()) {
                    drop.push(k.clone());
                }
            }
            Value::Bool(true) => {}
        }
    }
    for k in drop {
        m.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_escaping_and_order() {
        let v = json!({"b": "a && b <c>", "a": [1, 2.5, 3.0], "c": "\u{1}\u{8}"});
        assert_eq!(
            marshal(&v),
            r#"{"a":[1,2.5,3],"b":"a \u0026\u0026 b \u003cc\u003e","c":"\u0001\b"}"#
        );
    }

    #[test]
    fn quantities_are_written_as_go_marshals_them() {
        let mut v = json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1000m"}},
            "env": [{"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1000m"}}}]}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "0.5Gi"}}],
            "overhead": {"cpu": "0.25"}}});
        normalize_pod_template(&mut v);
        let c = &v["spec"]["containers"][0];
        assert_eq!(
            c["resources"],
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}})
        );
        assert_eq!(c["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"], "1");
        assert_eq!(
            c["env"][0]["valueFrom"]["resourceFieldRef"]["resource"], "limits.cpu",
            "not a quantity"
        );
        assert_eq!(v["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "512Mi");
        assert_eq!(v["spec"]["overhead"]["cpu"], "250m");
    }

    #[test]
    fn omitempty_rules() {
        let mut v = json!({"metadata": {"labels": {}}, "spec": {"containers": [
            {"name": "c", "image": "x", "env": [{"name": "E", "value": ""}], "stdin": false, "ports": []}
        ]}});
        normalize_pod_template(&mut v);
        assert_eq!(
            marshal(&v),
            r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"env":[{"name":"E"}],"image":"x","name":"c","resources":{}}]}}"#
        );
    }
}
