//! Paged lists, on both apiservers alike: `limit` objects in key order, a continue token whose pages read the
//! first page's state, `remainingItemCount`, and `limit` ignored at `resourceVersion=0` (what informers send).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectList, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::Env;
use crate::util::*;

fn names(list: &ObjectList<ConfigMap>) -> Vec<String> {
    list.items.iter().map(ResourceExt::name_any).collect()
}

pub async fn paging(env: &Env, ns: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), ns);
    let all = ["page-a", "page-b", "page-c", "page-d", "page-e"];
    // Created out of order: pages follow the key order, not creation.
    for name in ["page-d", "page-a", "page-e", "page-c", "page-b"] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"paging": "e2e"}}}))?;
        api.create(&PostParams::default(), &cm).await?;
    }
    let lp = ListParams::default().labels("paging=e2e");
    let first = api.list(&lp.clone().limit(2)).await?;
    ensure(names(&first) == all[..2], || {
        format!("first page: {:?}", names(&first))
    })?;
    let token = first.metadata.continue_.clone().unwrap_or_default();
    ensure(!token.is_empty(), || "no continue token after a full page".into())?;
    // With a label selector kube-apiserver does not count what remains.
    ensure(first.metadata.remaining_item_count.is_none(), || {
        format!(
            "remainingItemCount with a selector: {:?}",
            first.metadata.remaining_item_count
        )
    })?;

    // A change between pages is not seen by the rest of the list.
    let patch = json!({"data": {"changed": "yes"}});
    api.patch("page-c", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let mut rest = Vec::new();
    let mut next = Some(token);
    while let Some(token) = next.filter(|t| !t.is_empty()) {
        let page = api.list(&lp.clone().limit(2).continue_token(&token)).await?;
        ensure(
            page.metadata.resource_version == first.metadata.resource_version,
            || {
                format!(
                    "a continuation read {:?}, the first page {:?}",
                    page.metadata.resource_version, first.metadata.resource_version
                )
            },
        )?;
        ensure(page.items.iter().all(|c| c.data.is_none()), || {
            "a continuation saw a change made after the first page".into()
        })?;
        rest.extend(names(&page));
        next = page.metadata.continue_.clone();
    }
    ensure(rest == all[2..], || format!("the rest: {rest:?}"))?;

    // resourceVersion=0 is answered whole; a fresh list sees the change.
    // (kube-rs drops resourceVersion=0 from a list with a limit, so the request is written out.)
    let uri =
        format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=paging%3De2e&limit=2&resourceVersion=0");
    let whole: ObjectList<ConfigMap> = env
        .client
        .request(http::Request::get(uri).body(Vec::new())?)
        .await?;
    ensure(
        whole.items.len() == all.len() && whole.metadata.continue_.as_deref().unwrap_or("").is_empty(),
        || format!("resourceVersion=0 with limit 2: {:?}", names(&whole)),
    )?;
    let fresh = api.list(&lp).await?;
    ensure(
        fresh
            .items
            .iter()
            .any(|c| c.data.as_ref().is_some_and(|d| d.contains_key("changed"))),
        || "a new list does not see the change".into(),
    )?;
    // The same refusals, word for word: a resourceVersionMatch without a resourceVersion (422), an
    // unparsable resourceVersion (400). (A resourceVersion not reached yet gets 504 with Retry-After on both,
    // checked by hand on v1.37.2: kube-rs' client retries it until the scenario's timeout.)
    let base = format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=paging%3De2e");
    for (query, code, message) in [
        (
            "resourceVersionMatch=Exact",
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=x",
            400,
            "invalid resource version: resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax",
        ),
    ] {
        let req = http::Request::get(format!("{base}&{query}")).body(Vec::new())?;
        match env.client.request::<ObjectList<ConfigMap>>(req).await {
            Err(kube::Error::Api(s)) => ensure(s.code == code && s.message == message, || {
                format!("{query}: want {code} {message:?}, got {} {:?}", s.code, s.message)
            })?,
            other => ensure(false, || format!("{query}: want {code}, got {other:?}"))?,
        }
    }
    for name in all {
        api.delete(name, &Default::default()).await?;
    }
    Ok(())
}
