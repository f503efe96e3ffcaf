//! The ImagePullJob model against Kruise's controller and daemon rules.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::model::*;

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn at(secs: u64) -> Timestamp {
    super::super::runtime::add(t0(), Duration::from_secs(secs))
}

fn spec(v: serde_json::Value) -> JobSpec {
    JobSpec::parse(&v)
}

#[test]
fn parses_the_spec_insitu_writes() {
    let s = spec(json!({
        "image": "nginx:alpine",
        "podSelector": {"matchLabels": {"app": "a"}},
        "parallelism": 2,
        "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 300},
        "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 600},
    }));
    assert_eq!(s.parallelism, 2);
    assert_eq!((s.timeout_seconds, s.backoff_limit), (Some(300), Some(1)));
    assert_eq!(s.ttl_seconds_after_finished, Some(600));
    assert!(!s.never && s.selector.is_none() && s.pod_selector.is_some());
    assert_eq!(s.image_ref(), "docker.io/library/nginx:alpine");
    // IntOrString.IntValue(): a numeric string counts, "50%" is 0; absent is the default 1.
    assert_eq!(spec(json!({"parallelism": "3"})).parallelism, 3);
    assert_eq!(spec(json!({"parallelism": "50%"})).parallelism, 0);
    assert_eq!(spec(json!({})).parallelism, 1);
}

#[test]
fn targets_follow_kruise_selection() {
    let l = |k: &str| BTreeMap::from([("zone".to_string(), k.to_string())]);
    let (a, b, c) = (l("a"), l("b"), l("a"));
    let nodes = [
        NodeInfo {
            name: "n2",
            labels: &a,
        },
        NodeInfo {
            name: "n0",
            labels: &b,
        },
        NodeInfo {
            name: "n1",
            labels: &c,
        },
    ];
    let none = || std::iter::empty::<PodInfo<'static>>();
    // No selector: every node (in name order).
    assert_eq!(targets(&spec(json!({})), "ns", &nodes, none()), [1, 2, 0]);
    // Names (unknown names are skipped; an empty list selects none).
    let by_name = spec(json!({"selector": {"names": ["n2", "gone"]}}));
    assert_eq!(targets(&by_name, "ns", &nodes, none()), [0]);
    assert!(targets(&spec(json!({"selector": {"names": []}})), "ns", &nodes, none()).is_empty());
    let by_label = spec(json!({"selector": {"matchLabels": {"zone": "a"}}}));
    assert_eq!(targets(&by_label, "ns", &nodes, none()), [2, 0]);
    // Pods: active pods of the job's namespace that match, one entry per node.
    let app = BTreeMap::from([("app".to_string(), "x".to_string())]);
    let other = BTreeMap::from([("app".to_string(), "y".to_string())]);
    let pod = |ns, labels, node, active| PodInfo {
        namespace: ns,
        labels: Some(labels),
        node,
        active,
    };
    let pods = vec![
        pod("ns", &app, 0, true),
        pod("ns", &app, 0, true),
        pod("ns", &app, 1, false),
        pod("other", &app, 2, true),
        pod("ns", &other, 2, true),
    ];
    let by_pod = spec(json!({"podSelector": {"matchLabels": {"app": "x"}}}));
    assert_eq!(targets(&by_pod, "ns", &nodes, pods.into_iter()), [0]);
}

#[test]
fn a_pull_takes_the_image_time_or_is_shared() {
    let s = spec(json!({"image": "nginx:1"}));
    let input = |present| PullInput {
        start: t0(),
        pull: Duration::from_secs(5),
        never_pulls: false,
        present,
        spec: &s,
    };
    let o = run_pull(&input(None));
    assert!(o.ok);
    assert_eq!((o.done_at, o.present_at), (at(5), Some(at(5))));
    // Already present: done at once. A kubelet pull ending at 2 s: shared, done then.
    assert_eq!(run_pull(&input(Some(t0()))).done_at, t0());
    assert_eq!(run_pull(&input(Some(at(2)))).done_at, at(2));
}

#[test]
fn failing_pulls_retry_backoff_limit_times() {
    let s = spec(json!({"image": "broken:1", "pullPolicy": {"backoffLimit": 1, "timeoutSeconds": 300}}));
    let o = run_pull(&PullInput {
        start: t0(),
        pull: Duration::from_secs(2),
        never_pulls: true,
        present: None,
        spec: &s,
    });
    // Two attempts of 2 s, each followed by the worker's back-off (1 s, then 2 s).
    assert!(!o.ok && o.present_at.is_none());
    assert_eq!(o.done_at, at(2 + 1 + 2 + 2));
    assert!(o.message.contains("code = NotFound"), "{}", o.message);
    // A pull longer than timeoutSeconds is canceled each time (default backoffLimit 3: four attempts).
    let slow = spec(json!({"image": "big:1", "pullPolicy": {"timeoutSeconds": 10}}));
    let o = run_pull(&PullInput {
        start: t0(),
        pull: Duration::from_secs(60),
        never_pulls: false,
        present: None,
        spec: &slow,
    });
    assert!(!o.ok);
    assert_eq!(o.done_at, at(10 + 1 + 10 + 2 + 10 + 4 + 10 + 8));
    assert_eq!(o.message, "pulling image docker.io/library/big:1 is canceled");
    // The job's activeDeadlineSeconds cuts the attempts short.
    let dl = spec(json!({"image": "big:1", "pullPolicy": {"timeoutSeconds": 10},
        "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 15}}));
    let o = run_pull(&PullInput {
        start: t0(),
        pull: Duration::from_secs(60),
        never_pulls: false,
        present: None,
        spec: &dl,
    });
    assert_eq!((o.ok, o.done_at), (false, at(10 + 1 + 4 + 2)));
}

#[test]
fn status_as_kruise_calculates_it() {
    let s = spec(json!({"image": "nginx:1", "parallelism": 2}));
    let (st, not_synced) = calculate(
        &s,
        None,
        t0(),
        &[
            ("a", NodeState::Succeeded),
            ("b", NodeState::Pulling),
            ("c", NodeState::NotSynced),
        ],
    );
    assert_eq!((st.desired, st.active, st.succeeded, st.failed), (3, 1, 1, 0));
    assert_eq!(st.message, "job is running, progress 33.3%");
    assert_eq!(st.start_time, Some(t0()));
    assert_eq!(not_synced, ["c"]);
    assert_eq!(to_sync(&s, &st, not_synced.len()), 1);
    let (done, _) = calculate(
        &s,
        Some(t0()),
        at(9),
        &[("b", NodeState::Failed), ("a", NodeState::Succeeded)],
    );
    assert_eq!(done.completion_time, Some(at(9)));
    assert_eq!(
        (done.message.as_str(), done.failed_nodes.clone()),
        ("job has completed", vec!["b".to_string()])
    );
    assert_eq!(
        done.to_json(),
        json!({"desired": 2, "active": 0, "succeeded": 1, "failed": 1, "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:00:09Z", "message": "job has completed", "failedNodes": ["b"]})
    );
    // Nothing to pull onto: complete at once (desired 0); under Never, running with no progress.
    assert_eq!(calculate(&s, None, t0(), &[]).0.message, "job has completed");
    let never = spec(json!({"image": "x", "completionPolicy": {"type": "Never"}}));
    let (st, _) = calculate(&never, None, t0(), &[]);
    assert_eq!(
        (st.completion_time, st.message.as_str()),
        (None, "job is running, no progress")
    );
    // activeDeadlineSeconds: what is not done fails.
    let dl = spec(json!({"image": "x", "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 30}}));
    let (st, rest) = calculate(
        &dl,
        Some(t0()),
        at(30),
        &[
            ("a", NodeState::Succeeded),
            ("b", NodeState::Pulling),
            ("c", NodeState::NotSynced),
        ],
    );
    assert_eq!((st.succeeded, st.failed, st.active), (1, 2, 0));
    assert_eq!(st.failed_nodes, ["b", "c"]);
    assert_eq!(st.message, "job exceeds activeDeadlineSeconds");
    assert!(rest.is_empty() && st.completion_time == Some(at(30)));
}
