//! `insitu whatif`'s accuracy: each rollout is predicted from the cluster's state (read-only), then performed,
//! and the per-pod decisions and the duration are compared (docs/whatif.md, "Accuracy").

use std::time::Duration;

use anyhow::Context as _;
use insitu_lab::whatif::{self, Change, SimOptions, Timing, observe};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::Env;
use crate::util::{cleanup, clonesets, create_cloneset, ensure, fast_cloneset, wait_rolled_out};

/// Predicted durations must be within this fraction of the actual ones on simulated nodes. On the real node
/// (`e2e/run --real-nodes`) the durations are printed, not gated: the same rollout there took 12.4 to 16.4 s
/// from run to run (docs/whatif.md, "Accuracy"); decisions, stalls and stuck pods are checked on both.
const TOLERANCE: f64 = 0.15;
const REPLICAS: usize = 6;

struct Case {
    name: &'static str,
    /// The change, as a JSON patch of the CloneSet (built from the case's images).
    patch: fn(&str) -> Value,
    /// The rollout cannot complete (a resize no node fits).
    stalls: bool,
}

fn image_path() -> &'static str {
    "/spec/template/spec/containers/0/image"
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "image",
            patch: |v2| json!([{"op": "replace", "path": image_path(), "value": v2}]),
            stalls: false,
        },
        Case {
            name: "image-resources",
            patch: |v2| {
                json!([{"op": "replace", "path": image_path(), "value": v2},
                       {"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "200m"}])
            },
            stalls: false,
        },
        Case {
            name: "env",
            patch: |_| json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "v2"}]),
            stalls: false,
        },
        Case {
            name: "canary",
            patch: |v2| {
                json!([{"op": "replace", "path": image_path(), "value": v2},
                       {"op": "add", "path": "/spec/updateStrategy/partition", "value": 2}])
            },
            stalls: false,
        },
        Case {
            name: "no-fit",
            patch: |_| json!([{"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "64"}]),
            stalls: true,
        },
    ]
}

fn manifest(name: &str, image: &str) -> Value {
    let mut cs = fast_cloneset(name, REPLICAS as i32, 2);
    let c = &mut cs["spec"]["template"]["spec"]["containers"][0];
    c["image"] = json!(image);
    c["resources"] = json!({"requests": {"cpu": "100m", "memory": "64Mi"}});
    // Ready 3 s after start: the simulation leaves out the API round trips of a real cluster (watch, bind,
    // status write: a few hundred ms per batch), which would weigh more in batches of 2 s.
    c["readinessProbe"]["initialDelaySeconds"] = json!(3);
    cs
}

fn limits(stalls: bool) -> observe::Limits {
    observe::Limits {
        stall: Duration::from_secs(if stalls { 30 } else { 120 }),
        timeout: Duration::from_secs(240),
        ..observe::Limits::default()
    }
}

/// Predicts on the embedded cluster (its own thread and runtime), from the state read from `env`.
async fn predict(
    env: &Env,
    ns: &str,
    name: &str,
    change: &Value,
    stalls: bool,
) -> anyhow::Result<(whatif::report::Run, Vec<String>)> {
    let inp = whatif::input::from_cluster(&env.client, ns, name).await?;
    let facts: Vec<String> = inp
        .pods
        .iter()
        .map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| format!("{}@{:?}", c.status, c.last_transition_time.as_ref().map(|t| t.0)));
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            format!(
                "{} ready {} created {created:?}",
                p.metadata.name.as_deref().unwrap_or(""),
                ready.unwrap_or_default()
            )
        })
        .collect();
    let patch = Change::Json(serde_json::from_value(change.clone())?);
    let new_cs = whatif::change::apply(&inp.cloneset, &[patch])?;
    let strategy = new_cs
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        .unwrap_or("ReCreate")
        .to_string();
    let default_pull = inp
        .pulls
        .values()
        .copied()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let opts = SimOptions {
        timing: Timing {
            pulls: inp.pulls.clone(),
            default_pull: default_pull.unwrap_or(2.0),
            start: 1.0,
            sandbox: 0.0,
        },
        limits: limits(stalls),
        seed: 1,
        gates: insitu_core::FeatureGates::default(),
    };
    let mut runs = tokio::task::spawn_blocking(move || whatif::predict(&inp, &new_cs, &[strategy], &opts))
        .await
        .context("the prediction panicked")??;
    Ok((runs.remove(0), facts))
}

/// Predicts, performs and compares one case; returns its table line.
async fn one(env: &Env, ns: &str, case: &Case) -> anyhow::Result<String> {
    let name = format!("whatif-{}", case.name);
    let (v1, v2) = (format!("nginx:{name}-1"), format!("nginx:{name}-2"));
    create_cloneset(env, ns, manifest(&name, &v1)).await?;
    wait_rolled_out(env, ns, &name, REPLICAS, &v1, Duration::from_secs(120)).await?;
    // Let the status writes of the scale-up settle before the state is read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let change = (case.patch)(&v2);
    let (predicted, facts) = predict(env, ns, &name, &change, case.stalls).await?;
    let css = clonesets(env, ns);
    let (name2, change2) = (name.clone(), change.clone());
    let perform = async move {
        let p: json_patch::Patch = serde_json::from_value(change2)?;
        css.patch(&name2, &PatchParams::default(), &Patch::<()>::Json(p))
            .await
            .context("performing the change")?;
        Ok(())
    };
    let actual = observe::observe(&env.client, ns, &name, perform, limits(case.stalls)).await?;
    let decisions = |pods: &[observe::PodFate]| -> Vec<(String, String)> {
        pods.iter()
            .map(|p| (p.name.clone(), p.decision.clone()))
            .collect()
    };
    let (p, a) = (decisions(&predicted.pods), decisions(&actual.pods));
    let equal = p.iter().zip(&a).filter(|(x, y)| x == y).count();
    let count = |d: &str| a.iter().filter(|(_, x)| x == d).count();
    let delta = (predicted.predicted_seconds - actual.seconds) / actual.seconds.max(1e-9);
    let delta_text = if case.stalls {
        "     —".to_string()
    } else {
        format!("{:+5.1}%", 100.0 * delta)
    };
    let line = format!(
        "whatif {:<16} predicted {:>6.1} s{}  actual {:>6.1} s{}  Δ {}  decisions equal {equal}/{} (in place {}, recreate {}, unchanged {}){}",
        case.name,
        predicted.predicted_seconds,
        if predicted.completes { "" } else { " (stalls)" },
        actual.seconds,
        if actual.done { "" } else { " (stalls)" },
        delta_text,
        a.len(),
        count("in-place"),
        count("recreate"),
        count("unchanged"),
        predicted
            .resize_pending
            .first()
            .map_or(String::new(), |r| format!(
                "; predicted resize: {} ({})",
                r.reason, r.message
            )),
    );
    println!("{line}");
    cleanup(env, ns, &name).await;
    ensure(p == a && p.len() == REPLICAS, || {
        format!("{line}: decisions differ: predicted {p:?}, actual {a:?}; the pods as read: {facts:?}")
    })?;
    ensure(predicted.completes == actual.done, || {
        format!("{line}: one completes, the other does not")
    })?;
    if case.stalls {
        let stuck = |pods: &[observe::PodFate]| -> Vec<String> {
            pods.iter()
                .filter(|p| p.start.is_some() && p.end.is_none())
                .map(|p| p.name.clone())
                .collect()
        };
        ensure(stuck(&predicted.pods) == stuck(&actual.pods), || {
            format!(
                "{line}: stuck pods differ: predicted {:?}, actual {:?}",
                stuck(&predicted.pods),
                stuck(&actual.pods)
            )
        })?;
    } else if env.real_node.is_none() {
        ensure(delta.abs() <= TOLERANCE, || {
            format!("{line}: duration outside ±{:.0}%", 100.0 * TOLERANCE)
        })?;
    }
    Ok(line)
}

pub async fn whatif(env: &Env, ns: &str) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for case in cases() {
        if let Err(e) = one(env, ns, &case).await {
            println!("whatif {}: {e:#}", case.name);
            failures.push(format!("{}: {e:#}", case.name));
        }
    }
    ensure(failures.is_empty(), || failures.join("\n"))
}
