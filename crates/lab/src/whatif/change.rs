//! The change a what-if tries: `--set-image`, `--patch FILE` (JSON patch or merge patch) or `-f NEW.yaml`,
//! applied to the CloneSet as v1alpha1 JSON.

use anyhow::Context as _;
use serde_json::Value;

/// One change to the CloneSet.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// `CONTAINER=IMAGE` (`*` for every container, as `kubectl set image`).
    SetImage { container: String, image: String },
    /// RFC 6902 JSON patch (a JSON array).
    Json(json_patch::Patch),
    /// RFC 7386 merge patch (a JSON/YAML object).
    Merge(Value),
    /// The whole new CloneSet (its spec replaces the current one).
    Replace(Value),
}

impl Change {
    /// Parses `--set-image C=IMAGE`.
    pub fn set_image(arg: &str) -> anyhow::Result<Self> {
        let (c, i) = arg
            .split_once('=')
            .filter(|(c, i)| !c.is_empty() && !i.is_empty())
            .with_context(|| format!("--set-image {arg:?}: expected CONTAINER=IMAGE"))?;
        Ok(Change::SetImage {
            container: c.to_string(),
            image: i.to_string(),
        })
    }

    /// Parses a `--patch` file's text: a list is a JSON patch, an object a merge patch.
    pub fn patch(text: &str) -> anyhow::Result<Self> {
        let v: Value = serde_saphyr::from_str(text).context("the patch is not valid JSON/YAML")?;
        match v {
            Value::Array(_) => Ok(Change::Json(
                serde_json::from_value(v).context("the JSON patch (RFC 6902) does not parse")?,
            )),
            Value::Object(_) => Ok(Change::Merge(v)),
            _ => anyhow::bail!("a patch must be a JSON patch (a list) or a merge patch (an object)"),
        }
    }

    /// A short description for the report.
    pub fn describe(&self) -> String {
        match self {
            Change::SetImage { container, image } => format!("set image {container}={image}"),
            Change::Json(p) => format!("JSON patch ({} operations)", p.0.len()),
            Change::Merge(_) => "merge patch".into(),
            Change::Replace(_) => "new CloneSet from file".into(),
        }
    }
}

/// Applies the changes in order to the CloneSet (v1alpha1 JSON) and returns the new one. A change that
/// touches nothing is an error: a what-if of no change would report an empty rollout.
pub fn apply(cloneset: &Value, changes: &[Change]) -> anyhow::Result<Value> {
    let mut cs = cloneset.clone();
    for ch in changes {
        match ch {
            Change::SetImage { container, image } => set_image(&mut cs, container, image)?,
            Change::Json(p) => json_patch::patch(&mut cs, &p.0).context("applying the JSON patch")?,
            Change::Merge(m) => json_patch::merge(&mut cs, m),
            Change::Replace(new) => {
                let spec = new
                    .get("spec")
                    .context("the new CloneSet (-f) has no spec")?
                    .clone();
                cs["spec"] = spec;
            }
        }
    }
    anyhow::ensure!(
        cs.get("spec") != cloneset.get("spec"),
        "the change leaves the CloneSet's spec as it is: nothing to roll out"
    );
    // What the apiserver keeps of metadata on an update; a patch of anything else is not a rollout.
    cs["metadata"] = cloneset.get("metadata").cloned().unwrap_or(Value::Null);
    Ok(cs)
}

fn set_image(cs: &mut Value, container: &str, image: &str) -> anyhow::Result<()> {
    let spec = cs
        .pointer_mut("/spec/template/spec")
        .context("the CloneSet has no spec.template.spec")?;
    let mut found = false;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if container == "*" || c.get("name").and_then(Value::as_str) == Some(container) {
                c["image"] = Value::String(image.to_string());
                found = true;
            }
        }
    }
    anyhow::ensure!(
        found,
        "--set-image: no container named {container:?} in the CloneSet's template"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cs() -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
               "metadata": {"name": "web", "namespace": "d"},
               "spec": {"replicas": 4, "template": {"spec": {"containers": [
                   {"name": "app", "image": "nginx:1.19", "resources": {"requests": {"cpu": "100m"}}},
                   {"name": "side", "image": "busybox:1"}]}}}})
    }

    #[test]
    fn set_image_changes_only_the_named_container() {
        let new = apply(&cs(), &[Change::set_image("app=nginx:1.20").unwrap()]).unwrap();
        assert_eq!(
            new["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.20"
        );
        assert_eq!(
            new["spec"]["template"]["spec"]["containers"][1]["image"],
            "busybox:1"
        );
        let all = apply(&cs(), &[Change::set_image("*=x:2").unwrap()]).unwrap();
        assert_eq!(all["spec"]["template"]["spec"]["containers"][1]["image"], "x:2");
        let e = apply(&cs(), &[Change::set_image("nope=x").unwrap()]).unwrap_err();
        assert!(e.to_string().contains("no container named \"nope\""), "{e}");
        assert!(Change::set_image("app").is_err());
        assert!(Change::set_image("=x").is_err());
    }

    #[test]
    fn json_and_merge_patches() {
        let json = Change::patch(
            r#"[{"op":"replace","path":"/spec/template/spec/containers/0/resources/requests/cpu","value":"200m"}]"#,
        )
        .unwrap();
        assert!(matches!(json, Change::Json(_)));
        let new = apply(&cs(), &[json]).unwrap();
        assert_eq!(
            new["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "200m"
        );
        let merge = Change::patch("spec:\n  updateStrategy:\n    partition: 2\n").unwrap();
        let new = apply(&cs(), &[merge]).unwrap();
        assert_eq!(new["spec"]["updateStrategy"]["partition"], 2);
        assert_eq!(
            new["spec"]["replicas"], 4,
            "a merge patch keeps what it does not name"
        );
        assert!(Change::patch("3").is_err());
    }

    #[test]
    fn replace_takes_the_new_spec_and_keeps_metadata() {
        let mut other = cs();
        other["spec"]["replicas"] = json!(6);
        other["metadata"]["name"] = json!("ignored");
        let new = apply(&cs(), &[Change::Replace(other)]).unwrap();
        assert_eq!(new["spec"]["replicas"], 6);
        assert_eq!(new["metadata"]["name"], "web");
    }

    #[test]
    fn no_change_is_an_error() {
        let e = apply(&cs(), &[Change::set_image("app=nginx:1.19").unwrap()]).unwrap_err();
        assert!(e.to_string().contains("nothing to roll out"), "{e}");
    }
}
