//! Hostile and malformed requests sent to the real kube-apiserver and to the embedded one, answer against answer:
//! the embedded apiserver must refuse, store and warn exactly as kube-apiserver does (docs/embedded-cluster.md;
//! the sim's own tests, `crates/sim/tests/hostile.rs`, hold the same answers written down).

use std::fmt::Write as _;

use anyhow::Context as _;
use axum::body::Body;
use serde_json::Value;

use crate::Env;

const MERGE: &str = "application/merge-patch+json";
const JSON: &str = "application/json";
const JSON_PATCH: &str = "application/json-patch+json";
const SMP: &str = "application/strategic-merge-patch+json";

/// One request: method, path (`{ns}` replaced by the scenario's namespace), content type, body; and what of a
/// successful answer is compared (JSON pointers into the body; an error answer's `reason` and `message` always
/// are).
struct Case {
    what: &'static str,
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Vec<u8>,
    compare: &'static [&'static str],
}

fn case(what: &'static str, method: &'static str, path: impl Into<String>) -> Case {
    Case {
        what,
        method,
        path: path.into(),
        content_type: JSON,
        body: Vec::new(),
        compare: &[],
    }
}

impl Case {
    fn body(mut self, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        self.content_type = content_type;
        self.body = body.into();
        self
    }

    fn compare(mut self, pointers: &'static [&'static str]) -> Self {
        self.compare = pointers;
        self
    }
}

/// What is compared of an answer.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    code: u16,
    warnings: usize,
    first_warning: Option<String>,
    /// `reason`, `message` of a Status, or the compared pointers of an object.
    fields: Vec<(String, Value)>,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} warnings", self.code, self.warnings)?;
        if let Some(w) = &self.first_warning {
            write!(f, ", first {w:?}")?;
        }
        f.write_str(")")?;
        for (k, v) in &self.fields {
            let v = v.to_string();
            let v: String = v.chars().take(200).collect();
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

fn pod(name: &str, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"nodeName":"hostile-nowhere","containers":[{{"name":"c","image":"x"}}],"extra":{extra}}}}}"#
    )
    .into_bytes()
}

fn deep_cloneset(version: &str, name: &str, depth: usize) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"apps.kruise.io/{version}","kind":"CloneSet","metadata":{{"name":"{name}"}},"spec":{{"replicas":0,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}},"deep":{}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}]}}}}}}}}"#,
        nested(depth - 4)
    )
    .into_bytes()
}

fn event(name: &str, ns: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"{name}"}},"involvedObject":{{"kind":"Pod","name":"p","namespace":"{ns}"}},"reason":"R","message":"m"}}"#
    )
    .into_bytes()
}

/// A ConfigMap with `n` unknown fields (one warning each). Kept under 100: kube's client (hyper) refuses an
/// answer with more than 100 headers, so the cap on warnings is checked by the sim's own tests only.
fn many_unknown(name: &str, n: usize) -> Vec<u8> {
    let mut s = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}"#);
    for i in 0..n {
        let _ = write!(s, r#","u{i}":1"#);
    }
    s.push('}');
    s.into_bytes()
}

fn cases(ns: &str) -> Vec<Case> {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let cs = format!("/apis/apps.kruise.io/v1alpha1/namespaces/{ns}/clonesets");
    let cs_beta = format!("/apis/apps.kruise.io/v1beta1/namespaces/{ns}/clonesets");
    let events = format!("/api/v1/namespaces/{ns}/events");
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t1"},"data":{"a":"b"}}"#;
    let t1 = format!("{cms}/t1");
    let long = format!("Pod.{}", "x".repeat(300));
    let mut v = vec![
        case("a ConfigMap", "POST", &cms)
            .body(JSON, cm)
            .compare(&["/data"]),
        case("timeoutSeconds=abc", "GET", format!("{cms}?timeoutSeconds=abc")),
        case(
            "watch timeoutSeconds=abc",
            "GET",
            format!("{cms}?watch=true&timeoutSeconds=abc"),
        ),
        case("labelSelector a=b=c", "GET", format!("{pods}?labelSelector=a%3Db%3Dc")),
        case("labelSelector a,,b", "GET", format!("{pods}?labelSelector=a,,b")),
        case(
            "labelSelector key in (a b)",
            "GET",
            format!("{pods}?labelSelector=key%20in%20(a%20b)"),
        ),
        case("labelSelector -a=b", "GET", format!("{pods}?labelSelector=-a%3Db")),
        case(
            "fieldSelector metadata.name=a=b",
            "GET",
            format!("{pods}?fieldSelector=metadata.name%3Da%3Db"),
        ),
        case("invalid UTF-8 in a body", "POST", &cms)
            .body(
                JSON,
                b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"u8\"},\"data\":{\"a\":\"x\xff\xe2\x82y\"}}"
                    .to_vec(),
            )
            .compare(&["/data"]),
        case("merge patch metadata: null", "PATCH", &t1).body(MERGE, r#"{"metadata":null}"#),
        case("merge patch name: null", "PATCH", &t1).body(MERGE, r#"{"metadata":{"name":null}}"#),
        case("JSON patch removing the name", "PATCH", &t1)
            .body(JSON_PATCH, r#"[{"op":"remove","path":"/metadata/name"}]"#),
        case("JSON patch removing metadata", "PATCH", &t1)
            .body(JSON_PATCH, r#"[{"op":"remove","path":"/metadata"}]"#),
        case("strategic $patch: replace at the root", "PATCH", &t1)
            .body(SMP, r#"{"$patch":"replace","data":{"x":"y"}}"#),
        case("strategic $patch: delete at the root", "PATCH", &t1).body(SMP, r#"{"$patch":"delete"}"#),
        case("PUT without a name", "PUT", &t1)
            .body(JSON, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{},"data":{"a":"c"}}"#),
        case("merge patch of deletionTimestamp", "PATCH", &t1)
            .body(MERGE, r#"{"metadata":{"deletionTimestamp":"2030-01-01T00:00:00Z"}}"#),
        case("a core/v1 Event named over 253 characters", "POST", &events)
            .body(JSON, event(&long, ns))
            .compare(&["/metadata/name"]),
        case("a core/v1 Event named a%b", "POST", &events).body(JSON, event("a%b", ns)),
        // The storage version: no conversion. In v1alpha1 the conversion webhook's answer nests the object three
        // levels deeper, and kube-apiserver decodes it with the same limit.
        case("a v1beta1 CloneSet 10,000 levels deep", "POST", &cs_beta)
            .body(JSON, deep_cloneset("v1beta1", "deep", 10_000))
            .compare(&["/metadata/name"]),
        case("a v1alpha1 CloneSet 9,997 levels deep", "POST", &cs)
            .body(JSON, deep_cloneset("v1alpha1", "edge", 9_997))
            .compare(&["/metadata/name"]),
        case("a v1alpha1 CloneSet 9,998 levels deep", "POST", &cs)
            .body(JSON, deep_cloneset("v1alpha1", "over", 9_998)),
        case("a CloneSet 10,001 levels deep", "POST", &cs)
            .body(JSON, deep_cloneset("v1alpha1", "deeper", 10_001)),
        case("a pod's unknown field 9,990 levels deep", "POST", &pods)
            .body(JSON, pod("p", &nested(9_990)))
            .compare(&["/spec/extra"]),
        case("a pod 10,000 levels deep", "POST", &pods).body(JSON, pod("p2", &nested(10_000))),
        case("a merge patch 10,000 levels deep", "PATCH", format!("{pods}/p"))
            .body(MERGE, format!(r#"{{"metadata":{{"x":{}}}}}"#, nested(10_000))),
        case("a truncated merge patch", "PATCH", format!("{pods}/p")).body(MERGE, r#"{"x":"#),
        case("a ConfigMap with 50 unknown fields", "POST", &cms)
            .body(JSON, many_unknown("unknown", 50))
            .compare(&["/metadata/name"]),
        case("a ConfigMap with a repeated field", "POST", &cms)
            .body(
                JSON,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1"},"data":{"b":"2"}}"#,
            )
            .compare(&["/data"]),
    ];
    // Cleanup, compared too (the pod is on no node: deleted at once).
    for name in ["deep", "edge"] {
        v.push(
            case("delete a deep CloneSet", "DELETE", format!("{cs_beta}/{name}"))
                .compare(&["/metadata/name"]),
        );
    }
    v.push(
        case(
            "delete the pod",
            "DELETE",
            format!("{pods}/p?gracePeriodSeconds=0"),
        )
        .compare(&["/metadata/name"]),
    );
    v
}

async fn send(client: &kube::Client, c: &Case) -> anyhow::Result<Answer> {
    let req = axum::http::Request::builder()
        .method(c.method)
        .uri(&c.path)
        .header("accept", "application/json")
        .header("content-type", c.content_type)
        .body(kube::client::Body::from(c.body.clone()))?;
    let resp = client
        .send(req)
        .await
        .with_context(|| format!("{}: sending", c.what))?;
    let code = resp.status().as_u16();
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = axum::body::to_bytes(Body::new(resp.into_body()), 256 << 20)
        .await
        .map_err(|e| anyhow::anyhow!("{}: reading the answer: {e}", c.what))?;
    // A watch answers a stream of events: its first one is compared.
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let body: Value = serde_json::from_slice(first).unwrap_or(Value::Null);
    let fields = if body["kind"] == "Status" || code >= 400 {
        ["reason", "message"]
            .iter()
            .map(|k| ((*k).to_string(), body[*k].clone()))
            .collect()
    } else {
        c.compare
            .iter()
            .map(|p| ((*p).to_string(), body.pointer(p).cloned().unwrap_or(Value::Null)))
            .collect()
    };
    Ok(Answer {
        code,
        warnings: warnings.len(),
        first_warning: warnings.into_iter().next(),
        fields,
    })
}

/// Every case on both servers; the scenario fails listing each difference.
pub async fn hostile_parity(env: &Env, ns: &str) -> anyhow::Result<()> {
    let sim = insitu_sim::apiserver::ApiServer::new(insitu_sim::SimClock::new(
        k8s_openapi::jiff::Timestamp::now(),
        1.0,
    ));
    let embedded = sim.client();
    let namespace = format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
    let created = send(
        &embedded,
        &case("the namespace", "POST", "/api/v1/namespaces").body(JSON, namespace),
    )
    .await?;
    anyhow::ensure!(created.code == 201, "the embedded apiserver: namespace {created}");
    let mut diffs = Vec::new();
    let all = cases(ns);
    for c in &all {
        let real = send(&env.client, c).await?;
        let ours = send(&embedded, c).await?;
        if real != ours {
            diffs.push(format!("{}: kube-apiserver {real}; embedded {ours}", c.what));
        }
    }
    println!(
        "    hostile_parity: {} requests, {} answered alike",
        all.len(),
        all.len() - diffs.len()
    );
    anyhow::ensure!(diffs.is_empty(), "{} differ: {}", diffs.len(), diffs.join(" | "));
    Ok(())
}
