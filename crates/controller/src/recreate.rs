//! The why of a recreate: a Warning on the workload and on the pod naming the fields that forced it, and
//! `insitu_recreate_total{reason}` (insitu's addition; Kruise only logs "can not update in-place").

use insitu_api::CloneSet;
use insitu_api::keys::events as ev;
use insitu_core::PodRefusal;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;

use crate::Context;
use crate::events::{Severity, Warned};

/// A pod was marked for recreation (its `specified-delete` patch succeeded): say why, count it by reason.
pub fn recreated(
    ctx: &Context,
    owner: crate::workload::Workload<'_>,
    pod: &Pod,
    why: &PodRefusal,
    revision: &str,
) {
    let r = &why.refusal;
    ctx.metrics
        .recreate_total
        .get_or_create(&vec![("reason", r.reason.clone())])
        .inc();
    let name = pod.name_any();
    let message = format!(
        "pod {name} is recreated for revision {revision}, not updated in place: {}",
        r.describe()
    );
    ctx.events
        .emit_on(owner, Severity::Warning, ev::RECREATE_FOR_UPDATE, message.clone());
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name),
        namespace: pod.namespace(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    };
    ctx.events
        .emit_for(involved, Severity::Warning, ev::RECREATE_FOR_UPDATE, message);
}

/// InPlaceOnly pods left alone because their change cannot go in place: one Warning per CloneSet and update
/// revision (the FailedUpdate condition says it every round), naming the fields.
pub fn refused_in_place_only(
    ctx: &Context,
    warned: &Warned,
    cs: &CloneSet,
    refusals: &[PodRefusal],
    revision: &str,
) {
    let mut refused = refusals.iter().filter(|r| r.in_place_only).peekable();
    let Some(first) = refused.peek() else { return };
    let uid = cs.uid().unwrap_or_default();
    if !warned.first_time(&uid, &format!("{}/{revision}", ev::IN_PLACE_ONLY_REFUSED)) {
        return;
    }
    let describe = first.refusal.describe();
    let pods: Vec<&str> = refused.map(|r| r.pod.as_str()).collect();
    ctx.events.emit(
        cs,
        Severity::Warning,
        ev::IN_PLACE_ONLY_REFUSED,
        format!(
            "updateStrategy InPlaceOnly: pods {} cannot update in place to revision {revision}: {describe}",
            pods.join(", ")
        ),
    );
}
