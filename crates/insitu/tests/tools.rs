//! The rollout tools on the embedded cluster: `status -w` frames and exit outcomes, `set image`, `rollout` verbs.

// The controller's behaviour-test harness (the simulated cluster plus the controller), shared.
#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{Harness, cloneset, run};
use insitu::rollout_cmd::{self, Object, Verb};
use insitu::status_cmd::{self, Outcome, Screen};
use insitu::target::{ClusterArgs, DryRun};
use insitu_sim::cluster::SimConfig;
use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};

/// Runs `insitu status -w` until it ends (or `secs` virtual seconds), returning the outcome and its frames.
async fn watch_status(h: &Harness, name: &str, secs: u64) -> (Outcome, Vec<String>) {
    let mut frames: Vec<String> = Vec::new();
    let mut screen = Screen::plain();
    let mut out = |s: &str| {
        if s != "\n" {
            frames.push(s.to_string());
        }
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(secs),
        status_cmd::run(h.client.clone(), "default", name, true, &mut out, &mut screen),
    )
    .await
    .expect("status -w ends")
    .expect("status -w runs");
    (outcome, frames)
}

/// The `updated N/R` number of a frame's progress line.
fn updated(frame: &str) -> i32 {
    let at = frame.find("  updated ").expect("progress line") + "  updated ".len();
    frame[at..].split('/').next().unwrap().parse().unwrap()
}

fn object(name: &str) -> Object {
    Object {
        object: vec![format!("cloneset/{name}")],
        dry_run: DryRun::None,
        cluster: ClusterArgs::default(),
    }
}

async fn rollout(h: &Harness, verb: Verb) -> anyhow::Result<String> {
    rollout_cmd::run(h.client.clone(), "default", &verb).await
}

#[test]
fn status_watch_follows_an_in_place_rollout_to_completion() {
    run(async {
        let h = Harness::start(41).await;
        h.create(&cloneset("web", 3)).await;
        h.wait_ready("web", 3, Some("nginx:1.19.0"), 120).await;
        let before: Vec<String> = h.pods("web").await.iter().map(common::uid).collect();
        let msg = insitu::set_cmd::set_image(
            &h.clonesets(),
            "web",
            &[("nginx".into(), "nginx:1.20.0".into())],
            DryRun::None,
        )
        .await
        .unwrap();
        assert_eq!(msg, "cloneset.apps.kruise.io/web image updated");
        let (outcome, frames) = watch_status(&h, "web", 600).await;
        assert_eq!(outcome, Outcome::Done);
        assert!(frames.len() >= 4, "a frame per change, got {}", frames.len());
        // Frames before the controller observed the new spec still show the previous rollout's counts.
        let observed: Vec<&String> = frames
            .iter()
            .filter(|f| !f.contains("Waiting for CloneSet spec update to be observed"))
            .collect();
        let counts: Vec<i32> = observed.iter().map(|f| updated(f)).collect();
        assert!(
            counts.windows(2).all(|w| w[0] <= w[1]),
            "updated never goes down: {counts:?}"
        );
        assert!(counts[0] < 3 && *counts.last().unwrap() == 3, "{counts:?}");
        // The seed's stages show up in the batch line and the table while pods move.
        assert!(
            frames.iter().any(|f| f.contains("(Preparing)")),
            "a pod seen Preparing"
        );
        assert!(
            frames
                .iter()
                .any(|f| f.contains("in flight (maxUnavailable 1): web-"))
        );
        let last = frames.last().unwrap();
        assert!(
            last.contains("CloneSet rolling update complete 3 pods at revision web-"),
            "{last}"
        );
        assert!(
            last.contains("updated 3/3  updated-ready 3/3  available 3/3  partition 0"),
            "{last}"
        );
        assert!(
            !frames.iter().any(|f| f.contains('\x1b')),
            "plain frames carry no escapes"
        );
        // In place: the same pods.
        let after: Vec<String> = h.pods("web").await.iter().map(common::uid).collect();
        assert_eq!(before, after);
        // A finished rollout: one frame, exit 0 at once.
        let (outcome, frames) = watch_status(&h, "web", 5).await;
        assert_eq!((outcome, frames.len()), (Outcome::Done, 1));
    });
}

#[test]
fn status_watch_fails_when_the_progress_deadline_passes() {
    run(async {
        let h = Harness::start_with(SimConfig {
            nodes: 4,
            seed: 42,
            images: ImageProfiles::default().with(
                "*nginx:broken*",
                ImageProfile {
                    fail: ImageFailure::NeverPulls,
                    ..ImageProfile::default()
                },
            ),
            ..Default::default()
        })
        .await;
        let mut cs = cloneset("bad", 2);
        cs.spec.progress_deadline_seconds = Some(40);
        h.create(&cs).await;
        h.wait_ready("bad", 2, None, 120).await;
        insitu::set_cmd::set_image(
            &h.clonesets(),
            "bad",
            &[("nginx".into(), "nginx:broken".into())],
            DryRun::None,
        )
        .await
        .unwrap();
        let (outcome, frames) = watch_status(&h, "bad", 600).await;
        match &outcome {
            Outcome::Failed(m) => assert!(m.contains("exceeded its progress deadline"), "{m}"),
            o => panic!("expected a failure, got {o:?}"),
        }
        assert_eq!(outcome.exit_code(), std::process::ExitCode::from(1));
        let last = frames.last().unwrap();
        assert!(
            last.contains("ImagePullBackOff") || last.contains("ErrImagePull"),
            "{last}"
        );
    });
}

#[test]
fn rollout_verbs_pause_resume_restart_history_undo() {
    run(async {
        let h = Harness::start(43).await;
        h.create(&cloneset("app", 2)).await;
        h.wait_ready("app", 2, Some("nginx:1.19.0"), 120).await;
        assert_eq!(
            rollout(&h, Verb::Pause(object("app"))).await.unwrap(),
            "cloneset.apps.kruise.io/app paused"
        );
        let e = rollout(&h, Verb::Pause(object("app")))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("already paused"), "{e}");
        // Paused: a new image waits.
        insitu::set_cmd::set_image(
            &h.clonesets(),
            "app",
            &[("nginx".into(), "nginx:1.20.0".into())],
            DryRun::None,
        )
        .await
        .unwrap();
        h.sleep(30).await;
        assert!(
            h.pods("app")
                .await
                .iter()
                .all(|p| insitu_core::explain::podtable::image(p) == "nginx:1.19.0")
        );
        assert_eq!(
            rollout(&h, Verb::Resume(object("app"))).await.unwrap(),
            "cloneset.apps.kruise.io/app resumed"
        );
        let e = rollout(&h, Verb::Resume(object("app")))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not paused"), "{e}");
        h.wait_ready("app", 2, Some("nginx:1.20.0"), 300).await;
        let history = |revision| Verb::History {
            target: object("app"),
            revision,
        };
        let table = rollout(&h, history(None)).await.unwrap();
        assert_eq!(
            table,
            "cloneset.apps.kruise.io/app\nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>"
        );
        let one = rollout(&h, history(Some(1))).await.unwrap();
        assert!(
            one.contains("image: nginx:1.19.0") && !one.contains("nginx:1.20.0"),
            "{one}"
        );
        // Undo goes back to revision 1 in place; the controller reuses (bumps) that revision.
        let uids: Vec<String> = h.pods("app").await.iter().map(common::uid).collect();
        let undo = |to_revision| Verb::Undo {
            target: object("app"),
            to_revision,
        };
        assert_eq!(
            rollout(&h, undo(0)).await.unwrap(),
            "cloneset.apps.kruise.io/app rolled back"
        );
        h.wait_ready("app", 2, Some("nginx:1.19.0"), 300).await;
        assert_eq!(
            uids,
            h.pods("app").await.iter().map(common::uid).collect::<Vec<_>>()
        );
        let table = rollout(&h, history(None)).await.unwrap();
        assert!(table.ends_with("2         <none>\n3         <none>"), "{table}");
        let skipped = rollout(&h, undo(3)).await.unwrap();
        assert!(
            skipped.contains("skipped rollback (current template already matches revision 3)"),
            "{skipped}"
        );
        let e = rollout(&h, undo(9)).await.unwrap_err().to_string();
        assert!(e.contains("unable to find specified revision 9"), "{e}");
        // Restart: the template annotation rolls out to every pod, in place.
        assert_eq!(
            rollout(&h, Verb::Restart(object("app"))).await.unwrap(),
            "cloneset.apps.kruise.io/app restarted"
        );
        h.wait_for("restartedAt on every pod", 300, || async {
            let pods = h.pods("app").await;
            pods.len() == 2
                && pods.iter().all(|p| {
                    kube::ResourceExt::annotations(p).contains_key(rollout_cmd::RESTARTED_AT)
                        && common::is_ready(p)
                })
        })
        .await;
        assert_eq!(
            uids,
            h.pods("app").await.iter().map(common::uid).collect::<Vec<_>>()
        );
    });
}

#[test]
fn set_image_keeps_every_other_template_field() {
    run(async {
        let h = Harness::start(44).await;
        h.create(&cloneset("keep", 1)).await;
        h.wait_ready("keep", 1, None, 120).await;
        let before = serde_json::to_value(h.clonesets().get("keep").await.unwrap().spec.template).unwrap();
        insitu::set_cmd::set_image(
            &h.clonesets(),
            "keep",
            &[("nginx".into(), "nginx:1.21.0".into())],
            DryRun::None,
        )
        .await
        .unwrap();
        let mut after = serde_json::to_value(h.clonesets().get("keep").await.unwrap().spec.template).unwrap();
        assert_eq!(after["spec"]["containers"][0]["image"], "nginx:1.21.0");
        after["spec"]["containers"][0]["image"] = before["spec"]["containers"][0]["image"].clone();
        assert_eq!(before, after, "only the image changed");
        let msg = insitu::set_cmd::set_image(
            &h.clonesets(),
            "keep",
            &[("nginx".into(), "nginx:1.21.0".into())],
            DryRun::None,
        )
        .await
        .unwrap();
        assert_eq!(msg, "cloneset.apps.kruise.io/keep image unchanged");
        let e = insitu::set_cmd::set_image(
            &h.clonesets(),
            "keep",
            &[("web".into(), "x:1".into())],
            DryRun::None,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("container \"web\" not found") && e.contains("containers: nginx"),
            "{e}"
        );
    });
}

#[test]
fn dry_runs_of_set_image_and_rollout_verbs_change_nothing() {
    run(async {
        let h = Harness::start(45).await;
        h.create(&cloneset("dry", 1)).await;
        h.wait_ready("dry", 1, Some("nginx:1.19.0"), 120).await;
        // The controller's status writes move the resourceVersion; a spec write would move the generation.
        let rv = |cs: insitu_api::CloneSet| (cs.metadata.generation, serde_json::to_value(cs.spec).unwrap());
        let before = rv(h.clonesets().get("dry").await.unwrap());
        let image = [("nginx".to_string(), "nginx:1.20.0".to_string())];
        for (dry, shown) in [
            (DryRun::Server, " (server dry run)"),
            (DryRun::Client, " (dry run)"),
        ] {
            let msg = insitu::set_cmd::set_image(&h.clonesets(), "dry", &image, dry)
                .await
                .unwrap();
            assert_eq!(msg, format!("cloneset.apps.kruise.io/dry image updated{shown}"));
            let mut o = object("dry");
            o.dry_run = dry;
            assert_eq!(
                rollout(&h, Verb::Pause(o.clone())).await.unwrap(),
                format!("cloneset.apps.kruise.io/dry paused{shown}")
            );
            assert_eq!(
                rollout(&h, Verb::Restart(o.clone())).await.unwrap(),
                format!("cloneset.apps.kruise.io/dry restarted{shown}")
            );
            let e = rollout(
                &h,
                Verb::History {
                    target: o,
                    revision: None,
                },
            )
            .await
            .unwrap_err()
            .to_string();
            assert!(e.contains("takes no --dry-run"), "{e}");
        }
        // A dry run checks as a real run does: resuming a CloneSet that is not paused is refused.
        let mut o = object("dry");
        o.dry_run = DryRun::Server;
        let e = rollout(&h, Verb::Resume(o)).await.unwrap_err().to_string();
        assert!(e.contains("is not paused"), "{e}");
        h.sleep(30).await;
        let cs = h.clonesets().get("dry").await.unwrap();
        assert_eq!(rv(cs.clone()), before, "no dry run wrote the CloneSet");
        assert!(!cs.spec.update_strategy.is_some_and(|u| u.paused));
        assert!(
            h.pods("dry")
                .await
                .iter()
                .all(|p| insitu_core::explain::podtable::image(p) == "nginx:1.19.0")
        );
    });
}
