//! The object a tool command acts on (`cloneset/NAME`), its namespace, and the client for it (kubeconfig/context).

use anyhow::Context as _;

/// Connection flags shared by `status`, `set image` and `rollout` (kubectl's names, so the plugin reads alike).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Namespace of the CloneSet (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
}

/// A client for these flags and the namespace the command works in.
pub async fn connect(args: &ClusterArgs, component: &str) -> anyhow::Result<(kube::Client, String)> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await?,
        (None, None) => kube::Config::infer().await?,
    };
    let agent = format!("insitu/{} ({component})", env!("CARGO_PKG_VERSION"));
    config
        .headers
        .push((axum::http::header::USER_AGENT, agent.parse()?));
    let client = kube::Client::try_from(config)?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    Ok((client, namespace))
}

/// The CloneSet name in `cloneset/NAME` (also `clonesets/`, `clone/`, `cloneset.apps.kruise.io/`, or
/// `cloneset NAME` given as two words, as kubectl accepts).
pub fn cloneset_name(words: &[String]) -> anyhow::Result<String> {
    const KINDS: [&str; 5] = [
        "cloneset",
        "clonesets",
        "clone",
        "cloneset.apps.kruise.io",
        "clonesets.apps.kruise.io",
    ];
    let usage = "give the CloneSet as cloneset/NAME (or: cloneset NAME)";
    let (kind, name) = match words {
        [one] => one
            .split_once('/')
            .ok_or_else(|| anyhow::anyhow!("{one:?}: {usage}"))?,
        [kind, name] => (kind.as_str(), name.as_str()),
        _ => anyhow::bail!("{}: {usage}", words.join(" ")),
    };
    anyhow::ensure!(
        KINDS.contains(&kind.to_ascii_lowercase().as_str()),
        "{kind:?} is not a CloneSet: only clonesets.apps.kruise.io are supported ({usage})"
    );
    anyhow::ensure!(
        !name.is_empty() && !name.contains('/'),
        "{name:?} is not a CloneSet name ({usage})"
    );
    Ok(name.to_string())
}

/// `clonesets.apps.kruise.io "NAME"` as kube-apiserver names the object in its messages.
pub fn display(name: &str) -> String {
    format!("cloneset.apps.kruise.io/{name}")
}

#[cfg(test)]
mod tests {
    use super::cloneset_name;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn accepts_kubectl_spellings() {
        for w in [
            &["cloneset/web"][..],
            &["clonesets/web"],
            &["clone/web"],
            &["cloneset.apps.kruise.io/web"],
            &["cloneset", "web"],
        ] {
            assert_eq!(cloneset_name(&words(w)).unwrap(), "web", "{w:?}");
        }
    }

    #[test]
    fn refuses_other_kinds_and_bare_names() {
        let e = cloneset_name(&words(&["deployment/web"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a CloneSet"), "{e}");
        let e = cloneset_name(&words(&["web"])).unwrap_err().to_string();
        assert!(e.contains("cloneset/NAME"), "{e}");
        assert!(cloneset_name(&words(&["cloneset/"])).is_err());
    }
}

/// kubectl's `--dry-run`: `none` writes, `server` sends the write with `dryRun=All` (validated and admitted by
/// the apiserver, nothing stored), `client` sends no write at all.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DryRun {
    #[default]
    None,
    Server,
    Client,
}

impl DryRun {
    /// The patch options for this mode.
    pub fn patch_params(self) -> kube::api::PatchParams {
        kube::api::PatchParams {
            dry_run: self == DryRun::Server,
            ..Default::default()
        }
    }

    /// What kubectl appends to its message: ` (server dry run)`, ` (dry run)`, or nothing.
    pub fn suffix(self) -> &'static str {
        match self {
            DryRun::None => "",
            DryRun::Server => " (server dry run)",
            DryRun::Client => " (dry run)",
        }
    }
}
