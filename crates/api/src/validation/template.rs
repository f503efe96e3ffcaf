//! The part of Kubernetes' `ValidatePodTemplateSpec` that matters for a CloneSet template.
//!
//! Kruise runs the full core validation on the (already defaulted) template, with the volumeClaimTemplates added
//! as PVC volumes. insitu checks the subset below; fields that Kubernetes defaults (imagePullPolicy, protocol,
//! terminationMessagePolicy, dnsPolicy, httpGet path/scheme, ...) are only checked when set, because insitu does
//! not inject template defaults into the CloneSet. Messages are Kubernetes' own; where Kubernetes gives none
//! (a bare `Required value` or `Not found`), a short hint on how to fix it follows.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, HTTPGetAction, LifecycleHandler, PodSpec, PodTemplateSpec, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ErrorKind, FieldError, forbidden, format, invalid, quote, required};

/// Validates `template` (at `path`, e.g. `spec.template`), with `vct_names` mocked in as PVC volumes.
pub fn validate_template(template: &PodTemplateSpec, vct_names: &[&str], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    if let Some(labels) = labels {
        errs.extend(super::validate_labels(labels, &format!("{path}.labels")));
    }
    let empty = PodSpec::default();
    let spec = template.spec.as_ref().unwrap_or(&empty);
    validate_pod_spec(spec, vct_names, &format!("{path}.spec"), &mut errs);
    errs
}

fn validate_pod_spec(spec: &PodSpec, vct_names: &[&str], path: &str, errs: &mut Vec<FieldError>) {
    let volumes = validate_volumes(spec, vct_names, &format!("{path}.volumes"), errs);

    let cpath = format!("{path}.containers");
    if spec.containers.is_empty() {
        errs.push(required(&cpath, "add at least one container"));
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let p = format!("{cpath}[{i}]");
        validate_container(c, &volumes, &p, ContainerKind::Regular, errs);
        if !c.name.is_empty() && !names.insert(&c.name) {
            errs.push(duplicate(
                &format!("{p}.name"),
                &c.name,
                "container names must be unique within the pod",
            ));
        }
    }
    let ipath = format!("{path}.initContainers");
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let p = format!("{ipath}[{i}]");
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        let kind = if sidecar {
            ContainerKind::Sidecar
        } else {
            ContainerKind::Init
        };
        validate_container(c, &volumes, &p, kind, errs);
        if !c.name.is_empty() && !names.insert(&c.name) {
            errs.push(duplicate(
                &format!("{p}.name"),
                &c.name,
                "container names must be unique across containers and initContainers",
            ));
        }
    }
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(forbidden(
            &format!("{path}.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// Checks the volumes (template volumes, then one PVC volume per volumeClaimTemplate, as Kruise mocks them) and
/// returns the names of the valid ones, which volumeMounts may reference.
fn validate_volumes(
    spec: &PodSpec,
    vct_names: &[&str],
    path: &str,
    errs: &mut Vec<FieldError>,
) -> BTreeSet<String> {
    let mut valid = BTreeSet::new();
    let mut all: BTreeSet<String> = BTreeSet::new();
    let template_volumes = spec.volumes.iter().flatten().map(|v| {
        let sources: Vec<String> = match serde_json::to_value(v) {
            Ok(serde_json::Value::Object(m)) => {
                m.into_iter().map(|(k, _)| k).filter(|k| k != "name").collect()
            }
            _ => Vec::new(),
        };
        (v.name.as_str(), Some(sources))
    });
    let mocked = vct_names.iter().map(|n| (*n, None));
    for (i, (name, sources)) in template_volumes.chain(mocked).enumerate() {
        let p = format!("{path}[{i}]");
        let mut el = Vec::new();
        if let Some(sources) = sources {
            match sources.as_slice() {
                [] => el.push(required(&p, "must specify a volume type")),
                [_] => {}
                [_, rest @ ..] => {
                    for s in rest {
                        el.push(forbidden(
                            &format!("{p}.{s}"),
                            "may not specify more than 1 volume type",
                        ));
                    }
                }
            }
        }
        let np = format!("{p}.name");
        if name.is_empty() {
            el.push(required(&np, "give every volume a name"));
        } else {
            for m in format::dns1123_label(name) {
                el.push(invalid(&np, quote(name), m));
            }
        }
        if all.contains(name) {
            el.push(duplicate(
                &np,
                name,
                "volume names (including volumeClaimTemplates names) must be unique",
            ));
        }
        all.insert(name.to_string());
        if el.is_empty() {
            valid.insert(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    valid
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ContainerKind {
    Regular,
    Init,
    Sidecar,
}

fn validate_container(
    c: &Container,
    volumes: &BTreeSet<String>,
    path: &str,
    kind: ContainerKind,
    errs: &mut Vec<FieldError>,
) {
    let np = format!("{path}.name");
    if c.name.is_empty() {
        errs.push(required(&np, "give every container a name"));
    } else {
        for m in format::dns1123_label(&c.name) {
            errs.push(invalid(&np, quote(&c.name), m));
        }
    }
    if c.image.as_deref().is_none_or(str::is_empty) {
        errs.push(required(&format!("{path}.image"), "set the container image"));
    }
    if let Some(p) = c.termination_message_policy.as_deref()
        && !p.is_empty()
        && !matches!(p, "File" | "FallbackToLogsOnError")
    {
        errs.push(not_supported(
            &format!("{path}.terminationMessagePolicy"),
            p,
            &["File", "FallbackToLogsOnError"],
        ));
    }
    if let Some(p) = c.image_pull_policy.as_deref()
        && !p.is_empty()
        && !matches!(p, "Always" | "IfNotPresent" | "Never")
    {
        errs.push(not_supported(
            &format!("{path}.imagePullPolicy"),
            p,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    validate_ports(c, &format!("{path}.ports"), errs);
    validate_env(c.env.as_deref().unwrap_or_default(), &format!("{path}.env"), errs);
    validate_mounts(c, volumes, &format!("{path}.volumeMounts"), errs);

    let probes = [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ];
    if kind == ContainerKind::Init {
        // Kubernetes: regular init containers run to completion, so they may not have probes or hooks.
        let set = [
            ("lifecycle", c.lifecycle.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (name, present) in set {
            if present {
                errs.push(forbidden(
                    &format!("{path}.{name}"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
        }
        return;
    }
    for (name, probe) in probes {
        if let Some(probe) = probe {
            validate_probe(probe, name, &format!("{path}.{name}"), errs);
        }
    }
    if let Some(lc) = &c.lifecycle {
        for (name, h) in [("postStart", &lc.post_start), ("preStop", &lc.pre_stop)] {
            if let Some(h) = h {
                validate_lifecycle_handler(h, &format!("{path}.lifecycle.{name}"), errs);
            }
        }
    }
}

fn validate_ports(c: &Container, path: &str, errs: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = format::port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(invalid(&format!("{p}.name"), quote(name), m));
                }
            } else if !names.insert(name) {
                errs.push(duplicate(
                    &format!("{p}.name"),
                    name,
                    "port names must be unique within the container",
                ));
            }
        }
        if port.container_port == 0 {
            errs.push(required(
                &format!("{p}.containerPort"),
                "set the port number the container listens on (1-65535)",
            ));
        } else {
            for m in format::port_num(i64::from(port.container_port)) {
                errs.push(invalid(&format!("{p}.containerPort"), port.container_port, m));
            }
        }
        if let Some(hp) = port.host_port.filter(|hp| *hp != 0) {
            for m in format::port_num(i64::from(hp)) {
                errs.push(invalid(&format!("{p}.hostPort"), hp, m));
            }
        }
        if let Some(proto) = port.protocol.as_deref()
            && !proto.is_empty()
            && !matches!(proto, "SCTP" | "TCP" | "UDP")
        {
            errs.push(not_supported(
                &format!("{p}.protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
}

fn validate_env(env: &[EnvVar], path: &str, errs: &mut Vec<FieldError>) {
    for (i, ev) in env.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if ev.name.is_empty() {
            errs.push(required(
                &format!("{p}.name"),
                "give every environment variable a name",
            ));
        } else {
            for m in format::env_var_name(&ev.name) {
                errs.push(invalid(&format!("{p}.name"), quote(&ev.name), m));
            }
        }
        let Some(from) = &ev.value_from else { continue };
        let sources = match serde_json::to_value(from) {
            Ok(serde_json::Value::Object(m)) => m.len(),
            _ => 0,
        };
        let vp = format!("{p}.valueFrom");
        if sources == 0 {
            errs.push(invalid(
                &vp,
                "\"\"",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if ev.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(invalid(
                &vp,
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(invalid(
                &vp,
                "\"\"",
                "may not have more than one field specified at a time",
            ));
        }
    }
}

fn validate_mounts(c: &Container, volumes: &BTreeSet<String>, path: &str, errs: &mut Vec<FieldError>) {
    let mut mount_points = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let p = format!("{path}[{i}]");
        if m.name.is_empty() {
            errs.push(required(&format!("{p}.name"), "name the volume to mount"));
        } else if !volumes.contains(&m.name) {
            errs.push(FieldError {
                field: format!("{p}.name"),
                kind: ErrorKind::NotFound(quote(&m.name)),
                detail: format!(
                    "add a volume named {0} to spec.template.spec.volumes or a volumeClaimTemplate named {0}",
                    quote(&m.name)
                ),
            });
        }
        if m.mount_path.is_empty() {
            errs.push(required(
                &format!("{p}.mountPath"),
                "set where the volume is mounted",
            ));
        } else if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(invalid(
                &format!("{p}.mountPath"),
                quote(&m.mount_path),
                "must be unique",
            ));
        }
    }
}

/// One handler of a probe or lifecycle hook: its JSON name and, for the port-bearing ones, what to check.
enum Handler<'a> {
    Exec(Option<&'a [String]>),
    HttpGet(&'a HTTPGetAction),
    TcpSocket(&'a TCPSocketAction),
    Grpc(i32),
    Sleep,
}

impl Handler<'_> {
    fn name(&self) -> &'static str {
        match self {
            Handler::Exec(_) => "exec",
            Handler::HttpGet(_) => "httpGet",
            Handler::TcpSocket(_) => "tcpSocket",
            Handler::Grpc(_) => "grpc",
            Handler::Sleep => "sleep",
        }
    }
}

/// Kubernetes `validateHandler`: exactly one handler, each valid.
fn validate_handlers(handlers: Vec<Handler<'_>>, path: &str, errs: &mut Vec<FieldError>) {
    if handlers.is_empty() {
        errs.push(required(path, "must specify a handler type"));
        return;
    }
    for (i, h) in handlers.iter().enumerate() {
        let hp = format!("{path}.{}", h.name());
        if i > 0 {
            errs.push(forbidden(&hp, "may not specify more than 1 handler type"));
            continue;
        }
        match h {
            Handler::Exec(cmd) => {
                if cmd.is_none_or(<[String]>::is_empty) {
                    errs.push(required(&format!("{hp}.command"), "give the command to run"));
                }
            }
            Handler::HttpGet(a) => {
                port_num_or_name(&a.port, &format!("{hp}.port"), errs);
                if let Some(s) = a.scheme.as_deref()
                    && !s.is_empty()
                    && !matches!(s, "HTTP" | "HTTPS")
                {
                    errs.push(not_supported(&format!("{hp}.scheme"), s, &["HTTP", "HTTPS"]));
                }
            }
            Handler::TcpSocket(a) => port_num_or_name(&a.port, &format!("{hp}.port"), errs),
            Handler::Grpc(port) => {
                for m in format::port_num(i64::from(*port)) {
                    errs.push(invalid(&format!("{hp}.port"), port, m));
                }
            }
            Handler::Sleep => {}
        }
    }
}

fn port_num_or_name(port: &IntOrString, path: &str, errs: &mut Vec<FieldError>) {
    match port {
        IntOrString::Int(n) => {
            for m in format::port_num(i64::from(*n)) {
                errs.push(invalid(path, n, m));
            }
        }
        IntOrString::String(s) => {
            for m in format::port_name(s) {
                errs.push(invalid(path, quote(s), m));
            }
        }
    }
}

fn validate_probe(probe: &Probe, kind: &str, path: &str, errs: &mut Vec<FieldError>) {
    let mut handlers = Vec::new();
    if let Some(e) = &probe.exec {
        handlers.push(Handler::Exec(e.command.as_deref()));
    }
    if let Some(h) = &probe.http_get {
        handlers.push(Handler::HttpGet(h));
    }
    if let Some(t) = &probe.tcp_socket {
        handlers.push(Handler::TcpSocket(t));
    }
    if let Some(g) = &probe.grpc {
        handlers.push(Handler::Grpc(g.port));
    }
    validate_handlers(handlers, path, errs);
    let numbers = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (name, v) in numbers {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(invalid(
                &format!("{path}.{name}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if kind != "readinessProbe"
        && let Some(st) = probe.success_threshold.filter(|st| *st != 1)
    {
        errs.push(invalid(&format!("{path}.successThreshold"), st, "must be 1"));
    }
    if let Some(g) = probe.termination_grace_period_seconds {
        if kind == "readinessProbe" {
            errs.push(invalid(
                &format!("{path}.terminationGracePeriodSeconds"),
                g,
                "must not be set for readinessProbes",
            ));
        } else if g <= 0 {
            errs.push(invalid(
                &format!("{path}.terminationGracePeriodSeconds"),
                g,
                "must be greater than 0",
            ));
        }
    }
}

fn validate_lifecycle_handler(h: &LifecycleHandler, path: &str, errs: &mut Vec<FieldError>) {
    let mut handlers = Vec::new();
    if let Some(e) = &h.exec {
        handlers.push(Handler::Exec(e.command.as_deref()));
    }
    if let Some(a) = &h.http_get {
        handlers.push(Handler::HttpGet(a));
    }
    if let Some(a) = &h.tcp_socket {
        handlers.push(Handler::TcpSocket(a));
    }
    if h.sleep.is_some() {
        handlers.push(Handler::Sleep);
    }
    validate_handlers(handlers, path, errs);
}

fn duplicate(field: &str, value: &str, hint: &str) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::Duplicate(quote(value)),
        detail: hint.into(),
    }
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
    FieldError {
        field: field.into(),
        kind: ErrorKind::NotSupported(supported.iter().map(|s| s.to_string()).collect()),
        detail: quote(value),
    }
}

/// Names of the volumeClaimTemplates (the PVC volumes Kruise mocks into the template).
pub fn vct_names(vcts: &[k8s_openapi::api::core::v1::PersistentVolumeClaim]) -> Vec<&str> {
    vcts.iter()
        .map(|p| p.metadata.name.as_deref().unwrap_or_default())
        .collect()
}

/// Template labels as a map (empty when unset).
pub fn template_labels(t: &PodTemplateSpec) -> BTreeMap<String, String> {
    t.metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}
