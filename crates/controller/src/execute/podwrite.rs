//! Read-modify-write of a pod or its status from the cache, re-read only after a 409 (Kruise
//! `RetryOnConflict` around its pod updates).

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;

use super::{CONFLICT_RETRIES, Exec, action_err};
use crate::Error;
use crate::error::is_status;
use crate::expectations::{Expect, pod_version};

/// Which endpoint a read-modify-write goes to.
#[derive(Clone, Copy)]
pub(super) enum Target {
    Pod,
    Status,
}

impl Exec<'_> {
    /// GET-free read-modify-write: start from the cache, re-read only after a conflict (Kruise: RetryOnConflict).
    /// `mutate` returns false when the pod already looks right (no write).
    pub(super) async fn read_modify_write(
        &self,
        name: &str,
        uid: &str,
        target: Target,
        mutate: &(dyn Fn(&mut Pod) -> bool + Send + Sync),
    ) -> Result<Pod, Error> {
        let what = match target {
            Target::Pod => "update pod",
            Target::Status => "update pod status",
        };
        let api = self.pods();
        let mut pod = match self.cached(name, uid) {
            Some(p) => p,
            None => api
                .get(name)
                .await
                .map_err(|e| action_err(format!("{what} {name}"), e))?,
        };
        for attempt in 0..=CONFLICT_RETRIES {
            if pod.metadata.uid.as_deref() != Some(uid) {
                return Err(Error::Invalid(format!(
                    "pod {name} was replaced (uid changed) before {what}"
                )));
            }
            if !mutate(&mut pod) {
                return Ok(pod);
            }
            let result = match target {
                Target::Pod => {
                    self.ctx.metrics.write("update", "pods");
                    api.replace(name, &PostParams::default(), &pod).await
                }
                Target::Status => {
                    self.ctx.metrics.write("update", "pods/status");
                    api.replace_status(name, &PostParams::default(), &pod).await
                }
            };
            match result {
                Ok(written) => {
                    self.expect(Expect::PodVersion(
                        name.to_string(),
                        pod_version(&written.metadata),
                    ));
                    self.remember(&written);
                    return Ok(written);
                }
                Err(e) if is_status(&e, 409) && attempt < CONFLICT_RETRIES => {
                    pod = api
                        .get(name)
                        .await
                        .map_err(|e| action_err(format!("{what} {name}"), e))?;
                }
                Err(e) => return Err(action_err(format!("{what} {name}"), e)),
            }
        }
        Err(Error::Invalid(format!("{what} {name}: too many conflicts")))
    }
}
