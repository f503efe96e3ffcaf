//! Label and field selectors, parsed from query strings like apimachinery's `labels.Parse` / `fields.ParseSelector`.

use std::collections::BTreeMap;

use super::errors::ApiError;
use super::resources::ResourceType;
use crate::store::ObjIndex;

#[derive(Clone, Debug, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector (AND of requirements).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(key: &str, rest: &str, raw: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{raw}', expected: '('"
            ))
        })?;
    let _ = key;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let bad = || {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector: {term:?}"
                ))
            };
            let req = if let Some(key) = term.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once(" notin ") {
                LabelReq::NotIn(k.trim().to_string(), parse_set(k, v, &term)?)
            } else if let Some((k, v)) = term.split_once(" in ") {
                LabelReq::In(k.trim().to_string(), parse_set(k, v, &term)?)
            } else if let Some((k, v)) = term.split_once('>') {
                LabelReq::Gt(k.trim().to_string(), v.trim().parse().map_err(|_| bad())?)
            } else if let Some((k, v)) = term.split_once('<') {
                LabelReq::Lt(k.trim().to_string(), v.trim().parse().map_err(|_| bad())?)
            } else {
                LabelReq::Exists(term.clone())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k)
                | LabelReq::Gt(k, _)
                | LabelReq::Lt(k, _) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
            LabelReq::Gt(k, n) => labels
                .get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            LabelReq::Lt(k, n) => labels
                .get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
enum FieldReq {
    Eq(String, String),
    NotEq(String, String),
}

/// A parsed field selector (AND of `=`/`==`/`!=` terms), checked against the resource's supported fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldReq>);

/// Unescapes `\,` `\=` `\\` as `fields.EscapeValue` produces.
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn split_unescaped(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            cur.push('\\');
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

impl FieldSelector {
    pub fn parse(s: &str, rt: &ResourceType) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_unescaped(s) {
            let (field, value, neg) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let mut field = field.trim().to_string();
            if rt.is_pod() && field == "spec.host" {
                field = "spec.nodeName".into();
            }
            if !rt.field_supported(&field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            if rt.is_new_events() {
                field = super::events::core_field(&field);
            }
            let value = unescape(value.trim());
            reqs.push(if neg {
                FieldReq::NotEq(field, value)
            } else {
                FieldReq::Eq(field, value)
            });
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, idx: &ObjIndex) -> bool {
        self.0.iter().all(|r| match r {
            FieldReq::Eq(k, v) => idx.field(k).unwrap_or("") == v,
            FieldReq::NotEq(k, v) => idx.field(k).unwrap_or("") != v,
        })
    }
}

/// Label and field selectors together.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn matches(&self, idx: &ObjIndex) -> bool {
        self.labels.matches(&idx.labels) && self.fields.matches(idx)
    }

    /// Selects everything (kube-apiserver's `SelectionPredicate.Empty`).
    pub fn is_empty(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors() {
        let l = labels(&[("app", "web"), ("tier", "fe")]);
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=fe", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app in (db),tier=fe", false),
            ("", true),
        ] {
            let s = LabelSelector::parse(sel).map(|s| s.matches(&l));
            assert_eq!(s.ok(), Some(want), "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }
}
