//! Objects the controller cannot decode, created mid-run as issue 9 found them: a ControllerRevision whose
//! `data` nests 125 deep (valid alone, past serde_json's recursion limit inside a LIST), one nesting 200 deep
//! (undecodable alone), and a pod with a numeric label value (written before validation existed). They are
//! stored as they are, past validation, as an older apiserver or a direct etcd write would leave them.

use insitu_sim::apiserver::ApiServer;
use serde_json::{Value, json};

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

/// Creates the malformed objects of `seed`; one line per object for the trace.
pub fn inject(apiserver: &ApiServer, seed: u64) -> Vec<String> {
    let revision = |name: String, depth: usize| {
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
               "metadata": {"name": name, "namespace": "default"}, "revision": 1, "data": nested(depth)})
    };
    // In another namespace: the checker's own typed watch of `default` must not choke on it; the controller
    // watches every namespace.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("numeric-label-{seed}"), "namespace": "tenant",
                     "labels": {"app": "torture", "tier": 3}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.19.0"}]}});
    let tenant = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant"}});
    let _ = apiserver.create_unvalidated("", "v1", "namespaces", "", tenant);
    let objects = [
        (
            "apps",
            "controllerrevisions",
            "default",
            revision(format!("deep-125-{seed}"), 125),
        ),
        (
            "apps",
            "controllerrevisions",
            "default",
            revision(format!("deep-200-{seed}"), 200),
        ),
        ("", "pods", "tenant", pod),
    ];
    objects
        .into_iter()
        .map(|(group, resource, ns, body)| {
            let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
            match apiserver.create_unvalidated(group, "v1", resource, ns, body) {
                Ok(_) => format!("malformed {resource} {ns}/{name} stored"),
                Err(e) => format!("malformed {resource} {ns}/{name} not stored: {}", e.message),
            }
        })
        .collect()
}
