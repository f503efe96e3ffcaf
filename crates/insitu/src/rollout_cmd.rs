//! `insitu rollout pause|resume|undo|history|restart cloneset/NAME`, with kubectl-kruise's semantics.
//!
//! As kruise-tools does for CloneSets: pause/resume flip `spec.updateStrategy.paused` (an error when already
//! so); history lists the ControllerRevisions the CloneSet controls (REVISION, CHANGE-CAUSE from the
//! `kubernetes.io/change-cause` annotation the revision copies from the CloneSet); undo restores the pod
//! template of revision N, or of the one before the newest (skipped when the template already matches);
//! restart sets the template annotation `kubectl.kruise.io/restartedAt` (under InPlaceIfPossible this is a
//! metadata-only in-place update, which restarts no container, exactly as with Kruise).
//!
//! One difference on purpose: kruise-tools sends the revision's data (`{"spec":{"template":{…,"$patch":
//! "replace"}}}`) as a JSON merge patch, which a CRD cannot honour (`$patch` is pruned, maps merge), so
//! fields added since the revision survive an undo. insitu replaces `/spec/template` with a JSON patch,
//! so the template after undo is the revision's, and the controller reuses that revision.

use std::process::ExitCode;

use anyhow::Context as _;
use insitu_api::CloneSet;
use insitu_core::revision;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{ListParams, Patch};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::target::{self, ClusterArgs, DryRun};

/// kubectl's change-cause annotation (`--record`), copied onto revisions from the CloneSet's annotations.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// The template annotation `kubectl-kruise rollout restart` sets.
pub const RESTARTED_AT: &str = "kubectl.kruise.io/restartedAt";

#[derive(clap::Args, Debug)]
pub struct RolloutArgs {
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Object {
    /// The CloneSet: `cloneset/NAME`.
    #[arg(required = true, num_args = 1..=2)]
    pub object: Vec<String>,
    /// `none`, `server` (validated by the apiserver, nothing stored) or `client` (nothing sent), as kubectl's;
    /// not for `history`, which writes nothing.
    #[arg(long, value_enum, default_value = "none")]
    pub dry_run: DryRun,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum Verb {
    /// Stop updating pods (spec.updateStrategy.paused = true); scaling goes on.
    Pause(Object),
    /// Continue a paused update.
    Resume(Object),
    /// Roll the template back to a previous ControllerRevision.
    Undo {
        #[command(flatten)]
        target: Object,
        /// The revision to roll back to; 0 (default) means the one before the newest.
        #[arg(long, default_value_t = 0)]
        to_revision: i64,
    },
    /// List the revisions (or print the pod template of one).
    History {
        #[command(flatten)]
        target: Object,
        /// Print the pod template of this revision.
        #[arg(long)]
        revision: Option<i64>,
    },
    /// Restart the pods: a template annotation with the time (as kubectl-kruise), rolled out as any update.
    Restart(Object),
}

/// The ControllerRevisions `cs` controls, sorted by revision (Kruise's history order).
pub async fn history(
    revisions: &Api<ControllerRevision>,
    cs: &CloneSet,
) -> anyhow::Result<Vec<ControllerRevision>> {
    let sel: Vec<String> = cs
        .spec
        .selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let uid = cs.metadata.uid.as_deref();
    let mut revs: Vec<ControllerRevision> = revisions
        .list(&ListParams::default().labels(&sel.join(",")))
        .await
        .context("listing ControllerRevisions")?
        .items
        .into_iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.kind == "CloneSet" && Some(o.uid.as_str()) == uid)
        })
        .collect();
    revs.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    Ok(revs)
}

/// kruise-tools `findHistory`: revision `to`, or for 0 the second newest.
pub fn find(revs: &[ControllerRevision], to: i64) -> anyhow::Result<&ControllerRevision> {
    anyhow::ensure!(to >= 0, "unable to find specified revision {to} in history");
    if to == 0 {
        anyhow::ensure!(revs.len() > 1, "no last revision to roll back to");
        return Ok(&revs[revs.len() - 2]);
    }
    revs.iter()
        .find(|r| r.revision == to)
        .ok_or_else(|| anyhow::anyhow!("unable to find specified revision {to} in history"))
}

/// The pod template stored in a revision, as JSON (Kruise's data shape, `$patch` removed).
pub fn stored_template(rev: &ControllerRevision) -> anyhow::Result<Value> {
    let mut t = revision::template_value(rev)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("ControllerRevision {} holds no spec.template", rev.name_any()))?;
    if let Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    Ok(t)
}

/// The table `kubectl rollout history` prints.
pub fn history_table(revs: &[ControllerRevision]) -> String {
    if revs.is_empty() {
        return "No rollout history found.\n".into();
    }
    let mut out = String::from("REVISION  CHANGE-CAUSE\n");
    for r in revs {
        let cause = r.annotations().get(CHANGE_CAUSE).map_or("<none>", String::as_str);
        out.push_str(&format!("{:<8}  {cause}\n", r.revision));
    }
    out
}

/// Sends a merge patch to the CloneSet (none under a client dry run).
async fn merge(api: &Api<CloneSet>, name: &str, patch: Value, dry: DryRun) -> anyhow::Result<()> {
    if dry == DryRun::Client {
        return Ok(());
    }
    api.patch(name, &dry.patch_params(), &Patch::Merge(patch))
        .await
        .with_context(|| format!("patching {}", target::display(name)))?;
    Ok(())
}

/// Runs a verb; returns what to print.
pub async fn run(client: kube::Client, namespace: &str, verb: &Verb) -> anyhow::Result<String> {
    let name = target::cloneset_name(&verb.object().object)?;
    let shown = target::display(&name);
    let api: Api<CloneSet> = Api::namespaced(client.clone(), namespace);
    let cs = api
        .get(&name)
        .await
        .with_context(|| format!("getting {shown} in namespace {namespace}"))?;
    let paused = cs.spec.update_strategy.as_ref().is_some_and(|u| u.paused);
    let dry = verb.object().dry_run;
    let done = dry.suffix();
    match verb {
        Verb::Pause(_) => {
            anyhow::ensure!(!paused, "{shown} is already paused");
            merge(
                &api,
                &name,
                json!({"spec": {"updateStrategy": {"paused": true}}}),
                dry,
            )
            .await?;
            Ok(format!("{shown} paused{done}"))
        }
        Verb::Resume(_) => {
            anyhow::ensure!(paused, "{shown} is not paused");
            merge(
                &api,
                &name,
                json!({"spec": {"updateStrategy": {"paused": false}}}),
                dry,
            )
            .await?;
            Ok(format!("{shown} resumed{done}"))
        }
        Verb::Restart(_) => {
            let now = k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            let patch = json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}});
            merge(&api, &name, patch, dry).await?;
            Ok(format!("{shown} restarted{done}"))
        }
        Verb::History { revision, .. } => {
            anyhow::ensure!(
                dry == DryRun::None,
                "rollout history writes nothing: it takes no --dry-run"
            );
            let revs = history(&Api::namespaced(client, namespace), &cs).await?;
            match revision {
                None => Ok(format!("{shown}\n{}", history_table(&revs).trim_end())),
                Some(n) => {
                    let rev = revs
                        .iter()
                        .find(|r| r.revision == *n)
                        .ok_or_else(|| anyhow::anyhow!("unable to find the specified revision {n}"))?;
                    let yaml = serde_saphyr::to_string(&stored_template(rev)?)?;
                    Ok(format!(
                        "{shown} with revision #{n}\nPod Template:\n{}",
                        yaml.trim_end()
                    ))
                }
            }
        }
        Verb::Undo { to_revision, .. } => {
            let revs = history(&Api::namespaced(client, namespace), &cs).await?;
            let rev = find(&revs, *to_revision)?;
            if rev.data.as_ref().map(|d| &d.0) == Some(&revision::revision_data(&cs.spec.template)) {
                return Ok(format!(
                    "{shown} skipped rollback (current template already matches revision {}){done}",
                    rev.revision
                ));
            }
            // The generation moves with every spec change (not with status writes): a template changed
            // since it was compared with the revision makes the apiserver refuse the patch.
            let ops = json!([
                {"op": "test", "path": "/metadata/generation", "value": cs.metadata.generation},
                {"op": "replace", "path": "/spec/template", "value": stored_template(rev)?},
            ]);
            crate::set_cmd::json_patch(&api, &name, ops, dry).await?;
            Ok(format!("{shown} rolled back{done}"))
        }
    }
}

impl Verb {
    /// The CloneSet and connection flags every verb has.
    pub fn object(&self) -> &Object {
        match self {
            Verb::Pause(o) | Verb::Resume(o) | Verb::Restart(o) => o,
            Verb::Undo { target, .. } | Verb::History { target, .. } => target,
        }
    }
}

pub fn main(args: RolloutArgs) -> anyhow::Result<ExitCode> {
    let cluster = args.verb.object().cluster.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (client, namespace) = target::connect(&cluster, "rollout").await?;
        println!("{}", run(client, &namespace, &args.verb).await?);
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(n: i64) -> ControllerRevision {
        ControllerRevision {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("web-{n}")),
                ..Default::default()
            },
            revision: n,
            data: None,
        }
    }

    #[test]
    fn find_picks_the_second_newest_or_the_named_one() {
        let revs = vec![rev(1), rev(2), rev(3)];
        assert_eq!(find(&revs, 0).unwrap().revision, 2);
        assert_eq!(find(&revs, 1).unwrap().revision, 1);
        assert!(find(&revs, 7).unwrap_err().to_string().contains("revision 7"));
        assert!(
            find(&revs[..1], 0)
                .unwrap_err()
                .to_string()
                .contains("no last revision")
        );
    }

    #[test]
    fn table_shows_change_causes() {
        let mut r = rev(2);
        r.metadata.annotations = Some([(CHANGE_CAUSE.to_string(), "set image".to_string())].into());
        assert_eq!(
            history_table(&[rev(1), r]),
            "REVISION  CHANGE-CAUSE\n1         <none>\n2         set image\n"
        );
        assert_eq!(history_table(&[]), "No rollout history found.\n");
    }
}
