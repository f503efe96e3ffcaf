//! The webhook's TLS material: a self-signed CA and a serving certificate, kept in one Secret so replicas share it.
//!
//! As Kruise's webhook controller does (`pkg/webhook/util/controller`): certificates are generated at start when
//! the Secret holds none (or none valid for the names needed), written to the Secret, and rotated before they
//! expire. Each generation is a new CA with its serving certificate; the Secret keeps the previous CA
//! (`ca-previous.crt`) so the apiserver's CA bundle can trust both while replicas switch over.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

/// Secret data keys.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const CA_PREVIOUS: &str = "ca-previous.crt";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
/// Secret annotations: expiry (unix seconds) and the names the serving certificate covers.
pub const NOT_AFTER_ANNOTATION: &str = "insitu/webhook-cert-not-after";
pub const DNS_NAMES_ANNOTATION: &str = "insitu/webhook-cert-names";

/// One generation of certificates (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertBundle {
    pub ca_cert: String,
    pub ca_key: String,
    /// The CA of the generation before, still trusted by the CRD's CA bundle during a rotation.
    pub ca_previous: Option<String>,
    pub tls_cert: String,
    pub tls_key: String,
    /// Unix seconds after which the serving certificate is invalid.
    pub not_after: u64,
    pub dns_names: Vec<String>,
}

impl CertBundle {
    /// The CA bundle the apiserver must trust: the current CA and, during a rotation, the previous one.
    pub fn ca_bundle_pem(&self) -> String {
        let mut out = self.ca_cert.clone();
        if let Some(prev) = &self.ca_previous {
            out.push_str(prev);
        }
        out
    }

    /// Whether the bundle covers `names` and stays valid past `now + renew_before`.
    pub fn fresh(&self, names: &[String], now: u64, renew_before: Duration) -> bool {
        names.iter().all(|n| self.dns_names.contains(n)) && self.not_after > now + renew_before.as_secs()
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP addresses), valid for `validity`.
pub fn generate(
    names: &[String],
    validity: Duration,
    previous_ca: Option<String>,
) -> anyhow::Result<CertBundle> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let now = time::OffsetDateTime::now_utc();
    // Some slack for clocks that disagree a little (the apiserver checks notBefore).
    let not_before = now - time::Duration::minutes(5);
    let not_after = now + time::Duration::seconds(i64::try_from(validity.as_secs()).unwrap_or(i64::MAX / 2));

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "insitu-webhook-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, names.first().cloned().unwrap_or_default());
    params.not_before = not_before;
    params.not_after = not_after;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(CertBundle {
        ca_cert: ca_cert.pem(),
        ca_key: ca_key.serialize_pem(),
        ca_previous: previous_ca,
        tls_cert: cert.pem(),
        tls_key: key.serialize_pem(),
        not_after: u64::try_from(not_after.unix_timestamp()).unwrap_or(0),
        dns_names: names.to_vec(),
    })
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .filter(|s| !s.is_empty())
}

/// The bundle a Secret holds, if it holds a complete one.
pub fn from_secret(secret: &Secret) -> Option<CertBundle> {
    let data = secret.data.as_ref()?;
    let anns = secret.metadata.annotations.clone().unwrap_or_default();
    Some(CertBundle {
        ca_cert: text(data, CA_CERT)?,
        ca_key: text(data, CA_KEY)?,
        ca_previous: text(data, CA_PREVIOUS),
        tls_cert: text(data, TLS_CERT)?,
        tls_key: text(data, TLS_KEY)?,
        not_after: anns.get(NOT_AFTER_ANNOTATION)?.parse().ok()?,
        dns_names: anns
            .get(DNS_NAMES_ANNOTATION)
            .map(|s| s.split(',').filter(|n| !n.is_empty()).map(String::from).collect())
            .unwrap_or_default(),
    })
}

/// Writes `bundle` into `secret` (data and annotations), keeping its other fields.
pub fn into_secret(bundle: &CertBundle, mut secret: Secret) -> Secret {
    let mut data = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
    };
    put(CA_CERT, &bundle.ca_cert);
    put(CA_KEY, &bundle.ca_key);
    put(TLS_CERT, &bundle.tls_cert);
    put(TLS_KEY, &bundle.tls_key);
    if let Some(prev) = &bundle.ca_previous {
        put(CA_PREVIOUS, prev);
    }
    secret.data = Some(data);
    secret.string_data = None;
    let anns = secret.metadata.annotations.get_or_insert_with(BTreeMap::new);
    anns.insert(NOT_AFTER_ANNOTATION.into(), bundle.not_after.to_string());
    anns.insert(DNS_NAMES_ANNOTATION.into(), bundle.dns_names.join(","));
    secret
}

/// Reads the Secret; generates and stores a new bundle when it holds none fresh enough for `names`. Another
/// replica may write it at the same time: on a conflict the stored one is read back and used.
pub async fn ensure(
    secrets: &Api<Secret>,
    name: &str,
    names: &[String],
    validity: Duration,
    renew_before: Duration,
) -> anyhow::Result<CertBundle> {
    for _ in 0..5 {
        let existing = match secrets.get_opt(name).await {
            Ok(s) => s,
            Err(e) => anyhow::bail!(
                "reading Secret {name} for the webhook certificates: {e} (the controller needs get/update on it: apply deploy/webhook.yaml)"
            ),
        };
        if let Some(b) = existing.as_ref().and_then(from_secret)
            && b.fresh(names, unix_now(), renew_before)
        {
            return Ok(b);
        }
        let previous = existing.as_ref().and_then(from_secret).map(|b| b.ca_cert);
        let bundle = generate(names, validity, previous)?;
        let res = match existing {
            Some(s) => secrets
                .replace(name, &PostParams::default(), &into_secret(&bundle, s))
                .await
                .map(|_| ()),
            None => {
                let fresh = Secret {
                    metadata: ObjectMeta {
                        name: Some(name.to_string()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/name".into(),
                            "insitu".into(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    type_: Some("Opaque".into()),
                    ..Secret::default()
                };
                secrets
                    .create(&PostParams::default(), &into_secret(&bundle, fresh))
                    .await
                    .map(|_| ())
            }
        };
        match res {
            Ok(()) => {
                tracing::info!(
                    secret = name,
                    not_after = bundle.not_after,
                    "generated webhook certificates"
                );
                return Ok(bundle);
            }
            // Another replica wrote it first: use theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => anyhow::bail!(
                "writing Secret {name} with the webhook certificates: {e} (the controller needs create/update on it: apply deploy/webhook.yaml)"
            ),
        }
    }
    anyhow::bail!("Secret {name}: kept conflicting with other writers")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_bundle_round_trips_through_a_secret() {
        let names = vec![
            "insitu-webhook.insitu-system.svc".to_string(),
            "127.0.0.1".to_string(),
        ];
        let b = generate(&names, Duration::from_secs(3600), Some("OLD CA\n".into())).unwrap();
        assert!(b.ca_cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(b.tls_key.contains("PRIVATE KEY"));
        assert!(b.ca_bundle_pem().ends_with("OLD CA\n"));
        let s = into_secret(&b, Secret::default());
        assert_eq!(from_secret(&s), Some(b.clone()));
        let now = unix_now();
        assert!(b.fresh(&names, now, Duration::from_secs(60)));
        assert!(
            !b.fresh(&names, now, Duration::from_secs(7200)),
            "inside the renewal window"
        );
        assert!(!b.fresh(&["other.example".to_string()], now, Duration::ZERO));
    }
}
