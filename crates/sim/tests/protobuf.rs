//! Protobuf request bodies through the router, encoded with k8s-pb as kubectl's typed clients send them
//! (`kubectl create namespace`, `kubectl run`, `kubectl create configmap`): created and served back as JSON.

mod common;

use std::collections::BTreeMap;

use common::{Answer, Req, get, server};
use insitu_sim::apiserver::ApiServer;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// kubectl's Accept for typed clients.
const KUBECTL_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

fn named(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(String::new()),
        resource_version: Some(String::new()),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    })
}

async fn post(s: &ApiServer, uri: &str, accept: &str, body: Vec<u8>) -> Answer {
    Req::new(
        "POST",
        &format!("{uri}?fieldManager=kubectl-create&fieldValidation=Strict"),
    )
    .header("accept", accept)
    .body(PROTOBUF, body)
    .send(&s.router())
    .await
}

#[tokio::test(start_paused = true)]
async fn kubectl_create_bodies_in_protobuf() {
    let s = server();
    let ns = core::Namespace {
        metadata: named("proto"),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus::default()),
    };
    let a = post(
        &s,
        "/api/v1/namespaces",
        KUBECTL_ACCEPT,
        envelope("v1", "Namespace", ns.encode_to_vec()),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert!(
        a.content_type.starts_with("application/json"),
        "{}",
        a.content_type
    );
    assert_eq!(a.body["metadata"]["name"], "proto");
    assert_eq!(a.body["status"]["phase"], "Active");
    assert_eq!(
        a.body["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "proto"
    );

    let pod = core::Pod {
        metadata: named("web"),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("web".into()),
                image: Some("nginx:1.27".into()),
                image_pull_policy: Some(String::new()),
                termination_message_path: Some(String::new()),
                ..Default::default()
            }],
            restart_policy: Some("Always".into()),
            dns_policy: Some("ClusterFirst".into()),
            ..Default::default()
        }),
        status: Some(core::PodStatus::default()),
    };
    let pods = "/api/v1/namespaces/proto/pods";
    let a = post(
        &s,
        pods,
        KUBECTL_ACCEPT,
        envelope("v1", "Pod", pod.encode_to_vec()),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    // The empty strings kubectl's encoder wrote are Go zero values: defaulted as if absent.
    let c = &a.body["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent", "{c}");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log", "{c}");
    assert_eq!(
        get(&s, &format!("{pods}/web")).await.body["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );

    let cm = core::ConfigMap {
        metadata: named("cfg"),
        data: BTreeMap::from([("a".to_string(), "1".to_string())]),
        ..Default::default()
    };
    let cms = "/api/v1/namespaces/proto/configmaps";
    let a = post(
        &s,
        cms,
        KUBECTL_ACCEPT,
        envelope("v1", "ConfigMap", cm.encode_to_vec()),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    assert_eq!(
        get(&s, &format!("{cms}/cfg")).await.body["data"],
        json!({"a": "1"})
    );

    // A typed client's DELETE sends DeleteOptions in protobuf too: its precondition is honoured.
    let delete = |uid: &str| {
        let opts = meta::DeleteOptions {
            preconditions: Some(meta::Preconditions {
                uid: Some(uid.into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        Req::new("DELETE", &format!("{cms}/cfg"))
            .header("accept", KUBECTL_ACCEPT)
            .body(PROTOBUF, envelope("v1", "DeleteOptions", opts.encode_to_vec()))
    };
    let a = delete("not-its-uid").send(&s.router()).await;
    assert_eq!(a.code, 409, "{}", a.text);
    let uid = get(&s, &format!("{cms}/cfg")).await.body["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let a = delete(&uid).send(&s.router()).await;
    assert_eq!(a.code, 200, "{}", a.text);
    assert_eq!(get(&s, &format!("{cms}/cfg")).await.code, 404);
}

#[tokio::test(start_paused = true)]
async fn protobuf_refusals_name_the_kind_and_the_alternative() {
    let s = server();
    let cs = "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets";
    let a = post(
        &s,
        cs,
        KUBECTL_ACCEPT,
        envelope("apps.kruise.io/v1alpha1", "CloneSet", vec![]),
    )
    .await;
    assert_eq!(
        (a.code, a.body["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{}",
        a.text
    );
    assert!(
        a.text.contains("send CloneSet (apps.kruise.io/v1alpha1) as JSON"),
        "{}",
        a.text
    );
    let a = post(
        &s,
        "/api/v1/namespaces",
        PROTOBUF,
        envelope("v1", "Namespace", vec![]),
    )
    .await;
    assert_eq!(
        (a.code, a.body["reason"].as_str()),
        (406, Some("NotAcceptable")),
        "{}",
        a.text
    );
    let a = Req::new("GET", "/api/v1/namespaces/default")
        .header("accept", PROTOBUF)
        .send(&s.router())
        .await;
    assert_eq!(a.code, 406, "{}", a.text);
    assert!(
        a.text
            .contains("only the following media types are accepted: application/json")
    );
}
