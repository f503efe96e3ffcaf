//! The rollout tools on either cluster: `set image`, `status -w` (frames and outcome), `rollout pause|resume|
//! history|undo|restart`, driven through the same functions the `insitu` commands call.

use std::time::Duration;

use insitu::rollout_cmd::{self, Object, Verb};
use insitu::status_cmd::{self, Outcome, Screen};
use insitu::target::{ClusterArgs, DryRun};
use kube::ResourceExt;

use crate::Env;
use crate::util::*;

fn verb_target(name: &str) -> Object {
    Object {
        object: vec![format!("cloneset/{name}")],
        dry_run: DryRun::None,
        cluster: ClusterArgs::default(),
    }
}

const OBSERVING: &str = "Waiting for CloneSet spec update to be observed";

/// `insitu status -w` until the rollout ends: its outcome and the `updated N` of every frame.
async fn watch(env: &Env, ns: &str, name: &str) -> anyhow::Result<(Outcome, Vec<i32>, String)> {
    let mut frames = Vec::new();
    let mut screen = Screen::plain();
    let mut out = |s: &str| {
        if s != "\n" {
            frames.push(s.to_string());
        }
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        status_cmd::run(env.client.clone(), ns, name, true, &mut out, &mut screen),
    )
    .await
    .map_err(|_| anyhow::anyhow!("status -w did not end within 120s"))??;
    // Frames before the controller observed the new spec still show the previous rollout's counts.
    let updated = frames
        .iter()
        .filter(|f| !f.contains(OBSERVING))
        .filter_map(|f| {
            let at = f.find("  updated ")? + "  updated ".len();
            f[at..].split('/').next()?.parse().ok()
        })
        .collect();
    Ok((outcome, updated, frames.last().cloned().unwrap_or_default()))
}

pub async fn tools(env: &Env, ns: &str) -> anyhow::Result<()> {
    let name = "tools";
    create_cloneset(env, ns, fast_cloneset(name, 3, 1)).await?;
    let (_, before) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(60)).await?;
    let api = clonesets(env, ns);
    let msg =
        insitu::set_cmd::set_image(&api, name, &[("app".into(), IMAGE_V2.into())], DryRun::None).await?;
    ensure(msg.ends_with("image updated"), || msg.clone())?;
    let (outcome, updated, last) = watch(env, ns, name).await?;
    ensure(outcome == Outcome::Done, || {
        format!("status -w ended with {outcome:?}: {last}")
    })?;
    ensure(
        updated.windows(2).all(|w| w[0] <= w[1]) && updated.last() == Some(&3) && updated.len() >= 2,
        || format!("updated per frame should rise to 3: {updated:?}"),
    )?;
    ensure(last.contains("rolling update complete 3 pods"), || last.clone())?;
    let (_, after) = wait_rolled_out(env, ns, name, 3, IMAGE_V2, Duration::from_secs(30)).await?;
    ensure(identities(&before) == identities(&after), || {
        "set image recreated pods".into()
    })?;

    let run = |verb: Verb| async move { rollout_cmd::run(env.client.clone(), ns, &verb).await };
    let paused = run(Verb::Pause(verb_target(name))).await?;
    ensure(paused.ends_with("paused"), || paused.clone())?;
    let cs = api.get(name).await?;
    ensure(cs.spec.update_strategy.as_ref().is_some_and(|u| u.paused), || {
        "not paused".into()
    })?;
    let again = run(Verb::Pause(verb_target(name))).await;
    ensure(again.is_err(), || "pausing twice should fail".into())?;
    run(Verb::Resume(verb_target(name))).await?;

    let table = run(Verb::History {
        target: verb_target(name),
        revision: None,
    })
    .await?;
    ensure(table.contains("\n1         <none>\n2         <none>"), || {
        table.clone()
    })?;
    let undone = run(Verb::Undo {
        target: verb_target(name),
        to_revision: 0,
    })
    .await?;
    ensure(undone.ends_with("rolled back"), || undone.clone())?;
    let (_, back) = wait_rolled_out(env, ns, name, 3, IMAGE_V1, Duration::from_secs(90)).await?;
    ensure(identities(&before) == identities(&back), || {
        "undo recreated pods".into()
    })?;

    run(Verb::Restart(verb_target(name))).await?;
    wait_until(
        "restartedAt on every pod",
        Duration::from_secs(90),
        || async move {
            let pods = live_pods(env, ns, name).await?;
            let done = pods.len() == 3
                && pods
                    .iter()
                    .all(|p| p.annotations().contains_key(rollout_cmd::RESTARTED_AT) && is_ready(p));
            Ok(if done {
                Ok(())
            } else {
                Err(format!("{} pods", pods.len()))
            })
        },
    )
    .await?;
    cleanup(env, ns, name).await;
    Ok(())
}
