//! What the server serves of `apps.kruise.io/v1beta1`, read once at start (Kruise `DiscoverGVK`): CloneSet status
//! is written in v1beta1 where served, and ImagePullJobs exist only where Kruise's CRD is installed.

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};

pub const GROUP: &str = "apps.kruise.io";
pub const V1BETA1: &str = "v1beta1";

/// The resources of `apps.kruise.io/v1beta1` the server serves (empty when the group version is not served).
pub async fn kruise_v1beta1(
    client: &Client,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource> {
    match client
        .list_api_group_resources(&format!("{GROUP}/{V1BETA1}"))
        .await
    {
        Ok(list) => list.resources,
        Err(e) => {
            tracing::info!(error = %e, "{GROUP}/{V1BETA1} not served");
            Vec::new()
        }
    }
}

/// `plural` of `apps.kruise.io/v1beta1` as an ApiResource, if served (and `sub`resource too, when given).
pub fn served(
    resources: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource],
    plural: &str,
    sub: Option<&str>,
) -> Option<ApiResource> {
    let r = resources.iter().find(|r| r.name == plural)?;
    if let Some(sub) = sub
        && !resources.iter().any(|s| s.name == format!("{plural}/{sub}"))
    {
        return None;
    }
    let gvk = GroupVersionKind::gvk(GROUP, V1BETA1, &r.kind);
    Some(ApiResource::from_gvk_with_plural(&gvk, &r.name))
}
