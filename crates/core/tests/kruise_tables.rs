//! Research §4.1 (`calculateDiffsWithExpectation`) and §4.2 (`limitUpdateIndexes`) tables, every row.

use insitu_api::CloneSetSpec;
use insitu_core::Budget;
use insitu_core::budget::{self, DiffPod};
use serde_json::json;

/// `n` pods: `u` = updated (new revision), `a` = available (ready), `d` = specified delete,
/// `pd` = PreparingDelete.
fn pods(n: usize, u: bool, a: bool, d: bool, pd: bool) -> Vec<DiffPod> {
    vec![
        DiffPod {
            updated: u,
            available: a,
            to_delete: d,
            preparing_delete: pd
        };
        n
    ]
}
fn new_r(n: usize) -> Vec<DiffPod> {
    pods(n, true, true, false, false)
}
fn new_nr(n: usize) -> Vec<DiffPod> {
    pods(n, true, false, false, false)
}
fn old_r(n: usize) -> Vec<DiffPod> {
    pods(n, false, true, false, false)
}
fn cat(v: &[Vec<DiffPod>]) -> Vec<DiffPod> {
    v.concat()
}

fn spec(r: i32, p: i32, mu: i32, ms: i32) -> CloneSetSpec {
    serde_json::from_value(json!({
        "replicas": r, "selector": {"matchLabels": {"a": "b"}}, "template": {},
        "updateStrategy": {"partition": p, "maxUnavailable": mu, "maxSurge": ms}
    }))
    .unwrap()
}

#[derive(Default)]
struct E {
    scale_up: i32,
    scale_up_old: i32,
    scale_down: i32,
    scale_down_old: i32,
    limit: i32,
    drl: i32,
    surge: i32,
    surge_old: i32,
    update: i32,
    umu: i32,
}

fn check(row: u32, s: &CloneSetSpec, p: &[DiffPod], exclude: bool, e: E) {
    let b: Budget = budget::calculate(s, p, true, exclude);
    let got = (
        b.scale_up_num,
        b.scale_up_num_old_revision,
        b.scale_down_num,
        b.scale_down_num_old_revision,
        b.scale_up_limit,
        b.delete_ready_limit,
        b.use_surge,
        b.use_surge_old_revision,
        b.update_num,
        b.update_max_unavailable,
    );
    let want = (
        e.scale_up,
        e.scale_up_old,
        e.scale_down,
        e.scale_down_old,
        e.limit,
        e.drl,
        e.surge,
        e.surge_old,
        e.update,
        e.umu,
    );
    assert_eq!(
        got, want,
        "§4.1 row {row}: (up, upOld, down, downOld, limit, drl, surge, surgeOld, update, umu)"
    );
}

#[test]
fn calculate_diffs_table() {
    let d = |mut v: Vec<DiffPod>, n: usize| {
        for p in v.iter_mut().take(n) {
            p.to_delete = true;
        }
        v
    };
    check(1, &spec(0, 0, 1, 0), &[], false, E::default());
    check(
        2,
        &spec(5, 0, 1, 0),
        &[],
        false,
        E {
            scale_up: 5,
            limit: 5,
            ..E::default()
        },
    );
    check(3, &spec(5, 0, 1, 0), &new_r(5), false, E::default());
    check(
        4,
        &spec(5, 0, 1, 0),
        &d(new_r(5), 1),
        false,
        E {
            drl: 1,
            ..E::default()
        },
    );
    check(
        5,
        &spec(5, 0, 1, 0),
        &new_r(4),
        false,
        E {
            scale_up: 1,
            limit: 1,
            ..E::default()
        },
    );
    check(
        6,
        &spec(5, 0, 1, 0),
        &d(new_r(5), 2),
        false,
        E {
            drl: 1,
            ..E::default()
        },
    );
    check(
        7,
        &spec(5, 0, 1, 0),
        &cat(&[d(new_r(4), 1), new_nr(1)]),
        false,
        E::default(),
    );
    check(
        8,
        &spec(4, 0, 1, 0),
        &cat(&[d(new_nr(2), 2), new_r(3)]),
        false,
        E {
            drl: 2,
            ..E::default()
        },
    );
    check(
        9,
        &spec(5, 3, 1, 0),
        &old_r(5),
        false,
        E {
            update: 2,
            umu: 1,
            ..E::default()
        },
    );
    check(
        10,
        &spec(5, 3, 1, 0),
        &cat(&[new_r(1), old_r(4)]),
        false,
        E {
            update: 1,
            umu: 1,
            ..E::default()
        },
    );
    check(
        11,
        &spec(5, 3, 1, 0),
        &cat(&[new_r(2), old_r(3)]),
        false,
        E::default(),
    );
    check(
        12,
        &spec(5, 4, 2, 0),
        &cat(&[new_r(4), old_r(1)]),
        false,
        E {
            update: -3,
            umu: 2,
            ..E::default()
        },
    );
    check(
        13,
        &spec(5, 4, 2, 0),
        &cat(&[new_r(2), old_r(3)]),
        false,
        E {
            update: -1,
            umu: 2,
            ..E::default()
        },
    );
    check(
        14,
        &spec(5, 0, 0, 1),
        &d(new_r(5), 1),
        false,
        E {
            scale_up: 1,
            surge: 1,
            limit: 1,
            ..E::default()
        },
    );
    check(
        15,
        &spec(5, 0, 0, 1),
        &cat(&[d(new_r(5), 1), new_nr(1)]),
        false,
        E {
            surge: 1,
            ..E::default()
        },
    );
    check(
        16,
        &spec(5, 0, 0, 1),
        &cat(&[d(new_r(5), 1), new_r(1)]),
        false,
        E {
            drl: 1,
            surge: 1,
            ..E::default()
        },
    );
    check(
        17,
        &spec(5, 3, 1, 1),
        &old_r(5),
        false,
        E {
            scale_up: 1,
            surge: 1,
            limit: 1,
            update: 2,
            umu: 1,
            ..E::default()
        },
    );
    check(
        18,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(5), new_nr(1)]),
        false,
        E {
            surge: 1,
            update: 1,
            umu: 2,
            ..E::default()
        },
    );
    check(
        19,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), new_nr(2)]), // one of them `Updating`: unavailable either way
        false,
        E {
            scale_down: 1,
            scale_down_old: 1,
            ..E::default()
        },
    );
    check(
        20,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), new_r(1), new_nr(1)]),
        false,
        E {
            scale_down: 1,
            scale_down_old: 1,
            drl: 1,
            ..E::default()
        },
    );
    check(
        21,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), d(old_r(1), 1), new_nr(1)]),
        false,
        E {
            surge: 1,
            surge_old: 1,
            drl: 1,
            update: 1,
            umu: 2,
            ..E::default()
        },
    );
    check(
        22,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), new_nr(1)]),
        false,
        E {
            surge: 1,
            scale_up: 1,
            limit: 1,
            update: 1,
            umu: 1,
            ..E::default()
        },
    );
    check(
        23,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), new_nr(2)]),
        false,
        E {
            scale_down: 1,
            scale_down_old: 1,
            ..E::default()
        },
    );
    check(
        24,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(4), new_r(1), new_nr(1)]),
        false,
        E {
            scale_down: 1,
            scale_down_old: 1,
            drl: 1,
            ..E::default()
        },
    );
    check(
        25,
        &spec(5, 3, 1, 1),
        &cat(&[old_r(3), new_r(2)]),
        false,
        E::default(),
    );

    let smu = |r: i32| -> CloneSetSpec {
        let mut s = spec(r, 0, 1, 0);
        s.scale_strategy = Some(serde_json::from_value(json!({"maxUnavailable": 2})).unwrap());
        s
    };
    check(
        36,
        &smu(5),
        &[],
        false,
        E {
            scale_up: 5,
            limit: 2,
            ..E::default()
        },
    );
    check(
        37,
        &smu(6),
        &cat(&[new_r(2), new_nr(1)]),
        false,
        E {
            scale_up: 3,
            limit: 1,
            ..E::default()
        },
    );
    check(
        38,
        &smu(6),
        &cat(&[new_r(1), new_nr(2)]),
        false,
        E {
            scale_up: 3,
            limit: 0,
            ..E::default()
        },
    );
    let pd_d = || pods(1, true, true, true, true);
    check(
        39,
        &spec(3, 0, 1, 0),
        &cat(&[new_r(2), pd_d()]),
        false,
        E::default(),
    );
    check(
        40,
        &spec(3, 0, 1, 0),
        &cat(&[new_r(2), pd_d()]),
        true,
        E {
            scale_up: 1,
            limit: 1,
            ..E::default()
        },
    );
    check(
        41,
        &spec(3, 0, 1, 0),
        &cat(&[new_r(2), pd_d(), new_nr(1)]),
        true,
        E::default(),
    );
    check(
        42,
        &spec(2, 0, 1, 0),
        &d(new_r(3), 1),
        true,
        E {
            drl: 2,
            ..E::default()
        },
    );
}

/// §4.2: `limitUpdateIndexes` with the candidates in the order Kruise's test gives them.
fn allowed(s: &CloneSetSpec, old: &[bool], new: &[bool]) -> usize {
    let all: Vec<DiffPod> = old
        .iter()
        .map(|&a| DiffPod {
            updated: false,
            available: a,
            ..Default::default()
        })
        .chain(new.iter().map(|&a| DiffPod {
            updated: true,
            available: a,
            ..Default::default()
        }))
        .collect();
    let b = budget::calculate(s, &all, true, false);
    let (cands, target_is_new) = if b.update_num > 0 {
        (old.to_vec(), true)
    } else if b.update_num < 0 {
        (new.to_vec(), false)
    } else {
        return 0;
    };
    budget::limit_update(
        &b,
        all.iter().map(|p| (p.available, p.updated == target_is_new)),
        &cands,
    )
}

fn strat(r: i32, st: serde_json::Value) -> CloneSetSpec {
    serde_json::from_value(json!({
        "replicas": r, "selector": {"matchLabels": {"a": "b"}}, "template": {}, "updateStrategy": st
    }))
    .unwrap()
}

#[test]
fn calculate_update_count_table() {
    const R: bool = true;
    const N: bool = false;
    let def = |r| strat(r, json!({}));
    assert_eq!(allowed(&def(3), &[R, R, R], &[]), 1);
    assert_eq!(allowed(&def(3), &[R, N, R], &[]), 0);
    assert_eq!(allowed(&def(3), &[N, R, R], &[]), 1);
    assert_eq!(allowed(&def(10), &[N, R, R, R, R, R, R, R, N], &[R]), 1);
    let p2mu3 = |r| strat(r, json!({"partition": 2, "maxUnavailable": 3}));
    assert_eq!(allowed(&p2mu3(3), &[N, R], &[R]), 0);
    assert_eq!(allowed(&p2mu3(8), &[R; 7], &[R]), 3);
    let mu2 = strat(5, json!({"partition": 0, "maxUnavailable": 2}));
    assert_eq!(allowed(&mu2, &[N; 5], &[]), 2);
    assert_eq!(allowed(&mu2, &[N; 3], &[N, N]), 0);
    assert_eq!(allowed(&mu2, &[N; 3], &[R, N]), 1);
    let mu2ms1 = strat(5, json!({"partition": 0, "maxUnavailable": 2, "maxSurge": 1}));
    assert_eq!(allowed(&mu2ms1, &[N; 5], &[N]), 2);
    assert_eq!(allowed(&mu2ms1, &[N; 4], &[R, N]), 2);
    assert_eq!(allowed(&mu2ms1, &[N; 3], &[N, R, N]), 1);
    assert_eq!(allowed(&mu2ms1, &[N; 3], &[N, N, N]), 0);
    let rollback = strat(8, json!({"partition": 7, "maxUnavailable": 3}));
    assert_eq!(allowed(&rollback, &[R; 3], &[N; 5]), 3);
    let r4 = strat(4, json!({"maxUnavailable": 2, "maxSurge": 1}));
    assert_eq!(allowed(&r4, &[R, R], &[R, R, R]), 1);
    assert_eq!(allowed(&r4, &[R; 4], &[R, R]), 2);
}

#[test]
fn partition_rounding() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::{Int, String as S};
    assert_eq!(
        budget::partition(Some(&S("99%".into())), 4),
        3,
        "#953: ≥1 updated unless 100%"
    );
    assert_eq!(budget::partition(Some(&S("100%".into())), 4), 4);
    assert_eq!(budget::partition(Some(&S("90%".into())), 20), 18);
    assert_eq!(budget::partition(Some(&S("50%".into())), 1), 1);
    assert_eq!(budget::partition(Some(&Int(7)), 5), 5);
    assert_eq!(budget::partition(Some(&Int(-1)), 5), 0);
    assert_eq!(budget::partition(Some(&S("5".into())), 5), 0, "not a percent → 0");
    assert_eq!(budget::partition(None, 5), 0);
}

#[test]
fn rounding_of_max_unavailable() {
    // Rounds up without surge, down with surge (Kruise); paused forces surge 0.
    let s = strat(10, json!({"maxUnavailable": "25%"}));
    assert_eq!(budget::surge_and_unavailable(&s), (0, 3));
    let s = strat(10, json!({"maxUnavailable": "25%", "maxSurge": "15%"}));
    assert_eq!(budget::surge_and_unavailable(&s), (2, 2));
    let s = strat(
        10,
        json!({"maxUnavailable": "25%", "maxSurge": "15%", "paused": true}),
    );
    assert_eq!(budget::surge_and_unavailable(&s), (0, 3));
    let s = strat(3, json!({}));
    assert_eq!(
        budget::surge_and_unavailable(&s),
        (0, 1),
        "default 20% of 3 rounds up"
    );
}
