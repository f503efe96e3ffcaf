//! How the caches fill: a streaming list (watch with `sendInitialEvents`) where the server has it, else one LIST.
//!
//! kube-apiserver answers a LIST with `resourceVersion=0` from its watch cache and ignores `limit` there, so a
//! controller starting on 10,000 pods reads one response of all of them (with their managedFields, ~5 KiB each)
//! and holds the whole body while it decodes it: its memory peaks at about the body plus the cache. A streaming
//! list (KEP-3157, WatchList; served by kube-apiserver since 1.27 behind a gate that is on in current
//! releases) sends the same objects as watch events, one at a time, then a bookmark marked
//! `k8s.io/initial-events-end`: the cache fills object by object. client-go's reflectors use it the same way
//! (`WatchListClient`). A server without it (older, or the gate off) refuses `sendInitialEvents`; probed once
//! at start (`auto`), the controller then falls back to the LIST. `scripts/bench-controller-rss` with
//! `CONTROLLER_ARGS="--initial-list stream"` measures the difference.

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher;

/// How to fill the caches (`insitu run --initial-list`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Probe the server once: streaming where it answers one, else LIST.
    Auto,
    /// Always LIST (`resourceVersion=0`, from the watch cache). The default until `auto` has been through the
    /// e2e tiers (the sim serves streaming lists too).
    #[default]
    List,
    /// Always a streaming list.
    Stream,
}

impl std::str::FromStr for InitialList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "list" => Ok(Self::List),
            "stream" => Ok(Self::Stream),
            _ => Err(format!("{s:?}: give auto, list or stream")),
        }
    }
}

/// The label no pod carries: the probe's streaming watch selects nothing and ends its initial events at once.
const PROBE_SELECTOR: &str = "insitu.dev/watch-list-probe=none";

/// Whether the server serves streaming lists: a streaming watch of pods (the resource the controller watches
/// anyway, so RBAC allows it) that selects nothing answers with the initial-events-end bookmark.
pub async fn served(pods: &Api<Pod>) -> bool {
    let params = WatchParams::streaming_lists().labels(PROBE_SELECTOR).timeout(10);
    let probe = async {
        let stream = pods.watch(&params, "0").await?;
        futures::pin_mut!(stream);
        while let Some(ev) = stream.try_next().await? {
            match ev {
                WatchEvent::Bookmark(b) => {
                    return Ok::<_, kube::Error>(
                        b.metadata.annotations.contains_key("k8s.io/initial-events-end"),
                    );
                }
                WatchEvent::Error(e) => {
                    tracing::debug!(error = %e.message, "streaming-list probe refused");
                    return Ok(false);
                }
                _ => {}
            }
        }
        Ok(false)
    };
    match tokio::time::timeout(Duration::from_secs(15), probe).await {
        Ok(Ok(yes)) => yes,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "streaming-list probe failed");
            false
        }
        Err(_) => false,
    }
}

/// The watcher configuration for `mode`, probing the server when `Auto`.
pub async fn config(mode: InitialList, pods: &Api<Pod>) -> watcher::Config {
    let stream = match mode {
        InitialList::List => false,
        InitialList::Stream => true,
        InitialList::Auto => served(pods).await,
    };
    tracing::info!(
        streaming = stream,
        "caches fill by {}",
        if stream {
            "streaming list (watch with sendInitialEvents)"
        } else {
            "LIST (resourceVersion=0)"
        }
    );
    if stream {
        watcher::Config::default().streaming_lists()
    } else {
        watcher::Config::default().any_semantic()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_flag_values_and_names_them_on_error() {
        assert_eq!("auto".parse(), Ok(InitialList::Auto));
        assert_eq!("list".parse(), Ok(InitialList::List));
        assert_eq!("stream".parse(), Ok(InitialList::Stream));
        assert_eq!(InitialList::default(), InitialList::List);
        let err = "watch".parse::<InitialList>().unwrap_err();
        assert!(err.contains("auto, list or stream"), "{err}");
    }
}
