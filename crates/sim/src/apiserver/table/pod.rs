//! The pod printer of `kubectl get pods`: READY, STATUS (kubelet reasons, init and sidecar progress), RESTARTS,
//! AGE, IP, NODE, NOMINATED NODE and READINESS GATES, as kube-apiserver's built-in printer fills them.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{age, human_duration, or_none, s};

pub(super) fn pod_cells(p: &Value, now: Timestamp) -> Vec<Value> {
    let arr = |ptr: &str| {
        p.pointer(ptr)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let containers = arr("/spec/containers");
    let init_specs = arr("/spec/initContainers");
    let sidecar = |name: &str| {
        init_specs.iter().any(|c| {
            c.get("name").and_then(Value::as_str) == Some(name) && s(c, "/restartPolicy") == "Always"
        })
    };
    let mut total = containers.len()
        + init_specs
            .iter()
            .filter(|c| s(c, "/restartPolicy") == "Always")
            .count();
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut reason = s(p, "/status/phase").to_string();
    if !s(p, "/status/reason").is_empty() {
        reason = s(p, "/status/reason").to_string();
    }
    for c in arr("/status/conditions") {
        if s(&c, "/type") == "PodScheduled" && s(&c, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".into();
        }
    }
    let mut initializing = false;
    let init_statuses = arr("/status/initContainerStatuses");
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let term = c.pointer("/state/terminated");
        let exit = term
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if term.is_some() && exit == 0 {
            continue;
        }
        if sidecar(s(c, "/name")) && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        initializing = true;
        let waiting = s(c, "/state/waiting/reason");
        reason = if let Some(t) = term {
            let r = s(t, "/reason");
            if r.is_empty() {
                format!("Init:ExitCode:{exit}")
            } else {
                format!("Init:{r}")
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{}/{}", i, init_specs.len())
        };
        break;
    }
    let initialized = arr("/status/conditions")
        .iter()
        .any(|c| s(c, "/type") == "Initialized" && s(c, "/status") == "True");
    if !initializing || initialized {
        let mut has_running = false;
        for c in arr("/status/containerStatuses").iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            if let Some(f) = c
                .pointer("/lastState/terminated/finishedAt")
                .and_then(Value::as_str)
                .and_then(|f| f.parse::<Timestamp>().ok())
                && last_restart.is_none_or(|l| l < f)
            {
                last_restart = Some(f);
            }
            let waiting = s(c, "/state/waiting/reason");
            let term = c.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = term {
                let r = s(t, "/reason");
                reason = if !r.is_empty() {
                    r.to_string()
                } else if let Some(sig) = t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                    format!("Signal:{sig}")
                } else {
                    format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    )
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = arr("/status/conditions")
                .iter()
                .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
            reason = if pod_ready {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = p
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    let phase = s(p, "/status/phase");
    if deleting && s(p, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    total = total.max(containers.len());
    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.as_second() - t.as_second())
        ),
        _ => restarts.to_string(),
    };
    let ip = p
        .pointer("/status/podIPs/0/ip")
        .and_then(Value::as_str)
        .unwrap_or_else(|| s(p, "/status/podIP"));
    let gates = arr("/spec/readinessGates");
    let gates_str = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = arr("/status/conditions");
        let t = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .any(|c| s(c, "/type") == s(g, "/conditionType") && s(c, "/status") == "True")
            })
            .count();
        format!("{t}/{}", gates.len())
    };
    vec![
        json!(s(p, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_str),
        json!(age(p.pointer("/metadata/creationTimestamp"), now)),
        json!(or_none(ip)),
        json!(or_none(s(p, "/spec/nodeName"))),
        json!(or_none(s(p, "/status/nominatedNodeName"))),
        json!(gates_str),
    ]
}
