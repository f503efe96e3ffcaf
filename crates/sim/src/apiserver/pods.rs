//! Pod rules: scheme defaults, admission tolerations, QoS, `ValidatePodUpdate` and `ValidatePodResize`.

#[cfg(test)]
use insitu_api::quantity::parse_quantity;
pub use insitu_api::quantity::qos_class;
use insitu_api::quantity::quantity;
use serde_json::{Map, Value, json};

use super::errors::{FieldErr, quote};

const UPDATABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn set_default(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

/// `Always` for `:latest` or untagged images, else `IfNotPresent` (`SetDefaults_Container`).
fn pull_policy(image: &str) -> &'static str {
    let (without_digest, has_digest) = match image.split_once('@') {
        Some((i, _)) => (i, true),
        None => (image, false),
    };
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if has_digest => "IfNotPresent",
        None => "Always",
    }
}

fn default_probe(p: &mut Value) {
    let Some(m) = p.as_object_mut() else { return };
    set_default(m, "timeoutSeconds", json!(1));
    set_default(m, "periodSeconds", json!(10));
    set_default(m, "successThreshold", json!(1));
    set_default(m, "failureThreshold", json!(3));
    if let Some(h) = m.get_mut("httpGet").and_then(Value::as_object_mut) {
        default_http_get(h);
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(h: &mut Map<String, Value>) {
    set_default(h, "path", json!("/"));
    set_default(h, "scheme", json!("HTTP"));
}

fn default_container(c: &mut Value, probes: bool) {
    let Some(m) = c.as_object_mut() else { return };
    set_default(m, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(m, "terminationMessagePolicy", json!("File"));
    let image = m.get("image").and_then(Value::as_str).unwrap_or("").to_string();
    set_default(m, "imagePullPolicy", json!(pull_policy(&image)));
    set_default(m, "resources", json!({}));
    if let Some(r) = m.get_mut("resources").and_then(Value::as_object_mut) {
        // Requests default to limits for resources that have a limit but no request.
        if let Some(limits) = r.get("limits").and_then(Value::as_object).cloned() {
            let requests = r.entry("requests").or_insert_with(|| json!({}));
            if let Some(req) = requests.as_object_mut() {
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    if let Some(env) = m.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            if let Some(f) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                set_default(f, "apiVersion", json!("v1"));
            }
        }
    }
    if probes {
        for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
            if let Some(p) = m.get_mut(key) {
                default_probe(p);
            }
        }
    }
    if let Some(lc) = m.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc
                .get_mut(hook)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(Value::as_object_mut)
            {
                set_default(h, "scheme", json!("HTTP"));
            }
        }
    }
}

/// Scheme defaults for a pod spec (`SetDefaults_PodSpec`, `SetDefaults_Container`, ...). Idempotent.
pub fn default_spec(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    if let Some(cs) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        cs.iter_mut().for_each(|c| default_container(c, true));
    }
    if let Some(cs) = spec.get_mut("initContainers").and_then(Value::as_array_mut) {
        cs.iter_mut().for_each(|c| default_container(c, true));
    }
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            for src in ["configMap", "secret", "downwardAPI", "projected"] {
                if let Some(s) = v.get_mut(src).and_then(Value::as_object_mut) {
                    set_default(s, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// Create-time defaults: scheme defaults, Priority and DefaultTolerationSeconds admission, and the
/// initial status (`Pending`, QoS class).
pub fn default_create(pod: &mut Value) {
    if !pod.get("spec").is_some_and(Value::is_object) {
        return;
    }
    default_spec(pod);
    let qos = qos_class(pod);
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        set_default(spec, "priority", json!(0));
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(list) = tolerations.as_array_mut() {
            for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
                let tolerated = list.iter().any(|t| {
                    let tkey = t.get("key").and_then(Value::as_str).unwrap_or("");
                    let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
                    let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
                    (tkey == key || (tkey.is_empty() && op == "Exists"))
                        && (effect.is_empty() || effect == "NoExecute")
                });
                if !tolerated {
                    list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
                }
            }
        }
    }
    if let Some(obj) = pod.as_object_mut() {
        obj.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
    }
}

/// Drops what Go's semantic DeepEqual treats as unset: nulls, empty lists, empty strings, `false`, empty maps.
fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalize(v)))
                .filter(|(_, v)| !is_unset(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(_) => false,
        Value::Number(_) => false,
    }
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Leaf-level differences between two JSON values, as `path: old → new` lines (a stand-in for cmp.Diff).
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= 20 || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => {
            out.push(format!("- \t{path}: {a}"));
            out.push(format!("+ \t{path}: {b}"));
        }
    }
}

fn validate_container_updates(new: &[Value], old: &[Value], path: &str, errs: &mut Vec<FieldErr>) -> bool {
    if new.len() != old.len() {
        errs.push(FieldErr::forbidden(
            path,
            "pod updates may not add or remove containers",
        ));
        return true;
    }
    for (i, c) in new.iter().enumerate() {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        if image.is_empty() {
            errs.push(FieldErr::required(&format!("{path}[{i}].image"), ""));
        }
        if image.trim().len() != image.len() {
            errs.push(FieldErr::invalid(
                &format!("{path}[{i}].image"),
                &quote(image),
                "must not have leading or trailing whitespace",
            ));
        }
    }
    false
}

/// `ValidatePodUpdate` for the spec (metadata rules are generic). Both pods are already defaulted.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    if validate_container_updates(
        arr(ns, "containers"),
        arr(os, "containers"),
        "spec.containers",
        &mut errs,
    ) {
        return errs;
    }
    if validate_container_updates(
        arr(ns, "initContainers"),
        arr(os, "initContainers"),
        "spec.initContainers",
        &mut errs,
    ) {
        return errs;
    }
    let new_ads = ns.get("activeDeadlineSeconds").and_then(Value::as_i64);
    let old_ads = os.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (new_ads, old_ads) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldErr::invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be between 0 and 2147483647, inclusive",
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldErr::invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => {
            errs.push(FieldErr::invalid(
                "spec.activeDeadlineSeconds",
                "null",
                "must not update from a positive integer to nil value",
            ));
        }
        _ => {}
    }
    // Tolerations: only additions (an existing one may change only its tolerationSeconds).
    let new_tol = arr(ns, "tolerations");
    for old_t in arr(os, "tolerations") {
        let found = new_tol.iter().any(|nt| {
            let mut clone = old_t.clone();
            if let Some(m) = clone.as_object_mut() {
                match nt.get("tolerationSeconds") {
                    Some(s) => m.insert("tolerationSeconds".into(), s.clone()),
                    None => m.remove("tolerationSeconds"),
                };
            }
            normalize(&clone) == normalize(nt)
        });
        if !found {
            errs.push(FieldErr::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    // Scheduling gates: only deletions.
    let old_gates: Vec<&str> = arr(os, "schedulingGates")
        .iter()
        .filter_map(|g| g.get("name").and_then(Value::as_str))
        .collect();
    for g in arr(ns, "schedulingGates")
        .iter()
        .filter_map(|g| g.get("name").and_then(Value::as_str))
    {
        if !old_gates.contains(&g) {
            errs.push(FieldErr::forbidden(
                "spec.schedulingGates",
                &format!("only deletion is allowed, but found new scheduling gate '{g}'"),
            ));
        }
    }
    if normalize(ns) == normalize(os) {
        return errs;
    }
    // Munge the updatable fields back to their old values and compare the rest.
    let mut munged = ns.clone();
    if let Some(m) = munged.as_object_mut() {
        for key in ["containers", "initContainers"] {
            if let Some(list) = m.get_mut(key).and_then(Value::as_array_mut) {
                for (i, c) in list.iter_mut().enumerate() {
                    let old_image = os
                        .get(key)
                        .and_then(|l| l.get(i))
                        .and_then(|c| c.get("image"))
                        .cloned();
                    if let Some(cm) = c.as_object_mut() {
                        match old_image {
                            Some(img) => cm.insert("image".into(), img),
                            None => cm.remove("image"),
                        };
                    }
                }
            }
        }
        for key in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
            match os.get(key) {
                Some(v) => m.insert(key.into(), v.clone()),
                None => m.remove(key),
            };
        }
        let old_grace = os.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
        let new_grace = m.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
        if let (Some(o), Some(1)) = (old_grace, new_grace)
            && o < 0
        {
            m.insert("terminationGracePeriodSeconds".into(), json!(o));
        }
    }
    let (a, b) = (normalize(os), normalize(&munged));
    if a != b {
        let mut lines = Vec::new();
        diff("", &a, &b, &mut lines);
        let body = lines
            .iter()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n");
        errs.push(FieldErr::forbidden(
            "spec",
            &format!("{UPDATABLE}\n  core.PodSpec{{\n{body}\n  }}\n"),
        ));
    }
    errs
}

/// Pod create validation (the subset the sim enforces).
pub fn validate_create(pod: &Value) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    let Some(spec) = pod.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldErr::required("spec.containers", ""));
        return errs;
    };
    let containers = arr(spec, "containers");
    if containers.is_empty() {
        errs.push(FieldErr::required("spec.containers", ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (key, list) in [
        ("initContainers", arr(spec, "initContainers")),
        ("containers", containers),
    ] {
        for (i, c) in list.iter().enumerate() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                errs.push(FieldErr::required(&format!("spec.{key}[{i}].name"), ""));
            } else if names.contains(&name) {
                errs.push(FieldErr::duplicate(
                    &format!("spec.{key}[{i}].name"),
                    &quote(name),
                ));
            } else {
                names.push(name);
            }
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            if image.is_empty() {
                errs.push(FieldErr::required(&format!("spec.{key}[{i}].image"), ""));
            }
        }
    }
    if let Some(rp) = spec.get("restartPolicy").and_then(Value::as_str)
        && !["Always", "OnFailure", "Never"].contains(&rp)
    {
        errs.push(FieldErr::not_supported(
            "spec.restartPolicy",
            &quote(rp),
            &["Always", "OnFailure", "Never"],
        ));
    }
    errs
}

/// Applies a resize: the result is the old pod with only containers' `resources`/`resizePolicy` taken from
/// `patched` (`dropNonResizeUpdates`), validated as `ValidatePodResize`.
pub fn resize(patched: &Value, old: &Value) -> Result<Value, Vec<FieldErr>> {
    let mut result = old.clone();
    for key in ["containers", "initContainers"] {
        let new_list = patched
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(list) = result
            .pointer_mut(&format!("/spec/{key}"))
            .and_then(Value::as_array_mut)
        {
            for c in list.iter_mut() {
                let name = c.get("name").cloned();
                let Some(nc) = new_list.iter().find(|n| n.get("name") == name.as_ref()) else {
                    continue;
                };
                if let Some(cm) = c.as_object_mut() {
                    for field in ["resources", "resizePolicy"] {
                        match nc.get(field) {
                            Some(v) => cm.insert(field.into(), v.clone()),
                            None => cm.remove(field),
                        };
                    }
                }
            }
        }
    }
    default_spec(&mut result);
    let mut errs = Vec::new();
    // isPodResizeRequestSupported: decided by the first running container.
    let statuses = old
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if let Some(running) = statuses.iter().find(|s| s.pointer("/state/running").is_some())
        && running.get("resources").is_none_or(Value::is_null)
    {
        errs.push(FieldErr::forbidden(
            "spec",
            "Pod running on node without support for resize",
        ));
    }
    let old_qos = old
        .pointer("/status/qosClass")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| qos_class(old).to_string());
    if qos_class(&result) != old_qos {
        errs.push(FieldErr::invalid(
            "spec",
            &quote(&old_qos),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    let mut only_cpu_mem = false;
    let mut removed: Vec<String> = Vec::new();
    for key in ["containers", "initContainers"] {
        let list = |v: &'_ Value| {
            v.pointer(&format!("/spec/{key}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        for (i, (o, n)) in list(old).iter().zip(list(&result).iter()).enumerate() {
            for kind in ["requests", "limits"] {
                let om = o
                    .pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object);
                let nm = n
                    .pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object);
                let empty = Map::new();
                let (om, nm) = (om.unwrap_or(&empty), nm.unwrap_or(&empty));
                let path = format!("spec.{key}[{i}].resources.{kind}");
                for (res, ov) in om {
                    let nv = nm.get(res);
                    if res != "cpu" && res != "memory" {
                        only_cpu_mem |= nv != Some(ov);
                    } else if nv.is_none() && !removed.contains(&path) {
                        errs.push(FieldErr::forbidden(
                            &path,
                            &format!("resource {kind} cannot be removed"),
                        ));
                        removed.push(path.clone());
                    }
                }
                only_cpu_mem |= nm
                    .keys()
                    .any(|r| r != "cpu" && r != "memory" && !om.contains_key(r));
            }
        }
    }
    if only_cpu_mem {
        errs.push(FieldErr::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    if errs.is_empty() { Ok(result) } else { Err(errs) }
}

/// Pod cpu (milli) and memory (bytes) requests, as `resource.PodRequests` (max of the regular sum and
/// any single init container).
fn pod_requests(pod: &Value) -> (i128, i128) {
    let req = |c: &Value, r: &str| {
        c.pointer(&format!("/resources/requests/{r}"))
            .and_then(quantity)
            .unwrap_or(0)
    };
    let list = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (mut cpu, mut mem) = (0i128, 0i128);
    for c in list("/spec/containers") {
        cpu += req(&c, "cpu");
        mem += req(&c, "memory");
    }
    for c in list("/spec/initContainers") {
        cpu = cpu.max(req(&c, "cpu"));
        mem = mem.max(req(&c, "memory"));
    }
    (cpu, mem)
}

/// The PodResize admission check: the resized pod's requests must fit the node's allocatable.
pub fn check_allocatable(pod: &Value, node: &Value) -> Result<(), String> {
    let alloc = |r: &str| {
        node.pointer(&format!("/status/allocatable/{r}"))
            .and_then(quantity)
            .unwrap_or(0)
    };
    let (cpu, mem) = pod_requests(pod);
    let mut msg = Vec::new();
    if cpu > alloc("cpu") {
        msg.push(format!(
            "cpu, requested: {}, allocatable: {}",
            cpu / 1_000_000,
            alloc("cpu") / 1_000_000
        ));
    }
    if mem > alloc("memory") {
        msg.push(format!(
            "memory, requested: {}, allocatable: {}",
            mem / 1_000_000_000,
            alloc("memory") / 1_000_000_000
        ));
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "node didn't have enough allocatable resources: {}",
            msg.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("500m"), Some(500_000_000));
        assert_eq!(parse_quantity("1"), Some(1_000_000_000));
        assert_eq!(parse_quantity("0.5"), parse_quantity("500m"));
        assert_eq!(parse_quantity("1Ki"), Some(1024 * 1_000_000_000));
        assert_eq!(parse_quantity("1e3"), parse_quantity("1k"));
        assert_eq!(parse_quantity("abc"), None);
    }

    #[test]
    fn qos() {
        let be = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn pull_policies() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }
}
