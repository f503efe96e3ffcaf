//! Planning stays bounded whatever the spec says (issue 9 item 1): huge `replicas`, the instance-id space.

mod common;

use common::*;
use insitu_api::keys;
use insitu_core::pods::{self, ID_SPACE};
use insitu_core::{Action, MAX_CREATES_PER_ROUND, Plan};
use serde_json::json;
use std::collections::HashSet;

fn creates(p: &Plan) -> usize {
    p.actions
        .iter()
        .filter(|a| matches!(a, Action::CreatePod { .. }))
        .count()
}

fn failed_scale(p: &Plan) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .iter()
        .find_map(|c| (c.type_ == keys::conditions::FAILED_SCALE).then(|| c.message.clone()))
}

#[test]
fn int32_max_replicas_plans_one_bounded_batch_and_warns() {
    // Before: `memory allocation of 51539607528 bytes failed` (ids allocated for every replica up front).
    let w = World::new(cloneset(
        i32::MAX,
        "nginx:1",
        json!({"type": "InPlaceIfPossible"}),
    ));
    let snap = w.snapshot();
    let plan = insitu_core::plan(&snap);
    assert_eq!(creates(&plan), MAX_CREATES_PER_ROUND);
    let names: HashSet<String> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod, .. } => pod.meta().name.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(names.len(), MAX_CREATES_PER_ROUND, "ids are distinct");
    let w0 = &plan.warnings[0];
    assert_eq!(w0.reason, keys::events::INSTANCE_IDS_EXHAUSTED);
    assert!(w0.message.contains("spec.replicas 2147483647"), "{}", w0.message);
    assert!(w0.message.contains("14348907"), "{}", w0.message);
    let cond = failed_scale(&plan).expect("FailedScale condition");
    assert_eq!(cond, w0.message);
}

#[test]
fn replicas_within_the_id_space_create_in_bounded_rounds_without_warning() {
    let mut w = World::new(cloneset(2500, "nginx:1", json!({"type": "InPlaceIfPossible"})));
    let mut rounds = Vec::new();
    for _ in 0..4 {
        let plan = w.plan();
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        assert!(failed_scale(&plan).is_none());
        let n = creates(&plan);
        if n == 0 {
            break;
        }
        rounds.push(n);
        w.apply(&plan);
    }
    assert_eq!(rounds, [1000, 1000, 500]);
    assert_eq!(w.pods.len(), 2500);
}

#[test]
fn id_generation_gives_up_when_the_id_space_is_full() {
    // Before: an endless loop once every id is taken (≥ 27⁵ pods). A full space is modelled by a `taken`
    // that says yes to every id (a real one would hold 14,348,907 names).
    let ids = pods::instance_ids("seed", MAX_CREATES_PER_ROUND, |_| true);
    assert!(ids.is_empty());
    // Nearly full: only ids starting with 'b' are free; the bounded draws still find some.
    let ids = pods::instance_ids("seed", 10, |id| !id.starts_with('b'));
    assert_eq!(ids.len(), 10);
    assert!(ids.iter().all(|id| id.starts_with('b')));
    assert_eq!(ID_SPACE, 14_348_907);
}
