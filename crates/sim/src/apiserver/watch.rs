//! Watch streams: snapshot or history replay, then live events; selectors, bookmarks, timeouts, lag cut-off.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};

use super::errors::{ApiError, ApiResult};
use super::resources::ResourceType;
use super::selectors::Selectors;
use super::{ApiRequest, ApiServer, table};
use crate::store::{Event, EventType, Object, WatchFrom};

/// Decrements the open-watch gauge when the stream is dropped.
struct Guard(ApiServer);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.watch_ended();
    }
}

struct Renderer {
    rt: &'static ResourceType,
    ns: Option<String>,
    sel: Selectors,
    /// Table output (kubectl get -w): each event object is a one-row Table.
    table: Option<TableState>,
    server: ApiServer,
}

struct TableState {
    include: String,
    wide_headers_sent: bool,
}

impl Renderer {
    /// The line for `obj`: rendered on a deep stack when it nests deeply (its version may be converted).
    fn line(&mut self, ty: &str, obj: &Object) -> Bytes {
        if obj.index.deep {
            crate::deep::run(|| self.render(ty, obj))
        } else {
            self.render(ty, obj)
        }
    }

    fn render(&mut self, ty: &str, obj: &Object) -> Bytes {
        match &mut self.table {
            None => {
                let bytes = super::handlers::present(self.rt, obj);
                let mut b = BytesMut::with_capacity(bytes.len() + 32);
                b.put_slice(b"{\"type\":\"");
                b.put_slice(ty.as_bytes());
                b.put_slice(b"\",\"object\":");
                b.put_slice(&bytes);
                b.put_slice(b"}\n");
                b.freeze()
            }
            Some(ts) => {
                let v = super::handlers::present_value(self.rt, obj.value());
                let t = table::table(
                    self.rt,
                    &[v],
                    &obj.index.rv.to_string(),
                    self.server.now(),
                    &ts.include,
                    !ts.wide_headers_sent,
                );
                ts.wide_headers_sent = true;
                value_line(ty, &t)
            }
        }
    }

    /// The line for a store event, as this watcher sees it (selector transitions become ADDED/DELETED).
    fn event(&mut self, ev: &Event) -> Option<Bytes> {
        if let Some(ns) = &self.ns
            && &ev.object.index.namespace != ns
        {
            return None;
        }
        let now_match = self.sel.matches(&ev.object.index);
        let ty = match ev.kind {
            EventType::Added => now_match.then_some("ADDED"),
            EventType::Deleted => now_match.then_some("DELETED"),
            EventType::Modified => {
                let was = ev.prev.as_ref().map_or(now_match, |p| self.sel.matches(p));
                match (was, now_match) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }?;
        Some(self.line(ty, &ev.object))
    }
}

fn value_line(ty: &str, v: &Value) -> Bytes {
    let mut out = serde_json::to_vec(&json!({"type": ty, "object": v})).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

struct WatchState {
    pending: VecDeque<Bytes>,
    rx: Option<broadcast::Receiver<Arc<Event>>>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    renderer: Renderer,
    _guard: Guard,
}

fn stream_response(state: WatchState, content_type: &'static str) -> Response {
    let stream = futures::stream::unfold(state, |mut st| async move {
        if let Some(line) = st.pending.pop_front() {
            return Some((Ok::<Bytes, Infallible>(line), st));
        }
        loop {
            let rx = st.rx.as_mut()?;
            let received = match st.deadline.as_mut() {
                Some(deadline) => tokio::select! {
                    biased;
                    _ = deadline => return None,
                    r = rx.recv() => r,
                },
                None => rx.recv().await,
            };
            match received {
                Ok(ev) => {
                    if let Some(line) = st.renderer.event(&ev) {
                        return Some((Ok(line), st));
                    }
                }
                // Too slow: close the stream; the client re-watches (and relists on 410).
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(
                        resource = st.renderer.rt.resource,
                        missed = n,
                        selectors = ?st.renderer.sel,
                        "closing lagging watch"
                    );
                    return None;
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response()
}

/// kube-apiserver's `--min-request-timeout` default.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// Serves `?watch=true`.
pub(super) fn serve(server: &ApiServer, req: &ApiRequest, sel: Selectors) -> ApiResult<Response> {
    let rt = req.rt;
    let send_initial = req.flag("sendInitialEvents");
    let rv = req.q("resourceVersion").unwrap_or("");
    let from = if send_initial || rv.is_empty() || rv == "0" {
        WatchFrom::Snapshot
    } else {
        WatchFrom::After(rv.parse().map_err(|_| {
            let q = super::errors::quote(rv);
            ApiError::internal(format!(
                "resourceVersion: Invalid value: {q}: strconv.ParseUint: parsing {q}: invalid syntax"
            ))
        })?)
    };
    let timeout_seconds = req.timeout_seconds()?;
    // A negative timeout: the watch's context has expired before it starts; kube-apiserver answers 200 with one
    // ERROR event (`context deadline exceeded`) and ends the stream (observed on v1.37.2).
    let expired = timeout_seconds.is_some_and(|t| t < 0);
    // No timeout (or 0): the server picks one in [minRequestTimeout, 2 x minRequestTimeout) so that watches
    // spread their re-lists (k8s.io/apiserver `pkg/endpoints/handlers/get.go`, `ListResource`:
    // `minRequestTimeout * (rand.Float64() + 1.0)`, with kube-apiserver's default `--min-request-timeout=1800`).
    let timeout = match timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
        _ => MIN_REQUEST_TIMEOUT.mul_f64(1.0 + server.random_fraction()),
    };
    let table = req.wants_table().then(|| TableState {
        include: req.q("includeObject").unwrap_or("Metadata").to_string(),
        wide_headers_sent: false,
    });
    let content_type = if table.is_some() {
        table::CONTENT_TYPE
    } else {
        "application/json"
    };
    server.watch_started();
    let guard = Guard(server.clone());
    let mut renderer = Renderer {
        rt,
        ns: req.ns.clone(),
        sel: sel.clone(),
        table,
        server: server.clone(),
    };
    let started = server
        .store()
        .watch(&rt.key(), req.ns.as_deref(), from, |idx| sel.matches(idx));
    let mut pending = VecDeque::new();
    if expired {
        let status = ApiError::new(500, "InternalError", "context deadline exceeded").status();
        pending.push_back(value_line("ERROR", &status));
        let st = WatchState {
            pending,
            rx: None,
            deadline: None,
            renderer,
            _guard: guard,
        };
        return Ok(stream_response(st, content_type));
    }
    let start = match started {
        Ok(s) => s,
        Err(too_old) => {
            // As the watch cache does: 200, then one ERROR event, then the end of the stream.
            let status = ApiError::expired(too_old.requested, too_old.oldest).status();
            pending.push_back(value_line("ERROR", &status));
            let st = WatchState {
                pending,
                rx: None,
                deadline: None,
                renderer,
                _guard: guard,
            };
            return Ok(stream_response(st, content_type));
        }
    };
    for obj in &start.snapshot {
        pending.push_back(renderer.line("ADDED", obj));
    }
    for ev in &start.replay {
        if let Some(line) = renderer.event(ev) {
            pending.push_back(line);
        }
    }
    if send_initial {
        let bookmark = json!({
            "kind": rt.kind,
            "apiVersion": rt.api_version(),
            "metadata": {"resourceVersion": start.rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}},
        });
        pending.push_back(value_line("BOOKMARK", &bookmark));
    }
    let deadline = Some(Box::pin(server.clock().sleep(timeout)));
    let st = WatchState {
        pending,
        rx: Some(start.rx),
        deadline,
        renderer,
        _guard: guard,
    };
    Ok(stream_response(st, content_type))
}
