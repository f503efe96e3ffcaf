//! core/v1 Secrets as kube-apiserver serves them: `stringData` merged into `data` and never stored, `type`
//! defaulted to Opaque, bad base64 refused by the decoder, immutability and per-type keys validated.

mod common;

use common::{get, json_req, server};
use serde_json::json;

const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const MERGE: &str = "application/merge-patch+json";

fn secret(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}})
}

#[tokio::test(start_paused = true)]
async fn string_data_is_merged_into_data_and_type_defaults_to_opaque() {
    let s = server();
    // What `kubectl create secret generic x --from-literal=a=b` sends, plus a stringData entry.
    let mut body = secret("x");
    body["data"] = json!({"a": "Yg==", "c": "ZA=="});
    body["stringData"] = json!({"c": "over", "e": "f"});
    let a = json_req(&s, "POST", SECRETS, "application/json", body).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let stored = get(&s, &format!("{SECRETS}/x")).await.body;
    // stringData wins over data for the same key ("over"), is base64-encoded, and is not kept.
    assert_eq!(stored["data"], json!({"a": "Yg==", "c": "b3Zlcg==", "e": "Zg=="}));
    assert!(stored.get("stringData").is_none(), "{stored}");
    assert_eq!(stored["type"], "Opaque");
    // A patch's stringData is merged the same way.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{SECRETS}/x"),
        MERGE,
        json!({"stringData": {"a": "new"}}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.body["data"]["a"], "bmV3");
    assert!(a.body.get("stringData").is_none(), "{}", a.body);
    // Listed, and selectable by type.
    let list = get(&s, &format!("{SECRETS}?fieldSelector=type%3DOpaque"))
        .await
        .body;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let list = get(&s, &format!("{SECRETS}?fieldSelector=type%3Dkubernetes.io%2Ftls"))
        .await
        .body;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
    // The type never changes.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{SECRETS}/x"),
        MERGE,
        json!({"type": "Other"}),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["details"]["causes"][0]["field"], "type", "{}", a.body);
    let a = json_req(
        &s,
        "DELETE",
        &format!("{SECRETS}/x"),
        "application/json",
        json!({}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(get(&s, &format!("{SECRETS}/x")).await.code, 404);
}

#[tokio::test(start_paused = true)]
async fn bad_base64_and_bad_keys_are_refused() {
    let s = server();
    let mut body = secret("b");
    body["data"] = json!({"a": "not base64!"});
    let a = json_req(&s, "POST", SECRETS, "application/json", body).await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3"
    );
    let mut body = secret("k");
    body["data"] = json!({"a/b": "Yg=="});
    let a = json_req(&s, "POST", SECRETS, "application/json", body).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["details"]["causes"][0]["field"], "data[a/b]", "{}", a.body);
    let mut body = secret("t");
    body["type"] = json!("kubernetes.io/tls");
    body["data"] = json!({"tls.crt": "Yg=="});
    let a = json_req(&s, "POST", SECRETS, "application/json", body).await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(msg.contains("data[tls.key]: Required value"), "{msg}");
    assert_eq!(get(&s, &format!("{SECRETS}/t")).await.code, 404);
}

#[tokio::test(start_paused = true)]
async fn immutable_secrets_keep_their_data() {
    let s = server();
    let mut body = secret("i");
    body["data"] = json!({"a": "Yg=="});
    body["immutable"] = json!(true);
    let a = json_req(&s, "POST", SECRETS, "application/json", body).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let url = format!("{SECRETS}/i");
    let a = json_req(&s, "PATCH", &url, MERGE, json!({"stringData": {"a": "changed"}})).await;
    assert_eq!(a.code, 422, "{}", a.body);
    let msg = a.body["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{msg}"
    );
    let a = json_req(&s, "PATCH", &url, MERGE, json!({"immutable": false})).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(get(&s, &url).await.body["data"]["a"], "Yg==");
    // Metadata still changes.
    let a = json_req(
        &s,
        "PATCH",
        &url,
        MERGE,
        json!({"metadata": {"labels": {"k": "v"}}}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
}
