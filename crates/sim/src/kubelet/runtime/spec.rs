//! The container spec fields the runtime model reads: probe timing and lifecycle hooks (preStop, postStart).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::jiff::Timestamp;

use super::{add, since};

/// The probe fields that decide timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ProbeT {
    pub(super) initial: Duration,
    pub(super) period: Duration,
    pub(super) success: u32,
}

impl ProbeT {
    pub(super) fn from(p: &Probe) -> Self {
        let secs =
            |v: Option<i32>, d: i32| Duration::from_secs(u64::try_from(v.unwrap_or(d).max(0)).unwrap_or(0));
        let period = secs(p.period_seconds, 10).max(Duration::from_secs(1));
        Self {
            initial: secs(p.initial_delay_seconds, 0),
            period,
            success: p.success_threshold.unwrap_or(1).max(1).unsigned_abs(),
        }
    }

    /// First time this probe passes for a container started at `start` whose app is ready from `not_before`:
    /// probes run at `start + initialDelay + k·period`; `successThreshold` consecutive successes are needed.
    pub(super) fn pass_time(self, start: Timestamp, not_before: Timestamp) -> Timestamp {
        let first = add(start, self.initial);
        let mut t = first;
        if not_before > first {
            let gap = since(not_before, first).as_nanos();
            let period = self.period.as_nanos().max(1);
            let k = gap.div_ceil(period);
            t = add(
                first,
                Duration::from_nanos(u64::try_from(k * period).unwrap_or(u64::MAX)),
            );
        }
        add(t, self.period * self.success.saturating_sub(1))
    }
}

/// A postStart hook as the simulation runs it: how long it takes and whether it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hook {
    pub(super) takes: Duration,
    pub(super) fails: bool,
}

/// The container spec fields the runtime uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CSpec {
    pub(super) image: String,
    pub(super) readiness: Option<ProbeT>,
    pub(super) startup: Option<ProbeT>,
    pub(super) pre_stop: Duration,
    pub(super) post_start: Option<Hook>,
    /// `command` set: the image's default command (which `--exit-image` images exit from) is not run.
    pub(super) has_command: bool,
}

impl CSpec {
    pub(super) fn from(c: &Container) -> Self {
        Self {
            image: c.image.clone().unwrap_or_default(),
            readiness: c.readiness_probe.as_ref().map(ProbeT::from),
            startup: c.startup_probe.as_ref().map(ProbeT::from),
            pre_stop: pre_stop_duration(c),
            post_start: post_start_hook(c),
            has_command: c.command.as_ref().is_some_and(|v| !v.is_empty()),
        }
    }
}

pub(super) fn hook_words(h: &k8s_openapi::api::core::v1::LifecycleHandler) -> Vec<String> {
    h.exec
        .as_ref()
        .and_then(|e| e.command.as_ref())
        .into_iter()
        .flatten()
        .flat_map(|a| {
            a.split(|ch: char| ch.is_whitespace() || ch == ';' || ch == '&' || ch == '|')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The time of the `sleep N` in a hook's exec command, or its `sleep` action.
pub(super) fn hook_sleep(h: &k8s_openapi::api::core::v1::LifecycleHandler) -> Duration {
    if let Some(s) = &h.sleep {
        return Duration::from_secs(u64::try_from(s.seconds.max(0)).unwrap_or(0));
    }
    let words = hook_words(h);
    let mut total = Duration::ZERO;
    for pair in words.windows(2) {
        if pair[0] == "sleep" || pair[0].ends_with("/sleep") {
            let n = pair[1].trim_end_matches('s');
            if let Ok(secs) = n.parse::<f64>()
                && secs.is_finite()
                && secs >= 0.0
            {
                total += Duration::from_secs_f64(secs.min(1e9));
            }
        }
    }
    total
}

/// How long a container's preStop hook runs: `sleep N` in an exec hook, or the `sleep` action.
pub fn pre_stop_duration(c: &Container) -> Duration {
    c.lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .map_or(Duration::ZERO, hook_sleep)
}

/// A container's postStart hook: its `sleep` time, and whether it fails (an exec command that is `false`
/// or runs `exit N` with N ≠ 0; every other command succeeds). httpGet/tcpSocket hooks succeed at once.
pub(super) fn post_start_hook(c: &Container) -> Option<Hook> {
    let h = c.lifecycle.as_ref()?.post_start.as_ref()?;
    let words = hook_words(h);
    let fails = words.iter().any(|w| w == "false" || w.ends_with("/false"))
        || words
            .windows(2)
            .any(|p| p[0] == "exit" && p[1].parse::<i64>().is_ok_and(|n| n != 0));
    Some(Hook {
        takes: hook_sleep(h),
        fails,
    })
}
