//! Warnings the defaulting webhook returns for template edits that will recreate pods under `InPlaceIfPossible`.
//!
//! The seed tutorial's `kubectl patch --type=merge` with a `containers` list is a JSON merge patch (RFC 7386):
//! the list is replaced, so the container loses its ports, env, probes and hooks, and Kruise (as insitu) then
//! recreates every pod instead of updating it in place (`pkg/util/inplaceupdate`, `defaultCalculateInPlaceUpdateSpec`:
//! only image and metadata changes go in place). Likewise a plain env value is immutable on a pod. Both are valid
//! requests that do something else than the writer most likely meant: they are accepted, with a warning that
//! names the field and gives the command that works (docs/seed-tutorial.md).

use serde_json::Value;

/// The warnings for an UPDATE from `old` to `new` (both defaulted, in the same version).
pub fn template_warnings(new: &Value, old: &Value) -> Vec<String> {
    if !in_place_if_possible(new) {
        return Vec::new();
    }
    let containers = |v: &Value| {
        v.pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("NAME");
    let old_containers = containers(old);
    let mut out = Vec::new();
    for (i, c) in containers(new).iter().enumerate() {
        let cname = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(before) = old_containers
            .iter()
            .find(|o| o.get("name").and_then(Value::as_str) == Some(cname))
        else {
            continue;
        };
        let mut dropped: Vec<&str> = before
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| c.get(k.as_str()).is_none())
            .map(|(k, _)| k.as_str())
            .collect();
        dropped.sort_unstable();
        if !dropped.is_empty() {
            out.push(dropped_fields(name, i, cname, &dropped, c));
        } else if env_values(before) != env_values(c) {
            out.push(format!(
                "spec.template.spec.containers[{i}].env ({cname:?}): a changed env value cannot go in place (a pod's \
                 env is immutable in Kubernetes), so the pods will be recreated; env read from the pod's labels or \
                 annotations (valueFrom.fieldRef metadata.labels['...']) changes in place (docs/in-place-rules.md)"
            ));
        }
    }
    out
}

/// A container that lost fields: the merge patch's replaced list, and the JSON patch that changes one field.
fn dropped_fields(name: &str, i: usize, cname: &str, dropped: &[&str], c: &Value) -> String {
    let fix = match (c.get("image").and_then(Value::as_str), first_env(c)) {
        (Some(image), _) => format!(
            "to change only the image: kubectl patch cloneset {name} --type=json \
             -p='[{{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/{i}/image\",\"value\":\"{image}\"}}]'"
        ),
        (None, Some((j, value))) => format!(
            "to change only that env value (which recreates the pods: a pod's env is immutable): kubectl patch \
             cloneset {name} --type=json \
             -p='[{{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/{i}/env/{j}/value\",\"value\":{value}}}]'"
        ),
        (None, None) => format!(
            "to change one field use a JSON patch: kubectl patch cloneset {name} --type=json \
             -p='[{{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/{i}/FIELD\",\"value\":...}}]'"
        ),
    };
    format!(
        "spec.template.spec.containers[{i}] ({cname:?}): this update removes {}, so the pods will be recreated, not \
         updated in place: a JSON merge patch (kubectl patch --type=merge) replaces the whole containers list; {fix}",
        dropped.join(", ")
    )
}

/// The first env var with a plain value: its index and the value as JSON.
fn first_env(c: &Value) -> Option<(usize, String)> {
    c.get("env")?
        .as_array()?
        .iter()
        .enumerate()
        .find_map(|(j, e)| e.get("value").map(|v| (j, v.to_string())))
}

/// Plain env values by name (those read through `valueFrom` are not compared: metadata ones go in place).
fn env_values(c: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = c
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("valueFrom").is_none())
        .map(|e| {
            let n = e
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (n, e.get("value").cloned().unwrap_or(Value::Null))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// v1alpha1 `type: InPlaceIfPossible`, or v1beta1 `rollingUpdate.podUpdatePolicy: InPlaceIfPossible`.
fn in_place_if_possible(cs: &Value) -> bool {
    let us = cs.pointer("/spec/updateStrategy");
    let alpha = us.and_then(|u| u.get("type")).and_then(Value::as_str);
    let beta = us
        .and_then(|u| u.pointer("/rollingUpdate/podUpdatePolicy"))
        .and_then(Value::as_str);
    alpha == Some("InPlaceIfPossible") || beta == Some("InPlaceIfPossible")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seed(container: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "nginx-demo"},
               "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
                        "template": {"spec": {"containers": [container]}}}})
    }

    fn full() -> Value {
        json!({"name": "nginx", "image": "nginx:1.19.0", "ports": [{"containerPort": 80}],
               "env": [{"name": "VERSION", "value": "v1.0"}], "readinessProbe": {}, "imagePullPolicy": "Always"})
    }

    #[test]
    fn the_seeds_merge_patch_of_the_image_warns_with_the_json_patch() {
        let old = seed(full());
        let new = seed(json!({"name": "nginx", "image": "nginx:1.20.0", "imagePullPolicy": "Always"}));
        let w = template_warnings(&new, &old);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("spec.template.spec.containers[0] (\"nginx\"): this update removes env, ports, readinessProbe")
                && w[0].contains(r#"kubectl patch cloneset nginx-demo --type=json -p='[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.20.0"}]'"#),
            "{}",
            w[0]
        );
    }

    #[test]
    fn the_seeds_merge_patch_of_the_env_warns_with_the_env_patch() {
        let old = seed(full());
        let new = seed(json!({"name": "nginx", "env": [{"name": "VERSION", "value": "v2.0"}]}));
        let w = template_warnings(&new, &old);
        assert!(
            w[0].contains("removes image, imagePullPolicy, ports, readinessProbe")
                && w[0].contains(r#""path":"/spec/template/spec/containers/0/env/0/value","value":"v2.0""#),
            "{}",
            w[0]
        );
    }

    #[test]
    fn an_env_value_change_warns_and_an_image_change_does_not() {
        let old = seed(full());
        let mut env = full();
        env["env"][0]["value"] = json!("v2.0");
        let w = template_warnings(&seed(env), &old);
        assert!(
            w.len() == 1 && w[0].starts_with("spec.template.spec.containers[0].env"),
            "{w:?}"
        );
        let mut image = full();
        image["image"] = json!("nginx:1.20.0");
        assert!(template_warnings(&seed(image.clone()), &old).is_empty());
        // Under ReCreate nothing goes in place anyway: no warning.
        let mut recreate = seed(json!({"name": "nginx", "image": "nginx:1.20.0"}));
        recreate["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] = json!("ReCreate");
        assert!(template_warnings(&recreate, &old).is_empty());
    }
}
