//! Measuring helpers shared by the bench scenarios: process memory, metric samples, histogram quantiles, the
//! apiserver's write counts and waiting on a CloneSet's status.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use futures::StreamExt;
use insitu_api::CloneSet;
use insitu_sim::Clock as _;
use insitu_sim::apiserver::ApiStats;
use kube::runtime::watcher;

/// `VmHWM` and `VmRSS` from /proc/self/status, in MiB (0 where unavailable).
pub fn proc_memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU time used so far (Linux `/proc`; zeros elsewhere), user + system, in seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTime {
    /// The whole process, threads that have ended included (`/proc/self/stat`, in 1/100 s: `USER_HZ`).
    pub process: f64,
    /// The calling thread (`/proc/thread-self/schedstat`, in ns): in the bench, the embedded cluster's thread.
    pub thread: f64,
}

pub fn cpu_time() -> CpuTime {
    // Fields after the command name's closing parenthesis: state is field 3, utime 14, stime 15.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let ticks: f64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    let thread_ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    CpuTime {
        process: ticks / 100.0,
        thread: thread_ns / 1e9,
    }
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS (Linux: `5` to `/proc/self/clear_refs`), so
/// the next reading is the peak of what follows. False when the kernel refused.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Metric samples from OpenMetrics text: `name{labels}` → value.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse::<f64>().ok()?))
        })
        .collect()
}

/// `label="value"` out of `name{a="x",b="y"}`.
pub fn label<'a>(key: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!("{name}=\"");
    let start = key.find(&pat)? + pat.len();
    let end = key[start..].find('"')? + start;
    Some(&key[start..end])
}

pub fn diff(
    after: &BTreeMap<String, f64>,
    before: &BTreeMap<String, f64>,
    prefix: &str,
) -> Vec<(String, f64)> {
    after
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// Quantile from cumulative histogram buckets `(upper bound, count)`, interpolated linearly within the bucket.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let total = buckets.last().map_or(0.0, |b| b.1);
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if !le.is_finite() {
                return prev.0;
            }
            let inside = cum - prev.1;
            let frac = if inside > 0.0 {
                (rank - prev.1) / inside
            } else {
                1.0
            };
            return prev.0 + (le - prev.0) * frac;
        }
        prev = (le, cum);
    }
    prev.0
}

pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WriteCount {
    pub verb: String,
    pub resource: String,
    pub count: u64,
    pub per_pod: f64,
}

pub fn write_counts(stats_after: &ApiStats, stats_before: &ApiStats, pods: usize) -> Vec<WriteCount> {
    let mut out: Vec<WriteCount> = stats_after
        .writes
        .iter()
        .map(|((verb, res), n)| {
            let d = n - stats_before.writes_for(verb, res);
            WriteCount {
                verb: verb.clone(),
                resource: res.clone(),
                count: d,
                per_pod: d as f64 / pods as f64,
            }
        })
        .filter(|w| w.count > 0)
        .collect();
    out.sort_by_key(|w| std::cmp::Reverse(w.count));
    out
}

/// Waits on the CloneSet watch until `done` holds; calls `seen` on every version.
pub async fn wait_cloneset<S>(
    stream: &mut S,
    clock: &insitu_sim::SimClock,
    timeout: u64,
    what: &str,
    mut seen: impl FnMut(&CloneSet),
    done: impl Fn(&CloneSet) -> bool,
) -> anyhow::Result<CloneSet>
where
    S: futures::Stream<Item = Result<CloneSet, watcher::Error>> + Unpin,
{
    let start = clock.now();
    loop {
        let left = Duration::from_secs(timeout)
            .saturating_sub(Duration::try_from(clock.now().duration_since(start)).unwrap_or_default());
        match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(Ok(cs))) => {
                seen(&cs);
                if done(&cs) {
                    return Ok(cs);
                }
            }
            Ok(Some(Err(e))) => tracing::debug!("cloneset watch: {e}"),
            Ok(None) => bail!("CloneSet watch ended while waiting for {what}"),
            Err(_) => bail!("{what}: not reached within {timeout} cluster seconds"),
        }
    }
}

pub fn settled(cs: &CloneSet, n: i32) -> bool {
    let Some(st) = &cs.status else { return false };
    st.observed_generation == cs.metadata.generation.unwrap_or(0)
        && st.replicas == n
        && st.ready_replicas == n
        && st.updated_replicas == n
        && st.updated_ready_replicas == n
}
