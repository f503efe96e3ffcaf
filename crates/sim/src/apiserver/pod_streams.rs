//! The pod subresources a kubelet serves (`log`, `exec`, `attach`, `portforward`): the simulated containers run
//! no processes, so `log` returns the lines the simulated runtime's history implies (each start and each
//! termination recorded in the pod's container statuses) and the others answer a Status saying so.

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::errors::{ApiError, ApiResult};
use super::{ApiRequest, ApiServer};

/// The subresources handled here.
pub(super) fn handles(rt_is_pod: bool, sub: &str) -> bool {
    rt_is_pod && matches!(sub, "log" | "exec" | "attach" | "portforward")
}

impl ApiServer {
    pub(super) fn pod_stream(
        &self,
        req: &ApiRequest,
        ns: &str,
        name: &str,
        sub: &str,
    ) -> ApiResult<Response> {
        let pod = self
            .store()
            .get(&req.rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(req.rt, name))?
            .value();
        if sub != "log" {
            return Err(ApiError::new(
                400,
                "BadRequest",
                format!(
                    "pods/{sub} is not supported by the simulated cluster: its containers run no processes (pod {name:?} exists; `kubectl logs` shows what its simulated containers did)"
                ),
            ));
        }
        if req.method != Method::GET {
            return Err(ApiError::method_not_allowed());
        }
        self.counters().reads += 1;
        let text = log_lines(&pod, name, req.q("container"), req.flag("previous"))?;
        let text = match req.q("tailLines").and_then(|t| t.parse::<usize>().ok()) {
            Some(n) => {
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(n);
                lines[start..].iter().map(|l| format!("{l}\n")).collect()
            }
            None => text,
        };
        Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response())
    }
}

/// The container the request names, or the only one (kubectl picks the default container itself).
fn container<'a>(pod: &'a Value, name: &str, wanted: Option<&str>) -> ApiResult<&'a Value> {
    let containers: Vec<&Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    match wanted {
        Some(w) => containers
            .into_iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(w))
            .ok_or_else(|| ApiError::bad_request(format!("container {w} is not valid for pod {name}"))),
        None if containers.len() == 1 => Ok(containers[0]),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

/// What the simulated container did, one line per event, as its status records it: the current (or, with
/// `previous`, the last terminated) instance's start and, if it ended, its termination.
fn log_lines(pod: &Value, name: &str, wanted: Option<&str>, previous: bool) -> ApiResult<String> {
    let c = container(pod, name, wanted)?;
    let cname = c.get("name").and_then(Value::as_str).unwrap_or("");
    let status = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(cname))
        });
    let state_key = if previous { "lastState" } else { "state" };
    let state = status.and_then(|s| s.get(state_key));
    let image = status
        .and_then(|s| s.get("image"))
        .or_else(|| c.get("image"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut out = String::new();
    if let Some(run) = state.and_then(|s| s.get("running")) {
        let at = run.get("startedAt").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!(
            "{at} simulated container {cname} started (image {image})\n"
        ));
    } else if let Some(t) = state.and_then(|s| s.get("terminated")) {
        let started = t.get("startedAt").and_then(Value::as_str).unwrap_or("");
        let finished = t.get("finishedAt").and_then(Value::as_str).unwrap_or("");
        let code = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        let reason = t.get("reason").and_then(Value::as_str).unwrap_or("");
        if !started.is_empty() {
            out.push_str(&format!(
                "{started} simulated container {cname} started (image {image})\n"
            ));
        }
        out.push_str(&format!(
            "{finished} simulated container {cname} exited with code {code} ({reason})\n"
        ));
    } else {
        let why = state
            .and_then(|s| s.pointer("/waiting/reason"))
            .and_then(Value::as_str)
            .unwrap_or("ContainerCreating");
        let which = if previous {
            "previous terminated container"
        } else {
            "container"
        };
        return Err(ApiError::bad_request(format!(
            "{which} {cname:?} in pod {name:?} is waiting to start: {why}"
        )));
    }
    Ok(out)
}
