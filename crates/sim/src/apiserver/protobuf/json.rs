//! The JSON form of decoded k8s-pb messages, as kube-apiserver would serve the Go object the message decodes to:
//! Go zero values of `omitempty` fields are left out, pointer fields keep an explicit zero, and the types with
//! their own JSON (Time, MicroTime, Quantity, IntOrString, FieldsV1, RawExtension) are written as Go writes them.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

pub(super) use k8s_pb::api::apps::v1 as apps;
pub(super) use k8s_pb::api::coordination::v1 as coordination;
pub(super) use k8s_pb::api::core::v1 as core;
pub(super) use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
pub(super) use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

/// A decoded protobuf value's JSON form.
pub(crate) trait ToJson {
    /// The JSON value; `None` when the field is absent (a nil pointer, an empty list or map).
    fn to_json(&self) -> Option<Value>;
    /// Whether this is Go's zero value, which `omitempty` leaves out (gogo-protobuf writes non-pointer scalars
    /// even when zero, so presence on the wire does not mean the client set them).
    fn is_zero(&self) -> bool {
        false
    }
}

/// Adds one field: `keep` is a Go pointer or a field without `omitempty` (its zero value is written).
pub(crate) fn put<T: ToJson>(m: &mut Map<String, Value>, key: &str, v: &T, keep: bool) {
    if !keep && v.is_zero() {
        return;
    }
    if let Some(j) = v.to_json() {
        m.insert(key.to_string(), j);
    }
}

/// Merges an embedded (inline) struct's fields into its parent, as `encoding/json` promotes them.
pub(crate) fn inline<T: ToJson>(m: &mut Map<String, Value>, v: &T) {
    if let Some(Value::Object(inner)) = v.to_json() {
        m.extend(inner);
    }
}

/// One message: every prost field is named (the destructuring is exhaustive, so a k8s-pb field this table
/// misses fails to compile), with its JSON name and `keep`/`inline` from the Go field's tags.
macro_rules! msg {
    ($($path:ident)::+ { $($field:ident : $json:literal $($flag:ident)?),* $(,)? }) => {
        impl $crate::apiserver::protobuf::json::ToJson for $($path)::+ {
            fn to_json(&self) -> Option<serde_json::Value> {
                let $($path)::+ { $($field),* } = self;
                let mut m = serde_json::Map::new();
                $( msg!(@put m, $json, $field $(, $flag)?); )*
                Some(serde_json::Value::Object(m))
            }
        }
    };
    (@put $m:ident, $json:literal, $field:ident) => {
        $crate::apiserver::protobuf::json::put(&mut $m, $json, $field, false)
    };
    (@put $m:ident, $json:literal, $field:ident, keep) => {
        $crate::apiserver::protobuf::json::put(&mut $m, $json, $field, true)
    };
    (@put $m:ident, $json:literal, $field:ident, inline) => {
        $crate::apiserver::protobuf::json::inline(&mut $m, $field)
    };
}
pub(super) use msg;

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Option<Value> {
        self.as_ref().and_then(ToJson::to_json)
    }
    fn is_zero(&self) -> bool {
        self.as_ref().is_none_or(ToJson::is_zero)
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Array(
            self.iter().map(|v| v.to_json().unwrap_or(Value::Null)).collect(),
        ))
    }
}

impl<T: ToJson> ToJson for BTreeMap<String, T> {
    fn to_json(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.to_json().unwrap_or(Value::Null)))
                .collect(),
        ))
    }
}

impl ToJson for String {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
    fn is_zero(&self) -> bool {
        !*self
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

/// `[]byte`: base64, as `encoding/json` writes it.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

/// `metav1.Time`: RFC 3339 in seconds; the zero time is `null`, left out here.
impl ToJson for meta::Time {
    fn to_json(&self) -> Option<Value> {
        let (s, n) = (self.seconds.unwrap_or(0), self.nanos.unwrap_or(0));
        (s != 0 || n != 0).then(|| Value::String(rfc3339(s, None)))
    }
}

/// `metav1.MicroTime`: RFC 3339 with six fraction digits.
impl ToJson for meta::MicroTime {
    fn to_json(&self) -> Option<Value> {
        let (s, n) = (self.seconds.unwrap_or(0), self.nanos.unwrap_or(0));
        (s != 0 || n != 0).then(|| Value::String(rfc3339(s, Some(n / 1000))))
    }
}

impl ToJson for Quantity {
    fn to_json(&self) -> Option<Value> {
        self.string.clone().map(Value::String)
    }
}

/// `intstr.IntOrString`: type 0 is the int, 1 the string.
impl ToJson for IntOrString {
    fn to_json(&self) -> Option<Value> {
        Some(match self.r#type.unwrap_or(0) {
            1 => Value::String(self.str_val.clone().unwrap_or_default()),
            _ => Value::from(self.int_val.unwrap_or(0)),
        })
    }
}

/// `metav1.FieldsV1` holds its JSON document as bytes.
impl ToJson for meta::FieldsV1 {
    fn to_json(&self) -> Option<Value> {
        self.raw.as_deref().and_then(|r| serde_json::from_slice(r).ok())
    }
}

/// `runtime.RawExtension` holds the embedded object's JSON (a ControllerRevision's data); bytes that are not JSON
/// are left out.
impl ToJson for RawExtension {
    fn to_json(&self) -> Option<Value> {
        self.raw.as_deref().and_then(|r| serde_json::from_slice(r).ok())
    }
}

/// `2006-01-02T15:04:05Z`, or with `.000000` microseconds.
fn rfc3339(secs: i64, micros: Option<i32>) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    match micros {
        None => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
        Some(us) => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}Z"),
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_go_writes_them() {
        assert_eq!(rfc3339(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_216_400, None), "2026-12-02T13:00:00Z");
        assert_eq!(rfc3339(951_782_400, Some(7)), "2000-02-29T00:00:00.000007Z");
        let zero = meta::Time {
            seconds: Some(0),
            nanos: Some(0),
        };
        assert_eq!(zero.to_json(), None);
    }

    #[test]
    fn zero_values_follow_the_go_field() {
        let mut m = Map::new();
        put(&mut m, "a", &Some(String::new()), false);
        put(&mut m, "b", &Some(String::new()), true);
        put(&mut m, "c", &Some(0i64), true);
        put(&mut m, "d", &Some(false), false);
        put(&mut m, "e", &Vec::<String>::new(), true);
        assert_eq!(Value::Object(m), serde_json::json!({"b": "", "c": 0}));
        let port = IntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some("http".into()),
        };
        assert_eq!(port.to_json(), Some(Value::from("http")));
    }
}
