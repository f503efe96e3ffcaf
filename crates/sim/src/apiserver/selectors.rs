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

impl LabelSelector {
    /// Parses a selector as `labels.Parse` does (`labelparse`), refusing a malformed one with its message.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        use super::labelparse::{self, Op};
        let reqs = labelparse::parse(s).map_err(ApiError::bad_request)?;
        let mut out = Vec::with_capacity(reqs.len());
        for (key, op, mut values) in reqs {
            let one = || values.first().cloned().unwrap_or_default();
            // Gt/Lt values were checked to be integers by the parser.
            let number = || one().parse::<i64>().unwrap_or_default();
            out.push(match op {
                Op::Equals => LabelReq::Eq(key, one()),
                Op::NotEquals => LabelReq::NotEq(key, one()),
                Op::Gt => LabelReq::Gt(key, number()),
                Op::Lt => LabelReq::Lt(key, number()),
                Op::Exists => LabelReq::Exists(key),
                Op::DoesNotExist => LabelReq::NotExists(key),
                Op::In => LabelReq::In(key, std::mem::take(&mut values)),
                Op::NotIn => LabelReq::NotIn(key, std::mem::take(&mut values)),
            });
        }
        Ok(Self(out))
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

/// `fields.UnescapeValue`: `\\`, `\,` and `\=` unescaped; any other escape, a trailing backslash or an
/// unescaped `,` or `=` is an error (its message).
fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => {
                    return Err(format!("invalid field selector: invalid escape sequence: \\{n}"));
                }
                None => return Err("invalid field selector: invalid escape sequence: \\".into()),
            },
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `fields.splitTerms`: on commas not escaped by a backslash (which stays in the term).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut start, mut slash) = (0, false);
    for (i, c) in s.char_indices() {
        if slash {
            slash = false;
        } else if c == '\\' {
            slash = true;
        } else if c == ',' {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// `fields.splitTerm`: split at the first `!=`, `==` or `=` (in that preference at each position).
fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    (0..term.len())
        .filter(|i| term.is_char_boundary(*i))
        .find_map(|i| {
            ["!=", "==", "="]
                .into_iter()
                .find(|op| term[i..].starts_with(op))
                .map(|op| (&term[..i], op, &term[i + op.len()..]))
        })
}

impl FieldSelector {
    /// `fields.ParseSelector` (terms sorted, neither side trimmed), then the resource's field label check, as
    /// the list handler decodes and converts its options.
    pub fn parse(s: &str, rt: &ResourceType) -> Result<Self, ApiError> {
        let mut terms = split_terms(s);
        terms.sort_unstable();
        let mut parsed = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let (field, op, value) = split_term(term).ok_or_else(|| {
                ApiError::bad_request(format!("invalid selector: '{s}'; can't understand '{term}'"))
            })?;
            parsed.push((field, op == "!=", unescape(value).map_err(ApiError::bad_request)?));
        }
        let mut reqs = Vec::with_capacity(parsed.len());
        for (field, neg, value) in parsed {
            let mut field = field.to_string();
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

    /// The messages kube-apiserver v1.37.2 gave for these field selectors on pods.
    #[test]
    fn field_selectors_refused_as_kube() {
        let pods = super::super::resources::find("", "v1", "pods").expect("pods");
        for (sel, want) in [
            (
                "metadata.name=a=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "metadata.name",
                "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
            ),
            ("spec.foo=x", "field label not supported: spec.foo"),
            (
                "metadata.name==a,,b",
                "invalid selector: 'metadata.name==a,,b'; can't understand 'b'",
            ),
            (
                "metadata.name=a\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
        ] {
            let got = FieldSelector::parse(sel, pods).err().map(|e| e.message);
            assert_eq!(got.as_deref(), Some(want), "{sel}");
        }
        let ok = FieldSelector::parse("metadata.name=a\\,b,status.phase!=Running", pods);
        assert!(ok.is_ok_and(|f| f.0.len() == 2));
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
