//! What the kubelet agent does with what it watches: pod events (applied, deleted, relisted; parked while
//! their node is lost), ConfigMaps, and the pods it accepts onto a node.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::{Agent, Entry, key_of, rv_of};
use crate::kubelet::cache;
use crate::kubelet::runtime::{Env, KEvent, PodRt, deletion_grace};

impl Agent {
    pub(super) fn on_watch(&mut self, ev: watcher::Event<Pod>) {
        let ev = match ev {
            watcher::Event::InitApply(p) => {
                if let Some(seen) = &mut self.relist {
                    seen.insert(key_of(&p));
                }
                watcher::Event::Apply(p)
            }
            ev => ev,
        };
        if let watcher::Event::Apply(p) | watcher::Event::Delete(p) = &ev
            && self.lost_node_of(p)
        {
            self.parked.insert(key_of(p), ev);
            return;
        }
        match ev {
            watcher::Event::Init => self.relist = Some(HashSet::new()),
            watcher::Event::InitApply(p) => self.on_apply(p),
            watcher::Event::InitDone => {
                if let Some(seen) = self.relist.take() {
                    let mut gone: Vec<String> =
                        self.pods.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                    gone.sort_unstable();
                    for k in gone {
                        match self.pods.get(&k) {
                            Some(e) if self.lost.contains(&e.node) => {
                                let ev = watcher::Event::Delete(e.pod.clone());
                                self.parked.insert(k, ev);
                            }
                            _ => self.remove(&k),
                        }
                    }
                }
            }
            watcher::Event::Apply(p) => {
                if let Some(jobs) = &mut self.jobs {
                    jobs.pods_changed(p.metadata.namespace.as_deref().unwrap_or_default());
                }
                self.on_apply(p);
            }
            watcher::Event::Delete(p) => {
                if let Some(jobs) = &mut self.jobs {
                    jobs.pods_changed(p.metadata.namespace.as_deref().unwrap_or_default());
                }
                let key = key_of(&p);
                if self
                    .pods
                    .get(&key)
                    .is_some_and(|e| Some(&e.uid) == p.metadata.uid.as_ref())
                {
                    self.remove(&key);
                }
            }
        }
    }

    /// Whether `pod` runs (or is bound to, or was known on) a lost node.
    pub(super) fn lost_node_of(&self, pod: &Pod) -> bool {
        if self.lost.is_empty() {
            return false;
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.node_index.get(n));
        let known = self.pods.get(&key_of(pod)).map(|e| &e.node);
        bound.or(known).is_some_and(|n| self.lost.contains(n))
    }

    /// Applies a change of the lost set: a node back gets its parked events, then a status sync of every pod.
    pub(super) fn on_lost_changed(&mut self) {
        let names = self.lost_rx.borrow_and_update().clone();
        let now_lost: HashSet<usize> = names
            .iter()
            .filter_map(|n| self.node_index.get(n).copied())
            .collect();
        let back: Vec<usize> = self.lost.difference(&now_lost).copied().collect();
        self.lost = now_lost;
        if back.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for (_, ev) in parked {
            self.on_watch(ev);
        }
        // Sorted: the order of the writes must not depend on HashMap iteration (a run replays from its seed).
        let mut keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, e)| back.contains(&e.node))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable();
        for key in keys {
            self.sync(&key);
        }
    }

    pub(super) fn on_config_map(&mut self, ev: watcher::Event<ConfigMap>) {
        let (cm, deleted) = match ev {
            watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => (cm, false),
            watcher::Event::Delete(cm) => (cm, true),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        if deleted {
            self.config_maps.remove(&ns, &name);
        } else {
            let keys = cm
                .data
                .iter()
                .flat_map(|d| d.keys())
                .chain(cm.binary_data.iter().flat_map(|d| d.keys()))
                .cloned()
                .collect();
            self.config_maps.set(&ns, &name, keys);
        }
        let now = self.clock.now();
        let config = self.config.clone();
        let mut keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, e)| e.pod.metadata.namespace.as_deref() == Some(ns.as_str()) && !e.frozen)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort_unstable();
        for key in keys {
            let mut events = Vec::new();
            let Some(e) = self.pods.get_mut(&key) else {
                continue;
            };
            let mut env = Env {
                images: &config.images,
                node: &mut self.nodes[e.node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            e.rt.config_changed(&ns, now);
            e.rt.advance(now, &mut env);
            self.emit(&key, events);
            self.reschedule(&key);
            self.sync(&key);
        }
    }

    pub(super) fn remove(&mut self, key: &str) {
        if let Some(e) = self.pods.remove(key) {
            e.rt.release(&mut self.nodes[e.node].rt);
            if let Some(t) = e.timer {
                self.timers.remove(&t);
            }
            if let Some(ip) = e.ip {
                self.nodes[e.node].pool.release(ip);
            }
        }
    }

    pub(super) fn on_apply(&mut self, pod: Pod) {
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.node_index.get(n))
            .copied()
        else {
            return;
        };
        let key = key_of(&pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.pods.get(&key).is_some_and(|e| e.uid != uid) {
            self.remove(&key);
        }
        let now = self.clock.now();
        let mut events = Vec::new();
        let config = self.config.clone();
        let images = &config.images;
        if !self.pods.contains_key(&key) {
            let entry = self.accept(pod, node, now, &mut events, images);
            self.pods.insert(key.clone(), Box::new(entry));
        } else {
            let mut env = Env {
                images,
                node: &mut self.nodes[node].rt,
                rng: &mut self.rng,
                events: &mut events,
                config_maps: &self.config_maps,
            };
            let Some(e) = self.pods.get_mut(&key) else { return };
            if let (Some(old), Some(new)) = (rv_of(&e.pod), rv_of(&pod))
                && new < old
            {
                return;
            }
            if !e.frozen {
                e.rt.update_spec(&pod, now, &mut env);
                if config.kruise_daemon {
                    e.rt.restart_stale_env(&pod, now, &mut env);
                }
                if pod.metadata.deletion_timestamp.is_some() && !e.rt.terminating() {
                    e.rt.terminate(now, deletion_grace(&pod), &mut env);
                }
                e.rt.advance(now, &mut env);
            }
            e.keep(pod);
        }
        self.emit(&key, events);
        self.reschedule(&key);
        self.sync(&key);
    }

    pub(super) fn accept(
        &mut self,
        pod: Pod,
        node: usize,
        now: Timestamp,
        events: &mut Vec<KEvent>,
        images: &crate::kubelet::ImageProfiles,
    ) -> Entry {
        let status = pod.status.clone().unwrap_or_default();
        let frozen = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
        let ns = &mut self.nodes[node];
        let mut ip = status
            .pod_ip
            .as_deref()
            .and_then(|s| s.parse::<Ipv4Addr>().ok())
            .filter(|ip| ns.pool.reserve(*ip));
        if ip.is_none() && !frozen && !host_network {
            ip = ns.pool.allocate();
            if ip.is_none() {
                tracing::warn!(node = %ns.name, "pod IP range exhausted");
            }
        }
        let start_time = status.start_time.as_ref().map_or(now, |t| t.0);
        let mut env = Env {
            images,
            node: &mut ns.rt,
            rng: &mut self.rng,
            events,
            config_maps: &self.config_maps,
        };
        let mut rt = PodRt::new(&pod, now, &mut env);
        if !frozen {
            if pod.metadata.deletion_timestamp.is_some() {
                rt.terminate(now, deletion_grace(&pod), &mut env);
            }
            rt.advance(now, &mut env);
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let (pod, spec) = cache::kept(pod);
        Entry {
            uid,
            node,
            pod,
            spec,
            rt,
            ip,
            host_network,
            start_time,
            timer: None,
            writing: false,
            queued: false,
            dirty: false,
            last_written: None,
            deleting: false,
            frozen,
        }
    }
}
