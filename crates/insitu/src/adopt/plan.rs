//! What `insitu adopt` changes, computed from what the cluster holds: pure functions (no client, no clock).
//!
//! Facts reproduced (Kruise at 07169cf, `../shared/third_party/openkruise/`):
//! - kruise-manager elects its leader on the Lease `kruise-system/kruise-manager` (`--leader-election-id`,
//!   `--leader-election-namespace`, 15 s lease) and is deployed as `kruise-system/kruise-controller-manager`
//!   (`config/default` prefixes `kruise-` to `config/manager`'s `controller-manager`).
//! - Its webhooks live in `kruise-mutating-webhook-configuration` and `kruise-validating-webhook-configuration`
//!   (`pkg/webhook/util/configuration`); the CloneSet entries are `mcloneset.kb.io` and `vcloneset.kb.io`
//!   (`config/webhook/manifests.yaml`), all with `failurePolicy: Fail`. Kruise's webhook controller keeps the
//!   original entries in the configuration's `template` annotation and rebuilds `webhooks` from it, so an entry
//!   is removed from both.
//! - `mpod.kb.io` (pods CREATE) and `vpod.kb.io` (pods UPDATE/DELETE) also fail closed: with kruise-manager
//!   stopped nobody answers them and every pod write in the namespaces they select is refused.
//! - A storage migration is what kube-storage-version-migrator does: every object read and written back
//!   unchanged (now encoded in the storage version), then `status.storedVersions` set to the storage version.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

pub const KRUISE_NAMESPACE: &str = "kruise-system";
pub const KRUISE_LEASE: &str = "kruise-manager";
pub const KRUISE_DEPLOYMENT: &str = "kruise-controller-manager";
pub const KRUISE_MUTATING: &str = "kruise-mutating-webhook-configuration";
pub const KRUISE_VALIDATING: &str = "kruise-validating-webhook-configuration";
/// The annotation Kruise's webhook controller rebuilds `webhooks` from.
pub const TEMPLATE_ANNOTATION: &str = "template";
/// The CRD's storage version (Kruise master's and insitu's).
pub const STORAGE_VERSION: &str = "v1beta1";

/// kruise-manager's leader Lease, as adopt sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseState {
    Absent,
    /// Released (no holder) or not renewed for longer than its duration.
    Free {
        holder: Option<String>,
        expired_for: Option<Duration>,
    },
    /// Renewed within its duration: kruise-manager (or one of its replicas) is leading.
    Held {
        holder: String,
        expires_in: Duration,
    },
}

/// The Lease's state at `now`: held when it names a holder whose last renewal is younger than the lease
/// duration (client-go's rule; kruise-manager releases nothing on exit unless `ReleaseOnCancel`, so a stopped
/// one's Lease is held for up to 15 s more).
pub fn lease_state(spec: Option<&LeaseSpec>, now: Timestamp) -> LeaseState {
    let Some(spec) = spec else {
        return LeaseState::Absent;
    };
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let Some(who) = holder.clone() else {
        return LeaseState::Free {
            holder: None,
            expired_for: None,
        };
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(0));
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    let Some(renewed) = renewed else {
        // A holder but no time: treat as held for a whole duration from now (cannot tell).
        return LeaseState::Held {
            holder: who,
            expires_in: Duration::from_secs(duration as u64),
        };
    };
    let age_ms = now.as_millisecond() - renewed.as_millisecond();
    let left_ms = duration * 1000 - age_ms;
    if left_ms > 0 {
        LeaseState::Held {
            holder: who,
            expires_in: Duration::from_millis(left_ms as u64),
        }
    } else {
        LeaseState::Free {
            holder,
            expired_for: Some(Duration::from_millis((-left_ms) as u64)),
        }
    }
}

/// kruise-manager's Deployment: `Some(n)` replicas wanted or still present (spec or status), `None` if absent.
pub fn deployment_replicas(deployment: Option<&Value>) -> Option<i64> {
    let d = deployment?;
    let spec = d.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let status = d.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0);
    Some(spec.max(status))
}

/// Why adopt must not proceed while Kruise runs, with what to do; `None` when kruise-manager is stopped.
pub fn kruise_running(lease: &LeaseState, deployment: Option<i64>) -> Option<String> {
    let stop = format!(
        "stop it first (in a cluster: kubectl -n {KRUISE_NAMESPACE} scale deployment {KRUISE_DEPLOYMENT} --replicas=0), \
         then run insitu adopt again"
    );
    if let LeaseState::Held { holder, expires_in } = lease {
        return Some(format!(
            "kruise-manager is running: {holder} holds the Lease {KRUISE_NAMESPACE}/{KRUISE_LEASE} (renewed within its \
             duration; free in {:.0} s at the earliest if it stopped just now): two controllers would fight over the \
             same pods; {stop}",
            expires_in.as_secs_f64().ceil()
        ));
    }
    match deployment {
        Some(n) if n > 0 => Some(format!(
            "kruise-manager is running: Deployment {KRUISE_NAMESPACE}/{KRUISE_DEPLOYMENT} has {n} replica(s); {stop}"
        )),
        _ => None,
    }
}

/// One admission webhook entry, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `pods CREATE`, `clonesets CREATE,UPDATE`, … (one per rule).
    pub intercepts: Vec<String>,
    pub fails_closed: bool,
    pub cloneset: bool,
    /// A fail-closed entry on pod writes: once its server is gone, insitu's pod creates/updates/deletes fail.
    pub blocks_pods: bool,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

/// Summarises one entry of `webhooks`.
pub fn entry(wh: &Value) -> Entry {
    let name = wh
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // admissionregistration/v1 defaults failurePolicy to Fail.
    let fails_closed = wh.get("failurePolicy").and_then(Value::as_str).unwrap_or("Fail") == "Fail";
    let (mut intercepts, mut cloneset, mut pods) = (Vec::new(), false, false);
    for rule in wh.get("rules").and_then(Value::as_array).into_iter().flatten() {
        let groups = strings(rule.get("apiGroups"));
        let resources = strings(rule.get("resources"));
        let ops = strings(rule.get("operations"));
        let group = |g: &str| groups.iter().any(|x| x == g || x == "*");
        let base = |r: &str| r.split('/').next().unwrap_or(r).to_string();
        if group("apps.kruise.io") && resources.iter().any(|r| base(r) == "clonesets") {
            cloneset = true;
        }
        let writes = ops
            .iter()
            .any(|o| matches!(o.as_str(), "CREATE" | "UPDATE" | "DELETE" | "*"));
        if group("") && writes && resources.iter().any(|r| base(r) == "pods" || base(r) == "*") {
            pods = true;
        }
        intercepts.push(format!("{} {}", resources.join(","), ops.join(",")));
    }
    Entry {
        name,
        intercepts,
        fails_closed,
        cloneset,
        blocks_pods: pods && fails_closed,
    }
}

/// What to do with Kruise's webhooks besides its CloneSet entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KruiseWebhooks {
    /// Remove only the CloneSet entries (refused while other fail-closed entries would block pod writes).
    Cloneset,
    /// Delete both of Kruise's webhook configurations.
    All,
}

/// The change to one of Kruise's webhook configurations.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigChange {
    Absent,
    Unchanged {
        kept: Vec<Entry>,
    },
    /// The object with the CloneSet entries removed (from `webhooks` and the `template` annotation).
    Replace {
        removed: Vec<Entry>,
        kept: Vec<Entry>,
        object: Value,
    },
    Delete {
        removed: Vec<Entry>,
    },
}

/// `obj`'s `webhooks` (and Kruise's `template` annotation) without the CloneSet entries, or deleted (`All`).
pub fn plan_config(obj: Option<&Value>, mode: KruiseWebhooks) -> ConfigChange {
    let Some(obj) = obj else {
        return ConfigChange::Absent;
    };
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let all: Vec<Value> = list(obj.get("webhooks"));
    if mode == KruiseWebhooks::All {
        return ConfigChange::Delete {
            removed: all.iter().map(entry).collect(),
        };
    }
    let (removed, kept): (Vec<Value>, Vec<Value>) = all.into_iter().partition(|w| entry(w).cloneset);
    let template = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let template_has_cloneset = template
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|w| entry(w).cloneset));
    let kept_entries: Vec<Entry> = kept.iter().map(entry).collect();
    if removed.is_empty() && !template_has_cloneset {
        return ConfigChange::Unchanged { kept: kept_entries };
    }
    let mut object = obj.clone();
    object["webhooks"] = Value::Array(kept);
    if let Some(Value::Array(t)) = template {
        let t: Vec<Value> = t.into_iter().filter(|w| !entry(w).cloneset).collect();
        let text = serde_json::to_string(&t).unwrap_or_else(|_| "[]".into());
        object["metadata"]["annotations"][TEMPLATE_ANNOTATION] = json!(text);
    }
    ConfigChange::Replace {
        removed: removed.iter().map(entry).collect(),
        kept: kept_entries,
        object,
    }
}

/// Why the remaining Kruise webhooks would stop insitu (fail-closed pod entries nobody answers), with what to do.
pub fn pod_blockers(changes: &[(&str, &ConfigChange)]) -> Option<String> {
    let mut blocking = Vec::new();
    for (name, change) in changes {
        let kept = match change {
            ConfigChange::Unchanged { kept } | ConfigChange::Replace { kept, .. } => kept,
            ConfigChange::Absent | ConfigChange::Delete { .. } => continue,
        };
        for e in kept.iter().filter(|e| e.blocks_pods) {
            blocking.push(format!("{} in {name} ({})", e.name, e.intercepts.join("; ")));
        }
    }
    if blocking.is_empty() {
        return None;
    }
    Some(format!(
        "Kruise's webhooks {} fail closed and nobody answers them once kruise-manager is stopped: every pod write \
         insitu makes (create, in-place update, delete) would be refused. Run insitu adopt --kruise-webhooks all \
         (deletes {KRUISE_MUTATING} and {KRUISE_VALIDATING}: SidecarSet injection, WorkloadSpread, \
         PodUnavailableBudget and Kruise's deletion protection, already inactive without kruise-manager, stay off), \
         or delete those entries yourself and run insitu adopt again",
        blocking.join(", ")
    ))
}

/// The CRD with `desired`'s spec (insitu's: schema, CEL rules, printer columns, conversion target) and
/// `existing`'s metadata (resourceVersion: the replace fails on a concurrent change). The CA bundle is kept
/// when the conversion already names `desired`'s target (insitu patched it in: a re-run must not break
/// conversion), dropped otherwise (Kruise's CA is not the one insitu's server presents).
pub fn crd_replacement(existing: &Value, desired: &Value) -> Value {
    let mut out = existing.clone();
    let mut spec = desired.get("spec").cloned().unwrap_or(Value::Null);
    let target = |v: &Value| {
        let c = v
            .pointer("/spec/conversion/webhook/clientConfig")
            .cloned()
            .unwrap_or(Value::Null);
        (
            c.get("url").cloned(),
            c.pointer("/service/namespace").cloned(),
            c.pointer("/service/name").cloned(),
            c.pointer("/service/path").cloned(),
        )
    };
    if target(existing) == target(desired)
        && let Some(ca) = existing.pointer("/spec/conversion/webhook/clientConfig/caBundle")
    {
        spec["conversion"]["webhook"]["clientConfig"]["caBundle"] = ca.clone();
    }
    out["spec"] = spec;
    if let Some(obj) = out.as_object_mut() {
        obj.remove("status");
    }
    out
}

/// Where a CRD's conversion webhook points: its URL or `service namespace/name path`.
pub fn conversion_target(crd: &Value) -> String {
    let c = crd.pointer("/spec/conversion/webhook/clientConfig");
    match (c.and_then(|c| c.get("url")), c.and_then(|c| c.get("service"))) {
        (Some(Value::String(u)), _) => u.clone(),
        (_, Some(s)) => format!(
            "service {}/{}{}",
            s.get("namespace").and_then(Value::as_str).unwrap_or_default(),
            s.get("name").and_then(Value::as_str).unwrap_or_default(),
            s.get("path").and_then(Value::as_str).unwrap_or_default()
        ),
        _ => match crd.pointer("/spec/conversion/strategy").and_then(Value::as_str) {
            Some(s) => format!("strategy {s}"),
            None => "none".into(),
        },
    }
}

/// The versions `status.storedVersions` lists besides the storage version: objects may still be encoded in
/// them, so they must be rewritten before the list is trimmed. Empty: nothing to migrate.
pub fn versions_to_migrate(stored: &[String]) -> Vec<String> {
    stored
        .iter()
        .filter(|v| v.as_str() != STORAGE_VERSION)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
