//! The embedded apiserver serves Kruise's Advanced StatefulSet (`statefulsets.apps.kruise.io`) at v1beta1
//! (storage) and v1alpha1, converting, defaulting and validating with `insitu_api::statefulset`; the scale and
//! status subresources, discovery (short names `sts`, `asts`) and Table columns as Kruise's CRD gives them.

mod common;

use common::server;
use insitu_api::statefulset::{StatefulSet, v1alpha1};
use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn beta(name: &str, spec_extra: Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": 2,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
    });
    if let (Some(a), Value::Object(b)) = (spec.as_object_mut(), spec_extra) {
        a.extend(b);
    }
    serde_json::from_value(
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                                  "metadata": {"name": name}, "spec": spec}),
    )
    .expect("v1beta1 statefulset")
}

#[tokio::test(start_paused = true)]
async fn a_v1beta1_statefulset_is_defaulted_read_as_v1alpha1_and_edited_there_losslessly() {
    let s = server();
    let betas: Api<StatefulSet> = Api::default_namespaced(s.client());
    let alphas: Api<v1alpha1::StatefulSet> = Api::default_namespaced(s.client());
    let created = betas
        .create(
            &PostParams::default(),
            &beta(
                "web",
                json!({"reserveOrdinals": [1, "4-5"], "ordinals": {"start": 2}}),
            ),
        )
        .await
        .expect("create v1beta1");
    // Kruise's defaults (SetDefaultsStatefulSet) and the template defaults.
    let spec = serde_json::to_value(&created.spec).unwrap();
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1,
               "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(created.metadata.generation, Some(1));

    // v1alpha1: the same object, without v1beta1's own fields (kept aside for the way back).
    let a = alphas.get("web").await.expect("get v1alpha1");
    assert_eq!(a.metadata.uid, created.metadata.uid);
    assert_eq!(a.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(a.spec.replicas, Some(2));
    assert_eq!(a.spec.pod_management_policy.as_deref(), Some("OrderedReady"));
    assert_eq!(a.spec.update_strategy, created.spec.update_strategy);
    let listed = alphas.list(&ListParams::default()).await.expect("list v1alpha1");
    assert_eq!(listed.items.len(), 1);

    // An edit through v1alpha1 keeps reserveOrdinals, ordinals and the retention policy.
    let patched = alphas
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("patch v1alpha1");
    assert_eq!(patched.spec.replicas, Some(4));
    let b = betas.get("web").await.expect("get v1beta1");
    assert_eq!(b.spec.replicas, Some(4));
    assert_eq!(
        serde_json::to_value(&b.spec.reserve_ordinals).unwrap(),
        json!([1, "4-5"])
    );
    assert_eq!(b.spec.ordinals.as_ref().map(|o| o.start), Some(2));
    assert_eq!(
        b.spec.persistent_volume_claim_retention_policy,
        created.spec.persistent_volume_claim_retention_policy
    );
    let anns = b.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !anns.contains_key(insitu_api::conversion::PRESERVED_ANNOTATION),
        "the stored v1beta1 object carries no conversion annotation: {anns:?}"
    );
    assert_eq!(b.metadata.generation, Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_v1alpha1_statefulset_is_stored_and_defaulted_as_kruise_does() {
    let s = server();
    let alphas: Api<v1alpha1::StatefulSet> = Api::default_namespaced(s.client());
    let betas: Api<StatefulSet> = Api::default_namespaced(s.client());
    let obj: v1alpha1::StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "podManagementPolicy": "Parallel",
                 "updateStrategy": {"type": "OnDelete"},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "c", "image": "postgres:16"}]}}}
    }))
    .unwrap();
    let created = alphas
        .create(&PostParams::default(), &obj)
        .await
        .expect("create v1alpha1");
    assert_eq!(created.spec.replicas, Some(1));
    assert_eq!(
        created
            .spec
            .update_strategy
            .as_ref()
            .map(|u| u.rolling_update.is_none()),
        Some(true),
        "OnDelete gets no rollingUpdate"
    );
    assert!(
        created.metadata.annotations.is_none(),
        "no conversion annotation on a v1alpha1 create"
    );
    let b = betas.get("db").await.expect("get v1beta1");
    assert_eq!(b.spec.pod_management_policy.as_deref(), Some("Parallel"));
    // What Kruise stores for a v1alpha1 create (its ConvertFrom drops the policy): the CRD's v1beta1 default
    // fills it on read.
    assert_eq!(
        b.spec
            .persistent_volume_claim_retention_policy
            .as_ref()
            .and_then(|p| p.when_deleted.as_deref()),
        Some("Retain")
    );
}

#[tokio::test(start_paused = true)]
async fn kruise_validation_refuses_with_its_messages() {
    let s = server();
    let betas: Api<StatefulSet> = Api::default_namespaced(s.client());
    let bad = beta(
        "bad",
        json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}),
    );
    let err = betas
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("maxUnavailable 2 needs Parallel");
    let (code, _, message) = common::api_err(err);
    assert_eq!(code, 422);
    assert!(
        message.contains(
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: can only work with Parallel PodManagementPolicyType"
        ),
        "{message}"
    );
    assert!(
        message.starts_with("StatefulSet.apps.kruise.io \"bad\" is invalid"),
        "{message}"
    );

    let in_place = beta(
        "ip",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    );
    let err = betas
        .create(&PostParams::default(), &in_place)
        .await
        .expect_err("no readiness gate");
    assert!(
        err.to_string()
            .contains("must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceIfPossible"),
        "{err}"
    );

    betas
        .create(&PostParams::default(), &beta("ok", json!({})))
        .await
        .expect("create");
    let err = betas
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serviceName": "other"}})),
        )
        .await
        .expect_err("serviceName is immutable");
    assert!(
        err.to_string()
            .contains("spec: Forbidden: updates to statefulset spec for fields other than"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn scale_and_status_subresources_work_in_both_versions() {
    let s = server();
    let betas: Api<StatefulSet> = Api::default_namespaced(s.client());
    let alphas: Api<v1alpha1::StatefulSet> = Api::default_namespaced(s.client());
    betas
        .create(&PostParams::default(), &beta("web", json!({})))
        .await
        .expect("create");
    let status = json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
        "currentReplicas": 2, "updatedReplicas": 2, "updatedReadyReplicas": 1, "labelSelector": "app=web"}});
    let with_status = betas
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");
    let st = with_status.status.expect("status");
    assert_eq!((st.replicas, st.updated_ready_replicas), (2, 1));
    // The main resource ignores status.
    let main = betas
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 9}})),
        )
        .await
        .expect("patch main");
    assert_eq!(main.status.map(|s| s.replicas), Some(2));

    let scale = betas.get_scale("web").await.expect("get scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let sst = scale.status.clone().unwrap_or_default();
    assert_eq!((sst.replicas, sst.selector.as_deref()), (2, Some("app=web")));
    let scaled: Scale = alphas
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale through v1alpha1");
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(betas.get("web").await.expect("get").spec.replicas, Some(5));
    // The v1beta1-only status field survives a v1alpha1 read of the status.
    let a = alphas.get_status("web").await.expect("get status v1alpha1");
    assert_eq!(a.status.map(|s| s.ready_replicas), Some(1));
    assert_eq!(
        betas
            .get("web")
            .await
            .unwrap()
            .status
            .map(|s| s.updated_ready_replicas),
        Some(1)
    );
}

#[tokio::test(start_paused = true)]
async fn discovery_names_it_as_kruise_does_and_tables_have_its_columns() {
    let s = server();
    let client = s.client();
    let get = |uri: String| {
        let client = client.clone();
        async move {
            client
                .request::<Value>(http::Request::get(uri).body(Vec::new()).expect("req"))
                .await
                .expect("discovery")
        }
    };
    for v in ["v1alpha1", "v1beta1"] {
        let res = get(format!("/apis/apps.kruise.io/{v}")).await;
        let list = res["resources"].as_array().cloned().unwrap_or_default();
        let sts = list
            .iter()
            .find(|r| r["name"] == "statefulsets")
            .expect("statefulsets");
        assert_eq!(sts["kind"], "StatefulSet");
        assert_eq!(sts["singularName"], "statefulset");
        assert_eq!(sts["namespaced"], true);
        assert_eq!(sts["shortNames"], json!(["sts", "asts"]));
        for sub in ["statefulsets/status", "statefulsets/scale"] {
            assert!(list.iter().any(|r| r["name"] == sub), "{v}: {sub}");
        }
    }
    let crd =
        get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/statefulsets.apps.kruise.io".into())
            .await;
    assert_eq!(crd["spec"]["versions"][1]["storage"], true);

    let betas: Api<StatefulSet> = Api::default_namespaced(client.clone());
    betas
        .create(&PostParams::default(), &beta("web", json!({})))
        .await
        .expect("create");
    let table = common::Req::new(
        "GET",
        "/apis/apps.kruise.io/v1alpha1/namespaces/default/statefulsets",
    )
    .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .send(&s.router())
    .await;
    assert_eq!(table.code, 200, "{}", table.text);
    let cols: Vec<&str> = table.body["columnDefinitions"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        cols,
        [
            "Name",
            "DESIRED",
            "CURRENT",
            "UPDATED",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES"
        ]
    );
    let row = &table.body["rows"][0]["cells"];
    assert_eq!(row[0], "web");
    assert_eq!(row[1], 2);
    assert_eq!(row[7], "nginx:1.27");
}

/// kubectl finds it by its names and scales it. Needs a kubectl (`e2e/bin/kubectl` or on PATH) and a real
/// port: `cargo test -p insitu-sim --test advanced_statefulset -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs kubectl and a real port"]
async fn kubectl_gets_and_scales_it_by_its_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bundled = root.join("e2e/bin/kubectl");
    let kubectl = if bundled.exists() {
        bundled
    } else {
        "kubectl".into()
    };
    let s = insitu_sim::apiserver::ApiServer::new(insitu_sim::SimClock::new(
        k8s_openapi::jiff::Timestamp::now(),
        1.0,
    ));
    let (addr, _h) = s.serve(([127, 0, 0, 1], 0).into()).await.expect("bind");
    let cache = std::env::temp_dir().join(format!("insitu-kubectl-asts-{}", addr.port()));
    let run = |args: &str| {
        let out = std::process::Command::new(&kubectl)
            .arg("-s")
            .arg(format!("http://{addr}"))
            .args(args.split(' '))
            .env("KUBECACHEDIR", &cache)
            .env("KUBECONFIG", "/dev/null")
            .output()
            .expect("run kubectl");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let betas: Api<StatefulSet> = Api::default_namespaced(s.client());
    betas
        .create(&PostParams::default(), &beta("web", json!({})))
        .await
        .expect("create");
    let (ok, out) = tokio::task::block_in_place(|| run("get asts"));
    assert!(ok && out.contains("DESIRED") && out.contains("web"), "{out}");
    let (ok, out) = tokio::task::block_in_place(|| run("get statefulsets.apps.kruise.io web -o wide"));
    assert!(
        ok && out.contains("IMAGES") && out.contains("nginx:1.27"),
        "{out}"
    );
    let (ok, out) = tokio::task::block_in_place(|| run("scale asts web --replicas=3"));
    assert!(ok && out.contains("scaled"), "{out}");
    assert_eq!(betas.get("web").await.expect("get").spec.replicas, Some(3));
    let (ok, out) = tokio::task::block_in_place(|| {
        run("get statefulsets.v1alpha1.apps.kruise.io web -o jsonpath={.spec.replicas}")
    });
    assert!(ok && out.trim() == "3", "{out}");
    let _ = std::fs::remove_dir_all(&cache);
}
