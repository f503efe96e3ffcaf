//! The CloneSet mutating webhook (`POST /mutate-cloneset`): Kruise's defaults (`insitu_api::defaults`) answered
//! as an AdmissionReview with a JSON patch, as Kruise's `/mutate-apps-kruise-io-cloneset` does.

use std::borrow::Cow;

use base64::Engine as _;
use insitu_api::jsondepth;
use serde_json::value::RawValue;
use serde_json::{Value, json};

pub use insitu_api::crd::MUTATE_PATH;

/// Answers an `admission.k8s.io/v1` AdmissionReview: allowed, with the defaults as a JSON patch (none if
/// nothing changes). A request without an object (DELETE, CONNECT) is allowed unchanged.
pub fn review(body: &Value) -> Value {
    let request = body.get("request");
    let get = |k: &str| request.and_then(|r| r.get(k));
    answer(
        body.get("apiVersion").and_then(Value::as_str),
        get("uid").cloned(),
        get("object"),
        get("oldObject"),
    )
}

/// An AdmissionReview as read by [`review_json`]: the objects stay unparsed until each is measured.
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
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
    #[serde(rename = "oldObject", default, borrow)]
    old_object: Option<&'a RawValue>,
}

/// [`review`] on the JSON bytes of a request, answered as JSON bytes. Objects nest up to
/// `insitu_api::jsondepth::MAX_DEPTH` levels as in Kubernetes (the caller runs this on a deep stack); a deeper
/// one is refused (`allowed: false`) with the limit named. `Err` when the body is not an AdmissionReview.
pub fn review_json(body: &[u8]) -> Result<Vec<u8>, String> {
    let review: ReviewIn<'_> =
        serde_json::from_slice(body).map_err(|e| format!("the body is not an AdmissionReview: {e}"))?;
    let request = review.request.as_ref();
    let parse = |raw: Option<&RawValue>| -> Result<Option<Value>, String> {
        raw.map(|r| jsondepth::from_slice::<Value>(r.get().as_bytes()))
            .transpose()
            .map_err(|e| e.to_string())
    };
    let uid = parse(request.and_then(|r| r.uid))?;
    let objects = parse(request.and_then(|r| r.object))
        .and_then(|o| Ok((o, parse(request.and_then(|r| r.old_object))?)));
    let api_version = review.api_version.as_deref();
    let out = match objects {
        Ok((object, old)) => answer(api_version, uid, object.as_ref(), old.as_ref()),
        Err(message) => {
            let response = json!({"uid": uid.unwrap_or(json!("")), "allowed": false,
                "status": {"status": "Failure", "code": 400, "reason": "BadRequest",
                           "message": format!("CloneSet defaults: {message}")}});
            envelope(api_version, response)
        }
    };
    serde_json::to_vec(&out).map_err(|e| e.to_string())
}

fn answer(
    api_version: Option<&str>,
    uid: Option<Value>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let mut response = json!({ "uid": uid.unwrap_or(json!("")), "allowed": true });
    if let Some(obj) = object.filter(|o| o.is_object()) {
        let old = old.filter(|o| o.is_object());
        match insitu_api::defaults::admit_request(obj, old) {
            Ok(admitted) => {
                if !admitted.warnings.is_empty() {
                    response["warnings"] = json!(admitted.warnings);
                }
                let ops = insitu_api::defaults::json_patch(obj, &admitted.object);
                if !ops.is_empty() {
                    let bytes = serde_json::to_vec(&ops).unwrap_or_default();
                    response["patchType"] = json!("JSONPatch");
                    response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
            }
            // Both spellings of a rolling-update field set differently: refused as invalid; the apiserver prefixes
            // `admission webhook "…" denied the request: ` (apiserver `webhookerrors.ToStatusErr`).
            Err(errs) => {
                response["allowed"] = json!(false);
                response["status"] = json!({
                    "status": "Failure",
                    "code": 422,
                    "reason": "Invalid",
                    "message": insitu_api::validation::aggregate(&errs),
                });
            }
        }
    }
    envelope(api_version, response)
}

fn envelope(api_version: Option<&str>, response: Value) -> Value {
    let api_version = api_version.unwrap_or("admission.k8s.io/v1");
    json!({ "apiVersion": api_version, "kind": "AdmissionReview", "response": response })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_a_json_patch_of_the_defaults() {
        let review_in = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "operation": "CREATE",
            "object": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "x"},
                       "spec": {"replicas": 2, "revisionHistoryLimit": 3, "template": {"spec": {
                           "containers": [{"name": "c", "image": "nginx:1.19.0"}]}},
                           "updateStrategy": {"type": "OnDelete"}}}}});
        let out = review(&review_in);
        assert_eq!(out["response"]["uid"], "u1");
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(out["response"]["patch"].as_str().unwrap())
            .unwrap();
        let ops: Vec<Value> = serde_json::from_slice(&patch).unwrap();
        assert!(ops.contains(&json!({"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"})));
        assert!(ops.contains(
            &json!({"op": "add", "path": "/spec/template/spec/dnsPolicy", "value": "ClusterFirst"})
        ));

        // Nothing to add: no patch at all.
        let mut done = review_in.clone();
        let defaulted = insitu_api::defaults::admit(&review_in["request"]["object"], None);
        done["request"]["object"] = defaulted;
        let out = review(&done);
        assert!(out["response"].get("patch").is_none());
        assert_eq!(
            review(&json!({"request": {"uid": "d", "operation": "DELETE"}}))["response"]["allowed"],
            true
        );
    }

    #[test]
    fn moves_the_v1alpha1_spelling_and_refuses_a_contradiction() {
        let old = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "x"},
            "spec": {"replicas": 10, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}});
        let mut paused = old.clone();
        paused["spec"]["updateStrategy"]["paused"] = json!(true);
        let out = review(
            &json!({"request": {"uid": "p", "operation": "UPDATE", "object": paused, "oldObject": old}}),
        );
        let patch = base64::engine::general_purpose::STANDARD
            .decode(out["response"]["patch"].as_str().unwrap())
            .unwrap();
        let ops: Vec<Value> = serde_json::from_slice(&patch).unwrap();
        let mut patched = paused.clone();
        let ops: json_patch::Patch = serde_json::from_value(json!(ops)).unwrap();
        json_patch::patch(&mut patched, &ops).unwrap();
        assert_eq!(patched["spec"]["updateStrategy"]["rollingUpdate"]["paused"], true);
        assert!(patched["spec"]["updateStrategy"].get("paused").is_none());

        let mut both = paused.clone();
        both["spec"]["updateStrategy"]["partition"] = json!(3);
        both["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(4);
        let out = review(
            &json!({"request": {"uid": "b", "operation": "UPDATE", "object": both, "oldObject": old}}),
        );
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 422);
        let msg = out["response"]["status"]["message"].as_str().unwrap();
        assert!(
            msg.contains("spec.updateStrategy.partition: Invalid value: 3")
                && msg.contains("spec.updateStrategy.rollingUpdate.partition (4)"),
            "{msg}"
        );
    }

    /// An AdmissionReview of a CloneSet carrying `extra` (raw JSON) under `spec.template.metadata.deep`.
    fn review_with_template_value(extra: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u2","operation":"CREATE","object":{{"apiVersion":"apps.kruise.io/v1beta1","kind":"CloneSet","metadata":{{"name":"deep"}},"spec":{{"replicas":1,"template":{{"metadata":{{"deep":{extra}}},"spec":{{"containers":[{{"name":"c","image":"nginx"}}]}}}}}}}}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn objects_nested_as_deep_as_kubernetes_allows_are_defaulted_and_deeper_ones_refused() {
        use insitu_api::jsondepth::{MAX_DEPTH, nested_objects, on_deep_stack};
        // 200 levels under the template's metadata, on an ordinary test thread: defaulted as any other.
        let out: Value =
            serde_json::from_slice(&review_json(&review_with_template_value(&nested_objects(200))).unwrap())
                .unwrap();
        assert_eq!(out["response"]["uid"], "u2");
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        // At the limit (4 levels to the template's metadata): on a deep stack, as the webhook's workers run it.
        let at_limit = review_with_template_value(&nested_objects(MAX_DEPTH - 4));
        let out: Value = serde_json::from_slice(&on_deep_stack(|| review_json(&at_limit).unwrap())).unwrap();
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        // One more: refused, naming the limit.
        let past = review_with_template_value(&nested_objects(MAX_DEPTH - 3));
        let out: Value = serde_json::from_slice(&on_deep_stack(|| review_json(&past).unwrap())).unwrap();
        assert_eq!(out["response"]["allowed"], false);
        let msg = out["response"]["status"]["message"].as_str().unwrap();
        assert!(msg.contains("max depth of 10000"), "{msg}");
        assert!(review_json(b"not json").is_err());
    }
}
