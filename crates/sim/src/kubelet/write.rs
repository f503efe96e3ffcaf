//! A pod's status write: the conditional PUT of `pods/status`, its re-read and rebuild after a conflict, and
//! the hash that keeps an unchanged status from being written twice.

use insitu_api::containermeta::RUNTIME_CONTAINERS_META_ANNOTATION;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

use super::image::fnv1a;
use super::status::{PodView, build_status};
use crate::Clock;

pub(super) enum Outcome {
    Written(Box<Wrote>),
    /// Nothing to write; the pod as re-read after a conflict, when it was.
    Unchanged(Option<Box<Pod>>),
    Gone,
    Failed(String),
}

/// A status write that succeeded. The apiserver keeps the stored spec on a status write and the write was
/// conditional on the version it was based on, so the result is that version with this status, metadata
/// annotation and resourceVersion: the cache applies it without decoding the response's whole pod.
pub(super) struct Wrote {
    /// The pod as re-read after a conflict, when the write was based on it rather than on the cached pod.
    pub(super) base: Option<Box<Pod>>,
    pub(super) resource_version: Option<String>,
    pub(super) status: PodStatus,
    pub(super) runtime_meta: Option<String>,
    pub(super) hash: u64,
}

pub(super) fn status_hash(s: &PodStatus, meta: Option<&str>) -> u64 {
    let mut h = Fnv1a(FNV_OFFSET);
    // Serialized straight into the hash: no buffer to grow for each status.
    let _ = serde_json::to_writer(&mut h, s);
    h.0 ^ meta.map_or(0, |m| fnv1a(m.as_bytes()).rotate_left(1))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over whatever is written (the same value as `fnv1a` of the bytes).
struct Fnv1a(u64);

impl std::io::Write for Fnv1a {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for b in buf {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(super) fn meta_annotation(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(RUNTIME_CONTAINERS_META_ANNOTATION)
        .map(String::as_str)
}

pub(super) fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// One attempt's input: the metadata it is based on (its resourceVersion is the write's precondition), the
/// status and its hash.
pub(super) struct StatusWrite {
    pub(super) meta: ObjectMeta,
    pub(super) status: PodStatus,
    pub(super) hash: u64,
}

/// The body of a `pods/status` PUT: metadata and status. The apiserver keeps the stored spec on a status write
/// (kube-apiserver's pod status strategy copies it from the old object), so it is not sent.
#[derive(serde::Serialize)]
struct StatusBody<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    status: &'a PodStatus,
}

/// The only part of the written pod the cache needs back.
#[derive(serde::Deserialize)]
struct WrittenVersion {
    metadata: VersionOnly,
}

#[derive(serde::Deserialize)]
struct VersionOnly {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// PUTs `pods/status` and returns the new resourceVersion (the response's pod is not decoded).
async fn put_status(
    api: &Api<Pod>,
    client: &Client,
    name: &str,
    w: &StatusWrite,
) -> Result<Option<String>, kube::Error> {
    let body = serde_json::to_vec(&StatusBody {
        api_version: "v1",
        kind: "Pod",
        metadata: &w.meta,
        status: &w.status,
    })
    .map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(api.resource_url())
        .replace_subresource("status", name, &PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    let text = client.request_text(req).await?;
    let written: WrittenVersion = serde_json::from_str(&text).map_err(kube::Error::SerdeError)?;
    Ok(written.metadata.resource_version)
}

/// Conditional write of `pods/status` (resourceVersion); on 409, re-read and regenerate (never clobbering
/// conditions others wrote meanwhile).
pub(super) async fn write_status(
    api: &Api<Pod>,
    name: &str,
    uid: &str,
    mut w: StatusWrite,
    view: &PodView,
    clock: &dyn Clock,
) -> Outcome {
    let client = api.clone().into_client();
    let runtime_meta = view.runtime_meta.as_deref();
    let mut base: Option<Box<Pod>> = None;
    for _ in 0..10 {
        if let Some(m) = runtime_meta {
            // kruise-daemon reports it through pods/status too (which keeps metadata changes).
            w.meta
                .annotations
                .get_or_insert_with(Default::default)
                .insert(RUNTIME_CONTAINERS_META_ANNOTATION.into(), m.to_string());
        }
        match put_status(api, &client, name, &w).await {
            Ok(resource_version) => {
                return Outcome::Written(Box::new(Wrote {
                    base,
                    resource_version,
                    status: w.status,
                    runtime_meta: runtime_meta.map(str::to_string),
                    hash: w.hash,
                }));
            }
            Err(e) if is_code(&e, 409) => match api.get_opt(name).await {
                Ok(Some(p)) if p.metadata.uid.as_deref() == Some(uid) => {
                    let desired = build_status(&p, view, clock.now());
                    if p.status.as_ref() == Some(&desired)
                        && runtime_meta.is_none_or(|m| meta_annotation(&p) == Some(m))
                    {
                        return Outcome::Unchanged(Some(Box::new(p)));
                    }
                    w = StatusWrite {
                        meta: p.metadata.clone(),
                        hash: status_hash(&desired, runtime_meta),
                        status: desired,
                    };
                    base = Some(Box::new(p));
                }
                Ok(_) => return Outcome::Gone,
                Err(e) => return Outcome::Failed(e.to_string()),
            },
            Err(e) if is_code(&e, 404) => return Outcome::Gone,
            Err(e) => return Outcome::Failed(e.to_string()),
        }
    }
    Outcome::Failed("too many status write conflicts".into())
}
