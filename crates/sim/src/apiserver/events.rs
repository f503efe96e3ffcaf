//! One Event storage behind two APIs: core/v1 `events` (stored form) and its `events.k8s.io/v1` view.

use serde_json::{Map, Value, json};

/// Field renames between events.k8s.io/v1 (left) and core/v1 (right).
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Fields serialized even when unset by the real apiserver (Go zero values), in core/v1 form.
pub fn default_core(ev: &mut Value) {
    let Some(m) = ev.as_object_mut() else { return };
    for (k, v) in [
        ("eventTime", Value::Null),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
        ("source", json!({})),
        ("involvedObject", json!({})),
    ] {
        m.entry(k).or_insert(v);
    }
}

/// events.k8s.io/v1 → core/v1.
pub fn to_core(ev: &Value) -> Value {
    let Some(m) = ev.as_object() else {
        return ev.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let key = RENAMES
            .iter()
            .find(|(new, _)| new == k)
            .map_or(k.as_str(), |(_, core)| core);
        out.insert(key.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut v = Value::Object(out);
    default_core(&mut v);
    v
}

/// core/v1 → events.k8s.io/v1, with the real view's zero values.
pub fn to_new(ev: &Value) -> Value {
    let Some(m) = ev.as_object() else {
        return ev.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let key = RENAMES
            .iter()
            .find(|(_, core)| core == k)
            .map_or(k.as_str(), |(new, _)| new);
        let omit_empty = matches!(
            key,
            "reportingController" | "reportingInstance" | "action" | "note" | "reason" | "type"
        );
        if (omit_empty && v.as_str() == Some(""))
            || (key == "deprecatedCount" && v.as_i64().unwrap_or(0) == 0)
        {
            continue;
        }
        out.insert(key.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    for (k, v) in [
        ("eventTime", Value::Null),
        ("deprecatedFirstTimestamp", Value::Null),
        ("deprecatedLastTimestamp", Value::Null),
        ("deprecatedSource", json!({})),
    ] {
        out.entry(k).or_insert(v);
    }
    Value::Object(out)
}

/// An events.k8s.io field label in core/v1 terms (`regarding.name` → `involvedObject.name`).
pub fn core_field(label: &str) -> String {
    if let Some(rest) = label.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match label {
        "reportingController" => "reportingComponent".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reason": "R", "type": "Normal",
            "reportingController": "insitu", "reportingInstance": "i", "action": "A",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}});
        let core = to_core(&new);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "insitu");
        assert_eq!(core["source"], json!({}));
        let back = to_new(&core);
        for k in [
            "regarding",
            "note",
            "reason",
            "type",
            "reportingController",
            "reportingInstance",
            "action",
            "series",
        ] {
            assert_eq!(back[k], new[k], "{k}");
        }
        assert_eq!(core_field("regarding.name"), "involvedObject.name");
    }
}
