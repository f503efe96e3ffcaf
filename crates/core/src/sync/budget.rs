//! Kruise's `calculateDiffsWithExpectation` (`sync/cloneset_sync_utils.go`) and `limitUpdateIndexes`
//! (`sync/cloneset_update.go`).

use insitu_api::CloneSetSpec;
use insitu_api::validation::intstr::{legacy_scaled_value, scaled_value};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::plan::Budget;

/// The four facts about a pod that the arithmetic needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffPod {
    /// Counts as the update revision (hash match; with PreparingUpdateAsUpdate also PreparingUpdate pods).
    pub updated: bool,
    /// Lifecycle `PreparingDelete`.
    pub preparing_delete: bool,
    /// `specified-delete` label or listed in `podsToDelete`.
    pub to_delete: bool,
    /// Kruise `IsPodAvailable` (lifecycle, Running, Ready ≥ minReadySeconds, InPlaceUpdateReady).
    pub available: bool,
}

/// Kruise `util.CalculatePartitionReplicas`: int as-is; percent rounds up, and short of `"100%"` a
/// result equal to replicas (R > 1) becomes R−1 (#926/#953); clamped to [0, R]; an error counts as 0.
pub fn partition(p: Option<&IntOrString>, replicas: i32) -> i32 {
    let Some(p) = p else { return 0 };
    let v = match p {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => match scaled_value(p, replicas, true) {
            Ok(v) if replicas > 1 && v == replicas && s != "100%" => replicas - 1,
            Ok(v) => v,
            Err(_) => return 0,
        },
    };
    v.min(replicas).max(0)
}

/// `maxSurge` (rounded up, 0 when paused) and `maxUnavailable` (default 20%, rounded up when maxSurge is 0,
/// down otherwise), both with apimachinery's legacy parser as the Kruise controller does.
pub fn surge_and_unavailable(spec: &CloneSetSpec) -> (i32, i32) {
    let replicas = spec.replicas();
    let us = spec.update_strategy.as_ref();
    if us.is_some_and(|u| !u.has_rolling_update()) {
        // v1beta1 OnDelete without rollingUpdate: no surge, the default 20% rounded down.
        return (
            0,
            legacy_scaled_value(&IntOrString::String("20%".into()), replicas, false),
        );
    }
    let mut max_surge = us
        .and_then(|u| u.max_surge.as_ref())
        .map_or(0, |v| legacy_scaled_value(v, replicas, true));
    if us.is_some_and(|u| u.paused) {
        // Kruise #1153: paused forces maxSurge to 0.
        max_surge = 0;
    }
    let mu = us
        .and_then(|u| u.max_unavailable.clone())
        .unwrap_or_else(|| IntOrString::String("20%".into()));
    let max_unavailable = legacy_scaled_value(&mu, replicas, max_surge == 0);
    (max_surge, max_unavailable)
}

fn clamp(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// Kruise `calculateDiffsWithExpectation`. `allow_rollback` = gate CloneSetPartitionRollback on and
/// currentRevision ≠ updateRevision. `exclude_preparing_delete` = flag or CloneSet label.
pub fn calculate(
    spec: &CloneSetSpec,
    pods: &[DiffPod],
    allow_rollback: bool,
    exclude_preparing_delete: bool,
) -> Budget {
    let replicas = i64::from(spec.replicas());
    let us = spec.update_strategy.as_ref();
    let part = i64::from(partition(us.and_then(|u| u.partition.as_ref()), spec.replicas()));
    let (max_surge, max_unavailable) = surge_and_unavailable(spec);
    let (max_surge, max_unavailable) = (i64::from(max_surge), i64::from(max_unavailable));
    let scale_max_unavailable = spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
        .map_or(i64::from(i32::MAX), |v| {
            i64::from(legacy_scaled_value(v, spec.replicas(), true))
        });

    let (mut old_count, mut new_active, mut old_active) = (0i64, 0i64, 0i64);
    let (mut unavail_new, mut unavail_old, mut del_new, mut del_old) = (0i64, 0i64, 0i64, 0i64);
    let (mut pd_new, mut pd_old) = (0i64, 0i64);
    for p in pods {
        if p.updated {
            if p.preparing_delete {
                pd_new += 1;
            } else {
                new_active += 1;
                if p.to_delete {
                    del_new += 1;
                } else if !p.available {
                    unavail_new += 1;
                }
            }
        } else {
            old_count += 1;
            if p.preparing_delete {
                pd_old += 1;
            } else {
                old_active += 1;
                if p.to_delete {
                    del_old += 1;
                } else if !p.available {
                    unavail_old += 1;
                }
            }
        }
    }

    let mut update_old_diff = old_active - part;
    let mut update_new_diff = new_active - (replicas - part);
    let total_unavailable = pd_new + pd_old + unavail_new + unavail_old;
    if !allow_rollback {
        // Kruise: without CloneSetPartitionRollback (or with one revision) pods only move forward.
        update_old_diff = update_old_diff.max(0);
        update_new_diff = update_new_diff.min(0);
    }

    let mut b = Budget {
        partition: clamp(part),
        max_surge: clamp(max_surge),
        max_unavailable: clamp(max_unavailable),
        ..Default::default()
    };
    let (mut use_surge, mut use_surge_old) = (0i64, 0i64);
    if max_surge > 0 {
        // Surge for specified deletes not covered by maxUnavailable.
        let (mut scale_surge, mut scale_surge_old) = (0i64, 0i64);
        let to_delete = del_new + del_old;
        if to_delete > 0 {
            scale_surge = (total_unavailable + to_delete - max_unavailable)
                .max(0)
                .min(to_delete);
            if scale_surge > del_new {
                scale_surge_old = scale_surge - del_new;
            }
        }
        // Surge for moving pods between revisions (opposite-sign diffs).
        let (mut update_surge, mut update_surge_old) = (0i64, 0i64);
        if (update_old_diff > 0 && update_new_diff < 0) || (update_old_diff < 0 && update_new_diff > 0) {
            if update_old_diff.abs() <= update_new_diff.abs() {
                update_surge = update_old_diff.abs();
                if update_old_diff < 0 {
                    update_surge_old = update_surge;
                }
            } else {
                update_surge = update_new_diff.abs();
                if update_new_diff > 0 {
                    update_surge_old = update_surge;
                }
            }
        }
        // Kruise: scale and update never in one reconcile, so the larger need wins.
        if scale_surge >= update_surge {
            use_surge = max_surge.min(scale_surge);
            use_surge_old = use_surge.min(scale_surge_old);
        } else {
            use_surge = max_surge.min(update_surge);
            use_surge_old = use_surge.min(update_surge_old);
        }
    }
    b.use_surge = clamp(use_surge);
    b.use_surge_old_revision = clamp(use_surge_old);

    let mut current_total = pods.len() as i64;
    let mut current_old = old_count;
    if exclude_preparing_delete {
        current_total -= pd_new + pd_old;
        current_old -= pd_old;
    }
    let expected_total = replicas + use_surge;
    let expected_old = part + use_surge_old;

    let up = expected_total - current_total;
    if up > 0 {
        b.scale_up_num = clamp(up);
        b.scale_up_num_old_revision = clamp((expected_old - current_old).max(0));
        b.scale_up_limit = clamp(up.min((scale_max_unavailable - total_unavailable).max(0)));
    }
    let down = current_total - del_new - del_old - expected_total;
    if down > 0 {
        b.scale_down_num = clamp(down);
        b.scale_down_num_old_revision = clamp((current_old - del_old - expected_old).max(0));
    }
    if del_new > 0 || del_old > 0 || down > 0 {
        b.delete_ready_limit =
            clamp((max_unavailable + (pods.len() as i64 - replicas) - total_unavailable).max(0));
    }
    let update_num = if update_old_diff.abs() <= update_new_diff.abs() {
        update_old_diff
    } else {
        -update_new_diff
    };
    b.update_num = clamp(update_num);
    if update_num != 0 {
        b.update_max_unavailable = clamp(max_unavailable + pods.len() as i64 - replicas);
    }
    b
}

/// Kruise `limitUpdateIndexes`: keep the first |updateNum| candidates, then admit them while the pods
/// unavailable at the target revision plus those admitted stay below `updateMaxUnavailable`; an available
/// candidate also needs the overall unavailable count below it (updating an unavailable pod costs nothing).
/// `all` = (available, at target revision) for every active pod; `candidates` = availability, in order.
pub fn limit_update(budget: &Budget, all: impl Iterator<Item = (bool, bool)>, candidates: &[bool]) -> usize {
    let counts = Unavailable::count(all);
    counts.admit(budget, candidates)
}

/// Unavailable pods among all active pods, and among those at the target revision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unavailable {
    all: i64,
    at_target: i64,
}

impl Unavailable {
    pub(crate) fn count(all: impl Iterator<Item = (bool, bool)>) -> Self {
        let (mut unavailable, mut at_target) = (0i64, 0i64);
        for (available, target) in all {
            if !available {
                unavailable += 1;
                if target {
                    at_target += 1;
                }
            }
        }
        Unavailable {
            all: unavailable,
            at_target,
        }
    }

    /// How many leading candidates `admit` can look at: it stops once `at_target + admitted` reaches
    /// `updateMaxUnavailable`, and every candidate it looks at is admitted or ends the loop. So the
    /// planner only needs this many candidates in order, not all of them.
    pub(crate) fn scan_bound(&self, budget: &Budget, candidates: usize) -> usize {
        let want = (budget.update_num.unsigned_abs() as usize).min(candidates);
        let room = usize::try_from(i64::from(budget.update_max_unavailable) - self.at_target).unwrap_or(0);
        want.min(room)
    }

    /// `limitUpdateIndexes` itself (see `limit_update`).
    pub(crate) fn admit(self, budget: &Budget, candidates: &[bool]) -> usize {
        let want = (budget.update_num.unsigned_abs() as usize).min(candidates.len());
        let max = i64::from(budget.update_max_unavailable);
        let (mut unavailable, target_unavailable) = (self.all, self.at_target);
        let mut admitted = 0usize;
        for &available in &candidates[..want] {
            if target_unavailable + admitted as i64 >= max {
                break;
            }
            if available {
                if unavailable >= max {
                    break;
                }
                unavailable += 1;
            }
            admitted += 1;
        }
        admitted
    }
}
