//! Kubernetes Events on the CloneSet, as Kruise's client-go recorder writes them (core/v1, source `cloneset-controller`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use insitu_api::CloneSet;
use insitu_api::keys::events::COMPONENT;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::correlator::{Correlator, Occurrence, Write};
use crate::error::is_status;
use crate::{Clock, Metrics};

/// Normal or Warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

/// Writes events without blocking the reconcile (queued to one writer task, in order).
#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    enabled: bool,
    seq: Arc<AtomicU64>,
    correlator: Arc<Mutex<Correlator>>,
    /// The queue to the writer task, started on the first event (inside the runtime).
    writer: Arc<OnceLock<tokio::sync::mpsc::UnboundedSender<(Event, i32)>>>,
}

impl EventSink {
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>, metrics: Arc<Metrics>, enabled: bool) -> Self {
        Self {
            client,
            clock,
            metrics,
            enabled,
            seq: Arc::new(AtomicU64::new(0)),
            correlator: Default::default(),
            writer: Default::default(),
        }
    }

    /// Records `reason`/`message` on the CloneSet, through client-go's correlator (see `correlator`): most
    /// events of a big rollout are combined into one counted Event or dropped, as Kruise's recorder does.
    pub fn emit(&self, cs: &CloneSet, severity: Severity, reason: &str, message: String) {
        self.emit_on(crate::workload::Workload::CloneSet(cs), severity, reason, message);
    }

    /// Records `reason`/`message` on a workload (CloneSet or Advanced StatefulSet), logged with its kind.
    pub fn emit_on(
        &self,
        w: crate::workload::Workload<'_>,
        severity: Severity,
        reason: &str,
        message: String,
    ) {
        let (kind, name) = (w.kind(), w.name());
        match severity {
            Severity::Normal => tracing::info!(kind, workload = %name, reason, "{message}"),
            Severity::Warning => tracing::warn!(kind, workload = %name, reason, "{message}"),
        }
        self.emit_for(w.reference(), severity, reason, message);
    }

    /// Records `reason`/`message` on any namespaced object (not logged: the caller logs what it needs).
    pub fn emit_for(&self, involved: ObjectReference, severity: Severity, reason: &str, message: String) {
        if !self.enabled {
            return;
        }
        let ns = involved.namespace.clone().unwrap_or_else(|| "default".into());
        let obj_name = involved.name.clone().unwrap_or_default();
        let now = self.clock.now();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        // client-go names events `<object>.<UnixNano hex>`; the sequence keeps names unique when many share
        // one instant (the simulated clock).
        let name = format!("{obj_name}.{:x}", now.as_nanosecond() as u64 ^ seq);
        let type_ = match severity {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
        };
        let occurrence = Occurrence {
            namespace: &ns,
            object: &obj_name,
            uid: involved.uid.as_deref().unwrap_or_default(),
            type_,
            reason,
            message: &message,
        };
        let write = self
            .correlator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .correlate(occurrence, name, now);
        let (name, message, count, first) = match write {
            Write::Skip => {
                self.metrics.events_skipped.inc();
                return;
            }
            Write::Create { name, message } => (name, message, 1, now),
            Write::Patch {
                name,
                message,
                count,
                first_timestamp,
            } => (name, message, count, first_timestamp),
        };
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: involved,
            reason: Some(reason.to_string()),
            message: Some(message),
            type_: Some(type_.into()),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: None,
            }),
            first_timestamp: Some(Time(first)),
            last_timestamp: Some(Time(now)),
            count: Some(count),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: Some(COMPONENT.into()),
            ..Default::default()
        };
        let writer = self.writer.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(write_events(self.client.clone(), self.metrics.clone(), rx));
            tx
        });
        // Only fails once the writer task is gone (runtime shutting down): nothing left to record then.
        let _ = writer.send((ev, count));
    }
}

/// The one writer of a sink's Events, in the order they were emitted (as client-go's broadcaster goroutine
/// writes them): a count patch must not overtake the write of the lower count before it.
async fn write_events(
    client: kube::Client,
    metrics: Arc<Metrics>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<(Event, i32)>,
) {
    while let Some((ev, count)) = rx.recv().await {
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        let name = ev.metadata.name.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(client.clone(), &ns);
        if count > 1 {
            // client-go recordEvent: patch count, lastTimestamp and message of the existing Event …
            let patch = serde_json::json!({
                "count": count,
                "lastTimestamp": ev.last_timestamp,
                "message": ev.message,
            });
            metrics.write("patch", "events");
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => continue,
                // … and create it again if it has gone (expired, or deleted).
                Err(e) if is_status(&e, 404) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "event not recorded");
                    continue;
                }
            }
        }
        metrics.write("create", "events");
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            tracing::debug!(error = %e, "event not recorded");
        }
    }
}

/// Plan warnings already emitted (once per CloneSet UID and reason, for the controller's lifetime).
#[derive(Default)]
pub struct Warned(std::sync::Mutex<std::collections::HashSet<(String, String)>>);

impl Warned {
    /// True the first time this (CloneSet UID, reason) is seen.
    pub fn first_time(&self, uid: &str, reason: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((uid.to_string(), reason.to_string()))
    }
}
