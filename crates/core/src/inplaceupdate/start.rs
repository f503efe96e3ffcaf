//! Starting an in-place update (Kruise `updatePodInPlace`) and finishing its grace period (`finishGracePeriod`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use insitu_api::inplace::{InPlaceUpdateState, UpdateSpec};
use insitu_api::keys;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::batch::{Changes, apply_meta, meta_from_patch, patch_spec_to_pod};
use super::{InPlaceSpec, time};
use crate::model::mutation::PodMutation;

/// What every in-place start from one old revision to one target shares, computed once per plan so the
/// per-pod work is a few clones (10k-pod rollouts stay cheap).
#[derive(Clone, Debug)]
pub struct StartTemplate {
    pub spec: InPlaceSpec,
    pub revision: String,
    pub revision_label: String,
    pub grace_seconds: i32,
    /// `lifecycle.apps.kruise.io/timestamp` value (RFC3339 of now).
    pub now_rfc3339: String,
    pub now: Time,
    /// With a grace period: the grace annotation and the state annotation, identical for every pod.
    pub grace_json: Option<String>,
    pub state_json: Option<String>,
}

impl StartTemplate {
    pub fn new(
        spec: InPlaceSpec,
        revision: &str,
        revision_label: &str,
        grace_seconds: i32,
        now: Timestamp,
    ) -> Self {
        let t = time(now);
        let (mut grace_json, mut state_json) = (None, None);
        if grace_seconds > 0 {
            let grace = UpdateSpec {
                revision: revision.to_string(),
                container_images: spec.images.clone(),
                container_ref_metadata: spec.ref_metadata.clone(),
                update_env_from_metadata: spec.update_env_from_metadata,
                container_resources: spec.resources.clone(),
                meta_data_patch: spec.meta_patch.as_ref().map(|p| B64.encode(p.as_bytes())),
                grace_seconds,
            };
            grace_json = Some(grace.to_json());
            state_json = Some(Self::state(&spec, revision, &t).to_json());
        }
        StartTemplate {
            spec,
            revision: revision.to_string(),
            revision_label: revision_label.to_string(),
            grace_seconds,
            now_rfc3339: crate::model::podmeta::rfc3339(now),
            now: t,
            grace_json,
            state_json,
        }
    }

    fn state(spec: &InPlaceSpec, revision: &str, t: &Time) -> InPlaceUpdateState {
        InPlaceUpdateState {
            revision: revision.to_string(),
            update_timestamp: t.clone(),
            update_images: !spec.images.is_empty(),
            update_env_from_metadata: spec.update_env_from_metadata,
            update_resources: !spec.resources.is_empty(),
            ..Default::default()
        }
    }

    /// Whether `mutation` reads nothing from the pod (with a grace period the images wait, so the write is
    /// the same for every pod): the planner then builds it once and clones it per pod.
    pub(crate) fn same_for_every_pod(&self) -> bool {
        // Must follow the first arm of the match in `mutation`.
        self.grace_json.is_some() && self.state_json.is_some()
    }

    /// The pod write that starts an in-place update (Kruise `updatePodInPlace`, `inplace_update.go`):
    /// revision labels, lifecycle `Updating`, the state annotation, and either the new images now (grace 0)
    /// or the grace annotation (images untouched until the grace period ends).
    pub fn mutation(&self, pod: &Pod) -> PodMutation {
        let mut m = PodMutation::default();
        m.labels.insert(
            keys::CONTROLLER_REVISION_HASH_LABEL.into(),
            Some(self.revision_label.clone()),
        );
        m.labels.insert(
            keys::POD_TEMPLATE_HASH_LABEL.into(),
            Some(crate::revision::name::short_hash(&self.revision).into()),
        );
        m.labels.insert(
            keys::LIFECYCLE_STATE_LABEL.into(),
            Some(keys::lifecycle::UPDATING.into()),
        );
        m.annotations.insert(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.into(),
            Some(self.now_rfc3339.clone()),
        );
        let state_json = match (&self.grace_json, &self.state_json) {
            (Some(g), Some(st)) => {
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), Some(g.clone()));
                st.clone()
            }
            _ => {
                let mut state = Self::state(&self.spec, &self.revision, &self.now);
                apply_meta(&self.spec, &mut m);
                let changes = Changes {
                    images: &self.spec.images,
                    refs: &self.spec.ref_metadata,
                    resources: &self.spec.resources,
                };
                patch_spec_to_pod(pod, changes, &mut state, &self.now, &mut m);
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
                m.annotations
                    .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
                state.to_json()
            }
        };
        m.annotations
            .insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.into(), Some(state_json));
        m.annotations
            .insert(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD.into(), None);
        m
    }
}

/// Outcome of Kruise `finishGracePeriod` for one pod.
#[derive(Debug)]
pub(crate) enum Grace {
    /// Still waiting: look again after this many whole seconds (rounded up).
    Wait(std::time::Duration),
    /// Grace over: apply the images/metadata (and drop the annotation).
    Finish(PodMutation),
    /// The pod's revision no longer matches the grace spec: drop the annotation.
    Abandon(PodMutation),
    /// Unreadable annotations: nothing to do (explained).
    Invalid(String),
    /// A grace annotation without the state annotation (both are written together when an update starts):
    /// Kruise's finishGracePeriod fails on it in every round and the rollout stalls. Recovered here by
    /// finishing the grace at once from a fresh state (the mutation), with the reason for a Warning.
    Stale(PodMutation, String),
}

/// Kruise `finishGracePeriod` (`pkg/util/inplaceupdate/inplace_update.go`).
pub(crate) fn finish_grace(
    pod: &Pod,
    pod_revision: &str,
    grace: &str,
    state: Option<&str>,
    now: Timestamp,
) -> Grace {
    let spec: UpdateSpec = match serde_json::from_str(grace) {
        Ok(s) => s,
        Err(e) => {
            return Grace::Invalid(format!(
                "unreadable {}: {e}",
                keys::INPLACE_UPDATE_GRACE_ANNOTATION
            ));
        }
    };
    let stale = match state {
        None => None,
        Some(state) => {
            let Ok(state) = serde_json::from_str::<InPlaceUpdateState>(state) else {
                return Grace::Invalid(format!("unreadable {}", keys::INPLACE_UPDATE_STATE_ANNOTATION));
            };
            Some(state)
        }
    };
    let (mut state, stale) = match stale {
        Some(state) => (state, None),
        None => {
            // When the update started is unknown: its grace period counts as over now.
            let state = InPlaceUpdateState {
                revision: spec.revision.clone(),
                update_timestamp: time(now),
                last_container_statuses: None,
                // What the grace spec carries, so completion waits for all of it (as a fresh start would).
                update_env_from_metadata: spec.update_env_from_metadata,
                update_resources: !spec.container_resources.is_empty(),
                update_images: !spec.container_images.is_empty(),
                next_container_images: Default::default(),
                next_container_ref_metadata: Default::default(),
                next_container_resources: Default::default(),
                pre_check_before_next: None,
                container_batches_record: Vec::new(),
            };
            let why = format!(
                "pod has {} but {} not found: the grace period is finished now (Kruise would fail this pod's refresh in every round)",
                keys::INPLACE_UPDATE_GRACE_ANNOTATION,
                keys::INPLACE_UPDATE_STATE_ANNOTATION
            );
            (state, Some(why))
        }
    };
    let mut m = PodMutation::default();
    if !crate::revision::name::equal_to_revision(pod_revision, &spec.revision) {
        m.annotations
            .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
        m.annotations
            .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
        return Grace::Abandon(m);
    }
    let grace_ms = i64::from(spec.grace_seconds) * 1000;
    let span_ms = now.as_millisecond() - state.update_timestamp.0.as_millisecond();
    if span_ms < grace_ms && stale.is_none() {
        // Kruise roundupSeconds(grace − span).
        let left_ms = grace_ms - span_ms;
        let secs = (left_ms + 999) / 1000;
        return Grace::Wait(std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0)));
    }
    if let Some(p) = spec.meta_data_patch.as_deref().and_then(|p| B64.decode(p).ok()) {
        meta_from_patch(&String::from_utf8_lossy(&p), &mut m);
    }
    let changes = Changes {
        images: &spec.container_images,
        refs: &spec.container_ref_metadata,
        resources: &spec.container_resources,
    };
    patch_spec_to_pod(pod, changes, &mut state, &time(now), &mut m);
    m.annotations.insert(
        keys::INPLACE_UPDATE_STATE_ANNOTATION.into(),
        Some(state.to_json()),
    );
    m.annotations
        .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(), None);
    m.annotations
        .insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD.into(), None);
    match stale {
        Some(why) => Grace::Stale(m, why),
        None => Grace::Finish(m),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{burstable, pod_with, rtpl};
    use super::super::{calculate, containers_completed, parse_state};
    use super::*;
    use serde_json::json;

    #[test]
    fn start_resizes_now_and_records_state() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let t = StartTemplate::new(
            spec,
            "rev-2",
            "rev-2",
            0,
            Timestamp::from_second(1_800_000_000).unwrap(),
        );
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = t.mutation(&pod);
        assert!(m.container_images.is_empty());
        assert_eq!(
            m.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
        let st = parse_state(
            m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert!(st.update_resources && !st.update_images);
        assert_eq!(st.container_batches_record[0].containers, vec!["c1".to_string()]);
        assert_eq!(st.last_container_statuses, None, "no image, no imageID recorded");
        // Not complete until the status reports the new resources.
        let mut p = pod.clone();
        m.apply(&mut p);
        assert!(
            containers_completed(&p, &st)
                .unwrap_err()
                .contains("resources not changed")
        );
        let reported = p.spec.as_ref().unwrap().containers[0].resources.clone();
        p.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].resources = reported;
        assert_eq!(containers_completed(&p, &st), Ok(()));
    }

    #[test]
    fn grace_period_carries_the_resources() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo1", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t = StartTemplate::new(spec, "rev-2", "rev-2", 5, t0);
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = t.mutation(&pod);
        assert!(
            m.container_resources.is_empty(),
            "nothing resized during the grace period"
        );
        let grace = m.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION]
            .clone()
            .unwrap();
        assert!(
            grace.contains(r#""containerResources":{"c1":{"requests":{"cpu":"2"}}}"#),
            "{grace}"
        );
        let state = m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
            .clone()
            .unwrap();
        let later = Timestamp::from_second(1_800_000_006).unwrap();
        let Grace::Finish(f) = finish_grace(&pod, "rev-2", &grace, Some(&state), later) else {
            panic!("grace over")
        };
        assert_eq!(
            f.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
    }

    // Kruise TestRefresh's grace rows (`inplace_update_test.go`): grace 30 s started 10 s ago waits (the
    // remainder rounded up to whole seconds), grace 5 s started 10 s ago is applied.
    #[test]
    fn grace_waits_then_applies_as_kruise_refresh() {
        let spec = calculate(&rtpl("foo1", json!({})), &rtpl("foo2", json!({})), true).unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = StartTemplate::new(spec.clone(), "rev-2", "rev-2", 30, t0).mutation(&pod);
        let grace = m.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION]
            .clone()
            .unwrap();
        let state = m.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
            .clone()
            .unwrap();
        let at = |ms: i64| Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap();
        match finish_grace(&pod, "rev-2", &grace, Some(&state), at(10_500)) {
            Grace::Wait(d) => assert_eq!(d.as_secs(), 20, "19.5 s left, rounded up"),
            g => panic!("{g:?}"),
        }
        let m5 = StartTemplate::new(spec, "rev-2", "rev-2", 5, t0).mutation(&pod);
        let grace5 = m5.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION]
            .clone()
            .unwrap();
        let state5 = m5.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
            .clone()
            .unwrap();
        let Grace::Finish(f) = finish_grace(&pod, "rev-2", &grace5, Some(&state5), at(10_000)) else {
            panic!("grace over")
        };
        assert_eq!(f.container_images["c1"], "foo2");
        assert_eq!(
            f.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION],
            None,
            "grace removed"
        );
        // The template changed again (the pod's revision label moved on): the grace is dropped.
        assert!(matches!(
            finish_grace(&pod, "rev-3", &grace, Some(&state), at(10_500)),
            Grace::Abandon(_)
        ));
    }

    // A grace annotation without the state annotation (Kruise fails the pod's refresh every round and the
    // rollout stalls): finished at once from a fresh state that keeps what the grace spec carries.
    #[test]
    fn a_stale_grace_is_finished_with_everything_it_carries() {
        let spec = calculate(
            &rtpl("foo1", burstable("1", "1Gi")),
            &rtpl("foo2", burstable("2", "1Gi")),
            true,
        )
        .unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let pod = pod_with(json!([]), &[("c1", None)]);
        let m = StartTemplate::new(spec, "rev-2", "rev-2", 3600, t0).mutation(&pod);
        let grace = m.annotations[keys::INPLACE_UPDATE_GRACE_ANNOTATION]
            .clone()
            .unwrap();
        let Grace::Stale(f, why) = finish_grace(&pod, "rev-2", &grace, None, t0) else {
            panic!("stale")
        };
        assert!(why.contains("not found"), "{why}");
        assert_eq!(f.container_images["c1"], "foo2", "applied now, not after 3600 s");
        assert_eq!(
            f.container_resources["c1"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
        let st = parse_state(
            f.annotations[keys::INPLACE_UPDATE_STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert!(st.update_images && st.update_resources, "{st:?}");
        assert_eq!(st.revision, "rev-2");
    }
}
