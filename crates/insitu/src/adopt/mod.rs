//! `insitu adopt`: takes CloneSets over from a stopped kruise-manager without touching a pod.
//!
//! Reads everything first, plans with [`plan`] (pure), refuses before any write when kruise-manager still runs
//! or when Kruise's remaining webhooks would block insitu's pod writes, then: removes Kruise's CloneSet webhook
//! entries, replaces the CloneSet CRD with insitu's (conversion through insitu's webhook), and migrates the
//! storage version where `status.storedVersions` needs it. Pods, ControllerRevisions and CloneSet specs are not
//! written (a migration rewrites CloneSets unchanged). `--dry-run` sends every write as a server-side dry run.

pub mod plan;

use std::process::ExitCode;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, TypeMeta,
};
use serde_json::{Value, json};

use insitu_api::crd::WebhookTarget;
use plan::{ConfigChange, KruiseWebhooks, LeaseState};

const CRD_NAME: &str = "clonesets.apps.kruise.io";
const FIELD_MANAGER: &str = "insitu-adopt";

#[derive(clap::Args, Debug)]
pub struct AdoptArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster). Needs cluster-admin-like
    /// rights: CRDs, webhook configurations, CloneSets, Leases and Deployments in kruise-system.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// Send every write as a server-side dry run (validated and admitted by the apiserver, nothing stored).
    #[arg(long)]
    pub dry_run: bool,
    /// Kruise's webhooks: `cloneset` removes only its CloneSet entries (refused while its fail-closed pod
    /// webhooks would block insitu's pod writes); `all` deletes both of Kruise's webhook configurations.
    #[arg(long, value_enum, default_value = "cloneset")]
    pub kruise_webhooks: KruiseWebhooks,
    /// The URL of `insitu run --webhook-url` (a controller outside the cluster), written into the CRD's conversion.
    #[arg(long)]
    pub webhook_url: Option<String>,
    /// The webhook's Service, `namespace/name` (port 443), when insitu runs in the cluster (deploy/).
    #[arg(long, default_value = "insitu-system/insitu-webhook")]
    pub webhook_service: String,
}

impl AdoptArgs {
    fn target(&self) -> anyhow::Result<WebhookTarget> {
        match &self.webhook_url {
            Some(u) if u.starts_with("https://") => Ok(WebhookTarget::Url(u.clone())),
            Some(u) => anyhow::bail!("--webhook-url {u:?}: the apiserver only calls https:// webhooks"),
            None => match self.webhook_service.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok(WebhookTarget::Service {
                    namespace: ns.into(),
                    name: name.into(),
                    port: 443,
                }),
                _ => anyhow::bail!(
                    "--webhook-service {:?}: give it as namespace/name",
                    self.webhook_service
                ),
            },
        }
    }
}

/// Exit status: 0 done, 1 refused (nothing written), 2 error, 3 storage migration pending (re-run).
const REFUSED: u8 = 1;
const PENDING: u8 = 3;

pub fn main(args: AdoptArgs) -> anyhow::Result<ExitCode> {
    let target = args.target()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(args, target))
}

fn step(n: u8, text: &str) {
    println!("[{n}/5] {text}");
}

fn detail(text: &str) {
    println!("      {text}");
}

async fn run(args: AdoptArgs, target: WebhookTarget) -> anyhow::Result<ExitCode> {
    let cluster = crate::target::ClusterArgs {
        namespace: None,
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
    };
    let (client, _) = crate::target::connect(&cluster, "adopt").await?;
    let dry = args.dry_run;
    println!(
        "insitu adopt: taking the CloneSets over from kruise-manager{}",
        if dry {
            " (server dry run: nothing is stored)"
        } else {
            ""
        }
    );

    step(1, "kruise-manager must be stopped");
    if let Some(why) = check_kruise_stopped(&client).await? {
        eprintln!("error: refusing, nothing changed: {why}");
        return Ok(ExitCode::from(REFUSED));
    }

    step(
        2,
        &format!("CustomResourceDefinition {CRD_NAME} and its CloneSets"),
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(existing) = crds.get_opt(CRD_NAME).await.context("reading the CloneSet CRD")? else {
        eprintln!(
            "error: refusing: no CRD {CRD_NAME}, nothing to adopt (a fresh install: insitu crd | kubectl apply --server-side -f -)"
        );
        return Ok(ExitCode::from(REFUSED));
    };
    let existing = serde_json::to_value(&existing)?;
    let stored: Vec<String> = existing
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    detail(&format!(
        "conversion: {}; storedVersions: [{}]",
        plan::conversion_target(&existing),
        stored.join(", ")
    ));
    list_clonesets(&client).await;

    step(3, "Kruise's CloneSet webhooks");
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let m = get_value(&mutating, plan::KRUISE_MUTATING).await?;
    let v = get_value(&validating, plan::KRUISE_VALIDATING).await?;
    let (pm, pv) = (
        plan::plan_config(m.as_ref(), args.kruise_webhooks),
        plan::plan_config(v.as_ref(), args.kruise_webhooks),
    );
    if let Some(why) = plan::pod_blockers(&[(plan::KRUISE_MUTATING, &pm), (plan::KRUISE_VALIDATING, &pv)]) {
        eprintln!("error: refusing, nothing changed: {why}");
        return Ok(ExitCode::from(REFUSED));
    }
    apply_config(
        &mutating,
        "MutatingWebhookConfiguration",
        plan::KRUISE_MUTATING,
        &pm,
        dry,
    )
    .await?;
    apply_config(
        &validating,
        "ValidatingWebhookConfiguration",
        plan::KRUISE_VALIDATING,
        &pv,
        dry,
    )
    .await?;

    step(
        4,
        "the CloneSet CRD: insitu's (schema, CEL rules, columns; conversion by insitu's webhook)",
    );
    let desired = serde_json::to_value(insitu_api::crd::crd_for(&target))?;
    replace_crd(&crds, &existing, &desired, dry).await?;

    step(5, "storage version");
    let migrate = plan::versions_to_migrate(&stored);
    let pending = if migrate.is_empty() {
        detail(&format!(
            "storedVersions [{}]: every CloneSet is stored as {}, nothing to migrate",
            stored.join(", "),
            plan::STORAGE_VERSION
        ));
        false
    } else {
        detail(&format!(
            "storedVersions [{}]: CloneSets may still be stored as {}; rewriting each unchanged",
            stored.join(", "),
            migrate.join(", ")
        ));
        // In a dry run Kruise's CloneSet webhooks are still there (nothing was stored) and would refuse the
        // probes: then only count.
        let kruise_hooks_left = [&pm, &pv]
            .iter()
            .any(|c| matches!(c, ConfigChange::Replace { .. } | ConfigChange::Delete { .. }));
        !migrate_storage(&client, &crds, dry, dry && kruise_hooks_left).await?
    };

    let where_ = match &target {
        WebhookTarget::Url(u) => format!("outside the cluster: insitu run --webhook-url {u}"),
        WebhookTarget::Service { namespace, name, .. } => {
            format!("in the cluster: kubectl apply -k deploy/ (webhook Service {namespace}/{name})")
        }
    };
    println!(
        "next: start insitu run ({where_}). It serves the conversion webhook, patches its CA bundle into the CRD \
         and keeps MutatingWebhookConfiguration {} (Kruise's CloneSet defaults) pointed at itself; until it \
         answers, CloneSet reads in v1alpha1 fail and nothing is reconciled (pods keep running). Do not start \
         kruise-manager again: its webhook controller would point the CRD's conversion back at itself.",
        insitu_api::crd::MUTATING_CONFIG_NAME
    );
    if pending {
        println!(
            "pending: the storage migration did not finish (see above); once insitu run answers, run insitu adopt again"
        );
        return Ok(ExitCode::from(PENDING));
    }
    println!("done{}", if dry { " (dry run)" } else { "" });
    Ok(ExitCode::SUCCESS)
}

/// `Some(reason)` while kruise-manager holds its Lease or its Deployment has replicas.
async fn check_kruise_stopped(client: &kube::Client) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), plan::KRUISE_NAMESPACE);
    let lease = leases
        .get_opt(plan::KRUISE_LEASE)
        .await
        .with_context(|| format!("reading Lease {}/{}", plan::KRUISE_NAMESPACE, plan::KRUISE_LEASE))?;
    let state = plan::lease_state(lease.as_ref().and_then(|l| l.spec.as_ref()), Timestamp::now());
    let lease_name = format!("Lease {}/{}", plan::KRUISE_NAMESPACE, plan::KRUISE_LEASE);
    match &state {
        LeaseState::Absent => detail(&format!("{lease_name}: absent")),
        LeaseState::Free { holder, expired_for } => detail(&format!(
            "{lease_name}: free ({})",
            match (holder, expired_for) {
                (Some(h), Some(d)) => format!("last held by {h}, expired {:.0} s ago", d.as_secs_f64()),
                _ => "released".into(),
            }
        )),
        LeaseState::Held { holder, .. } => detail(&format!("{lease_name}: held by {holder}")),
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), plan::KRUISE_NAMESPACE);
    let dep = deployments
        .get_opt(plan::KRUISE_DEPLOYMENT)
        .await
        .with_context(|| {
            format!(
                "reading Deployment {}/{}",
                plan::KRUISE_NAMESPACE,
                plan::KRUISE_DEPLOYMENT
            )
        })?
        .map(|d| serde_json::to_value(d).unwrap_or(Value::Null));
    let replicas = plan::deployment_replicas(dep.as_ref());
    detail(&format!(
        "Deployment {}/{}: {}",
        plan::KRUISE_NAMESPACE,
        plan::KRUISE_DEPLOYMENT,
        replicas.map_or("absent".to_string(), |n| format!("{n} replica(s)"))
    ));
    Ok(plan::kruise_running(&state, replicas))
}

fn cloneset_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", plan::STORAGE_VERSION, "CloneSet");
    ApiResource::from_gvk_with_plural(&gvk, "clonesets")
}

/// Prints the CloneSets (read in the storage version: no conversion needed) and their revisions, which
/// insitu reuses: same template, same hash, so no pod is updated.
async fn list_clonesets(client: &kube::Client) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &cloneset_resource());
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            detail(&format!(
                "{} CloneSet(s); their pods are not written",
                list.items.len()
            ));
            for cs in &list.items {
                let d = &cs.data;
                detail(&format!(
                    "  {}/{}: replicas {}, ready {}, updateRevision {}",
                    cs.namespace().unwrap_or_default(),
                    cs.name_any(),
                    d.pointer("/spec/replicas").unwrap_or(&json!(1)),
                    d.pointer("/status/readyReplicas").unwrap_or(&json!(0)),
                    d.pointer("/status/updateRevision")
                        .and_then(Value::as_str)
                        .unwrap_or("-")
                ));
            }
        }
        Err(e) => detail(&format!("listing CloneSets as {}: {e}", plan::STORAGE_VERSION)),
    }
}

async fn get_value<K>(api: &Api<K>, name: &str) -> anyhow::Result<Option<Value>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let got = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading {name}"))?;
    Ok(got.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

async fn apply_config<K>(
    api: &Api<K>,
    kind: &str,
    name: &str,
    change: &ConfigChange,
    dry: bool,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let names = |es: &[plan::Entry]| es.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ");
    match change {
        ConfigChange::Absent => detail(&format!("{kind} {name}: absent")),
        ConfigChange::Unchanged { kept } => detail(&format!(
            "{kind} {name}: no CloneSet entry; {} entries left as they are",
            kept.len()
        )),
        ConfigChange::Replace {
            removed,
            kept,
            object,
        } => {
            let obj: K = serde_json::from_value(object.clone()).with_context(|| format!("{kind} {name}"))?;
            let pp = PostParams {
                dry_run: dry,
                field_manager: Some(FIELD_MANAGER.into()),
            };
            api.replace(name, &pp, &obj)
                .await
                .with_context(|| format!("removing {} from {kind} {name}", names(removed)))?;
            detail(&format!(
                "{kind} {name}: removed {} (from webhooks and Kruise's template annotation); kept {} other entries",
                names(removed),
                kept.len()
            ));
        }
        ConfigChange::Delete { removed } => {
            let dp = DeleteParams {
                dry_run: dry,
                ..DeleteParams::default()
            };
            api.delete(name, &dp)
                .await
                .with_context(|| format!("deleting {kind} {name}"))?;
            detail(&format!("{kind} {name}: deleted ({})", names(removed)));
        }
    }
    Ok(())
}

/// Replaces the CRD's spec with insitu's; a server-side dry run first tells whether anything changes at all
/// (the stored CRD holds the apiserver's defaults, so comparing with the generated one would always differ).
async fn replace_crd(
    crds: &Api<CustomResourceDefinition>,
    existing: &Value,
    desired: &Value,
    dry: bool,
) -> anyhow::Result<()> {
    let candidate: CustomResourceDefinition =
        serde_json::from_value(plan::crd_replacement(existing, desired))?;
    let probe = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let would = crds
        .replace(CRD_NAME, &probe, &candidate)
        .await
        .context("replacing the CloneSet CRD with insitu's (server dry run)")?;
    let would = serde_json::to_value(&would)?;
    if would.get("spec") == existing.get("spec") {
        detail("already insitu's CRD: unchanged");
        return Ok(());
    }
    if !dry {
        let pp = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.into()),
        };
        crds.replace(CRD_NAME, &pp, &candidate)
            .await
            .context("replacing the CloneSet CRD with insitu's")?;
    }
    let versions: Vec<String> = would
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| {
            let name = v["name"].as_str().unwrap_or_default();
            if v["storage"] == json!(true) {
                format!("{name} (storage)")
            } else {
                name.to_string()
            }
        })
        .collect();
    detail(&format!(
        "replaced: conversion {} → {}; served {}; status.storedVersions kept",
        plan::conversion_target(existing),
        plan::conversion_target(&would),
        versions.join(", ")
    ));
    Ok(())
}

/// Rewrites every CloneSet unchanged in the storage version, then trims `status.storedVersions`. Returns
/// false (pending) when a CloneSet cannot be read or rewritten yet (the conversion webhook does not answer
/// before insitu run is up) or when admission would change its spec (then it is left alone, reported).
async fn migrate_storage(
    client: &kube::Client,
    crds: &Api<CustomResourceDefinition>,
    dry: bool,
    count_only: bool,
) -> anyhow::Result<bool> {
    let ar = cloneset_resource();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let list = match all.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            detail(&format!(
                "cannot read the CloneSets as {} yet: {e}",
                plan::STORAGE_VERSION
            ));
            return Ok(false);
        }
    };
    if count_only {
        detail(&format!(
            "would rewrite {} CloneSet(s) and set status.storedVersions [{}] (not probed: in a dry run Kruise's \
             webhooks stay in place)",
            list.items.len(),
            plan::STORAGE_VERSION
        ));
        return Ok(true);
    }
    let (mut done, mut left) = (0usize, Vec::new());
    for mut cs in list.items {
        cs.types = Some(TypeMeta {
            api_version: insitu_api::conversion::V1BETA1.into(),
            kind: "CloneSet".into(),
        });
        let (ns, name) = (cs.namespace().unwrap_or_default(), cs.name_any());
        match rewrite(client, &ar, cs, dry).await {
            Ok(()) => done += 1,
            Err(e) => left.push(format!("{ns}/{name}: {e:#}")),
        }
    }
    detail(&format!(
        "{done} CloneSet(s) rewritten unchanged{}",
        if dry { " (dry run)" } else { "" }
    ));
    if !left.is_empty() {
        for l in &left {
            detail(&format!("not rewritten: {l}"));
        }
        return Ok(false);
    }
    let patch = json!({ "status": { "storedVersions": [plan::STORAGE_VERSION] } });
    let pp = PatchParams {
        dry_run: dry,
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    crds.patch_status(CRD_NAME, &pp, &Patch::Merge(&patch))
        .await
        .context("setting the CRD's status.storedVersions")?;
    detail(&format!("status.storedVersions: [{}]", plan::STORAGE_VERSION));
    Ok(true)
}

/// One CloneSet written back as read: a dry run first (admission must leave its spec as it is), then the
/// write; a conflict (someone wrote it meanwhile: it is then stored in the storage version already) is done.
async fn rewrite(
    client: &kube::Client,
    ar: &ApiResource,
    cs: DynamicObject,
    dry: bool,
) -> anyhow::Result<()> {
    let ns = cs.namespace().unwrap_or_default();
    let name = cs.name_any();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, ar);
    let probe = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let would = api.replace(&name, &probe, &cs).await?;
    anyhow::ensure!(
        would.data.get("spec") == cs.data.get("spec"),
        "admission would change its spec (a mutating webhook defaults it); left alone so that no new revision starts"
    );
    if dry {
        return Ok(());
    }
    let pp = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    match api.replace(&name, &pp, &cs).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
