//! The fields named for a recreate agree with what `inplaceupdate::calculate` refuses.

use super::*;
use serde_json::json;

fn tpl(container: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
           "spec": {"containers": [container, {"name": "side", "image": "busybox:1"}]}})
}

fn refusal(old: &Value, new: &Value) -> Refusal {
    let msg = crate::inplaceupdate::calculate(old, new, true).expect_err("not in place");
    Refusal::from_templates(msg, old, new, true)
}

#[test]
fn env_change_names_the_container_and_variable_with_the_downward_api_hint() {
    let old = tpl(json!({"name": "app", "image": "nginx:1", "env": [{"name": "VERSION", "value": "1"}]}));
    let new = tpl(json!({"name": "app", "image": "nginx:2", "env": [{"name": "VERSION", "value": "2"}]}));
    let r = refusal(&old, &new);
    assert_eq!(r.fields, vec!["spec.containers[app].env[VERSION]"]);
    assert_eq!(r.reason, "spec.containers.env");
    assert!(r.hint.contains("downward-API"), "{r:?}");
    assert!(
        r.describe()
            .starts_with("spec.containers[app].env[VERSION] changed: a pod's env is immutable"),
        "{}",
        r.describe()
    );
}

#[test]
fn unnamed_list_elements_name_the_list_and_every_field_is_listed() {
    let old = tpl(json!({"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]}));
    let new = tpl(
        json!({"name": "app", "image": "nginx:1", "ports": [{"containerPort": 8080}],
                         "command": ["nginx"]}),
    );
    let r = refusal(&old, &new);
    assert_eq!(
        r.fields,
        vec!["spec.containers[app].command", "spec.containers[app].ports"]
    );
    assert_eq!(r.reason, "spec.containers.command");
}

#[test]
fn pod_level_fields_volumes_and_added_containers() {
    let mut old = tpl(json!({"name": "app", "image": "nginx:1"}));
    old["spec"]["volumes"] = json!([{"name": "cfg", "configMap": {"name": "a"}}]);
    let mut new = old.clone();
    new["spec"]["volumes"][0]["configMap"]["name"] = json!("b");
    new["spec"]["terminationGracePeriodSeconds"] = json!(5);
    new["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "extra", "image": "x:1"}));
    let r = refusal(&old, &new);
    let mut f = r.fields.clone();
    f.sort();
    assert_eq!(
        f,
        vec![
            "spec.containers[extra]",
            "spec.terminationGracePeriodSeconds",
            "spec.volumes[cfg]"
        ]
    );
}

#[test]
fn in_place_changes_are_never_named() {
    let old = tpl(
        json!({"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}],
                         "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}),
    );
    let mut new = tpl(
        json!({"name": "app", "image": "nginx:2", "env": [{"name": "A", "value": "2"}],
                             "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}),
    );
    new["metadata"]["labels"]["v"] = json!("2");
    assert_eq!(
        refused_fields(&old, &new, true),
        vec!["spec.containers[app].env[A]"]
    );
    // Without the vertical-scaling gate the resources are refused too.
    assert_eq!(
        refused_fields(&old, &new, false),
        vec![
            "spec.containers[app].env[A]",
            "spec.containers[app].resources.limits.cpu",
            "spec.containers[app].resources.requests.cpu"
        ]
    );
}

#[test]
fn qos_class_change_names_the_resources_and_says_qos() {
    let g = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
    let t = |app: Value| {
        json!({"spec": {"containers": [
        {"name": "app", "image": "nginx:1", "resources": app},
        {"name": "side", "image": "busybox:1", "resources": g}]}})
    };
    let old = t(g.clone());
    let mut burst = g.clone();
    burst["limits"]["cpu"] = json!("2");
    let new = t(burst);
    let r = refusal(&old, &new);
    assert_eq!(r.fields, vec!["spec.containers[app].resources.limits.cpu"]);
    assert!(r.hint.contains("QoS"), "{r:?}");
}

#[test]
fn reason_labels_drop_names() {
    assert_eq!(strip_names("spec.containers[a].env[B]"), "spec.containers.env");
    assert_eq!(strip_names("spec.volumes[x]"), "spec.volumes");
    assert_eq!(Refusal::volume_claim_templates("m".into()).reason, VCT_REASON);
}
