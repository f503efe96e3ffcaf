//! The CloneSet conversion and defaulting webhooks served by `insitu run`: HTTPS (rustls) with a self-signed CA kept in a Secret,
//! the CA bundle patched into the CRD's conversion config and the MutatingWebhookConfiguration, rotation before expiry, readiness once it answers.
//!
//! Kruise does the same with its webhook controller (`pkg/webhook/util/controller`): it generates certificates
//! into the `kruise-webhook-certs` Secret and writes the CA bundle into its webhook configurations and the CRDs'
//! `spec.conversion.webhook.clientConfig.caBundle`. The conversion itself is `insitu_api::conversion` (the
//! functions the embedded apiserver calls in-process).

pub mod budget;
pub mod certs;
pub mod conntimer;
pub mod mutate;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use insitu_api::crd::WebhookTarget;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

/// The CloneSet CRD's name.
pub const CRD_NAME: &str = "clonesets.apps.kruise.io";

/// The Advanced StatefulSet CRD's name (`insitu crd` installs it beside the CloneSet CRD, converted by the same
/// webhook).
pub const STATEFULSET_CRD_NAME: &str = insitu_api::statefulset::crd::CRD_NAME;

/// How the webhook is served and reached.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Where the HTTPS server listens.
    pub addr: SocketAddr,
    /// How the apiserver reaches it (written into the CRD): the in-cluster Service or a URL.
    pub target: WebhookTarget,
    /// The Secret holding the certificates (shared by replicas).
    pub secret_namespace: String,
    pub secret_name: String,
    /// Lifetime of a certificate generation.
    pub validity: Duration,
    /// Whether to patch the CA bundle (and target) into the CRD.
    pub patch_crd: bool,
}

impl WebhookConfig {
    /// Renew when less than a third of the validity is left (Kruise renews well before expiry too).
    pub fn renew_before(&self) -> Duration {
        self.validity / 3
    }

    /// Names the serving certificate must cover: the Service's DNS names or the URL's host, plus localhost for
    /// the readiness self-check.
    pub fn names(&self) -> Vec<String> {
        let mut names = match &self.target {
            WebhookTarget::Service { namespace, name, .. } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
                format!("{name}.{namespace}"),
                name.clone(),
            ],
            WebhookTarget::Url(url) => vec![url_host(url)],
        };
        for extra in ["localhost", "127.0.0.1"] {
            if !names.iter().any(|n| n == extra) {
                names.push(extra.to_string());
            }
        }
        names
    }
}

/// The host of an `https://host:port/path` URL (brackets stripped from an IPv6 literal).
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6).to_string();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_string()
}

/// A running webhook: `ready` turns true once it answers a conversion over TLS and the CRD trusts it.
pub struct Webhook {
    pub ready: watch::Receiver<bool>,
}

/// Prepares certificates, starts the server, patches the CRD, then keeps the certificates fresh. Returns once
/// the server listens; errors before that (Secret not readable, port taken) are returned.
pub async fn start(client: kube::Client, cfg: WebhookConfig) -> anyhow::Result<Webhook> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &cfg.secret_namespace);
    let names = cfg.names();
    let bundle = certs::ensure(
        &secrets,
        &cfg.secret_name,
        &names,
        cfg.validity,
        cfg.renew_before(),
    )
    .await?;
    let resolver = server::CertResolver::new();
    resolver.set(&bundle)?;
    let listener =
        bind(cfg.addr).map_err(|e| anyhow::anyhow!("binding the webhook address {}: {e}", cfg.addr))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, target = ?cfg.target, "serving the conversion webhook");
    tokio::spawn(server::serve(listener, server::tls_config(resolver.clone())?));
    let (ready_tx, ready) = watch::channel(false);
    tokio::spawn(keep(client, cfg, addr, resolver, bundle, ready_tx));
    Ok(Webhook { ready })
}

/// Binds with `SO_REUSEPORT` (Unix) so that several replicas on one host (an out-of-cluster HA pair, as in the
/// e2e suite) share one webhook address, the kernel spreading connections as a Service spreads them over pods:
/// when one replica dies the others keep answering on the URL the CRD names. They present certificates from the
/// same Secret, so any of them is trusted.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    #[cfg(unix)]
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Readiness, CRD patching and rotation, for as long as the process runs.
async fn keep(
    client: kube::Client,
    cfg: WebhookConfig,
    addr: SocketAddr,
    resolver: Arc<server::CertResolver>,
    mut bundle: certs::CertBundle,
    ready: watch::Sender<bool>,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &cfg.secret_namespace);
    let names = cfg.names();
    let mut patched: Option<String> = None;
    let check = (cfg.validity / 20).clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        if cfg.patch_crd && patched.as_deref() != Some(bundle.ca_bundle_pem().as_str()) {
            // A restart (or a second replica) finds the trust in place already: nothing is written.
            if trust_current(&client, &cfg.target, &bundle.ca_bundle_pem()).await {
                patched = Some(bundle.ca_bundle_pem());
            }
        }
        if cfg.patch_crd && patched.as_deref() != Some(bundle.ca_bundle_pem().as_str()) {
            match patch_trust(&client, &cfg.target, &bundle.ca_bundle_pem()).await {
                Ok(()) => patched = Some(bundle.ca_bundle_pem()),
                Err(e) => {
                    tracing::warn!(error = %e, "patching the CA bundle into the CRD and the webhook configuration; retrying")
                }
            }
        }
        let answered = server::self_check(addr, "localhost", &bundle.ca_cert).await;
        let now_ready = answered.is_ok() && (!cfg.patch_crd || patched.is_some());
        if let Err(e) = &answered {
            tracing::warn!(error = %e, "conversion webhook self-check");
        }
        ready.send_if_modified(|r| std::mem::replace(r, now_ready) != now_ready);
        tokio::time::sleep(if now_ready { check } else { Duration::from_secs(1) }).await;
        // Another replica may have rotated; or it is our turn.
        match certs::ensure(
            &secrets,
            &cfg.secret_name,
            &names,
            cfg.validity,
            cfg.renew_before(),
        )
        .await
        {
            Ok(b) if b != bundle => {
                // Trust first, then serve: the CRD gets the new bundle (new + previous CA) before the swap.
                if cfg.patch_crd {
                    if let Err(e) = patch_trust(&client, &cfg.target, &b.ca_bundle_pem()).await {
                        tracing::warn!(error = %e, "patching the rotated CA bundle into the CRD; retrying");
                        continue;
                    }
                    patched = Some(b.ca_bundle_pem());
                    // The apiserver reloads the CRD's conversion client and the webhook configuration from
                    // its informers: serving the new certificate before it did would fail conversions.
                    tokio::time::sleep(TRUST_SETTLE).await;
                }
                if let Err(e) = resolver.set(&b) {
                    tracing::warn!(error = %e, "loading the rotated webhook certificate");
                    continue;
                }
                tracing::info!(not_after = b.not_after, "webhook certificate rotated");
                bundle = b;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "refreshing the webhook certificates"),
        }
    }
}

/// Time between writing a rotated CA bundle and serving the certificate it signs (see `keep`).
const TRUST_SETTLE: Duration = Duration::from_secs(2);

/// Whether the CRD's conversion and our defaulting webhook already name `target` with `ca_pem` (then a
/// restart patches nothing). Any read error counts as not current (the patch then says why).
async fn trust_current(client: &kube::Client, target: &WebhookTarget, ca_pem: &str) -> bool {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Ok(crd) = crds.get(CRD_NAME).await else {
        return false;
    };
    let want = insitu_api::crd::conversion_config(target, Some(&ca));
    let have = serde_json::to_value(&crd).unwrap_or_default();
    if !client_config_matches(
        have.pointer("/spec/conversion/webhook/clientConfig"),
        &want["webhook"]["clientConfig"],
    ) {
        return false;
    }
    // The Advanced StatefulSet CRD names the same webhook; absent (or not ours to read) it needs nothing.
    if let Some(config) = our_statefulset_crd(&crds, target).await
        && !client_config_matches(Some(&config), &want["webhook"]["clientConfig"])
    {
        return false;
    }
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    match configs.get_opt(insitu_api::crd::MUTATING_CONFIG_NAME).await {
        Ok(Some(c)) => {
            let have = serde_json::to_value(&c).unwrap_or_default();
            let want = insitu_api::crd::mutating_webhook_configuration(target, Some(&ca));
            client_config_matches(
                have.pointer("/webhooks/0/clientConfig"),
                &want["webhooks"][0]["clientConfig"],
            )
        }
        // Nothing of ours to keep trusted (older RBAC or not created yet): `patch_mutating` decides.
        _ => false,
    }
}

/// A stored `clientConfig` equals the wanted one in URL or Service (namespace, name, path, port 443 by
/// default) and CA bundle.
fn client_config_matches(have: Option<&serde_json::Value>, want: &serde_json::Value) -> bool {
    names_target(have, want) && have.and_then(|h| h.get("caBundle")) == want.get("caBundle")
}

/// Whether a webhook client config `have` names the same URL or Service as `want` (whatever its CA bundle).
fn names_target(have: Option<&serde_json::Value>, want: &serde_json::Value) -> bool {
    let Some(have) = have else {
        return false;
    };
    let svc = |v: &serde_json::Value| {
        v.get("service").map(|s| {
            (
                s.get("namespace").cloned(),
                s.get("name").cloned(),
                s.get("path").cloned(),
                s.get("port").and_then(serde_json::Value::as_i64).unwrap_or(443),
            )
        })
    };
    have.get("url") == want.get("url") && svc(have) == svc(want)
}

/// The Advanced StatefulSet CRD's conversion client config, if that CRD is installed and names insitu's webhook
/// (`insitu crd` installed it). Kruise's own CRD, where a team keeps kruise-manager for its StatefulSets, is
/// left alone: insitu does not take over a CRD it did not install.
async fn our_statefulset_crd(
    crds: &Api<CustomResourceDefinition>,
    target: &WebhookTarget,
) -> Option<serde_json::Value> {
    let sts = crds.get_opt(STATEFULSET_CRD_NAME).await.ok().flatten()?;
    let have = serde_json::to_value(&sts).ok()?;
    let config = have.pointer("/spec/conversion/webhook/clientConfig")?.clone();
    let want = insitu_api::crd::conversion_config(target, None);
    names_target(Some(&config), &want["webhook"]["clientConfig"]).then_some(config)
}

/// Points the CRD's conversion webhook and the CloneSet defaulting webhook at `target` with `ca_pem`.
async fn patch_trust(client: &kube::Client, target: &WebhookTarget, ca_pem: &str) -> anyhow::Result<()> {
    patch_crd(&Api::all(client.clone()), target, ca_pem).await?;
    patch_mutating(&Api::all(client.clone()), target, ca_pem).await
}

/// Writes the CloneSet defaulting webhook configuration (`insitu_api::crd::mutating_webhook_configuration`)
/// with `ca_pem`: a merge patch of our own configuration's `webhooks` (deploy/webhook.yaml creates it; the
/// controller needs patch on that one name), or a create where it does not exist yet (an out-of-cluster
/// `--webhook-url` run, whose credentials may create it), as Kruise's webhook controller keeps its
/// `kruise-mutating-webhook-configuration` pointed at its server.
pub async fn patch_mutating(
    configs: &Api<MutatingWebhookConfiguration>,
    target: &WebhookTarget,
    ca_pem: &str,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let want = insitu_api::crd::mutating_webhook_configuration(target, Some(&ca));
    let name = insitu_api::crd::MUTATING_CONFIG_NAME;
    let exists = match configs.get_opt(name).await {
        Ok(found) => found.is_some(),
        // Older RBAC (before the defaulting webhook): nothing of ours to keep trusted; conversion still works.
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(
                "may not read MutatingWebhookConfiguration {name}: CloneSets are not defaulted as by Kruise \
                 (apply deploy/rbac.yaml and deploy/webhook.yaml)"
            );
            return Ok(());
        }
        Err(e) => anyhow::bail!("reading MutatingWebhookConfiguration {name}: {e}"),
    };
    if exists {
        let patch = json!({ "webhooks": want["webhooks"] });
        configs
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "patching MutatingWebhookConfiguration {name}: {e} (the controller needs get/patch on it)"
                )
            })?;
    } else {
        let obj: MutatingWebhookConfiguration = serde_json::from_value(want)?;
        match configs.create(&Default::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 403 => tracing::warn!(
                "MutatingWebhookConfiguration {name} does not exist and may not be created: CloneSets are not \
                 defaulted as by Kruise (kubectl apply -f deploy/webhook.yaml creates it)"
            ),
            Err(e) => anyhow::bail!("creating MutatingWebhookConfiguration {name}: {e}"),
        }
    }
    Ok(())
}

/// Points the CRDs' conversion webhook (CloneSet's, and the Advanced StatefulSet's where installed) at `target`
/// with `ca_pem` as its CA bundle (a merge patch that also clears the other kind of client config).
pub async fn patch_crd(
    crds: &Api<CustomResourceDefinition>,
    target: &WebhookTarget,
    ca_pem: &str,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut conversion = insitu_api::crd::conversion_config(target, Some(&ca));
    let client = &mut conversion["webhook"]["clientConfig"];
    match target {
        WebhookTarget::Service { .. } => client["url"] = serde_json::Value::Null,
        WebhookTarget::Url(_) => client["service"] = serde_json::Value::Null,
    }
    let patch = json!({ "spec": { "conversion": conversion } });
    crds.patch(CRD_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            anyhow::anyhow!("patching CRD {CRD_NAME}: {e} (the controller needs get/patch on it)")
        })?;
    // The Advanced StatefulSet CRD, where `insitu crd` installed it: not there, Kruise's own, or older RBAC
    // leaves CloneSets working.
    if our_statefulset_crd(crds, target).await.is_none() {
        return Ok(());
    }
    match crds
        .patch(
            STATEFULSET_CRD_NAME,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(kube::Error::Api(s)) if s.code == 403 => tracing::warn!(
            "may not patch CRD {STATEFULSET_CRD_NAME}: its conversion webhook is not trusted (apply deploy/rbac.yaml)"
        ),
        Err(e) => anyhow::bail!("patching CRD {STATEFULSET_CRD_NAME}: {e}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_names_cover_the_target_and_localhost() {
        let cfg = WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            target: WebhookTarget::Url("https://127.0.0.1:9443/convert".into()),
            secret_namespace: "insitu-system".into(),
            secret_name: "insitu-webhook-certs".into(),
            validity: Duration::from_secs(3600),
            patch_crd: false,
        };
        assert_eq!(cfg.names(), ["127.0.0.1", "localhost"]);
        assert_eq!(url_host("https://[::1]:9443/convert"), "::1");
        assert_eq!(url_host("https://webhook.example:443/convert"), "webhook.example");
        let svc = WebhookConfig {
            target: insitu_api::crd::default_webhook_target(),
            ..cfg
        };
        assert!(
            svc.names()
                .contains(&"insitu-webhook.insitu-system.svc".to_string())
        );
        assert_eq!(svc.renew_before(), Duration::from_secs(1200));
    }

    #[test]
    fn a_stored_client_config_matches_only_with_the_same_target_and_ca() {
        let url = WebhookTarget::Url("https://127.0.0.1:9443/convert".into());
        let want = insitu_api::crd::conversion_config(&url, Some("Q0E="));
        let want = &want["webhook"]["clientConfig"];
        let stored = json!({"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="});
        assert!(client_config_matches(Some(&stored), want));
        let other_ca = json!({"url": "https://127.0.0.1:9443/convert", "caBundle": "T0xE"});
        assert!(!client_config_matches(Some(&other_ca), want));
        assert!(!client_config_matches(None, want));
        // The apiserver defaults a Service's port to 443.
        let svc = insitu_api::crd::default_webhook_target();
        let want = insitu_api::crd::conversion_config(&svc, Some("Q0E="));
        let stored = json!({"service": {"namespace": "insitu-system", "name": "insitu-webhook", "path": "/convert"},
                            "caBundle": "Q0E="});
        assert!(client_config_matches(
            Some(&stored),
            &want["webhook"]["clientConfig"]
        ));
        assert!(!client_config_matches(
            Some(&stored),
            &insitu_api::crd::conversion_config(&url, Some("Q0E="))["webhook"]["clientConfig"]
        ));
    }

    #[test]
    fn a_crd_is_ours_when_it_names_our_webhook_whatever_its_ca() {
        let svc = insitu_api::crd::default_webhook_target();
        let want = insitu_api::crd::conversion_config(&svc, None);
        let want = &want["webhook"]["clientConfig"];
        let ours = json!({"service": {"namespace": "insitu-system", "name": "insitu-webhook", "path": "/convert",
                          "port": 443}, "caBundle": "T0xE"});
        assert!(names_target(Some(&ours), want));
        // Kruise's own webhook Service: not insitu's to repoint.
        let kruise = json!({"service": {"namespace": "kruise-system", "name": "kruise-webhook-service",
                            "path": "/convert"}, "caBundle": "Q0E="});
        assert!(!names_target(Some(&kruise), want));
        assert!(!names_target(None, want));
    }
}
