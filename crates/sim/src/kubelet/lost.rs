//! Node loss: the simulated nodes whose kubelet is cut off from the apiserver (a crashed, powered-off or
//! partitioned machine), so that no heartbeat, pod status or pod event crosses in either direction.
//!
//! While a node is lost its containers keep running (a partition, not a wipe: the runtime's timers advance), but
//! the control plane hears nothing: the Lease and `lastHeartbeatTime` go stale and the node lifecycle controller
//! (`crate::nodelifecycle`) reacts as kube-controller-manager's does. Pod changes made meanwhile (a deletion, a
//! NotReady mark) reach the kubelet when it is back, as its relist would bring them.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

/// Which nodes are lost; clones share the set (the kubelet agent and heartbeats subscribe to it).
#[derive(Clone, Debug)]
pub struct LostNodes {
    tx: Arc<watch::Sender<BTreeSet<String>>>,
}

impl Default for LostNodes {
    fn default() -> Self {
        Self {
            tx: Arc::new(watch::channel(BTreeSet::new()).0),
        }
    }
}

impl LostNodes {
    /// Cuts `node` off; `false` if it already was.
    pub fn lose(&self, node: &str) -> bool {
        self.tx.send_if_modified(|s| s.insert(node.to_string()))
    }

    /// Brings `node` back; `false` if it was not lost.
    pub fn restore(&self, node: &str) -> bool {
        self.tx.send_if_modified(|s| s.remove(node))
    }

    pub fn is_lost(&self, node: &str) -> bool {
        self.tx.borrow().contains(node)
    }

    /// The lost nodes now.
    pub fn current(&self) -> BTreeSet<String> {
        self.tx.borrow().clone()
    }

    /// A receiver that wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<String>> {
        self.tx.subscribe()
    }
}
