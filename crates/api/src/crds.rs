//! Every CRD insitu serves, as the YAML `insitu crd` prints and `deploy/crd.yaml` holds: the CloneSet's
//! (`crate::crd`), then the Advanced StatefulSet's (`crate::statefulset::crd`).

use crate::crd::WebhookTarget;

/// The CRDs rendered as YAML (what `insitu crd` prints and `deploy/crd.yaml` holds): the CloneSet CRD, then
/// the Advanced StatefulSet CRD (`crate::statefulset::crd`), as two documents.
pub fn crd_yaml() -> String {
    crd_yaml_for(&crate::crd::default_webhook_target())
}

/// The CRDs for `target`, as YAML.
pub fn crd_yaml_for(target: &WebhookTarget) -> String {
    let cloneset = serde_saphyr::to_string(&crate::crd::crd_for(target)).unwrap_or_default();
    let statefulset = serde_saphyr::to_string(&crate::statefulset::crd::crd_for(target)).unwrap_or_default();
    format!("{cloneset}---\n{statefulset}")
}
