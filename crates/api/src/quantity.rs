//! Kubernetes resource quantities (`resource.Quantity`) and the pod QoS class (`qos.ComputePodQOS`), on JSON.

use std::collections::BTreeMap;

use serde_json::Value;

/// Parses a Kubernetes quantity into nano-units (`1` → 1e9, `500m` → 5e8, `1Ki` → 1024e9).
pub fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    if num.is_empty() {
        return None;
    }
    let (neg, num) = match num.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac9: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    let base: i128 = int
        .parse::<i128>()
        .unwrap_or(0)
        .checked_mul(1_000_000_000)?
        .checked_add(frac9.parse::<i128>().ok()?)?;
    let scaled = match suffix {
        "" => base,
        "n" => base / 1_000_000_000,
        "u" => base / 1_000_000,
        "m" => base / 1_000,
        "k" => base.checked_mul(1_000)?,
        "M" => base.checked_mul(1_000_000)?,
        "G" => base.checked_mul(1_000_000_000)?,
        "T" => base.checked_mul(1_000_000_000_000)?,
        "P" => base.checked_mul(1_000_000_000_000_000)?,
        "E" => base.checked_mul(1_000_000_000_000_000_000)?,
        "Ki" => base.checked_mul(1 << 10)?,
        "Mi" => base.checked_mul(1 << 20)?,
        "Gi" => base.checked_mul(1 << 30)?,
        "Ti" => base.checked_mul(1 << 40)?,
        "Pi" => base.checked_mul(1 << 50)?,
        "Ei" => base.checked_mul(1 << 60)?,
        other => {
            let exp: i32 = other.strip_prefix(['e', 'E'])?.parse().ok()?;
            if exp >= 0 {
                base.checked_mul(10i128.checked_pow(exp.unsigned_abs())?)?
            } else {
                base / 10i128.checked_pow(exp.unsigned_abs())?
            }
        }
    };
    Some(if neg { -scaled } else { scaled })
}

pub fn quantity(v: &Value) -> Option<i128> {
    match v {
        Value::String(s) => parse_quantity(s),
        Value::Number(n) => n.as_f64().map(|f| (f * 1e9) as i128),
        _ => None,
    }
}

/// `qos.ComputePodQOS`: BestEffort, Burstable or Guaranteed.
pub fn qos_class(pod: &Value) -> &'static str {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let containers = ["/spec/containers", "/spec/initContainers"]
        .into_iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten();
    for c in containers {
        for (field, acc) in [("requests", &mut requests), ("limits", &mut limits)] {
            let mut found = Vec::new();
            if let Some(m) = c
                .pointer(&format!("/resources/{field}"))
                .and_then(Value::as_object)
            {
                for name in ["cpu", "memory"] {
                    if let Some(q) = m.get(name).and_then(quantity).filter(|q| *q > 0) {
                        *acc.entry(name).or_insert(0) += q;
                        found.push(name);
                    }
                }
            }
            if field == "limits" && found.len() < 2 {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.iter().all(|(k, v)| limits.get(k) == Some(v)) && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}
