//! Kruise's template defaults on the simulated cluster: the seed's CloneSet is stored with them (the embedded
//! apiserver runs `insitu_api::defaults` where a real one calls the mutating webhook), its pods carry them, and
//! the revision hash is the one computed from the defaulted template.

mod common;

use common::{Harness, run, seed_cloneset};
use k8s_openapi::api::core::v1::PodTemplateSpec;

/// What kruise-manager (built from the Kruise snapshot 07169cf, with its mutating webhook, on kube-apiserver
/// v1.37.2) named the seed's revision, recorded 2026-12-02 from `kubectl get controllerrevisions` after
/// `kubectl apply -f examples/cloneset-demo.yaml`; its pods carried the same `controller-revision-hash`.
const KRUISE_SEED_REVISION: &str = "nginx-demo-784887bdd7";

/// The revision name Kruise's `NewRevision` gives `template` for a CloneSet named `name` (collision count 0).
fn revision_name(name: &str, template: &serde_json::Value) -> String {
    let tpl: PodTemplateSpec = serde_json::from_value(template.clone()).expect("template");
    let data = insitu_core::revision::revision_data(&tpl);
    let hash = insitu_core::revision::hash_revision(insitu_core::gojson::marshal(&data).as_bytes(), 0);
    insitu_core::revision::revision_name(name, &hash)
}

#[test]
fn the_seed_template_is_stored_defaulted_and_hashed_from_the_defaults() {
    run(async {
        let h = Harness::start(11).await;
        h.create(&seed_cloneset()).await;
        let stored = h.clonesets().get("nginx-demo").await.expect("get");
        let tpl = serde_json::to_value(&stored.spec.template).expect("template json");
        let spec = &tpl["spec"];
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        let c = &spec["containers"][0];
        assert_eq!(
            c["imagePullPolicy"], "Always",
            "Kruise's in-place default, not the tag rule"
        );
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["readinessProbe"]["timeoutSeconds"], 1);
        assert_eq!(c["livenessProbe"]["failureThreshold"], 3);

        // The same defaults as the pure function gives for the YAML as written.
        let written = serde_json::to_value(seed_cloneset()).expect("seed json");
        let defaulted = insitu_api::defaults::admit(&written, None);
        assert_eq!(tpl, defaulted["spec"]["template"]);

        h.wait_ready("nginx-demo", 3, Some("nginx:1.19.0"), 120).await;
        let expected = revision_name("nginx-demo", &defaulted["spec"]["template"]);
        let undefaulted = revision_name("nginx-demo", &written["spec"]["template"]);
        assert_ne!(expected, undefaulted, "the defaults change the revision");
        assert_eq!(
            expected, KRUISE_SEED_REVISION,
            "the hash Kruise gives the same YAML"
        );
        for p in h.pods("nginx-demo").await {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels.get("controller-revision-hash"), Some(&expected));
            let pc = &p.spec.as_ref().expect("spec").containers[0];
            assert_eq!(pc.image_pull_policy.as_deref(), Some("Always"));
        }
        assert_eq!(h.status("nginx-demo").await.update_revision, expected);
    });
}
