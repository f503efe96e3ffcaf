//! Field validation beyond create/update JSON bodies, as kube-apiserver does it: duplicate fields in patch
//! documents and YAML bodies, and the default directive (Warn) when a client sends no `fieldValidation`.

mod common;

use common::{get, json_req, send, server};
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";
const MERGE: &str = "application/merge-patch+json";

fn pod_json(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})
}

fn warning(text: &str) -> String {
    format!("299 - {}", serde_json::to_string(text).unwrap_or_default())
}

#[tokio::test(start_paused = true)]
async fn duplicate_fields_in_patches() {
    let s = server();
    let a = json_req(&s, "POST", PODS, "application/json", pod_json("p")).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let url = format!("{PODS}/p");
    let patch = br#"{"metadata":{"labels":{"a":"1","a":"2"}}}"#.to_vec();
    // Strict: the merge patch's repetition is a 422 on `patch`, and nothing is stored.
    let a = send(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Strict"),
        MERGE,
        patch.clone(),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("\"\" is invalid: patch: Invalid value: "),
        "{msg}"
    );
    assert!(
        msg.ends_with(": strict decoding error: duplicate field \"metadata.labels.a\""),
        "{msg}"
    );
    assert!(get(&s, &url).await.body["metadata"].get("labels").is_none());
    // Warn: applied (the last value wins), with the warning.
    let a = send(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Warn"),
        MERGE,
        patch.clone(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.body["metadata"]["labels"]["a"], "2");
    assert_eq!(a.warnings, vec![warning("duplicate field \"metadata.labels.a\"")]);
    // A JSON patch: its ops are decoded strictly too, the paths prefixed as the apiserver does.
    let ops = br#"[{"op":"add","path":"/metadata/annotations","value":{"b":"1","b":"2"}}]"#.to_vec();
    let a = send(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Strict"),
        "application/json-patch+json",
        ops,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(
        msg.ends_with("strict decoding error: json patch duplicate field \"[0].value.b\""),
        "{msg}"
    );
}

#[tokio::test(start_paused = true)]
async fn duplicate_keys_in_yaml_bodies() {
    let s = server();
    let yaml = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: y\n  name: y2\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n";
    let a = send(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Strict"),
        "application/yaml",
        yaml.to_vec(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map"
    );
    let a = send(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Ignore"),
        "application/yaml",
        yaml.to_vec(),
    )
    .await;
    assert_eq!((a.code, a.warnings.len()), (201, 0), "{}", a.body);
    assert_eq!(a.body["metadata"]["name"], "y2", "the last key wins");
}

#[tokio::test(start_paused = true)]
async fn no_parameter_means_warn() {
    let s = server();
    // kube-apiserver's fieldValidation("") is Warn: an unknown field of a built-in kind is warned about.
    let mut pod = pod_json("w");
    pod["spec"]["containers"][0]["imagee"] = json!("typo");
    let a = json_req(&s, "POST", PODS, "application/json", pod).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec![warning("unknown field \"spec.containers[0].imagee\"")]
    );
    let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"d"},"spec":{"containers":[{"name":"c","image":"a","image":"b"}]}}"#;
    let a = send(&s, "POST", PODS, "application/json", body.to_vec()).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec![warning("duplicate field \"spec.containers[0].image\"")]
    );
    assert_eq!(a.body["spec"]["containers"][0]["image"], "b");
}

#[tokio::test(start_paused = true)]
async fn unknown_fields_of_built_ins_are_not_stored() {
    let s = server();
    // Warn (explicit): created, warned about, and the field is gone from the answer and the stored object, as
    // kube-apiserver's decoder into the Go type loses it.
    let mut pod = pod_json("u");
    pod["spec"]["containers"][0]["imagee"] = json!("typo");
    pod["spec"]["nodeSelecter"] = json!({"a": "b"});
    pod["metadata"]["labelz"] = json!({"x": "y"});
    let a = json_req(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Warn"),
        "application/json",
        pod,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec![
            warning("unknown field \"metadata.labelz\""),
            warning("unknown field \"spec.containers[0].imagee\""),
            warning("unknown field \"spec.nodeSelecter\""),
        ]
    );
    let url = format!("{PODS}/u");
    let stored = get(&s, &url).await.body;
    assert!(
        stored["spec"]["containers"][0].get("imagee").is_none(),
        "{stored}"
    );
    assert_eq!(stored["spec"]["containers"][0]["image"], "nginx:1.27");
    assert!(stored["spec"].get("nodeSelecter").is_none(), "{stored}");
    assert!(stored["metadata"].get("labelz").is_none(), "{stored}");
    assert!(a.body["spec"].get("nodeSelecter").is_none(), "{}", a.body);
    let pruned = s.stats().pruned;
    assert_eq!(pruned.get("pods spec.nodeSelecter"), Some(&1), "{pruned:?}");
    // A merge patch without a parameter (Warn): the known part is applied, the unknown one warned and dropped.
    let patch = json!({"metadata": {"labels": {"k": "v"}}, "spec": {"activeDeadlineSecondz": 5}});
    let a = json_req(&s, "PATCH", &url, MERGE, patch).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec![warning("unknown field \"spec.activeDeadlineSecondz\"")]
    );
    let stored = get(&s, &url).await.body;
    assert_eq!(stored["metadata"]["labels"]["k"], "v");
    assert!(stored["spec"].get("activeDeadlineSecondz").is_none(), "{stored}");
    // Ignore: no warning, and the field is still dropped.
    let patch = json!({"spec": {"hostnamee": "h"}});
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Ignore"),
        MERGE,
        patch,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert!(get(&s, &url).await.body["spec"].get("hostnamee").is_none());
    // Strict still refuses it with the strict decoder's message.
    let patch = json!({"spec": {"hostnamee": "h"}});
    let a = json_req(
        &s,
        "PATCH",
        &format!("{url}?fieldValidation=Strict"),
        MERGE,
        patch,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(
        msg.ends_with("strict decoding error: unknown field \"spec.hostnamee\""),
        "{msg}"
    );
}

/// 100,000 unknown fields give kube-apiserver's bounded warning set, not 100,000 headers: its strict decoder keeps
/// the first 100 errors (kube-apiserver v1.37.2 sends 100 headers, 4.5 KB, for this body); the object is created.
#[tokio::test(start_paused = true)]
async fn warnings_are_bounded_as_kube() {
    let s = server();
    let mut pod = pod_json("many");
    let spec = pod["spec"].as_object_mut().expect("spec");
    for i in 0..100_000 {
        spec.insert(format!("f{i}"), json!(1));
    }
    let a = json_req(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Warn"),
        "application/json",
        pod,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    let bytes: usize = a.warnings.iter().map(String::len).sum();
    assert_eq!(a.warnings.len(), 100);
    assert!(bytes < 4 * 1024, "{bytes}");
    assert_eq!(a.warnings[0], warning("unknown field \"spec.f0\""));
    let mut seen = a.warnings.clone();
    seen.dedup();
    assert_eq!(seen.len(), a.warnings.len());
}

/// A custom resource's unknown fields are all reported by the CRD handler; the warning recorder bounds them
/// (4,096 runes, then 256 a warning).
#[tokio::test(start_paused = true)]
async fn custom_resource_warnings_bounded_by_the_recorder() {
    let s = server();
    let mut cs = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "many"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let spec = cs["spec"].as_object_mut().expect("spec");
    for i in 0..10_000 {
        spec.insert(format!("unknownField{i:05}"), json!(1));
    }
    let url = "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets?fieldValidation=Warn";
    let a = json_req(&s, "POST", url, "application/json", cs).await;
    assert_eq!(a.code, 201, "{}", a.text);
    // `unknown field "spec.unknownField00000"`: 38 runes each; 107 fit in 4,096, the 108th crosses it.
    assert_eq!(a.warnings.len(), 108);
    assert_eq!(a.warnings[0], warning("unknown field \"spec.unknownField00000\""));
}

/// A built-in kind's strict-decoding messages come in the order its decoder meets them in the body (kube-apiserver
/// v1.37.2 answers this body with these three warnings in this order), unknown and repeated fields interleaved.
#[tokio::test(start_paused = true)]
async fn built_in_warnings_follow_the_document_order() {
    let s = server();
    let body = br#"{"apiVersion":"v1","kind":"Pod",
        "spec":{"nodeSelecter":{"a":"b"},"containers":[{"name":"c","image":"x","imagee":"y"}],
                "restartPolicy":"Always","restartPolicy":"Always"},
        "metadata":{"name":"ordered","labelz":{"x":"y"}}}"#;
    let a = send(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Warn"),
        "application/json",
        body.to_vec(),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert_eq!(
        a.warnings,
        vec![
            warning("unknown field \"spec.nodeSelecter\""),
            warning("unknown field \"spec.containers[0].imagee\""),
            warning("duplicate field \"spec.restartPolicy\""),
            warning("unknown field \"metadata.labelz\""),
        ]
    );
    // Strict: the same order in the one error.
    let body = String::from_utf8_lossy(body).replace("\"ordered\"", "\"ordered2\"");
    let a = send(
        &s,
        "POST",
        &format!("{PODS}?fieldValidation=Strict"),
        "application/json",
        body.into_bytes(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.text);
    let msg = a.body["message"].as_str().unwrap_or_default();
    assert!(
        msg.ends_with(
            "strict decoding error: unknown field \"spec.nodeSelecter\", unknown field \"spec.containers[0].imagee\", duplicate field \"spec.restartPolicy\", unknown field \"metadata.labelz\""
        ),
        "{msg}"
    );
}
