//! `insitu set image cloneset/NAME CONTAINER=IMAGE ...`: a JSON patch of exactly those images.
//!
//! Each image is replaced at its container's index, behind a `test` op on that container's name, so a
//! template changed meanwhile (containers reordered) makes the apiserver refuse the patch instead of
//! setting the wrong container; nothing else of the template is sent, so no field is ever dropped.

use std::process::ExitCode;

use anyhow::Context as _;
use insitu_api::CloneSet;
use kube::Api;
use kube::api::Patch;
use serde_json::{Value, json};

use crate::target::{self, ClusterArgs, DryRun};

#[derive(clap::Args, Debug)]
pub struct SetArgs {
    #[command(subcommand)]
    pub what: SetWhat,
}

#[derive(clap::Subcommand, Debug)]
pub enum SetWhat {
    /// Set container images of a CloneSet's template: `insitu set image cloneset/web nginx=nginx:1.20.0`.
    /// `*=IMAGE` sets every container and init container.
    Image(ImageArgs),
}

#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    /// `cloneset/NAME` followed by one or more `CONTAINER=IMAGE`.
    #[arg(required = true, num_args = 2..)]
    pub args: Vec<String>,
    /// `none`, `server` (validated by the apiserver, nothing stored) or `client` (nothing sent), as kubectl's.
    #[arg(long, value_enum, default_value = "none")]
    pub dry_run: DryRun,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `CONTAINER=IMAGE` pairs, in order; a malformed one is an error naming it.
pub fn parse_pairs(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    anyhow::ensure!(!pairs.is_empty(), "give at least one CONTAINER=IMAGE");
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((c, i)) if !c.is_empty() && !i.is_empty() => Ok((c.to_string(), i.to_string())),
            _ => anyhow::bail!("{p:?}: expected CONTAINER=IMAGE, e.g. nginx=nginx:1.20.0"),
        })
        .collect()
}

/// The JSON patch setting `images` in `template` (the CloneSet's `spec.template`, a pod template, as JSON), or `None` when
/// every image is already set. An unknown container is an error listing the template's containers.
pub fn image_patch(template: &Value, images: &[(String, String)]) -> anyhow::Result<Option<Value>> {
    let mut ops = Vec::new();
    let mut names = Vec::new();
    for (list, pointer) in [
        ("containers", "/spec/template/spec/containers"),
        ("initContainers", "/spec/template/spec/initContainers"),
    ] {
        let containers = template
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, c) in containers.iter().enumerate() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            names.push(name.to_string());
            let Some((_, image)) = images.iter().rev().find(|(n, _)| n == name || n == "*") else {
                continue;
            };
            if c.get("image").and_then(Value::as_str) == Some(image.as_str()) {
                continue;
            }
            ops.push(json!({"op": "test", "path": format!("{pointer}/{i}/name"), "value": name}));
            ops.push(json!({"op": "replace", "path": format!("{pointer}/{i}/image"), "value": image}));
        }
    }
    for (n, _) in images.iter().filter(|(n, _)| n != "*") {
        anyhow::ensure!(
            names.contains(n),
            "container {n:?} not found in the CloneSet's template (containers: {})",
            names.join(", ")
        );
    }
    Ok((!ops.is_empty()).then_some(Value::Array(ops)))
}

/// Sends a JSON patch to the CloneSet (none under a client dry run).
pub async fn json_patch(api: &Api<CloneSet>, name: &str, ops: Value, dry: DryRun) -> anyhow::Result<()> {
    let p: json_patch::Patch = serde_json::from_value(ops).context("building the JSON patch")?;
    if dry == DryRun::Client {
        return Ok(());
    }
    api.patch(name, &dry.patch_params(), &Patch::<()>::Json(p))
        .await
        .with_context(|| format!("patching {}", target::display(name)))?;
    Ok(())
}

/// Sets the images; returns the line kubectl would print.
pub async fn set_image(
    api: &Api<CloneSet>,
    name: &str,
    images: &[(String, String)],
    dry: DryRun,
) -> anyhow::Result<String> {
    let cs = api
        .get(name)
        .await
        .with_context(|| format!("getting {}", target::display(name)))?;
    let template = serde_json::to_value(&cs.spec.template)?;
    match image_patch(&template, images)? {
        None => Ok(format!(
            "{} image unchanged{}",
            target::display(name),
            dry.suffix()
        )),
        Some(ops) => {
            json_patch(api, name, ops, dry).await?;
            Ok(format!("{} image updated{}", target::display(name), dry.suffix()))
        }
    }
}

pub fn main(args: SetArgs) -> anyhow::Result<ExitCode> {
    let SetWhat::Image(args) = args.what;
    let name = target::cloneset_name(&args.args[..1])?;
    let images = parse_pairs(&args.args[1..])?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (client, namespace) = target::connect(&args.cluster, "set-image").await?;
        let api: Api<CloneSet> = Api::namespaced(client, &namespace);
        println!("{}", set_image(&api, &name, &images, args.dry_run).await?);
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {
            "initContainers": [{"name": "init", "image": "busybox:1"}],
            "containers": [{"name": "sidecar", "image": "envoy:1"}, {"name": "nginx", "image": "nginx:1.19.0", "env": [{"name": "V", "value": "1"}]}]
        }})
    }

    #[test]
    fn patches_the_exact_index_behind_a_test_op() {
        let ops = image_patch(&template(), &[("nginx".into(), "nginx:1.20.0".into())])
            .unwrap()
            .unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/spec/template/spec/containers/1/name", "value": "nginx"},
                {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "nginx:1.20.0"}
            ])
        );
    }

    #[test]
    fn star_sets_every_container_and_unchanged_is_no_patch() {
        let ops = image_patch(&template(), &[("*".into(), "x:2".into())])
            .unwrap()
            .unwrap();
        assert_eq!(ops.as_array().unwrap().len(), 6);
        assert!(
            image_patch(&template(), &[("nginx".into(), "nginx:1.19.0".into())])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn unknown_container_names_the_known_ones() {
        let e = image_patch(&template(), &[("ngnix".into(), "x".into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"ngnix\" not found") && e.contains("sidecar, nginx, init"),
            "{e}"
        );
        let e = parse_pairs(&["nginx".into()]).unwrap_err().to_string();
        assert!(e.contains("CONTAINER=IMAGE"), "{e}");
    }
}
