//! What a pod's metadata and status say, read the same way everywhere: lifecycle state, conditions, instance id,
//! deletion cost, timestamps (vocabulary: imports no computing module).

use insitu_api::keys;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;

use crate::util::strmap::Entries;

/// The `InPlaceUpdateReady` (or any) condition of a pod.
pub(crate) fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The lifecycle label as an enum, so hot loops compare integers, not strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lc {
    /// No label.
    None,
    PreparingNormal,
    Normal,
    PreparingUpdate,
    Updating,
    Updated,
    PreparingDelete,
    /// Any other value.
    Other,
}

impl Lc {
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "" => Lc::None,
            keys::lifecycle::PREPARING_NORMAL => Lc::PreparingNormal,
            keys::lifecycle::NORMAL => Lc::Normal,
            keys::lifecycle::PREPARING_UPDATE => Lc::PreparingUpdate,
            keys::lifecycle::UPDATING => Lc::Updating,
            keys::lifecycle::UPDATED => Lc::Updated,
            keys::lifecycle::PREPARING_DELETE => Lc::PreparingDelete,
            _ => Lc::Other,
        }
    }
}

/// The instance id of a pod or PVC (`apps.kruise.io/cloneset-instance-id`; `""` when absent), as Kruise
/// `GetInstanceID`.
pub fn instance_id<'a>(labels: impl Into<Entries<'a>>) -> &'a str {
    labels.into().get(keys::INSTANCE_ID_LABEL).unwrap_or("")
}

/// Kruise `getDeletionCostFromPodAnnotations`: an int32 without `+` or leading zeros, else 0.
pub(crate) fn deletion_cost(v: &str) -> i32 {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let valid_first =
        v == "0" || v.starts_with('-') || v.as_bytes().first().is_some_and(|b| (b'1'..=b'9').contains(b));
    if !valid_first || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    v.parse().unwrap_or(0)
}

/// RFC3339 at second precision, as Go `time.Now().Format(time.RFC3339)` in UTC.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let t = Timestamp::from_second(t.as_second()).unwrap_or(t);
    k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).unwrap_or_default()
}
