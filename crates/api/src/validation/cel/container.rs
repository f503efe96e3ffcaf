//! CEL rules on a container of the template: names, images, ports, probes and lifecycle handlers.

use super::{DNS_LABEL, Rule, dns_label_msg, r};

/// `has(self.a) ? 1 : 0 + ...` for the handler fields of a probe or lifecycle hook.
fn handler_count(fields: &[&str]) -> String {
    fields
        .iter()
        .map(|f| format!("(has(self.{f}) ? 1 : 0)"))
        .collect::<Vec<_>>()
        .join(" + ")
}

pub(super) fn container_rules(base: &str, init: bool) -> Vec<Rule> {
    // `base` is `template.spec.containers[]` or `template.spec.initContainers[]`.
    let sub = |s: &str| format!("{base}.{s}");
    let mut out = vec![
        r(
            base,
            "has(self.name) && size(self.name) > 0",
            "give every container a name",
        )
        .at(".name")
        .required(),
        r(
            base,
            format!("!has(self.name) || size(self.name) == 0 || self.name.matches({DNS_LABEL})"),
            dns_label_msg(),
        )
        .at(".name"),
        r(
            base,
            "has(self.image) && size(self.image) > 0",
            "set the container image",
        )
        .at(".image")
        .required(),
        r(
            sub("ports[]"),
            "self.containerPort != 0",
            "set the port number the container listens on (1-65535)",
        )
        .at(".containerPort")
        .required(),
        r(
            sub("ports[]"),
            "self.containerPort == 0 || (self.containerPort >= 1 && self.containerPort <= 65535)",
            "must be between 1 and 65535, inclusive",
        )
        .at(".containerPort"),
        r(
            sub("ports[]"),
            "!has(self.hostPort) || self.hostPort == 0 || (self.hostPort >= 1 && self.hostPort <= 65535)",
            "must be between 1 and 65535, inclusive",
        )
        .at(".hostPort"),
        r(
            sub("ports[]"),
            "!has(self.protocol) || self.protocol in ['', 'SCTP', 'TCP', 'UDP']",
            "supported values: \"SCTP\", \"TCP\", \"UDP\"",
        )
        .at(".protocol"),
    ];
    let probe_handlers = handler_count(&["exec", "httpGet", "tcpSocket", "grpc"]);
    let hook_handlers = handler_count(&["exec", "httpGet", "tcpSocket", "sleep"]);
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        out.push(
            r(
                sub(probe),
                format!("{probe_handlers} >= 1"),
                "must specify a handler type",
            )
            .required(),
        );
        out.push(
            r(
                sub(probe),
                format!("{probe_handlers} <= 1"),
                "may not specify more than 1 handler type",
            )
            .forbidden(),
        );
    }
    for hook in ["lifecycle.postStart", "lifecycle.preStop"] {
        out.push(
            r(
                sub(hook),
                format!("{hook_handlers} >= 1"),
                "must specify a handler type",
            )
            .required(),
        );
        out.push(
            r(
                sub(hook),
                format!("{hook_handlers} <= 1"),
                "may not specify more than 1 handler type",
            )
            .forbidden(),
        );
    }
    if init {
        for field in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
            out.push(
                r(
                    base,
                    format!(
                        "(has(self.restartPolicy) && self.restartPolicy == 'Always') || !has(self.{field})"
                    ),
                    "may not be set for init containers without restartPolicy=Always",
                )
                .at(format!(".{field}"))
                .forbidden(),
            );
        }
    }
    out
}
