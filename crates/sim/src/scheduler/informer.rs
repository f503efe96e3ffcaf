//! The scheduler's informers: one task per watch drains it into a queue the scheduling loop applies.
//!
//! kube-scheduler reads its watches in informer goroutines, apart from the scheduling cycle; a loop that read
//! its watches only between bindings left them unread through a whole turn over the pending pods (one binding
//! awaited at a time), and at 30,000 pods and more the apiserver cut them off as too far behind (each cut-off a
//! relist of every pod). Here each watch is forwarded by its own task, polled whenever its stream has an event,
//! and the loop applies what has arrived after every binding.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;

use super::{BoundPod, Claim, NodeInfo, Scheduler, SchedulerConfig, key_of, meta_key};
use crate::Clock;
use crate::kubelet::events::EventSink;

/// One event of one of the scheduler's watches (boxed: a queued bound pod's event would otherwise take a
/// whole pod's room).
enum Input {
    Node(Box<watcher::Event<Node>>),
    Pending(Box<watcher::Event<Pod>>),
    Bound(Box<watcher::Event<BoundPod>>),
    Claim(Box<watcher::Event<PersistentVolumeClaim>>),
}

/// Keys seen during a watcher relist, to drop objects that disappeared meanwhile.
#[derive(Default)]
struct Relist(Option<HashSet<String>>);

impl Relist {
    fn begin(&mut self) {
        self.0 = Some(HashSet::new());
    }
    fn saw(&mut self, key: &str) {
        if let Some(s) = &mut self.0 {
            s.insert(key.to_string());
        }
    }
    fn finish(&mut self) -> Option<HashSet<String>> {
        self.0.take()
    }
    /// Ends the relist: the keys among `known` that it did not see (none if no relist was under way).
    fn gone<'a>(&mut self, known: impl Iterator<Item = &'a String>) -> Vec<String> {
        self.finish()
            .map(|seen| known.filter(|k| !seen.contains(*k)).cloned().collect())
            .unwrap_or_default()
    }
}

/// The informers' queue and what the scheduler tracks of each watch.
pub(super) struct Feeds {
    rx: mpsc::UnboundedReceiver<Input>,
    nodes: Relist,
    pending: Relist,
    bound: Relist,
    claims: Relist,
    /// Whether each watch has listed once; scheduling waits for all three (else counts and fits are wrong).
    nodes_synced: bool,
    bound_synced: bool,
    claims_synced: bool,
}

impl Feeds {
    fn synced(&self) -> bool {
        self.nodes_synced && self.bound_synced && self.claims_synced
    }
}

/// Forwards one watch into the queue until the queue closes; errors are logged (the watcher retries them with
/// its backoff).
fn forward<K, S>(
    tasks: &mut tokio::task::JoinSet<()>,
    tx: &mpsc::UnboundedSender<Input>,
    mut stream: S,
    wrap: fn(Box<watcher::Event<K>>) -> Input,
) where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + Unpin + 'static,
{
    let tx = tx.clone();
    tasks.spawn(async move {
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if tx.send(wrap(Box::new(ev))).is_err() {
                        return;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "scheduler watch error"),
            }
        }
    });
}

impl Scheduler {
    fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        config: SchedulerConfig,
        events: Option<EventSink>,
        rx: mpsc::UnboundedReceiver<Input>,
    ) -> Self {
        Scheduler {
            client,
            clock,
            config,
            nodes: Default::default(),
            assigned: Default::default(),
            counts: Default::default(),
            pending: Default::default(),
            order: Default::default(),
            seq: 0,
            reported: Default::default(),
            events,
            claims: Default::default(),
            feeds: Feeds {
                rx,
                nodes: Relist::default(),
                pending: Relist::default(),
                bound: Relist::default(),
                claims: Relist::default(),
                nodes_synced: false,
                bound_synced: false,
                claims_synced: false,
            },
        }
    }

    /// Applies everything the informers have delivered; returns whether anything was.
    pub(super) fn drain_feeds(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.feeds.rx.try_recv() {
                Ok(input) => {
                    self.apply(input);
                    any = true;
                }
                // Disconnected: the loop's next `recv` sees it and stops.
                Err(_) => return any,
            }
        }
    }

    fn apply(&mut self, input: Input) {
        match input {
            Input::Node(ev) => self.apply_node(*ev),
            Input::Pending(ev) => self.apply_pending(*ev),
            Input::Bound(ev) => self.apply_bound(*ev),
            Input::Claim(ev) => self.apply_claim(*ev),
        }
    }

    fn apply_node(&mut self, ev: watcher::Event<Node>) {
        match ev {
            watcher::Event::Init => self.feeds.nodes.begin(),
            watcher::Event::InitApply(n) | watcher::Event::Apply(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.feeds.nodes.saw(&name);
                self.nodes.insert(name, NodeInfo::from(&n));
            }
            watcher::Event::Delete(n) => {
                self.nodes.remove(n.metadata.name.as_deref().unwrap_or_default());
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.feeds.nodes.finish() {
                    self.nodes.retain(|k, _| seen.contains(k));
                }
                self.feeds.nodes_synced = true;
            }
        }
    }

    fn apply_pending(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Init => self.feeds.pending.begin(),
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                self.feeds.pending.saw(&key_of(&p));
                self.set_pending(p);
            }
            watcher::Event::Delete(p) => self.drop_pending(&key_of(&p)),
            watcher::Event::InitDone => {
                for k in self.feeds.pending.gone(self.pending.keys()) {
                    self.drop_pending(&k);
                }
            }
        }
    }

    fn apply_bound(&mut self, ev: watcher::Event<BoundPod>) {
        match ev {
            watcher::Event::Init => self.feeds.bound.begin(),
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                let key = meta_key(&p.metadata);
                self.feeds.bound.saw(&key);
                self.drop_pending(&key);
                let node = p
                    .spec
                    .as_ref()
                    .and_then(|sp| sp.node_name.clone())
                    .filter(|n| !n.is_empty());
                let terminal = matches!(
                    p.status.as_ref().and_then(|st| st.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                );
                if self.assigned.get(&key) != node.as_ref() || terminal {
                    self.set_assigned(key, if terminal { None } else { node });
                }
            }
            watcher::Event::Delete(p) => self.set_assigned(meta_key(&p.metadata), None),
            watcher::Event::InitDone => {
                for k in self.feeds.bound.gone(self.assigned.keys()) {
                    self.set_assigned(k, None);
                }
                self.feeds.bound_synced = true;
            }
        }
    }

    fn apply_claim(&mut self, ev: watcher::Event<PersistentVolumeClaim>) {
        match ev {
            watcher::Event::Init => self.feeds.claims.begin(),
            watcher::Event::InitApply(c) | watcher::Event::Apply(c) => {
                let key = meta_key(&c.metadata);
                self.feeds.claims.saw(&key);
                self.claims.insert(key, Claim::from(&c));
            }
            watcher::Event::Delete(c) => {
                self.claims.remove(&meta_key(&c.metadata));
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.feeds.claims.finish() {
                    self.claims.retain(|k, _| seen.contains(k));
                }
                self.feeds.claims_synced = true;
            }
        }
    }
}

/// Runs the scheduler until the future is dropped.
pub async fn run(client: Client, clock: Arc<dyn Clock>, config: SchedulerConfig) {
    let mut tasks = tokio::task::JoinSet::new();
    let events = config.events.then(|| {
        let (sink, task) = EventSink::spawn(
            client.clone(),
            &config.scheduler_name,
            65_536,
            config.event_drops.clone(),
        );
        tasks.spawn(async move {
            let _ = task.await;
        });
        sink
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let mut node_cfg = watcher::Config::default();
    if let Some(sel) = &config.node_selector {
        node_cfg = node_cfg.labels(sel);
    }
    let nodes = watcher(Api::<Node>::all(client.clone()), node_cfg)
        .default_backoff()
        .boxed();
    forward(&mut tasks, &tx, nodes, Input::Node);
    let pending_cfg = watcher::Config::default().fields("spec.nodeName=");
    let pending = watcher(Api::<Pod>::all(client.clone()), pending_cfg)
        .default_backoff()
        .boxed();
    forward(&mut tasks, &tx, pending, Input::Pending);
    let bound_cfg = watcher::Config::default().fields("spec.nodeName!=");
    let bound = watcher(Api::<BoundPod>::all(client.clone()), bound_cfg)
        .default_backoff()
        .boxed();
    forward(&mut tasks, &tx, bound, Input::Bound);
    let claims = watcher(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    forward(&mut tasks, &tx, claims, Input::Claim);
    drop(tx);
    let mut s = Scheduler::new(client, clock, config, events, rx);
    let mut retry = false;
    loop {
        let retry_sleep = s.clock.sleep(Duration::from_secs(1));
        let changed = tokio::select! {
            biased;
            input = s.feeds.rx.recv() => match input {
                Some(input) => {
                    s.apply(input);
                    s.drain_feeds();
                    true
                }
                None => return,
            },
            () = retry_sleep, if retry => true,
        };
        if changed && s.feeds.synced() && !s.pending.is_empty() {
            retry = s.schedule_all().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::SimClock;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }))
        .unwrap()
    }

    fn node(name: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"pods": "110"}},
        }))
        .unwrap()
    }

    /// kube-scheduler's informers keep running during its scheduling cycle; so must these: a pending pod
    /// deleted while another pod's binding is in flight is not bound after it.
    #[tokio::test]
    async fn what_arrives_during_a_binding_is_applied_before_the_next_one() {
        let (tx, rx) = mpsc::unbounded_channel();
        let requests = Arc::new(Mutex::new(Vec::<String>::new()));
        let (seen, informer) = (requests.clone(), tx.clone());
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            seen.lock()
                .unwrap()
                .push(format!("{} {}", req.method(), req.uri().path()));
            let _ = informer.send(Input::Pending(Box::new(watcher::Event::Delete(pod("b")))));
            async move {
                http::Response::builder()
                    .status(201)
                    .body(kube::client::Body::from(b"{}".to_vec()))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        let config = SchedulerConfig {
            events: false,
            ..Default::default()
        };
        let clock = SimClock::new(Timestamp::UNIX_EPOCH, 1.0);
        let mut s = Scheduler::new(Client::new(service, "default"), clock, config, None, rx);
        for input in [
            Input::Node(Box::new(watcher::Event::Init)),
            Input::Node(Box::new(watcher::Event::InitApply(node("n1")))),
            Input::Node(Box::new(watcher::Event::InitDone)),
            Input::Bound(Box::new(watcher::Event::Init)),
            Input::Bound(Box::new(watcher::Event::InitDone)),
            Input::Claim(Box::new(watcher::Event::Init)),
            Input::Claim(Box::new(watcher::Event::InitDone)),
            Input::Pending(Box::new(watcher::Event::Apply(pod("a")))),
            Input::Pending(Box::new(watcher::Event::Apply(pod("b")))),
        ] {
            tx.send(input).unwrap();
        }
        assert!(s.drain_feeds());
        assert!(s.feeds.synced());
        assert_eq!(s.pending.len(), 2);
        assert!(!s.schedule_all().await, "no binding failed");
        assert_eq!(
            *requests.lock().unwrap(),
            ["POST /api/v1/namespaces/default/pods/a/binding"],
            "b was deleted while a's binding was in flight"
        );
        assert!(s.pending.is_empty());
        assert_eq!(s.counts.get("n1"), Some(&1));
    }
}
