//! `admissionregistration.k8s.io/v1` MutatingWebhookConfigurations and ValidatingWebhookConfigurations: stored,
//! listed, watched, patched and deleted with kube-apiserver's defaults (pkg/apis/admissionregistration/v1/
//! defaults.go) and the checks of its validation (pkg/apis/admissionregistration/validation/validation.go,
//! `validateMutatingWebhook` / `validateValidatingWebhook`) that a client is likely to meet.
//!
//! The embedded apiserver does not call the webhooks they name: a CloneSet is admitted by the simulated Kruise
//! defaulting and validation whatever is configured, so `insitu run` against `insitu up --no-controller` can
//! register its defaulting webhook and become ready. Not checked (kube-apiserver refuses them; here they are
//! stored): the URL and Service path syntax of `clientConfig`, label selector syntax, `matchConditions` CEL, and
//! the resource-name syntax of `rules`.

use serde_json::{Value, json};

use super::errors::{FieldErr, quote};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// `noSideEffectClasses`: what create and update require (`requireNoSideEffects`).
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const REINVOCATION: &[&str] = &["IfNeeded", "Never"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// `SetDefaults_MutatingWebhook` / `SetDefaults_ValidatingWebhook`, `SetDefaults_Rule` and
/// `SetDefaults_ServiceReference` on every webhook of `obj`.
pub(super) fn default(obj: &mut Value, mutating: bool) {
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
        let mut set = |k: &str, v: Value| {
            if hook.get(k).is_none_or(Value::is_null) {
                hook.insert(k.to_string(), v);
            }
        };
        set("failurePolicy", json!("Fail"));
        set("matchPolicy", json!("Equivalent"));
        set("namespaceSelector", json!({}));
        set("objectSelector", json!({}));
        set("timeoutSeconds", json!(10));
        if mutating {
            set("reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if rule.get("scope").is_none_or(Value::is_null) {
                    rule.insert("scope".into(), json!("*"));
                }
            }
        }
        if let Some(svc) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
            && svc.get("port").is_none_or(Value::is_null)
        {
            svc.insert("port".into(), json!(443));
        }
    }
}

/// The checks of `validateMutatingWebhookConfiguration` / `validateValidatingWebhookConfiguration` this module
/// makes (see the module's doc), with the options create and update use.
pub(super) fn validate(obj: &Value, mutating: bool) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    let hooks = obj.get("webhooks").and_then(Value::as_array);
    let mut names = std::collections::HashSet::new();
    for (i, hook) in hooks.into_iter().flatten().enumerate() {
        let path = format!("webhooks[{i}]");
        let name = hook.get("name").and_then(Value::as_str).unwrap_or("");
        validate_hook(hook, &path, mutating, &mut errs);
        review_versions(hook, &format!("{path}.admissionReviewVersions"), &mut errs);
        if !name.is_empty() && !names.insert(name) {
            errs.push(FieldErr::duplicate(&format!("{path}.name"), &quote(name)));
        }
    }
    errs
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn one_of(v: &Value, key: &str, path: &str, allowed: &[&str], errs: &mut Vec<FieldErr>) {
    if let Some(s) = str_field(v, key)
        && !allowed.contains(&s)
    {
        errs.push(FieldErr::not_supported(
            &format!("{path}.{key}"),
            &quote(s),
            allowed,
        ));
    }
}

fn validate_hook(hook: &Value, path: &str, mutating: bool, errs: &mut Vec<FieldErr>) {
    qualified_name(
        str_field(hook, "name").unwrap_or(""),
        &format!("{path}.name"),
        errs,
    );
    for (j, rule) in hook
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        validate_rule(rule, &format!("{path}.rules[{j}]"), errs);
    }
    one_of(hook, "failurePolicy", path, FAILURE_POLICIES, errs);
    one_of(hook, "matchPolicy", path, MATCH_POLICIES, errs);
    match str_field(hook, "sideEffects") {
        None => errs.push(FieldErr::required(
            &format!("{path}.sideEffects"),
            &format!("must specify one of {}", NO_SIDE_EFFECTS.join(", ")),
        )),
        Some(_) => one_of(hook, "sideEffects", path, NO_SIDE_EFFECTS, errs),
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldErr::invalid(
            &format!("{path}.timeoutSeconds"),
            &t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if mutating {
        one_of(hook, "reinvocationPolicy", path, REINVOCATION, errs);
    }
    let cc = hook.get("clientConfig");
    let url = cc.and_then(|c| c.get("url")).filter(|v| !v.is_null());
    let svc = cc.and_then(|c| c.get("service")).filter(|v| !v.is_null());
    match (url, svc) {
        (Some(_), None) => {}
        (None, Some(svc)) => {
            let p = format!("{path}.clientConfig.service");
            for key in ["name", "namespace"] {
                if str_field(svc, key).unwrap_or("").is_empty() {
                    errs.push(FieldErr::required(&format!("{p}.{key}"), ""));
                }
            }
            if let Some(port) = svc.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&port)
            {
                errs.push(FieldErr::invalid(
                    &format!("{p}.port"),
                    &port.to_string(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
        _ => errs.push(FieldErr::required(
            &format!("{path}.clientConfig"),
            "exactly one of url or service is required",
        )),
    }
}

/// `utilvalidation.IsFullyQualifiedName`.
fn qualified_name(name: &str, path: &str, errs: &mut Vec<FieldErr>) {
    if name.is_empty() {
        errs.push(FieldErr::required(path, ""));
        return;
    }
    let subdomain = super::metadata_validation::name_errors_at(path, name);
    if !subdomain.is_empty() {
        errs.extend(subdomain);
        return;
    }
    if name.split('.').count() < 3 {
        errs.push(FieldErr::invalid(
            path,
            &quote(name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// `validateRuleWithOperations` and `validateRule`, but for the resources' syntax.
fn validate_rule(rule: &Value, path: &str, errs: &mut Vec<FieldErr>) {
    let list = |key: &str| -> Vec<&str> {
        rule.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let ops = list("operations");
    if ops.is_empty() {
        errs.push(FieldErr::required(&format!("{path}.operations"), ""));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            errs.push(FieldErr::not_supported(
                &format!("{path}.operations[{i}]"),
                &quote(op),
                OPERATIONS,
            ));
        }
    }
    if list("apiGroups").is_empty() {
        errs.push(FieldErr::required(&format!("{path}.apiGroups"), ""));
    }
    let versions = list("apiVersions");
    if versions.is_empty() {
        errs.push(FieldErr::required(&format!("{path}.apiVersions"), ""));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldErr::required(&format!("{path}.apiVersions[{i}]"), ""));
        }
    }
    if list("resources").is_empty() {
        errs.push(FieldErr::required(&format!("{path}.resources"), ""));
    }
    one_of(rule, "scope", path, SCOPES, errs);
}

/// `validateAdmissionReviewVersions` with `requireRecognizedAdmissionReviewVersion`.
fn review_versions(hook: &Value, path: &str, errs: &mut Vec<FieldErr>) {
    let versions: Vec<&str> = hook
        .get("admissionReviewVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldErr::required(
            path,
            &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(*v) {
            errs.push(FieldErr::invalid(
                &format!("{path}[{i}]"),
                &quote(v),
                "duplicate version",
            ));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        let rendered: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
        errs.push(FieldErr::invalid(
            path,
            &format!(
                "[]string{{{}}}",
                rendered.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ")
            ),
            &format!("must include at least one of {}", REVIEW_VERSIONS.join(", ")),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> Value {
        json!({"name": "m.insitu.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/m"}},
            "rules": [{"apiGroups": ["apps.kruise.io"], "apiVersions": ["v1beta1"], "operations": ["CREATE"],
                "resources": ["clonesets"]}]})
    }

    #[test]
    fn defaults_as_kube() {
        let mut obj = json!({"webhooks": [hook()]});
        default(&mut obj, true);
        let h = &obj["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(validate(&obj, true).is_empty());
        let mut v = json!({"webhooks": [hook()]});
        default(&mut v, false);
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
    }

    #[test]
    fn refuses_what_kube_refuses() {
        let mut bad = hook();
        bad["name"] = json!("short.name");
        bad["sideEffects"] = json!("Some");
        bad["timeoutSeconds"] = json!(31);
        bad["clientConfig"]["url"] = json!("https://x");
        bad["admissionReviewVersions"] = json!([]);
        let obj = json!({"webhooks": [bad, hook(), hook()]});
        let fields: Vec<String> = validate(&obj, true).into_iter().map(|e| e.message).collect();
        assert_eq!(
            fields,
            vec![
                "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                "webhooks[2].name: Duplicate value: \"m.insitu.io\"",
            ]
        );
    }
}
