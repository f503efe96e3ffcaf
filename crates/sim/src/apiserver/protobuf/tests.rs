//! Protobuf bodies as kubectl's typed clients encode them (gogo-protobuf writes every non-pointer field, zero or
//! not), decoded to the JSON a real apiserver would serve.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderValue, header};
use prost::Message;
use serde_json::json;

use super::json::{core, meta};
use super::*;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

/// Wraps an object message in Kubernetes' envelope.
pub(crate) fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// ObjectMeta as Go encodes a struct with only the name set: every string present and empty, a zero time.
fn go_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time {
            seconds: Some(0),
            nanos: Some(0),
        }),
        ..Default::default()
    }
}

#[test]
fn namespace_as_kubectl_create_ns_sends_it() {
    let ns = core::Namespace {
        metadata: Some(go_meta("x")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: Some(String::new()),
            conditions: vec![],
        }),
    };
    let v = decode(&envelope("v1", "Namespace", ns.encode_to_vec())).expect("decodes");
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {}, "status": {}})
    );
}

#[test]
fn pod_as_kubectl_run_sends_it() {
    let container = core::Container {
        name: Some("web".into()),
        image: Some("nginx:1.27".into()),
        image_pull_policy: Some(String::new()),
        termination_message_path: Some(String::new()),
        stdin: Some(false),
        tty: Some(false),
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([(
                "cpu".to_string(),
                k8s_pb::apimachinery::pkg::api::resource::Quantity {
                    string: Some("500m".into()),
                },
            )]),
            ..Default::default()
        }),
        ports: vec![core::ContainerPort {
            container_port: Some(80),
            host_port: Some(0),
            protocol: Some(String::new()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut metadata = go_meta("web");
    metadata.labels = BTreeMap::from([("run".to_string(), "web".to_string())]);
    let pod = core::Pod {
        metadata: Some(metadata),
        spec: Some(core::PodSpec {
            containers: vec![container],
            restart_policy: Some("Always".into()),
            dns_policy: Some("ClusterFirst".into()),
            host_network: Some(false),
            termination_grace_period_seconds: Some(0),
            ..Default::default()
        }),
        status: Some(core::PodStatus::default()),
    };
    let v = decode(&envelope("v1", "Pod", pod.encode_to_vec())).expect("decodes");
    assert_eq!(
        v,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"run": "web"}},
            "spec": {
                "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "500m"}},
                    "ports": [{"containerPort": 80}]}],
                "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                // A pointer field: its explicit zero is the client's choice and is kept.
                "terminationGracePeriodSeconds": 0,
            },
            "status": {},
        })
    );
    let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(v).expect("a valid Pod");
    assert_eq!(typed.metadata.name.as_deref(), Some("web"));
}

#[test]
fn configmap_data_and_binary_data() {
    let cm = core::ConfigMap {
        metadata: Some(go_meta("cfg")),
        data: BTreeMap::from([("a".to_string(), String::new())]),
        binary_data: BTreeMap::from([("b".to_string(), vec![0u8, 1, 2])]),
        immutable: Some(false),
    };
    let v = decode(&envelope("v1", "ConfigMap", cm.encode_to_vec())).expect("decodes");
    assert_eq!(v["data"], json!({"a": ""}));
    assert_eq!(v["binaryData"], json!({"b": "AAEC"}));
    assert_eq!(v["immutable"], json!(false));
}

#[test]
fn secret_as_kubectl_create_secret_sends_it() {
    let secret = core::Secret {
        metadata: Some(go_meta("x")),
        data: BTreeMap::from([("a".to_string(), b"b".to_vec())]),
        string_data: BTreeMap::new(),
        r#type: Some(String::new()),
        immutable: None,
    };
    let v = decode(&envelope("v1", "Secret", secret.encode_to_vec())).expect("decodes");
    assert_eq!(v["data"], json!({"a": "Yg=="}));
    // Go's omitempty: an empty type and no stringData are not written (the apiserver then defaults Opaque).
    assert!(v.get("type").is_none(), "{v}");
    assert!(v.get("stringData").is_none(), "{v}");
    assert!(v.get("immutable").is_none(), "{v}");
}

#[test]
fn delete_options_of_a_typed_client() {
    let opts = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        propagation_policy: Some("Foreground".into()),
        preconditions: Some(meta::Preconditions {
            uid: Some("u1".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "DeleteOptions", opts.encode_to_vec())).expect("decodes");
    assert_eq!(v["gracePeriodSeconds"], json!(0));
    assert_eq!(v["propagationPolicy"], json!("Foreground"));
    assert_eq!(v["preconditions"], json!({"uid": "u1"}));
}

#[test]
fn undecodable_kinds_and_bad_envelopes() {
    let e = decode(&envelope("apps.kruise.io/v1alpha1", "CloneSet", vec![])).expect_err("no table");
    assert_eq!((e.code, e.reason), (415, "UnsupportedMediaType"));
    assert!(
        e.message
            .contains("send CloneSet (apps.kruise.io/v1alpha1) as JSON"),
        "{}",
        e.message
    );
    let e = decode(b"{\"kind\":\"Pod\"}").expect_err("no magic");
    assert_eq!(e.code, 400);
    let e = decode(&[b"k8s\0".as_slice(), &[0xff, 0xff]].concat()).expect_err("truncated");
    assert_eq!(e.code, 400);
}

#[test]
fn accept_only_protobuf_is_not_acceptable() {
    let with = |a: &str| {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(a).expect("header"));
        check_accept(&h)
    };
    assert!(check_accept(&HeaderMap::new()).is_ok());
    assert!(with("application/vnd.kubernetes.protobuf,application/json").is_ok());
    assert!(with("application/json;as=Table;v=v1;g=meta.k8s.io,application/json").is_ok());
    assert!(with("*/*").is_ok());
    let e = with("application/vnd.kubernetes.protobuf").expect_err("406");
    assert_eq!((e.code, e.reason), (406, "NotAcceptable"));
    assert!(
        e.message
            .starts_with("only the following media types are accepted: application/json")
    );
    assert!(with("application/vnd.kubernetes.protobuf;stream=watch").is_err());
}
