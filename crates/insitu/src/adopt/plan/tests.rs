//! Tests of adopt's planning: Kruise's lease, webhook entries (as `config/webhook` declares them), the CRD, storage.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn lease(holder: &str, renewed: &str, secs: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.into()),
        renew_time: Some(MicroTime(at(renewed))),
        lease_duration_seconds: Some(secs),
        ..LeaseSpec::default()
    }
}

#[test]
fn a_lease_renewed_within_its_duration_is_held() {
    let now = at("2026-12-02T05:00:10Z");
    assert_eq!(lease_state(None, now), LeaseState::Absent);
    assert_eq!(
        lease_state(Some(&lease("km_1", "2026-12-02T05:00:00Z", 15)), now),
        LeaseState::Held {
            holder: "km_1".into(),
            expires_in: Duration::from_secs(5)
        }
    );
    assert_eq!(
        lease_state(Some(&lease("km_1", "2026-12-02T04:59:50Z", 15)), now),
        LeaseState::Free {
            holder: Some("km_1".into()),
            expired_for: Some(Duration::from_secs(5))
        }
    );
    // client-go's release: holder cleared.
    assert_eq!(
        lease_state(Some(&lease("", "2026-12-02T05:00:09Z", 1)), now),
        LeaseState::Free {
            holder: None,
            expired_for: None
        }
    );
}

#[test]
fn kruise_running_names_the_lease_or_the_deployment_and_what_to_do() {
    let held = LeaseState::Held {
        holder: "km_1".into(),
        expires_in: Duration::from_millis(4200),
    };
    let why = kruise_running(&held, None).unwrap();
    assert!(
        why.contains("km_1 holds the Lease kruise-system/kruise-manager"),
        "{why}"
    );
    assert!(why.contains("in 5 s"), "{why}");
    assert!(
        why.contains("scale deployment kruise-controller-manager --replicas=0"),
        "{why}"
    );
    let free = LeaseState::Free {
        holder: None,
        expired_for: None,
    };
    let dep = json!({"spec": {"replicas": 0}, "status": {"replicas": 1}});
    let why = kruise_running(&free, deployment_replicas(Some(&dep))).unwrap();
    assert!(
        why.contains("has 1 replica(s)"),
        "a terminating replica still counts: {why}"
    );
    let stopped = json!({"spec": {"replicas": 0}, "status": {}});
    assert_eq!(kruise_running(&free, deployment_replicas(Some(&stopped))), None);
    assert_eq!(kruise_running(&LeaseState::Absent, None), None);
}

fn hook(name: &str, group: &str, resources: &[&str], ops: &[&str], policy: Option<&str>) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"url": "https://127.0.0.1:9876/x"},
        "rules": [{"apiGroups": [group], "apiVersions": ["v1", "v1alpha1", "v1beta1"],
                   "operations": ops, "resources": resources}],
        "sideEffects": "None",
    });
    if let Some(p) = policy {
        w["failurePolicy"] = json!(p);
    }
    w
}

/// The entries Kruise's `config/webhook` declares that matter here (names, rules and policies as there).
fn kruise_mutating() -> Value {
    let webhooks = json!([
        hook("mpod.kb.io", "", &["pods"], &["CREATE"], Some("Fail")),
        hook(
            "mcloneset.kb.io",
            "apps.kruise.io",
            &["clonesets"],
            &["CREATE", "UPDATE"],
            Some("Fail")
        ),
        hook(
            "msidecarset.kb.io",
            "apps.kruise.io",
            &["sidecarsets"],
            &["CREATE", "UPDATE"],
            Some("Fail")
        ),
    ]);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": KRUISE_MUTATING, "resourceVersion": "42",
                     "annotations": {"template": serde_json::to_string(&webhooks).unwrap()}},
        "webhooks": webhooks,
    })
}

fn kruise_validating() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": KRUISE_VALIDATING, "resourceVersion": "43"},
        "webhooks": [
            hook("vcloneset.kb.io", "apps.kruise.io", &["clonesets"], &["CREATE", "UPDATE", "DELETE"], Some("Fail")),
            hook("vpod.kb.io", "", &["pods"], &["UPDATE", "DELETE"], None),
            hook("vpodeviction.kb.io", "", &["pods/eviction"], &["CREATE"], Some("Fail")),
            hook("vpodprobemarker.kb.io", "apps.kruise.io", &["podprobemarkers"], &["CREATE", "UPDATE"], Some("Ignore")),
        ]
    })
}

fn names(es: &[Entry]) -> Vec<&str> {
    es.iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn only_the_cloneset_entries_go_from_webhooks_and_from_kruises_template() {
    let m = kruise_mutating();
    let ConfigChange::Replace {
        removed,
        kept,
        object,
    } = plan_config(Some(&m), KruiseWebhooks::Cloneset)
    else {
        panic!("expected a replace");
    };
    assert_eq!(names(&removed), ["mcloneset.kb.io"]);
    assert_eq!(names(&kept), ["mpod.kb.io", "msidecarset.kb.io"]);
    let left: Vec<&str> = object["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["mpod.kb.io", "msidecarset.kb.io"]);
    let template: Value =
        serde_json::from_str(object["metadata"]["annotations"]["template"].as_str().unwrap()).unwrap();
    assert_eq!(
        template, object["webhooks"],
        "Kruise would rebuild the entry from its template otherwise"
    );
    assert_eq!(
        object["metadata"]["resourceVersion"], "42",
        "the replace is guarded"
    );
    // Done already: nothing to change.
    assert!(matches!(
        plan_config(Some(&object), KruiseWebhooks::Cloneset),
        ConfigChange::Unchanged { .. }
    ));
    assert_eq!(plan_config(None, KruiseWebhooks::Cloneset), ConfigChange::Absent);
}

#[test]
fn fail_closed_pod_entries_left_behind_refuse_unless_all_are_removed() {
    let (m, v) = (kruise_mutating(), kruise_validating());
    let (pm, pv) = (
        plan_config(Some(&m), KruiseWebhooks::Cloneset),
        plan_config(Some(&v), KruiseWebhooks::Cloneset),
    );
    let ConfigChange::Replace { removed, .. } = &pv else {
        panic!("{pv:?}")
    };
    assert_eq!(names(removed), ["vcloneset.kb.io"]);
    let why = pod_blockers(&[(KRUISE_MUTATING, &pm), (KRUISE_VALIDATING, &pv)]).unwrap();
    assert!(
        why.contains("mpod.kb.io in kruise-mutating-webhook-configuration (pods CREATE)"),
        "{why}"
    );
    assert!(
        why.contains("vpod.kb.io in kruise-validating-webhook-configuration (pods UPDATE,DELETE)"),
        "an absent failurePolicy is Fail: {why}"
    );
    assert!(why.contains("vpodeviction.kb.io"), "{why}");
    assert!(
        !why.contains("sidecarset"),
        "other kinds do not block insitu: {why}"
    );
    assert!(why.contains("--kruise-webhooks all"), "{why}");

    let (dm, dv) = (
        plan_config(Some(&m), KruiseWebhooks::All),
        plan_config(Some(&v), KruiseWebhooks::All),
    );
    assert!(matches!(&dm, ConfigChange::Delete { removed } if removed.len() == 3));
    assert_eq!(
        pod_blockers(&[(KRUISE_MUTATING, &dm), (KRUISE_VALIDATING, &dv)]),
        None
    );
    let ignored = hook("x", "", &["pods"], &["UPDATE"], Some("Ignore"));
    assert!(!entry(&ignored).blocks_pods, "Ignore does not block");
    assert!(!entry(&hook("y", "", &["pods"], &["CONNECT"], None)).blocks_pods);
}

fn crd(url: &str, ca: Option<&str>, schema: &str) -> Value {
    let mut c = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clonesets.apps.kruise.io", "resourceVersion": "7", "labels": {"owner": "helm"}},
        "spec": {"group": "apps.kruise.io", "versions": [{"name": schema}],
                 "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": url}}}},
        "status": {"storedVersions": ["v1beta1"]}
    });
    if let Some(ca) = ca {
        c["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = json!(ca);
    }
    c
}

#[test]
fn the_crd_takes_insitus_spec_and_keeps_its_metadata_and_a_matching_ca() {
    let kruise = crd("https://127.0.0.1:1111/convert", Some("S1JVSVNF"), "kruise");
    let ours = crd("https://127.0.0.1:2222/convert", None, "insitu");
    let out = crd_replacement(&kruise, &ours);
    assert_eq!(out["spec"], ours["spec"], "Kruise's CA is dropped with its URL");
    assert_eq!(out["metadata"], kruise["metadata"]);
    assert!(out.get("status").is_none());
    assert_eq!(conversion_target(&kruise), "https://127.0.0.1:1111/convert");
    // Re-run after insitu run patched its CA in: kept.
    let patched = crd("https://127.0.0.1:2222/convert", Some("SU5TSVRV"), "insitu");
    let again = crd_replacement(&patched, &ours);
    assert_eq!(again["spec"], patched["spec"]);
    let svc = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {
        "service": {"namespace": "kruise-system", "name": "kruise-webhook-service", "path": "/convert"}}}}}});
    assert_eq!(
        conversion_target(&svc),
        "service kruise-system/kruise-webhook-service/convert"
    );
}

#[test]
fn stored_versions_other_than_the_storage_version_need_a_migration() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(versions_to_migrate(&v(&["v1beta1"])).is_empty());
    assert_eq!(versions_to_migrate(&v(&["v1alpha1", "v1beta1"])), ["v1alpha1"]);
    assert_eq!(versions_to_migrate(&v(&["v1alpha1"])), ["v1alpha1"]);
}
