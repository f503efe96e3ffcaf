//! One seed's scenario: a random CloneSet, the changes made to it, and the faults injected, all drawn from the
//! seed (same seed, same scenario): slow preStop hooks and node loss among them.

use std::time::Duration;

use insitu_api::CloneSet;
use insitu_sim::apiserver::faults::{Fault, Rule, Verb};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

/// Images the simulated kubelet runs fine; `BAD_PULL` never pulls, `CRASHY` exits a few seconds after start.
pub const GOOD_IMAGES: [&str; 4] = ["nginx:1.19.0", "nginx:1.20.0", "nginx:1.21.0", "nginx:1.22.0"];
pub const BAD_PULL: &str = "torture/no-such-image:1";
pub const CRASHY: &str = "torture/crashy:1";
/// Simulated nodes per seed.
pub const NODES: usize = 3;

/// A change to the CloneSet at some virtual time.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Image only: goes in place.
    Image(String),
    /// Env value: a pod's env is immutable, so pods are recreated.
    Env(String),
    Scale(i32),
    Partition(IntOrString),
    Paused(bool),
    /// Delete one pod through `scaleStrategy.podsToDelete` (the first pod by name at that time).
    PodsToDelete,
}

impl Step {
    /// The patch making this change (`PodsToDelete` names `pod`). Image and env by JSON patch: a merge patch
    /// would replace the whole containers list.
    pub fn patch(&self, pod: Option<&str>) -> kube::api::Patch<Value> {
        let json = |ops: Value| {
            kube::api::Patch::Json(
                serde_json::from_value::<json_patch::Patch>(ops).unwrap_or(json_patch::Patch(Vec::new())),
            )
        };
        match self {
            Step::Image(i) => {
                json(json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": i}]))
            }
            Step::Env(v) => json(
                json!([{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": v}]),
            ),
            Step::Scale(r) => kube::api::Patch::Merge(json!({"spec": {"replicas": r}})),
            Step::Partition(p) => {
                kube::api::Patch::Merge(json!({"spec": {"updateStrategy": {"partition": p}}}))
            }
            Step::Paused(p) => kube::api::Patch::Merge(json!({"spec": {"updateStrategy": {"paused": p}}})),
            Step::PodsToDelete => kube::api::Patch::Merge(
                json!({"spec": {"scaleStrategy": {"podsToDelete": [pod.unwrap_or_default()]}}}),
            ),
        }
    }

    /// Whether this change may make the controller delete pods.
    pub fn deletes(&self) -> bool {
        matches!(self, Step::Env(_) | Step::Scale(_) | Step::PodsToDelete)
    }
}

/// A node whose kubelet stops talking to the apiserver (crashed machine, partition).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLoss {
    /// Virtual seconds into the timeline.
    pub at: u64,
    /// Which simulated node (`sim-node-<index>`).
    pub node: usize,
    /// How long it stays lost: under the 50 s node-monitor grace period (nothing happens), past it (NotReady,
    /// pods NotReady), or past the 300 s default tolerations too (pods evicted, replaced elsewhere).
    pub secs: u64,
    /// Whether it comes back; if not, its Node is deleted at the end (as the cloud's node controller does for a
    /// vanished instance) and PodGC removes its pods.
    pub returns: bool,
}

/// The lease holder cut off from the apiserver while it keeps running (leader election seeds only).
#[derive(Clone, Debug, PartialEq)]
pub struct HolderPartition {
    pub at: u64,
    /// Shorter than the 10 s renew deadline: the holder keeps the lease; longer: the standby takes over.
    pub secs: u64,
    /// Requests hang (delivered if it heals within 30 s) rather than being refused.
    pub hang: bool,
}

/// Everything one seed does.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub seed: u64,
    pub cloneset: CloneSet,
    /// (virtual seconds after the CloneSet is ready, change), in time order.
    pub steps: Vec<(u64, Step)>,
    /// API faults active from the start until `faults_until`.
    pub rules: Vec<Rule>,
    /// Controller crashes (virtual seconds after start) and how long each stays down.
    pub crashes: Vec<(u64, u64)>,
    pub faults_until: u64,
    /// Two controller replicas electing a leader on a Lease; a crash kills the lease holder.
    pub leader_election: bool,
    /// When (virtual seconds into the timeline) objects the controller cannot decode appear.
    pub malformed_at: Option<u64>,
    pub node_loss: Option<NodeLoss>,
    pub partition: Option<HolderPartition>,
}

fn int_or_percent(rng: &mut ChaCha8Rng, max_int: i32) -> IntOrString {
    if rng.random_bool(0.5) {
        IntOrString::Int(rng.random_range(1..=max_int.max(1)))
    } else {
        IntOrString::String(format!("{}%", rng.random_range(10..=60)))
    }
}

fn rule(verbs: &[Verb], probability: f64, fault: Fault) -> Rule {
    Rule {
        verbs: verbs.to_vec(),
        resources: Vec::new(),
        probability,
        fault,
        budget: None,
    }
}

impl Scenario {
    pub fn generate(seed: u64, max_pods: i32) -> Scenario {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let replicas = rng.random_range(1..=max_pods.max(1));
        let max_unavailable = int_or_percent(&mut rng, (replicas / 2).max(1));
        let max_surge = if rng.random_bool(0.6) {
            None
        } else {
            Some(int_or_percent(&mut rng, 2))
        };
        let partition = rng
            .random_bool(0.3)
            .then(|| IntOrString::Int(rng.random_range(0..=replicas)));
        let grace = if rng.random_bool(0.5) {
            0
        } else {
            rng.random_range(1..=5)
        };
        let mut cloneset: CloneSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "torture", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "torture"}},
                "template": {"metadata": {"labels": {"app": "torture"}},
                    "spec": {"containers": [{"name": "app", "image": GOOD_IMAGES[0],
                        "env": [{"name": "V", "value": "0"}]}]}},
                "updateStrategy": {
                    "type": "InPlaceIfPossible",
                    "maxUnavailable": max_unavailable,
                    "maxSurge": max_surge,
                    "partition": partition,
                    "inPlaceUpdateStrategy": {"gracePeriodSeconds": grace},
                },
            }
        }))
        .expect("torture CloneSet");

        let mut steps = Vec::new();
        let mut t = 0u64;
        let mut image = 0usize;
        for _ in 0..rng.random_range(1..=4) {
            t += rng.random_range(1..=40);
            let step = match rng.random_range(0..100) {
                0..40 => {
                    image = (image + rng.random_range(1..GOOD_IMAGES.len())) % GOOD_IMAGES.len();
                    Step::Image(GOOD_IMAGES[image].into())
                }
                40..50 => Step::Env(format!("{}", rng.random_range(1..1000))),
                50..65 => Step::Scale(rng.random_range(1..=max_pods.max(1))),
                65..75 => Step::Partition(IntOrString::Int(rng.random_range(0..=replicas))),
                75..82 => Step::Paused(true),
                82..90 => Step::PodsToDelete,
                _ => Step::Image(if rng.random_bool(0.5) { BAD_PULL } else { CRASHY }.into()),
            };
            steps.push((t, step));
        }
        // The last word is a good template, unpaused, so the rollout can converge once faults stop.
        t += rng.random_range(5..=30);
        if steps.iter().any(|(_, s)| matches!(s, Step::Paused(true))) {
            steps.push((t, Step::Paused(false)));
        }
        if steps
            .iter()
            .rev()
            .find_map(|(_, s)| match s {
                Step::Image(i) => Some(i.as_str()),
                _ => None,
            })
            .is_some_and(|i| i == BAD_PULL || i == CRASHY)
        {
            // Rollback to a good image (in place, as Kruise does for an image-only difference).
            steps.push((t, Step::Image(GOOD_IMAGES[image].into())));
        }

        let mut rules = Vec::new();
        let all = [
            Verb::Get,
            Verb::List,
            Verb::Watch,
            Verb::Create,
            Verb::Update,
            Verb::Patch,
            Verb::Delete,
        ];
        let writes = [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];
        if rng.random_bool(0.5) {
            let ms = rng.random_range(5..=500);
            rules.push(rule(&all, 0.3, Fault::Latency(Duration::from_millis(ms))));
        }
        if rng.random_bool(0.5) {
            rules.push(rule(&writes, rng.random_range(0.01..0.15), Fault::Status(409)));
        }
        if rng.random_bool(0.4) {
            rules.push(rule(&all, rng.random_range(0.01..0.1), Fault::Status(429)));
        }
        if rng.random_bool(0.4) {
            rules.push(rule(&writes, rng.random_range(0.01..0.1), Fault::Status(500)));
        }
        if rng.random_bool(0.4) {
            rules.push(rule(
                &[Verb::List],
                rng.random_range(0.05..0.5),
                Fault::Status(500),
            ));
        }
        if rng.random_bool(0.4) {
            // Expired watches (410): the client relists.
            rules.push(rule(
                &[Verb::Watch],
                rng.random_range(0.05..0.5),
                Fault::Status(410),
            ));
        }
        let faults_until = t + 30;
        let mut crashes = Vec::new();
        for _ in 0..rng.random_range(0..=3) {
            crashes.push((rng.random_range(1..=faults_until), rng.random_range(0..=5)));
        }
        crashes.sort_unstable();
        // Slow preStop (drawn last, so the rest of a seed's scenario does not depend on it): every kill of the
        // container (deletion, recreate, in-place restart) waits for the hook, within a 30 s grace period.
        if rng.random_bool(0.4) {
            let secs = rng.random_range(1..=20);
            let patch = json!({"spec": {"template": {"spec": {
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "app", "image": GOOD_IMAGES[0], "env": [{"name": "V", "value": "0"}],
                    "lifecycle": {"preStop": {"exec": {"command": ["sleep", secs.to_string()]}}}}]}}}});
            let mut v = serde_json::to_value(&cloneset).expect("CloneSet serializes");
            json_patch::merge(&mut v, &patch);
            cloneset = serde_json::from_value(v).expect("torture CloneSet with preStop");
        }
        // Drawn after everything else, for the same reason.
        let leader_election = rng.random_bool(0.3);
        let malformed_at = rng.random_bool(0.3).then(|| rng.random_range(1..=faults_until));
        let node_loss = rng.random_bool(0.4).then(|| NodeLoss {
            at: rng.random_range(1..=faults_until),
            node: rng.random_range(0..NODES),
            secs: match rng.random_range(0..10) {
                0..3 => rng.random_range(5..=45),
                3..7 => rng.random_range(60..=250),
                _ => rng.random_range(360..=420),
            },
            returns: rng.random_bool(0.75),
        });
        let partition = (leader_election && rng.random_bool(0.5)).then(|| HolderPartition {
            at: rng.random_range(1..=faults_until),
            secs: rng.random_range(3..=60),
            hang: rng.random_bool(0.5),
        });
        Scenario {
            seed,
            cloneset,
            steps,
            rules,
            crashes,
            faults_until,
            leader_election,
            malformed_at,
            node_loss,
            partition,
        }
    }

    /// No change of this scenario lets the controller delete a pod, and nothing adds pods beyond replicas:
    /// then Kruise's in-place guarantees are strict (no pod deleted, unavailable ≤ maxUnavailable).
    pub fn in_place_only(&self) -> bool {
        let surge = self
            .cloneset
            .spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.max_surge.as_ref())
            .is_some_and(|s| !matches!(s, IntOrString::Int(0)));
        !surge
            && self
                .steps
                .iter()
                .all(|(_, s)| !s.deletes() && !matches!(s, Step::Image(i) if i == BAD_PULL || i == CRASHY))
    }

    /// A one-line description, for traces and failure reports.
    pub fn describe(&self) -> String {
        let spec = &self.cloneset.spec;
        let us = spec.update_strategy.clone().unwrap_or_default();
        format!(
            "replicas={} leaderElection={} malformedAt={:?} nodeLoss={:?} partition={:?} preStop={:?} maxUnavailable={:?} maxSurge={:?} partition={:?} grace={:?} steps={:?} faults={:?} crashes={:?} faultsUntil={}s",
            spec.replicas(),
            self.leader_election,
            self.malformed_at,
            self.node_loss,
            self.partition,
            spec.template
                .spec
                .as_ref()
                .and_then(|p| p.containers.first())
                .and_then(|c| c
                    .lifecycle
                    .as_ref()?
                    .pre_stop
                    .as_ref()?
                    .exec
                    .as_ref()?
                    .command
                    .clone()),
            us.max_unavailable,
            us.max_surge,
            us.partition,
            us.in_place_update_strategy.and_then(|s| s.grace_period_seconds),
            self.steps,
            self.rules
                .iter()
                .map(|r| format!("{:?}@{:.2}{:?}", r.fault, r.probability, r.verbs))
                .collect::<Vec<_>>(),
            self.crashes,
            self.faults_until
        )
    }
}
