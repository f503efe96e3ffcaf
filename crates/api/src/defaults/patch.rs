//! RFC 6902 JSON patch between two JSON values (what a mutating webhook answers with).

use serde_json::{Value, json};

/// The operations turning `from` into `to`: objects are compared key by key, arrays of equal length element
/// by element, anything else is replaced whole. Keys are visited in sorted order, so the patch is deterministic.
pub fn json_patch(from: &Value, to: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    diff("", from, to, &mut ops);
    ops
}

/// A JSON pointer token (`~` → `~0`, `/` → `~1`).
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn diff(path: &str, from: &Value, to: &Value, ops: &mut Vec<Value>) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut removed: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
            removed.sort();
            for k in removed {
                ops.push(json!({"op": "remove", "path": format!("{path}/{}", token(k))}));
            }
            let mut keys: Vec<&String> = b.keys().collect();
            keys.sort();
            for k in keys {
                let p = format!("{path}/{}", token(k));
                match a.get(k) {
                    Some(old) => diff(&p, old, &b[k], ops),
                    None => ops.push(json!({"op": "add", "path": p, "value": b[k]})),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}/{i}"), x, y, ops);
            }
        }
        _ if from == to => {}
        _ => ops.push(json!({"op": "replace", "path": path, "value": to})),
    }
}
