//! The kubelet agent's timers and status writes: a pod's runtime advanced to now, its status built and
//! written in a bounded number of slots (queued when all are taken), each write's outcome, deletions finished.

use insitu_api::containermeta::{RUNTIME_CONTAINERS_META_ANNOTATION, RuntimeContainerMetaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};

use super::{Agent, Done, Entry, RETRY, regarding, rv_of};
use crate::kubelet::runtime::{Env, KEvent, add};
use crate::kubelet::status::{PodView, build_status_kept};
use crate::kubelet::write::{Outcome, StatusWrite, is_code, meta_annotation, status_hash, write_status};

impl Agent {
    pub(super) fn emit(&self, key: &str, events: Vec<KEvent>) {
        let (Some(sink), Some(e)) = (&self.events, self.pods.get(key)) else {
            return;
        };
        // One pod's events share its reference and node name while they wait in the queue.
        let reg = std::sync::Arc::new(regarding(&e.pod));
        let host: std::sync::Arc<str> = self.nodes[e.node].name.as_str().into();
        for ev in events {
            sink.record(
                ev.at,
                &reg,
                ev.field_path,
                ev.warning,
                ev.reason,
                ev.message,
                Some(&host),
            );
        }
    }

    pub(super) fn reschedule(&mut self, key: &str) {
        let Some(e) = self.pods.get_mut(key) else { return };
        let want = if e.frozen { None } else { e.rt.deadline() };
        if e.timer.map(|t| t.0) == want {
            return;
        }
        if let Some(t) = e.timer.take() {
            self.timers.remove(&t);
        }
        if let Some(at) = want {
            self.seq += 1;
            e.timer = Some((at, self.seq));
            self.timers.insert((at, self.seq), key.to_string());
        }
    }

    pub(super) fn schedule_retry(&mut self, key: &str) {
        let at = add(self.clock.now(), RETRY);
        let Some(e) = self.pods.get_mut(key) else { return };
        if e.timer.is_some_and(|t| t.0 <= at) {
            return;
        }
        if let Some(t) = e.timer.take() {
            self.timers.remove(&t);
        }
        self.seq += 1;
        e.timer = Some((at, self.seq));
        self.timers.insert((at, self.seq), key.to_string());
    }

    pub(super) fn on_timers(&mut self, now: Timestamp) {
        let config = self.config.clone();
        let images = &config.images;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            let mut events = Vec::new();
            let Some(node) = self.pods.get(&key).map(|e| e.node) else {
                continue;
            };
            let mut env = Env {
                images,
                node: &mut self.nodes[node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            if let Some(e) = self.pods.get_mut(&key) {
                e.timer = None;
                if !e.frozen {
                    e.rt.advance(now, &mut env);
                }
            }
            self.emit(&key, events);
            self.reschedule(&key);
            self.sync(&key);
        }
    }

    pub(super) fn view(&self, e: &Entry) -> PodView {
        let (init_statuses, statuses) = e.rt.statuses();
        let host_ip = self.nodes[e.node].host_ip.clone();
        let pod_ip = if e.host_network {
            host_ip.clone()
        } else {
            e.ip.map(|ip| ip.to_string()).unwrap_or_default()
        };
        PodView {
            sandbox_ready: !pod_ip.is_empty(),
            host_ip,
            pod_ip,
            start_time: e.start_time,
            init_statuses,
            statuses,
            terminal: e.rt.terminal(),
            runtime_meta: (self.config.kruise_daemon && e.rt.reads_metadata()).then(|| {
                RuntimeContainerMetaSet {
                    containers: e.rt.containers_meta(),
                }
                .to_json()
            }),
            resize_conditions: e.rt.resize_conditions(),
        }
    }

    /// Writes status if the generated status differs from the pod's; finishes deletion of terminal pods.
    pub(super) fn sync(&mut self, key: &str) {
        let Some(e) = self.pods.get(key) else { return };
        if self.lost.contains(&e.node) {
            // Cut off: nothing reaches the apiserver; the node's return syncs every pod.
            return;
        }
        if e.writing {
            if let Some(e) = self.pods.get_mut(key) {
                e.dirty = true;
            }
            return;
        }
        let delete =
            e.pod.metadata.deletion_timestamp.is_some() && !e.deleting && (e.frozen || e.rt.terminal());
        let view = (!e.frozen).then(|| self.view(e));
        // The status to write, built once here and handed to the write (which rebuilds it only after a conflict).
        let first = view.as_ref().and_then(|view| {
            let desired = build_status_kept(&e.pod, &e.spec, view, self.clock.now());
            let meta = view.runtime_meta.as_deref();
            let differs = e.pod.status.as_ref() != Some(&desired)
                || meta.is_some_and(|m| meta_annotation(&e.pod) != Some(m));
            if !differs {
                return None;
            }
            let hash = status_hash(&desired, meta);
            (e.last_written != Some(hash)).then_some((desired, hash))
        });
        if first.is_none() && !delete {
            return;
        }
        if self.inflight >= self.write_slots() {
            if let Some(e) = self.pods.get_mut(key)
                && !e.queued
            {
                e.queued = true;
                self.waiting.push_back(key.to_string());
            }
            return;
        }
        self.inflight += 1;
        // The write needs the metadata (labels and annotations may change through pods/status), not the spec.
        let meta = e.pod.metadata.clone();
        let uid = e.uid.clone();
        if let Some(e) = self.pods.get_mut(key) {
            e.writing = true;
            e.deleting |= delete;
        }
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            meta.namespace.as_deref().unwrap_or("default"),
        );
        let (clock, tx, key) = (self.clock.clone(), self.done_tx.clone(), key.to_string());
        tokio::spawn(async move {
            let name = meta.name.clone().unwrap_or_default();
            let outcome = match (first, view) {
                (Some((desired, hash)), Some(view)) => {
                    let first = StatusWrite {
                        meta,
                        status: desired,
                        hash,
                    };
                    write_status(&api, &name, &uid, first, &view, clock.as_ref()).await
                }
                _ => Outcome::Unchanged(None),
            };
            let deleted = match (&outcome, delete) {
                (Outcome::Written(..) | Outcome::Unchanged(_), true) => {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(Preconditions {
                            uid: Some(uid.clone()),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    Some(match api.delete(&name, &dp).await {
                        Ok(_) => Ok(()),
                        Err(e) if is_code(&e, 404) => Ok(()),
                        // A 409 is a conflict, not proof the pod is gone (a failed UID precondition means a new
                        // pod took the name, which the watch then shows): retry, as the kubelet's status manager
                        // retries its final delete on every sync until the pod is gone.
                        Err(e) => Err(e.to_string()),
                    })
                }
                (Outcome::Gone, true) => Some(Ok(())),
                (Outcome::Failed(e), true) => Some(Err(format!("not attempted: status write failed: {e}"))),
                _ => None,
            };
            let _ = tx.send(Done {
                key,
                uid,
                outcome,
                deleted,
            });
        });
    }

    pub(super) fn on_done(&mut self, done: Done) {
        self.inflight = self.inflight.saturating_sub(1);
        self.finish(done);
        while self.inflight < self.write_slots() {
            let Some(key) = self.waiting.pop_front() else {
                break;
            };
            if let Some(e) = self.pods.get_mut(&key) {
                e.queued = false;
                self.sync(&key);
            }
        }
    }

    /// Status writes that may be under way at once.
    pub(super) fn write_slots(&self) -> usize {
        self.config.max_inflight_writes.max(1)
    }

    /// A write's outcome: the pod as written, a retry, or the sync it missed while writing.
    pub(super) fn finish(&mut self, done: Done) {
        let Some(e) = self.pods.get_mut(&done.key).filter(|e| e.uid == done.uid) else {
            return;
        };
        e.writing = false;
        let mut retry = false;
        match done.outcome {
            Outcome::Written(w) => {
                e.last_written = Some(w.hash);
                if let Some(base) = w.base
                    && rv_of(&base) > rv_of(&e.pod)
                {
                    e.keep(*base);
                }
                // The write's own watch event (or a later one) may have arrived first; then it already shows this.
                let written = w.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
                if written > rv_of(&e.pod) {
                    e.pod.status = Some(w.status);
                    e.pod.metadata.resource_version = w.resource_version;
                    if let Some(m) = w.runtime_meta {
                        e.pod
                            .metadata
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(RUNTIME_CONTAINERS_META_ANNOTATION.into(), m);
                    }
                }
            }
            Outcome::Unchanged(pod) => {
                if let Some(pod) = pod
                    && rv_of(&pod) > rv_of(&e.pod)
                {
                    e.keep(*pod);
                }
            }
            Outcome::Gone => {}
            Outcome::Failed(err) => {
                tracing::debug!(pod = %done.key, error = %err, "pod status write failed; retrying");
                retry = true;
            }
        }
        if let Some(Err(err)) = done.deleted {
            tracing::debug!(pod = %done.key, error = %err, "pod delete failed; retrying");
            e.deleting = false;
            retry = true;
        }
        let dirty = std::mem::take(&mut e.dirty);
        if retry {
            self.schedule_retry(&done.key);
        } else if dirty {
            self.sync(&done.key);
        }
    }
}
