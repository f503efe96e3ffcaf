//! Fire-and-forget core/v1 Event recording (a bounded queue drained by one writer task; drops when full).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

use super::status::to_time;

/// The object an event is about.
#[derive(Clone, Debug, Default)]
pub struct Regarding {
    /// `v1`, `apps/v1`, ...
    pub api_version: String,
    /// `Pod`, `Node`, ...
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

/// An event waiting in the queue: only what varies, the rest shared. At 100,000 pods the kubelets queue more
/// than 65,536 at once (a queue of that size overflowed), so its size shows in the peak memory.
#[derive(Debug)]
struct Pending {
    /// Shared by the events of one pod recorded together.
    regarding: Arc<Regarding>,
    /// The name's suffix (`<regarding.name>.<nanos as hex>`).
    nanos: u64,
    field_path: Option<String>,
    warning: bool,
    reason: &'static str,
    message: String,
    host: Option<Arc<str>>,
    at: Timestamp,
}

impl Pending {
    /// The core/v1 Event `component` reports.
    fn into_event(self, component: &str) -> Event {
        let r = &*self.regarding;
        let namespace = if r.namespace.is_empty() {
            "default"
        } else {
            &r.namespace
        };
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", r.name, self.nanos)),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(r.api_version.clone()),
                kind: Some(r.kind.clone()),
                namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
                name: Some(r.name.clone()),
                uid: Some(r.uid.clone()),
                field_path: self.field_path,
                ..Default::default()
            },
            reason: Some(self.reason.to_string()),
            message: Some(self.message),
            type_: Some(if self.warning { "Warning" } else { "Normal" }.to_string()),
            source: Some(EventSource {
                component: Some(component.to_string()),
                host: self.host.as_deref().map(str::to_string),
            }),
            first_timestamp: Some(to_time(self.at)),
            last_timestamp: Some(to_time(self.at)),
            count: Some(1),
            reporting_component: Some(component.to_string()),
            reporting_instance: Some(self.host.as_deref().unwrap_or(component).to_string()),
            ..Default::default()
        }
    }
}

/// Creates `ev` without decoding the Event the apiserver sends back (`Api::create` would, and nothing
/// reads it): a kubelet records ~4 events per pod start, so at 10k pods the decode alone was ~1% of the
/// bench's CPU. Errors are the same `kube::Error`s `Api::create` returns.
async fn create_unread(client: &Client, api: &Api<Event>, ev: &Event) -> kube::Result<()> {
    let body = serde_json::to_vec(ev).map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(api.resource_url())
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(req).await.map(drop)
}

/// Events the simulated components dropped because their queue was full; clones share the count.
///
/// client-go's recorder drops an event when its broadcaster's queue is full and logs an error for each
/// (`Unable to record event: too many queued events, dropped event`); the simulated components do the same, logging a
/// warning at the first drop, the 10th, the 100th and so on, so that a user reading `kubectl get events`
/// after a huge simulation knows some are missing, and the bench can say how many.
#[derive(Clone, Debug, Default)]
pub struct EventDrops(Arc<AtomicU64>);

impl EventDrops {
    /// Events dropped so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Records events through a bounded queue; cloning shares the queue.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Pending>,
    component: Arc<str>,
    seq: Arc<AtomicU64>,
    drops: EventDrops,
}

impl EventSink {
    /// A sink for `component` (`kubelet`, `default-scheduler`) and the task that writes its events; events
    /// that find `capacity` queued are dropped and counted in `drops`.
    pub fn spawn(
        client: Client,
        component: &str,
        capacity: usize,
        drops: EventDrops,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Pending>(capacity.max(1));
        let component: Arc<str> = component.into();
        let writer = component.clone();
        let task = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let mut ev = p.into_event(&writer);
                let ns = ev.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let api: Api<Event> = Api::namespaced(client.clone(), &ns);
                for attempt in 0..3 {
                    match create_unread(&client, &api, &ev).await {
                        // Same object and nanosecond from two components: bump the name.
                        Err(kube::Error::Api(s)) if s.code == 409 && attempt < 2 => {
                            if let Some(n) = &mut ev.metadata.name {
                                n.push('0');
                            }
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, reason = ?ev.reason, "event not recorded");
                            break;
                        }
                        Ok(_) => break,
                    }
                }
            }
        });
        (
            Self {
                tx,
                component,
                seq: Arc::new(AtomicU64::new(0)),
                drops,
            },
            task,
        )
    }

    /// Records an event (dropped if the queue is full). `host` is the reporting node, if any.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        at: Timestamp,
        regarding: &Arc<Regarding>,
        field_path: Option<String>,
        warning: bool,
        reason: &'static str,
        message: String,
        host: Option<&Arc<str>>,
    ) {
        // Like client-go (`name.<hex nanos>`); a per-sink counter and salt keep names unique on virtual time.
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let salt = super::image::fnv1a(self.component.as_bytes()) % 1_000_000;
        let nanos = u64::try_from(at.as_nanosecond())
            .unwrap_or(0)
            .wrapping_add(salt)
            .wrapping_add(seq * 1_000_000);
        // Queued as the few fields that vary; the Event (~2 KB with its copies of the same strings) is built by
        // the writer. A burst of 65,536 queued events held whole was ~260 MB at 100k pods.
        let ev = Pending {
            regarding: regarding.clone(),
            nanos,
            field_path,
            warning,
            reason,
            message,
            host: host.cloned(),
            at,
        };
        // A closed queue means the writer is gone (the cluster is shutting down): nothing to count.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(ev) {
            let dropped = self.drops.add();
            // Each power of ten: the first drop, the 10th, the 100th, ... (client-go logs every one).
            if 10u64.pow(dropped.ilog10()) == dropped {
                tracing::warn!(
                    component = %self.component,
                    capacity = self.tx.max_capacity(),
                    dropped,
                    "event queue full: event dropped (as client-go's recorder drops them)"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::ApiServer;
    use crate::{Clock as _, SimClock};
    use kube::api::ListParams;

    /// A full queue drops the event and counts it; what was queued is still written.
    #[tokio::test(start_paused = true)]
    async fn full_queue_drops_and_counts() {
        let clock = SimClock::new(Timestamp::UNIX_EPOCH, 1.0);
        let server = ApiServer::new(clock.clone());
        let drops = EventDrops::default();
        let (sink, _task) = EventSink::spawn(server.client(), "kubelet", 1, drops.clone());
        let pod = Arc::new(Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: "web-0".into(),
            uid: "uid-0".into(),
        });
        let node: Arc<str> = "node-0".into();
        // No await in between: the writer cannot drain, so the second and third find the queue full.
        for reason in ["Pulling", "Pulled", "Created"] {
            sink.record(clock.now(), &pod, None, false, reason, String::new(), Some(&node));
        }
        assert_eq!(drops.count(), 2);
        let events: Api<Event> = Api::namespaced(server.client(), "default");
        let mut written = Vec::new();
        for _ in 0..100 {
            written = events
                .list(&ListParams::default())
                .await
                .expect("list events")
                .items;
            if !written.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        let reasons: Vec<_> = written.iter().filter_map(|e| e.reason.clone()).collect();
        assert_eq!(reasons, ["Pulling"]);
        assert_eq!(drops.count(), 2, "a written event is not a drop");
    }
}
