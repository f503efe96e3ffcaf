//! Pod status generation as the kubelet does it (`pkg/kubelet/status/generate.go`, `getPhase`): phase, conditions.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodIP, PodStatus};

use super::cache::{KeptContainer, KeptSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Conditions the kubelet owns; every other condition on the pod is preserved untouched.
pub const KUBELET_OWNED: [&str; 7] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
    "PodResizeInProgress",
    "PodResizePending",
];

/// The kubelet's runtime facts about one pod, from which `status` is generated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodView {
    /// Node IP.
    pub host_ip: String,
    /// Pod IP (unique while the pod lives).
    pub pod_ip: String,
    /// When the kubelet accepted the pod.
    pub start_time: Timestamp,
    /// Whether the sandbox exists (`PodReadyToStartContainers`).
    pub sandbox_ready: bool,
    /// Init container statuses in spec order.
    pub init_statuses: Vec<ContainerStatus>,
    /// Container statuses in spec order.
    pub statuses: Vec<ContainerStatus>,
    /// The pod is terminal (all containers stopped for good).
    pub terminal: bool,
    /// The `apps.kruise.io/runtime-containers-meta` annotation the node agent (kruise-daemon's role)
    /// reports with the status, if it reports one for this pod.
    pub runtime_meta: Option<String>,
    /// `PodResizePending` / `PodResizeInProgress`, while a resize is pending or being applied.
    pub resize_conditions: Vec<PodCondition>,
}

/// Truncates to whole seconds, the precision of `metav1.Time` on the wire.
pub fn to_time(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

fn is_sidecar(c: &KeptContainer) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// The pod phase from container statuses (kubelet `getPhase`).
pub(crate) fn pod_phase(spec: &KeptSpec, view: &PodView) -> &'static str {
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let find = |list: &'_ [ContainerStatus], name: &str| list.iter().position(|s| s.name == name);
    let mut pending_init = 0;
    let mut failed_init = 0;
    for c in spec.init_containers.iter() {
        let Some(i) = find(&view.init_statuses, &c.name) else {
            pending_init += 1;
            continue;
        };
        let s = &view.init_statuses[i];
        let state = s.state.clone().unwrap_or_default();
        if is_sidecar(c) {
            if s.started != Some(true) {
                pending_init += 1;
            }
            continue;
        }
        if state.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = &state.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if state.waiting.is_some() {
            match s.last_state.as_ref().and_then(|l| l.terminated.as_ref()) {
                Some(t) if t.exit_code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in &spec.containers {
        let Some(i) = find(&view.statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let s = &view.statuses[i];
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = &state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if s.last_state
                .as_ref()
                .and_then(|l| l.terminated.as_ref())
                .is_some()
            {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if view.terminal && running == 0 && unknown == 0 {
        return if stopped == succeeded {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    if pending_init > 0 || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        return match policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        };
    }
    "Pending"
}

/// A kubelet-owned condition before transition times are filled in.
struct Cond {
    type_: &'static str,
    status: &'static str,
    reason: Option<&'static str>,
    message: Option<String>,
}

impl Cond {
    fn new(type_: &'static str, ok: bool) -> Self {
        Self {
            type_,
            status: if ok { "True" } else { "False" },
            reason: None,
            message: None,
        }
    }
    fn why(mut self, reason: &'static str, message: Option<String>) -> Self {
        self.reason = Some(reason);
        self.message = message;
        self
    }
}

fn terminal_reason(phase: &str) -> &'static str {
    if phase == "Succeeded" {
        "PodCompleted"
    } else {
        "PodFailed"
    }
}

fn containers_ready(spec: &KeptSpec, view: &PodView, phase: &str) -> Cond {
    if phase == "Succeeded" || phase == "Failed" {
        return Cond::new("ContainersReady", false).why(terminal_reason(phase), None);
    }
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    let sidecars = spec.init_containers.iter().filter(|c| is_sidecar(c));
    for (c, list) in sidecars
        .map(|c| (c, &view.init_statuses))
        .chain(spec.containers.iter().map(|c| (c, &view.statuses)))
    {
        match list.iter().find(|s| s.name == c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if unknown.is_empty() && unready.is_empty() {
        return Cond::new("ContainersReady", true);
    }
    let mut msgs = Vec::new();
    if !unknown.is_empty() {
        msgs.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !unready.is_empty() {
        msgs.push(format!("containers with unready status: {}", go_list(&unready)));
    }
    Cond::new("ContainersReady", false).why("ContainersNotReady", Some(msgs.join(", ")))
}

fn initialized(spec: &KeptSpec, view: &PodView, phase: &str) -> Cond {
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in spec.init_containers.iter() {
        match view.init_statuses.iter().find(|s| s.name == c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) => {
                let done = if is_sidecar(c) {
                    s.started == Some(true)
                } else {
                    s.state
                        .as_ref()
                        .and_then(|st| st.terminated.as_ref())
                        .is_some_and(|t| t.exit_code == 0)
                };
                if !done {
                    incomplete.push(c.name.as_str());
                }
            }
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return Cond::new("Initialized", true).why("PodCompleted", None);
    }
    if unknown.is_empty() && incomplete.is_empty() {
        return Cond::new("Initialized", true);
    }
    let mut msgs = Vec::new();
    if !unknown.is_empty() {
        msgs.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !incomplete.is_empty() {
        msgs.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    Cond::new("Initialized", false).why("ContainersNotInitialized", Some(msgs.join(", ")))
}

fn ready(spec: &KeptSpec, conditions: &[PodCondition], cr: &Cond) -> Cond {
    if cr.status != "True" {
        let mut c = Cond::new("Ready", false);
        c.reason = cr.reason;
        c.message = cr.message.clone();
        return c;
    }
    let mut msgs = Vec::new();
    for t in &spec.readiness_gates {
        match conditions.iter().find(|c| &c.type_ == t) {
            None => msgs.push(format!(
                "corresponding condition of pod readiness gate \"{t}\" does not exist."
            )),
            Some(c) if c.status != "True" => msgs.push(format!(
                "the status of pod readiness gate \"{t}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if msgs.is_empty() {
        Cond::new("Ready", true)
    } else {
        Cond::new("Ready", false).why("ReadinessGatesNotReady", Some(msgs.join(", ")))
    }
}

/// Generates the pod's full status from the kubelet's view, preserving every field and condition the kubelet does
/// not own, and keeping `lastTransitionTime` of conditions whose status did not change (so the result is stable:
/// the same inputs produce the same status, and an unchanged pod needs no write).
pub fn build_status(pod: &Pod, view: &PodView, now: Timestamp) -> PodStatus {
    build_status_kept(pod, &KeptSpec::of(pod.spec.as_ref()), view, now)
}

/// `build_status` for a cached pod, whose spec is kept apart as the little that status building reads.
pub(crate) fn build_status_kept(pod: &Pod, spec: &KeptSpec, view: &PodView, now: Timestamp) -> PodStatus {
    let old = pod.status.as_ref();
    let old_conditions: &[PodCondition] = old.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let generation = pod.metadata.generation;
    // A terminal phase is final.
    let phase = match old.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => "Succeeded",
        Some("Failed") => "Failed",
        _ => pod_phase(spec, view),
    };

    let mut conditions: Vec<PodCondition> = old_conditions
        .iter()
        .filter(|c| !KUBELET_OWNED.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    let cr = containers_ready(spec, view, phase);
    let rd = if phase == "Succeeded" || phase == "Failed" {
        Cond::new("Ready", false).why(terminal_reason(phase), None)
    } else {
        ready(spec, old_conditions, &cr)
    };
    let owned = [
        Cond::new(
            "PodReadyToStartContainers",
            view.sandbox_ready && phase != "Succeeded" && phase != "Failed",
        ),
        initialized(spec, view, phase),
        rd,
        cr,
        Cond::new("PodScheduled", true),
    ];
    for c in owned {
        let prev = old_conditions.iter().find(|o| o.type_ == c.type_);
        let last_transition_time = match prev {
            Some(p) if p.status == c.status && p.last_transition_time.is_some() => {
                p.last_transition_time.clone()
            }
            _ => Some(to_time(now)),
        };
        conditions.push(PodCondition {
            type_: c.type_.to_string(),
            status: c.status.to_string(),
            reason: c.reason.map(str::to_string),
            message: c.message,
            last_transition_time,
            last_probe_time: None,
            observed_generation: generation,
        });
    }

    conditions.extend(view.resize_conditions.iter().cloned());

    let mut status = old.map(kept).unwrap_or_default();
    status.phase = Some(phase.to_string());
    status.conditions = Some(conditions);
    status.observed_generation = generation;
    status.host_ip = Some(view.host_ip.clone());
    status.host_ips = Some(vec![k8s_openapi::api::core::v1::HostIP {
        ip: view.host_ip.clone(),
    }]);
    if !view.pod_ip.is_empty() {
        status.pod_ip = Some(view.pod_ip.clone());
        status.pod_ips = Some(vec![PodIP {
            ip: view.pod_ip.clone(),
        }]);
    }
    status.start_time = Some(to_time(view.start_time));
    status.container_statuses = Some(view.statuses.clone());
    status.init_container_statuses = if !spec.init_containers.is_empty() {
        Some(view.init_statuses.clone())
    } else {
        None
    };
    status
}

/// The fields of `old` the kubelet does not generate (the rest are rebuilt, so not copied).
fn kept(old: &PodStatus) -> PodStatus {
    // Exhaustive on purpose: a field added to `PodStatus` must be sorted into kept or generated here.
    let PodStatus {
        allocated_resources,
        conditions: _,
        container_statuses: _,
        ephemeral_container_statuses,
        extended_resource_claim_status,
        host_ip: _,
        host_ips: _,
        init_container_statuses: _,
        message,
        nominated_node_name,
        observed_generation: _,
        phase: _,
        pod_ip,
        pod_ips,
        qos_class,
        reason,
        resize,
        resource_claim_statuses,
        resources,
        start_time: _,
    } = old;
    PodStatus {
        allocated_resources: allocated_resources.clone(),
        ephemeral_container_statuses: ephemeral_container_statuses.clone(),
        extended_resource_claim_status: extended_resource_claim_status.clone(),
        message: message.clone(),
        nominated_node_name: nominated_node_name.clone(),
        pod_ip: pod_ip.clone(),
        pod_ips: pod_ips.clone(),
        qos_class: qos_class.clone(),
        reason: reason.clone(),
        resize: resize.clone(),
        resource_claim_statuses: resource_claim_statuses.clone(),
        resources: resources.clone(),
        ..PodStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, PodReadinessGate, PodSpec,
    };

    fn pod(gates: &[&str], conds: Vec<PodCondition>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "nginx".into(),
                    image: Some("nginx:1.19.0".into()),
                    ..Default::default()
                }],
                readiness_gates: Some(
                    gates
                        .iter()
                        .map(|g| PodReadinessGate {
                            condition_type: g.to_string(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(PodStatus {
                conditions: Some(conds),
                qos_class: Some("BestEffort".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn view(ready: bool) -> PodView {
        PodView {
            host_ip: "172.16.0.2".into(),
            pod_ip: "10.0.0.2".into(),
            start_time: Timestamp::UNIX_EPOCH,
            sandbox_ready: true,
            init_statuses: vec![],
            statuses: vec![ContainerStatus {
                name: "nginx".into(),
                ready,
                started: Some(true),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            terminal: false,
            runtime_meta: None,
            resize_conditions: vec![],
        }
    }

    fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
        s.conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == t))
            .expect("condition")
    }

    #[test]
    fn unready_container_message() {
        let s = build_status(&pod(&[], vec![]), &view(false), Timestamp::UNIX_EPOCH);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let r = cond(&s, "Ready");
        assert_eq!(
            (r.status.as_str(), r.reason.as_deref()),
            ("False", Some("ContainersNotReady"))
        );
        assert_eq!(
            r.message.as_deref(),
            Some("containers with unready status: [nginx]")
        );
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    }

    #[test]
    fn readiness_gates() {
        let gate = "InPlaceUpdateReady";
        let s = build_status(&pod(&[gate], vec![]), &view(true), Timestamp::UNIX_EPOCH);
        let r = cond(&s, "Ready");
        assert_eq!(r.reason.as_deref(), Some("ReadinessGatesNotReady"));
        assert_eq!(
            r.message.as_deref(),
            Some("corresponding condition of pod readiness gate \"InPlaceUpdateReady\" does not exist.")
        );
        assert_eq!(cond(&s, "ContainersReady").status, "True");
        let g = PodCondition {
            type_: gate.into(),
            status: "False".into(),
            ..Default::default()
        };
        let s = build_status(&pod(&[gate], vec![g.clone()]), &view(true), Timestamp::UNIX_EPOCH);
        assert_eq!(
            cond(&s, "Ready").message.as_deref(),
            Some("the status of pod readiness gate \"InPlaceUpdateReady\" is not \"True\", but False")
        );
        assert_eq!(cond(&s, gate), &g, "foreign condition untouched");
        let g = PodCondition {
            status: "True".into(),
            ..g
        };
        let s = build_status(&pod(&[gate], vec![g]), &view(true), Timestamp::UNIX_EPOCH);
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(
            s.conditions.as_ref().map(|c| c[0].type_.as_str()),
            Some(gate),
            "foreign conditions first"
        );
    }

    #[test]
    fn stable_and_keeps_transition_times() {
        let t0 = Timestamp::from_second(1000).unwrap_or(Timestamp::UNIX_EPOCH);
        let t1 = Timestamp::from_second(2000).unwrap_or(Timestamp::UNIX_EPOCH);
        let mut p = pod(&[], vec![]);
        let s = build_status(&p, &view(false), t0);
        p.status = Some(s.clone());
        let again = build_status(&p, &view(false), t1);
        assert_eq!(s, again);
        let later = build_status(&p, &view(true), t1);
        assert_eq!(cond(&later, "Ready").last_transition_time, Some(to_time(t1)));
        assert_eq!(
            cond(&later, "PodScheduled").last_transition_time,
            Some(to_time(t0))
        );
    }

    #[test]
    fn terminal_phase() {
        let mut v = view(false);
        v.terminal = true;
        v.statuses[0].state = Some(ContainerState {
            terminated: Some(k8s_openapi::api::core::v1::ContainerStateTerminated {
                exit_code: 0,
                ..Default::default()
            }),
            ..Default::default()
        });
        let s = build_status(&pod(&[], vec![]), &v, Timestamp::UNIX_EPOCH);
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
    }
}
