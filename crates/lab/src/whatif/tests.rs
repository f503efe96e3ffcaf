//! What-ifs of a small CloneSet on the embedded cluster (virtual time): the decisions Kruise makes per pod.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn inputs(partition: Option<i32>) -> Inputs {
    let mut cs = synth::cloneset("web", 4, json!(2)).unwrap();
    if let Some(p) = partition {
        cs.spec
            .update_strategy
            .get_or_insert_with(Default::default)
            .partition = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p));
    }
    input::from_docs(synth::dump(cs, 2).unwrap(), Some("web")).unwrap()
}

fn opts() -> SimOptions {
    SimOptions {
        timing: Timing {
            pulls: Default::default(),
            default_pull: 2.0,
            start: 1.0,
            sandbox: 0.0,
        },
        limits: observe::Limits {
            stall: Duration::from_secs(120),
            ..observe::Limits::default()
        },
        seed: 1,
        gates: insitu_core::FeatureGates::default(),
    }
}

fn one(inp: &Inputs, changes: &[Change], strategy: &str) -> report::Run {
    let new_cs = change::apply(&inp.cloneset, changes).unwrap();
    let mut runs = predict(inp, &new_cs, &[strategy.to_string()], &opts()).unwrap();
    runs.remove(0)
}

fn decisions(r: &report::Run) -> Vec<&str> {
    r.pods.iter().map(|p| p.decision.as_str()).collect()
}

#[test]
fn image_change_goes_in_place_in_two_batches() {
    let inp = inputs(None);
    let r = one(
        &inp,
        &[Change::set_image("nginx=nginx:1.20.0").unwrap()],
        "InPlaceIfPossible",
    );
    assert!(r.completes, "{r:?}");
    assert_eq!(decisions(&r), ["in-place"; 4]);
    assert_eq!(r.peak_extra_pods, 0, "in place makes no extra pods");
    assert_eq!(r.peak_unavailable, 2, "maxUnavailable 2");
    assert_eq!(r.batches.len(), 2, "{:?}", r.batches);
    // Each pod: grace 10 s + preStop 5 s + pull 2 s + start 1 s + readiness (first probe after 5 s); the
    // second batch finds the image pulled.
    assert!(
        r.predicted_seconds > 2.0 * 20.0 && r.predicted_seconds < 60.0,
        "{}",
        r.predicted_seconds
    );
    assert!(
        r.groups.iter().all(|g| g.reason.contains("in place")),
        "{:?}",
        r.groups
    );
}

#[test]
fn env_change_recreates_and_says_why() {
    let inp = inputs(None);
    let patch = Change::patch(
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"v2.0"}]"#,
    )
    .unwrap();
    let r = one(&inp, &[patch], "InPlaceIfPossible");
    assert!(r.completes, "{r:?}");
    assert_eq!(decisions(&r), ["recreate"; 4]);
    assert_eq!(r.groups.len(), 1, "{:?}", r.groups);
    assert!(r.groups[0].reason.contains("env"), "{}", r.groups[0].reason);
    assert!(
        r.pods.iter().all(|p| p.end.is_some()),
        "every replacement became Ready: {:?}",
        r.pods
    );
}

#[test]
fn partition_keeps_pods_and_recreate_strategy_recreates() {
    let inp = inputs(Some(2));
    let r = one(
        &inp,
        &[Change::set_image("nginx=nginx:1.20.0").unwrap()],
        "InPlaceIfPossible",
    );
    assert!(r.completes, "{r:?}");
    let mut d = decisions(&r);
    d.sort_unstable();
    assert_eq!(d, ["in-place", "in-place", "unchanged", "unchanged"]);
    let rc = one(
        &inp,
        &[Change::set_image("nginx=nginx:1.20.0").unwrap()],
        "ReCreate",
    );
    let mut d = decisions(&rc);
    d.sort_unstable();
    assert_eq!(d, ["recreate", "recreate", "unchanged", "unchanged"]);
    assert!(
        rc.groups
            .iter()
            .any(|g| g.reason == "updateStrategy.type ReCreate"),
        "{:?}",
        rc.groups
    );
}

#[test]
fn a_resize_the_node_cannot_fit_stalls_as_in_kruise() {
    let inp = inputs(None);
    let big: Value = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "resources": {"requests": {"cpu": "64", "memory": "128Mi"}}}]}}}});
    // A merge patch replaces the containers list: take the template's and change its requests.
    let mut c = inp.cloneset["spec"]["template"]["spec"]["containers"][0].clone();
    c["resources"] = big["spec"]["template"]["spec"]["containers"][0]["resources"].clone();
    let patch = Change::Json(
        serde_json::from_value(
            json!([{"op": "replace", "path": "/spec/template/spec/containers/0", "value": c}]),
        )
        .unwrap(),
    );
    let mut o = opts();
    o.gates = insitu_core::FeatureGates::parse("InPlaceWorkloadVerticalScaling=true").unwrap();
    let new_cs = change::apply(&inp.cloneset, &[patch]).unwrap();
    let r = predict(&inp, &new_cs, &["InPlaceIfPossible".into()], &o)
        .unwrap()
        .remove(0);
    assert!(!r.completes, "64 cpu on 32-cpu nodes never fits: {r:?}");
    assert_eq!(
        r.resize_pending.len(),
        2,
        "maxUnavailable 2: two pods started: {:?}",
        r.resize_pending
    );
    assert!(
        r.resize_pending.iter().all(|p| p.reason == "Refused"),
        "{:?}",
        r.resize_pending
    );
    assert!(
        r.resize_pending[0].then.contains("no recreate"),
        "{}",
        r.resize_pending[0].then
    );
    assert_eq!(
        r.recreated, 0,
        "Kruise never recreates a pod for a refused resize"
    );
}

#[test]
fn a_resize_that_fits_one_pod_per_node_is_deferred_for_the_next() {
    let inp = inputs(None);
    let mut c = inp.cloneset["spec"]["template"]["spec"]["containers"][0].clone();
    c["resources"] = json!({"requests": {"cpu": "20", "memory": "128Mi"}});
    let patch = Change::Json(
        serde_json::from_value(
            json!([{"op": "replace", "path": "/spec/template/spec/containers/0", "value": c}]),
        )
        .unwrap(),
    );
    let mut o = opts();
    o.gates = insitu_core::FeatureGates::parse("InPlaceWorkloadVerticalScaling=true").unwrap();
    let new_cs = change::apply(&inp.cloneset, &[patch]).unwrap();
    let r = predict(&inp, &new_cs, &["InPlaceIfPossible".into()], &o)
        .unwrap()
        .remove(0);
    assert!(!r.completes, "two 20-cpu pods never fit one 32-cpu node: {r:?}");
    let done = r.pods.iter().filter(|p| p.end.is_some()).count();
    assert_eq!(done, 2, "the first pod on each node resizes: {:?}", r.pods);
    assert_eq!(r.resize_pending.len(), 2, "{:?}", r.resize_pending);
    assert!(
        r.resize_pending.iter().all(|p| p.reason == "Deferred"),
        "{:?}",
        r.resize_pending
    );
    assert!(r.peak_extra_cpu_milli >= 4 * 19_900, "{}", r.peak_extra_cpu_milli);
}
