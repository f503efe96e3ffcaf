//! The CloneSet mutating webhook (`POST /mutate-cloneset`): Kruise's defaults (`insitu_api::defaults`) answered
//! as an AdmissionReview with a JSON patch, as Kruise's `/mutate-apps-kruise-io-cloneset` does.

use base64::Engine as _;
use serde_json::{Value, json};

pub use insitu_api::crd::MUTATE_PATH;

/// Answers an `admission.k8s.io/v1` AdmissionReview: allowed, with the defaults as a JSON patch (none if
/// nothing changes). A request without an object (DELETE, CONNECT) is allowed unchanged.
pub fn review(body: &Value) -> Value {
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("admission.k8s.io/v1");
    let request = body.get("request");
    let uid = request.and_then(|r| r.get("uid")).cloned().unwrap_or(json!(""));
    let mut response = json!({ "uid": uid, "allowed": true });
    let object = request.and_then(|r| r.get("object")).filter(|o| o.is_object());
    if let Some(obj) = object {
        let old = request.and_then(|r| r.get("oldObject")).filter(|o| o.is_object());
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
}
