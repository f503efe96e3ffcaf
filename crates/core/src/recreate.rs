//! Why a pod is recreated instead of updated in place (or refused under InPlaceOnly): the exact template fields,
//! named as people read them (`spec.containers[app].env[VERSION]`), a hint, and a bounded metric label.
//!
//! Kruise only logs "can not update in-place" and recreates; insitu names the fields in a Warning event, in
//! `insitu_recreate_total{reason}` and in `insitu explain`. The rules are `inplaceupdate::calculate`'s: the template
//! metadata, container images and (with `InPlaceWorkloadVerticalScaling`) cpu/memory replaces go in place;
//! every other change to `spec` does not.

use serde::Serialize;
use serde_json::Value;

use crate::inplaceupdate::{self, Op};

/// The reason label of a volumeClaimTemplates change (`RecreatePodWhenChangeVCTInCloneSetGate`).
pub(crate) const VCT_REASON: &str = "spec.volumeClaimTemplates";
/// The reason label when a revision or template is missing (nothing to compare).
pub(crate) const NO_REVISION_REASON: &str = "revision";

/// Why the change from one revision to another cannot go in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// What the in-place calculation said (the first offending change).
    pub message: String,
    /// Every template field that forces the recreate, e.g. `spec.containers[app].ports`.
    pub fields: Vec<String>,
    /// The metric label: the first field without element names (`spec.containers.ports`).
    pub reason: String,
    /// What the user can do about it.
    pub hint: String,
}

impl Refusal {
    /// A refusal with no template diff to name (a revision or template is missing).
    pub fn other(message: String) -> Self {
        Refusal {
            message,
            fields: Vec::new(),
            reason: NO_REVISION_REASON.into(),
            hint: "the pod's revision is unknown, so nothing can be patched in place".into(),
        }
    }

    /// `RecreatePodWhenChangeVCTInCloneSetGate`: new claims need a new pod.
    pub fn volume_claim_templates(message: String) -> Self {
        Refusal {
            message,
            fields: vec![VCT_REASON.into()],
            reason: VCT_REASON.into(),
            hint: "new PersistentVolumeClaims are only bound to a new pod (RecreatePodWhenChangeVCTInCloneSetGate)"
                .into(),
        }
    }

    /// The fields of the template diff `old → new` that `inplaceupdate::calculate` refuses (it said `message`).
    pub(crate) fn from_templates(message: String, old: &Value, new: &Value, vertical: bool) -> Self {
        let fields = refused_fields(old, new, vertical);
        let reason = fields
            .first()
            .map_or_else(|| NO_REVISION_REASON.to_string(), |f| strip_names(f));
        let hint = hint_for(&reason, &message);
        Refusal {
            message,
            fields,
            reason,
            hint,
        }
    }

    /// `spec.containers[app].env[VERSION] changed: <hint>` (the Warning event's text).
    pub fn describe(&self) -> String {
        if self.fields.is_empty() {
            return format!("{} ({})", self.message, self.hint);
        }
        format!("{} changed: {}", self.fields.join(", "), self.hint)
    }
}

fn hint_for(reason: &str, message: &str) -> String {
    if message.contains("QoS") {
        return "a resize may not change the pod's QoS class; keep requests/limits in the same class".into();
    }
    match reason {
        r if r.ends_with(".env") || r.ends_with(".envFrom") => {
            "a pod's env is immutable; use a downward-API env from a label or annotation for in-place config"
                .into()
        }
        r if r.ends_with(".resources") => {
            "only replacing cpu/memory requests/limits resizes in place (with InPlaceWorkloadVerticalScaling)"
                .into()
        }
        "spec.containers" | "spec.initContainers" => {
            "containers cannot be added to or removed from a pod".into()
        }
        _ => "a running pod allows only image changes and cpu/memory resizes".into(),
    }
}

/// `spec.containers[app].env[VERSION]` → `spec.containers.env`: a label with a bounded set of values.
fn strip_names(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut depth = 0;
    for c in field.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Every refused change of the diff, named, deduplicated in diff order.
pub(crate) fn refused_fields(old: &Value, new: &Value, vertical: bool) -> Vec<String> {
    let mut ops = Vec::new();
    inplaceupdate::diff(old, new, "", &mut ops);
    let qos = crate::inplaceupdate::vertical::qos_changed(old, new).is_some();
    let mut out: Vec<String> = Vec::new();
    for op in ops.iter().filter(|op| refused(op, old, new, vertical, qos)) {
        let f = human_path(&op.path, old, new);
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

fn refused(op: &Op, old: &Value, new: &Value, vertical: bool, qos: bool) -> bool {
    if !op.path.starts_with("/spec/") {
        return op.path != "/metadata" && !op.path.starts_with("/metadata/");
    }
    if crate::inplaceupdate::vertical::resource_path(&op.path).is_some() {
        let mut scratch = Default::default();
        return !vertical
            || qos
            || crate::inplaceupdate::vertical::record_op(op.op, &op.path, old, new, &mut scratch).is_err();
    }
    let image = op.op == "replace"
        && op
            .path
            .strip_prefix("/spec/containers/")
            .and_then(|r| r.split_once('/'))
            .is_some_and(|(i, t)| t == "image" && !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    !image
}

/// Containers are named lists whose element's fields matter; any other list stops at its element.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// `/spec/containers/0/env/2/value` → `spec.containers[app].env[VERSION]`, names read from the templates.
fn human_path(pointer: &str, old: &Value, new: &Value) -> String {
    let segs: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let (mut o, mut n) = (Some(old), Some(new));
    let mut out = String::new();
    let mut parent = "";
    for seg in &segs {
        let in_array = o.or(n).is_some_and(Value::is_array);
        if in_array && let Ok(i) = seg.parse::<usize>() {
            let (eo, en) = (o.and_then(|v| v.get(i)), n.and_then(|v| v.get(i)));
            let name = eo.or(en).and_then(|e| e.get("name")).and_then(Value::as_str);
            let container = CONTAINER_LISTS.contains(&parent);
            match name {
                Some(name) => out.push_str(&format!("[{name}]")),
                // An unnamed element: the list is the field (`ports`), unless it holds containers.
                None if !container => break,
                None => out.push_str(&format!("[{i}]")),
            }
            if !container {
                break;
            }
            (o, n) = (eo, en);
            continue;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(seg);
        parent = seg;
        (o, n) = (
            o.and_then(|v| v.get(seg.as_str())),
            n.and_then(|v| v.get(seg.as_str())),
        );
    }
    out
}

#[cfg(test)]
mod tests;
