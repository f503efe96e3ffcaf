//! The seed tutorial's v1alpha1-shaped rolling-update fields sent to v1beta1 (kubectl's preferred version) land
//! under `rollingUpdate` by merge patch, JSON patch, update and server-side apply; both spellings set differently
//! are refused naming both; nothing keeps the old spelling when stored (docs/seed-tutorial.md).

mod common;

use common::{get, json_req, server};
use serde_json::{Value, json};

const BETA: &str = "/apis/apps.kruise.io/v1beta1/namespaces/default/clonesets";
const ALPHA: &str = "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets";
const MERGE: &str = "application/merge-patch+json";

/// The tutorial's CloneSet, as `kubectl apply -f cloneset-demo.yaml` creates it (v1alpha1).
fn seed() -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "nginx-demo"},
           "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "nginx-demo"}},
                    "updateStrategy": {"type": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10},
                                       "maxUnavailable": 1},
                    "template": {"metadata": {"labels": {"app": "nginx-demo"}},
                                 "spec": {"containers": [{"name": "nginx", "image": "nginx:1.19.0"}]}}}})
}

async fn strategy(s: &insitu_sim::apiserver::ApiServer) -> Value {
    get(s, &format!("{BETA}/nginx-demo")).await.body["spec"]["updateStrategy"].clone()
}

#[tokio::test(start_paused = true)]
async fn the_tutorials_patches_to_v1beta1_do_what_they_say() {
    let s = server();
    let created = json_req(&s, "POST", ALPHA, "application/json", seed()).await;
    assert_eq!(created.code, 201, "{}", created.text);

    // Canary step 1 and pause, exactly as the tutorial sends them (to v1beta1).
    for (patch, key, want) in [
        (
            json!({"spec": {"updateStrategy": {"partition": 8}}}),
            "partition",
            json!(8),
        ),
        (
            json!({"spec": {"updateStrategy": {"paused": true}}}),
            "paused",
            json!(true),
        ),
        (
            json!({"spec": {"updateStrategy": {"maxUnavailable": "20%"}}}),
            "maxUnavailable",
            json!("20%"),
        ),
        (
            json!({"spec": {"updateStrategy": {"maxSurge": 0}}}),
            "maxSurge",
            json!(0),
        ),
    ] {
        let a = json_req(&s, "PATCH", &format!("{BETA}/nginx-demo"), MERGE, patch.clone()).await;
        assert_eq!(a.code, 200, "{patch}: {}", a.text);
        assert!(a.warnings.is_empty(), "{patch}: {:?}", a.warnings);
        let us = strategy(&s).await;
        assert_eq!(us["rollingUpdate"][key], want, "{patch}: {us}");
        assert!(us.get(key).is_none(), "{patch}: old spelling stored: {us}");
    }
    // The same through v1alpha1 (the tutorial's apiVersion): its own fields.
    let alpha = get(&s, &format!("{ALPHA}/nginx-demo")).await.body;
    assert_eq!(alpha["spec"]["updateStrategy"]["partition"], 8);
    assert_eq!(alpha["spec"]["updateStrategy"]["paused"], true);
    assert_eq!(alpha["spec"]["updateStrategy"]["type"], "InPlaceIfPossible");

    // Resume; the troubleshooting section's grace-period patch; v1alpha1's type sent to v1beta1.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo"),
        MERGE,
        json!({"spec": {"updateStrategy": {"paused": false, "type": "InPlaceOnly",
                                            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 3}}}}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let us = strategy(&s).await;
    assert_eq!(us["type"], "RollingUpdate", "{us}");
    assert_eq!(us["rollingUpdate"]["podUpdatePolicy"], "InPlaceOnly", "{us}");
    assert_eq!(
        us["rollingUpdate"]["inPlaceUpdateStrategy"]["gracePeriodSeconds"], 3,
        "{us}"
    );
    assert!(
        us["rollingUpdate"].get("paused").is_none_or(|p| p == false),
        "{us}"
    );
    assert!(
        us.get("inPlaceUpdateStrategy").is_none() && us.get("paused").is_none(),
        "{us}"
    );
}

#[tokio::test(start_paused = true)]
async fn update_and_server_side_apply_in_the_old_spelling() {
    let s = server();
    assert_eq!(
        json_req(&s, "POST", ALPHA, "application/json", seed()).await.code,
        201
    );
    // PUT of the v1beta1 object with `partition` added in the old spelling (a runbook edit).
    let mut obj = get(&s, &format!("{BETA}/nginx-demo")).await.body;
    obj["spec"]["updateStrategy"]["partition"] = json!(4);
    let a = json_req(&s, "PUT", &format!("{BETA}/nginx-demo"), "application/json", obj).await;
    assert_eq!(a.code, 200, "{}", a.text);
    assert_eq!(strategy(&s).await["rollingUpdate"]["partition"], 4);

    // Server-side apply of a v1beta1 manifest written in the old spelling.
    let applied = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                         "metadata": {"name": "nginx-demo"},
                         "spec": {"updateStrategy": {"paused": true, "partition": 6}}});
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo?fieldManager=runbook&force=true"),
        "application/apply-patch+yaml",
        applied,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let us = strategy(&s).await;
    assert_eq!(
        (&us["rollingUpdate"]["paused"], &us["rollingUpdate"]["partition"]),
        (&json!(true), &json!(6)),
        "{us}"
    );
    assert!(
        us.get("paused").is_none() && us.get("partition").is_none(),
        "{us}"
    );

    // A v1beta1 create in the old spelling.
    let mut beta = seed();
    beta["apiVersion"] = json!("apps.kruise.io/v1beta1");
    beta["metadata"]["name"] = json!("beta-old-spelling");
    beta["spec"]["updateStrategy"]["partition"] = json!(2);
    let a = json_req(&s, "POST", BETA, "application/json", beta).await;
    assert_eq!(a.code, 201, "{}", a.text);
    let us = &a.body["spec"]["updateStrategy"];
    assert_eq!(us["type"], "RollingUpdate", "{us}");
    assert_eq!(
        us["rollingUpdate"]["podUpdatePolicy"], "InPlaceIfPossible",
        "{us}"
    );
    assert_eq!(us["rollingUpdate"]["partition"], 2, "{us}");
    assert_eq!(us["rollingUpdate"]["maxUnavailable"], 1, "{us}");
    assert_eq!(
        us["rollingUpdate"]["inPlaceUpdateStrategy"]["gracePeriodSeconds"], 10,
        "{us}"
    );
}

#[tokio::test(start_paused = true)]
async fn both_spellings_set_differently_are_refused_naming_both() {
    let s = server();
    assert_eq!(
        json_req(&s, "POST", ALPHA, "application/json", seed()).await.code,
        201
    );
    let before = strategy(&s).await;
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo"),
        MERGE,
        json!({"spec": {"updateStrategy": {"partition": 2, "rollingUpdate": {"partition": 1}}}}),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.text);
    let msg = a.body["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("admission webhook \"mcloneset.insitu.io\" denied the request: spec.updateStrategy.partition: Invalid value: 2: conflicts with spec.updateStrategy.rollingUpdate.partition (1)"),
        "{msg}"
    );
    assert_eq!(strategy(&s).await, before, "nothing changed");
}

#[tokio::test(start_paused = true)]
async fn the_seeds_merge_patches_of_the_containers_list_warn() {
    let s = server();
    assert_eq!(
        json_req(&s, "POST", ALPHA, "application/json", seed()).await.code,
        201
    );
    // Give the stored container what the tutorial's has, so the replaced list loses something.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo"),
        "application/json-patch+json",
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/env",
                "value": [{"name": "VERSION", "value": "v1.0"}]}]),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo?dryRun=All"),
        MERGE,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.20.0"}]}}}}),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.text);
    assert!(
        a.warnings.iter().any(|w| w.contains("this update removes env")
            && w.contains("--type=json")
            && w.contains("/spec/template/spec/containers/0/image")),
        "{:?}",
        a.warnings
    );
    // 方式 2: the replaced list has no image: refused, and the warning still reaches the client.
    let a = json_req(
        &s,
        "PATCH",
        &format!("{BETA}/nginx-demo"),
        MERGE,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "env": [{"name": "VERSION", "value": "v2.0"}]}]}}}}),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert!(
        a.text.contains("containers[0].image: Required value"),
        "{}",
        a.text
    );
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("/spec/template/spec/containers/0/env/0/value")),
        "{:?}",
        a.warnings
    );
}
