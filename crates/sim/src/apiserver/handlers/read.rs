//! Reads: get, list (JSON or Table) and the entry to watch.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{present, present_value};
use crate::apiserver::errors::{ApiError, ApiResult};
use crate::apiserver::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::apiserver::{ApiRequest, ApiServer, json_response, paging, table, watch};

impl ApiServer {
    pub(super) fn get(&self, req: &ApiRequest, ns: &str, name: &str) -> ApiResult<Response> {
        self.counters().reads += 1;
        let obj = self
            .store()
            .get(&req.rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(req.rt, name))?;
        if req.wants_table() {
            let v = present_value(req.rt, obj.value());
            return Ok(table::response(&table::list(
                req,
                &[v],
                &obj.index.rv.to_string(),
                self.now(),
            )));
        }
        Ok(json_response(StatusCode::OK, present(req.rt, &obj)))
    }

    pub(super) fn selectors(&self, req: &ApiRequest) -> ApiResult<Selectors> {
        let mut fields = FieldSelector::parse(req.q("fieldSelector").unwrap_or(""), req.rt)?;
        if req.watch_path
            && let Some(name) = &req.name
        {
            let both = format!("{},metadata.name={name}", req.q("fieldSelector").unwrap_or(""));
            fields = FieldSelector::parse(&both, req.rt)?;
        }
        Ok(Selectors {
            labels: LabelSelector::parse(req.q("labelSelector").unwrap_or(""))?,
            fields,
        })
    }

    pub(super) fn list_or_watch(&self, req: &ApiRequest) -> ApiResult<Response> {
        let sel = self.selectors(req)?;
        // ListOptions are decoded whole, selectors first (a bad `timeoutSeconds` fails a list too).
        req.timeout_seconds()?;
        if req.flag("watch") || req.watch_path {
            return watch::serve(self, req, sel);
        }
        self.counters().lists += 1;
        let paging = paging::parse(req)?;
        let current = self.store().current_rv();
        // A resourceVersion, or a continue token's, that the store has not reached (kube-apiserver waits 3 s for
        // its watch cache, then answers this).
        let asked = paging.min_rv.or(paging.from.as_ref().and_then(|c| c.rv));
        if let Some(rv) = asked.filter(|rv| *rv > current) {
            return Err(paging::too_large(rv, current));
        }
        let page = match self.store().list_page(
            &req.rt.key(),
            req.ns.as_deref(),
            |idx| sel.matches(idx),
            paging.limit,
            paging.from.as_ref(),
        ) {
            Ok(page) => page,
            Err(_) if paging.exact => return Err(paging::too_old()),
            Err(gone) => return Ok(paging::expired(gone.start)),
        };
        let meta = paging::list_meta(&page, !sel.is_empty());
        if req.wants_table() {
            let values: Vec<Value> = page
                .items
                .iter()
                .map(|o| present_value(req.rt, o.value()))
                .collect();
            let mut t = table::list(req, &values, &page.rv.to_string(), self.now());
            t["metadata"] = meta;
            return Ok(table::response(&t));
        }
        let rt = req.rt;
        let mut buf = format!(
            r#"{{"kind":"{}List","apiVersion":"{}","metadata":{},"items":["#,
            rt.kind,
            rt.api_version(),
            meta
        )
        .into_bytes();
        let total: usize = page.items.iter().map(|o| o.len() + 1).sum();
        buf.reserve(total + 2);
        for (i, o) in page.items.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(&present(rt, o));
        }
        buf.extend_from_slice(b"]}");
        Ok(json_response(StatusCode::OK, buf))
    }
}
