//! The committed `deploy/crd.yaml` must equal what the code generates (controller-rs style CRD check).

#[test]
fn committed_crd_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crd.yaml");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = insitu_api::crds::crd_yaml();
    if std::env::var_os("UPDATE_CRD").is_some() {
        std::fs::write(path, &generated).expect("write deploy/crd.yaml");
        return;
    }
    assert!(
        committed == generated,
        "deploy/crd.yaml is stale: regenerate it with `cargo run -p insitu -- crd > deploy/crd.yaml` (or UPDATE_CRD=1 cargo test -p insitu-api)"
    );
}

/// The chart's `crds/` holds the same CRDs, one file per CRD (a chart cannot read `deploy/`).
#[test]
fn chart_crds_are_the_committed_ones() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/insitu/crds");
    let generated = insitu_api::crds::crd_yaml();
    let (cloneset, statefulset) = generated.split_once("\n---\n").expect("two CRD documents");
    let files = [
        ("clonesets.apps.kruise.io.yaml", format!("{cloneset}\n")),
        ("statefulsets.apps.kruise.io.yaml", statefulset.to_string()),
    ];
    for (file, want) in files {
        let path = format!("{dir}/{file}");
        if std::env::var_os("UPDATE_CRD").is_some() {
            std::fs::write(&path, &want).expect("write the chart's CRD");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == want,
            "charts/insitu/crds/{file} is stale: regenerate with UPDATE_CRD=1 cargo test -p insitu-api --test crd_current"
        );
    }
}

#[test]
fn crd_has_kruise_identity() {
    let crd = insitu_api::crd::crd();
    assert_eq!(crd.spec.group, "apps.kruise.io");
    assert_eq!(crd.spec.names.kind, "CloneSet");
    assert_eq!(crd.spec.names.short_names, Some(vec!["clone".to_string()]));
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    let sub = v.subresources.as_ref().expect("subresources");
    assert!(sub.status.is_some());
    let scale = sub.scale.as_ref().expect("scale subresource");
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.replicas");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.labelSelector")
    );
    let cols: Vec<&str> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        cols,
        [
            "DESIRED",
            "UPDATED",
            "UPDATED_READY",
            "UPDATED_AVAILABLE",
            "READY",
            "TOTAL",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
}

#[test]
fn seed_yaml_parses_and_validates() {
    let yaml = include_str!("../../../examples/cloneset-demo.yaml");
    let cs: insitu_api::CloneSet = serde_saphyr::from_str(yaml).expect("seed YAML parses");
    assert_eq!(cs.spec.replicas, Some(3));
    assert!(insitu_api::validation::validate_create(&cs).is_empty());
}

#[test]
fn committed_mutating_webhook_configuration_is_current() {
    let yaml = include_str!("../../../deploy/webhook.yaml");
    let docs: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).expect("deploy/webhook.yaml parses"))
        .collect();
    let committed = docs
        .iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .expect("deploy/webhook.yaml has the MutatingWebhookConfiguration");
    let generated =
        insitu_api::crd::mutating_webhook_configuration(&insitu_api::crd::default_webhook_target(), None);
    assert_eq!(
        *committed, generated,
        "deploy/webhook.yaml's MutatingWebhookConfiguration is stale"
    );
    let url = insitu_api::crd::WebhookTarget::Url("https://127.0.0.1:9443/convert".into());
    let out = insitu_api::crd::mutating_webhook_configuration(&url, Some("Q0E="));
    assert_eq!(
        out["webhooks"][0]["clientConfig"],
        serde_json::json!({"url": "https://127.0.0.1:9443/mutate-cloneset", "caBundle": "Q0E="})
    );
}

/// deploy/networkpolicy.yaml selects the controller pods of deploy/deployment.yaml and opens exactly their
/// webhook and metrics ports (by the names the Deployment gives them), nothing else.
#[test]
fn committed_network_policy_opens_only_the_deployments_webhook_and_metrics_ports() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let policy: NetworkPolicy = serde_saphyr::from_str(include_str!("../../../deploy/networkpolicy.yaml"))
        .expect("deploy/networkpolicy.yaml parses as a NetworkPolicy");
    let deployment: Deployment = serde_saphyr::from_str(include_str!("../../../deploy/deployment.yaml"))
        .expect("deploy/deployment.yaml parses as a Deployment");
    let dspec = deployment.spec.unwrap();
    let pspec = policy.spec.unwrap();
    assert_eq!(
        pspec.pod_selector.unwrap().match_labels,
        dspec.selector.match_labels,
        "the policy selects the Deployment's pods"
    );
    assert_eq!(policy.metadata.namespace, deployment.metadata.namespace);
    assert_eq!(pspec.policy_types, Some(vec!["Ingress".to_string()]));
    let opened: Vec<String> = pspec
        .ingress
        .unwrap()
        .iter()
        .flat_map(|rule| rule.ports.clone().unwrap_or_default())
        .map(|p| match p.port {
            Some(IntOrString::String(name)) => name,
            other => panic!("ports are named as in the Deployment, got {other:?}"),
        })
        .collect();
    let container = &dspec.template.spec.unwrap().containers[0];
    let named: Vec<String> = container
        .ports
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.name)
        .collect();
    assert_eq!(opened, ["webhook", "http-metrics"]);
    assert!(
        opened.iter().all(|p| named.contains(p)),
        "{opened:?} vs {named:?}"
    );
}
