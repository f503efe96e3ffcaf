//! `admissionregistration.k8s.io/v1` webhook configurations in the embedded apiserver: served in discovery,
//! stored with kube-apiserver's defaults, listed, watched, patched as `insitu run` patches its defaulting
//! webhook, refused where kube-apiserver's validation refuses them, and deleted.

mod common;

use common::{get, server};
use futures::{StreamExt, TryStreamExt};
use insitu_api::crd::{self, WebhookTarget};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn mutating_configuration_round_trip() {
    let s = server();
    let disc = get(&s, "/apis/admissionregistration.k8s.io/v1").await;
    assert_eq!(disc.code, 200);
    let names: Vec<&str> = disc.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
    );

    let client = s.client();
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let target = WebhookTarget::Url("https://127.0.0.1:9443/convert".into());
    let want = crd::mutating_webhook_configuration(&target, None);
    let obj: MutatingWebhookConfiguration = serde_json::from_value(want.clone()).expect("typed");
    let created = api.create(&PostParams::default(), &obj).await.expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    let hook = &created.webhooks.as_ref().expect("webhooks")[0];
    // Defaults the object did not carry, as SetDefaults_MutatingWebhook sets them.
    assert_eq!(hook.reinvocation_policy.as_deref(), Some("Never"));
    assert!(hook.object_selector.is_some() && hook.namespace_selector.is_some());
    match watch.try_next().await.expect("event") {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some(crd::MUTATING_CONFIG_NAME)),
        other => panic!("expected ADDED, got {other:?}"),
    }
    // The controller's patch of its webhooks (a new CA bundle): stored, generation bumped.
    let with_ca = crd::mutating_webhook_configuration(&target, Some("Q0E="));
    let patch = json!({"webhooks": with_ca["webhooks"]});
    let patched = api
        .patch(
            crd::MUTATING_CONFIG_NAME,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("patched");
    assert_eq!(patched.metadata.generation, Some(2));
    let ca = patched
        .webhooks
        .as_ref()
        .and_then(|w| w[0].client_config.ca_bundle.clone());
    assert_eq!(ca.map(|b| b.0), Some(b"CA".to_vec()));
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    // kubectl get: the Webhooks column.
    let table = common::Req::new(
        "GET",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    )
    .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .send(&s.router())
    .await;
    assert_eq!(table.body["columnDefinitions"][1]["name"], "Webhooks");
    assert_eq!(table.body["rows"][0]["cells"][1], 1);
    api.delete(crd::MUTATING_CONFIG_NAME, &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(
        api.get_opt(crd::MUTATING_CONFIG_NAME)
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_configurations_refused_as_kube() {
    let s = server();
    let raw = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v"},
        "webhooks": [{"name": "v.example.com", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}]
    });
    let url = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let a = common::json_req(&s, "POST", url, "application/json", raw.clone()).await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(
        a.body["message"],
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"v\" is invalid: webhooks[0].sideEffects: \
         Required value: must specify one of None, NoneOnDryRun"
    );
    // k8s-openapi's typed form cannot leave it out: it sends "", which kube refuses as unsupported.
    let api: Api<ValidatingWebhookConfiguration> = Api::all(s.client());
    let obj: ValidatingWebhookConfiguration = serde_json::from_value(raw).expect("typed");
    let e = api.create(&PostParams::default(), &obj).await;
    let (code, _, message) = common::api_err(e.expect_err("sideEffects \"\" is refused"));
    assert_eq!(code, 422);
    assert!(
        message.ends_with(
            "webhooks[0].sideEffects: Unsupported value: \"\": supported values: \"None\", \"NoneOnDryRun\""
        ),
        "{message}"
    );
    let mut ok = obj.clone();
    if let Some(h) = ok.webhooks.as_mut().and_then(|w| w.first_mut()) {
        h.side_effects = "None".into();
    }
    let created = api.create(&PostParams::default(), &ok).await.expect("created");
    let hook = &created.webhooks.as_ref().expect("webhooks")[0];
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(hook.timeout_seconds, Some(10));
    // Validating webhooks have no reinvocation policy: none is defaulted into the stored JSON.
    let raw = get(
        &s,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
    )
    .await;
    assert_eq!(raw.body["webhooks"][0]["timeoutSeconds"], 10);
    assert!(raw.body["webhooks"][0].get("reinvocationPolicy").is_none());
}
