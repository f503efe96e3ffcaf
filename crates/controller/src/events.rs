//! Kubernetes Events on the CloneSet, as Kruise's client-go recorder writes them (core/v1, source `cloneset-controller`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use insitu_api::CloneSet;
use insitu_api::keys::events::COMPONENT;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};

use crate::{Clock, Metrics};

/// Normal or Warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

/// Writes events without blocking the reconcile (each is a fire-and-forget task).
#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    enabled: bool,
    seq: Arc<AtomicU64>,
}

impl EventSink {
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>, metrics: Arc<Metrics>, enabled: bool) -> Self {
        Self {
            client,
            clock,
            metrics,
            enabled,
            seq: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Records `reason`/`message` on the CloneSet.
    pub fn emit(&self, cs: &CloneSet, severity: Severity, reason: &str, message: String) {
        match severity {
            Severity::Normal => tracing::info!(cloneset = %cs.name_any(), reason, "{message}"),
            Severity::Warning => tracing::warn!(cloneset = %cs.name_any(), reason, "{message}"),
        }
        if !self.enabled {
            return;
        }
        let ns = cs.namespace().unwrap_or_else(|| "default".into());
        let now = self.clock.now();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}.{:x}", cs.name_any(), now.as_nanosecond() as u64 ^ seq);
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(CloneSet::api_version(&()).into_owned()),
                kind: Some("CloneSet".into()),
                name: cs.metadata.name.clone(),
                namespace: Some(ns.clone()),
                uid: cs.metadata.uid.clone(),
                resource_version: cs.metadata.resource_version.clone(),
                ..Default::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message),
            type_: Some(match severity {
                Severity::Normal => "Normal".into(),
                Severity::Warning => "Warning".into(),
            }),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: Some(COMPONENT.into()),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            metrics.write("create", "events");
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        });
    }
}
