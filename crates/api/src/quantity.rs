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

/// How a quantity was written, which its canonical form keeps (apimachinery's `Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// A quantity's canonical string, as Go's `Quantity.String()` writes it after `ParseQuantity`: the value kept
/// exactly (rounded up to nano-units, as apimachinery does), in the format of its suffix, with the largest
/// suffix that leaves an integer mantissa: `0.5` → `500m`, `1000m` → `1`, `2000` → `2k`, `1.5` → `1500m`,
/// `1024Mi` → `1Gi`, `0.5Gi` → `512Mi`, `1.5e3` → `1500`, `10e2` → `1e3`; binary values below 1024 or not
/// integral are written decimal (`0.5Ki` → `512`). `None` for what Go would not parse (then the text is kept).
/// Kruise hashes the template after a round trip through Go's types, so its revision hash sees these forms.
pub fn canonical(s: &str) -> Option<String> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(split);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    // value = mantissa × 10^scale (× 1024^bin for binary suffixes).
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut scale = -i32::try_from(frac.len()).ok()?;
    let (format, shift10, bin) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "n" => (Format::DecimalSi, -9, 0),
        "u" => (Format::DecimalSi, -6, 0),
        "m" => (Format::DecimalSi, -3, 0),
        "k" => (Format::DecimalSi, 3, 0),
        "M" => (Format::DecimalSi, 6, 0),
        "G" => (Format::DecimalSi, 9, 0),
        "T" => (Format::DecimalSi, 12, 0),
        "P" => (Format::DecimalSi, 15, 0),
        "E" => (Format::DecimalSi, 18, 0),
        "Ki" => (Format::BinarySi, 0, 1),
        "Mi" => (Format::BinarySi, 0, 2),
        "Gi" => (Format::BinarySi, 0, 3),
        "Ti" => (Format::BinarySi, 0, 4),
        "Pi" => (Format::BinarySi, 0, 5),
        "Ei" => (Format::BinarySi, 0, 6),
        other => {
            let exp: i32 = other.strip_prefix(['e', 'E'])?.parse().ok()?;
            (Format::DecimalExponent, exp, 0)
        }
    };
    scale += shift10;
    for _ in 0..bin {
        mantissa = mantissa.checked_mul(1024)?;
    }
    // Below nano-units: rounded up (away from zero), as ParseQuantity does.
    if scale < -9 {
        let div = 10i128.checked_pow((-9 - scale).unsigned_abs())?;
        mantissa = mantissa.div_euclid(div) + i128::from(mantissa.rem_euclid(div) != 0);
        scale = -9;
    }
    if mantissa == 0 {
        return Some("0".into());
    }
    if neg {
        mantissa = -mantissa;
    }
    // CanonicalizeBytes: binary only for integers of at least 1024 in magnitude, decimal otherwise.
    let integral = if scale >= 0 {
        mantissa.checked_mul(10i128.checked_pow(scale.unsigned_abs())?)
    } else {
        let d = 10i128.checked_pow(scale.unsigned_abs())?;
        (mantissa % d == 0).then(|| mantissa / d)
    };
    let format = match (format, integral) {
        (Format::BinarySi, Some(v)) if v.abs() >= 1024 => {
            let (mut v, mut exp) = (v, 0);
            while exp < 6 && v % 1024 == 0 {
                v /= 1024;
                exp += 1;
            }
            return Some(format!("{v}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp]));
        }
        (Format::BinarySi, _) => Format::DecimalSi,
        (f, _) => f,
    };
    // AsCanonicalBytes: strip factors of ten, then lower the exponent to a multiple of three.
    while mantissa % 10 == 0 {
        mantissa /= 10;
        scale += 1;
    }
    match scale.rem_euclid(3) {
        1 => {
            mantissa = mantissa.checked_mul(10)?;
            scale -= 1;
        }
        2 => {
            mantissa = mantissa.checked_mul(100)?;
            scale -= 2;
        }
        _ => {}
    }
    let suffix = match format {
        Format::DecimalExponent if scale == 0 => String::new(),
        Format::DecimalExponent => format!("e{scale}"),
        _ => match scale {
            -9 => "n".into(),
            -6 => "u".into(),
            -3 => "m".into(),
            0 => String::new(),
            3 => "k".into(),
            6 => "M".into(),
            9 => "G".into(),
            12 => "T".into(),
            15 => "P".into(),
            18 => "E".into(),
            // Beyond exa: Go falls back to an exponent.
            e => format!("e{e}"),
        },
    };
    Some(format!("{mantissa}{suffix}"))
}

/// Writes every quantity in `v` (a pod template, a volumeClaimTemplate, ...) in Go's canonical form.
pub fn canonicalize_in(v: &mut Value) {
    canonical_quantities(v, "");
}

/// Every `resource.Quantity` of a pod template: the values of `limits`/`requests` (containers, pod-level
/// `resources`, ephemeral volume claims), `overhead`, and `sizeLimit` / `divisor` (emptyDir, resourceFieldRef).
fn canonical_quantities(v: &mut Value, key: &str) {
    match v {
        // Maps with the user's keys: a label named `divisor` is no quantity.
        Value::Object(_)
            if matches!(
                key,
                "labels" | "annotations" | "nodeSelector" | "volumeAttributes"
            ) => {}
        Value::Object(m) => {
            let quantities = matches!(key, "limits" | "requests" | "overhead");
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(q) if quantities || k == "sizeLimit" || k == "divisor" => {
                        if let Some(c) = canonical(q) {
                            *q = c;
                        }
                    }
                    _ => canonical_quantities(x, k),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| canonical_quantities(x, key)),
        _ => {}
    }
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

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn quantities_canonicalise_as_go_writes_them() {
        // (input, Go's Quantity.String() after ParseQuantity), apimachinery's rules.
        for (input, want) in [
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1.5", "1500m"),
            ("1500", "1500"),
            ("2000", "2k"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("250m", "250m"),
            ("1", "1"),
            ("0", "0"),
            ("0.0", "0"),
            ("-0.5", "-500m"),
            ("+2", "2"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("1.5e3", "1500"),
            ("10e2", "1e3"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Gi", "1536Mi"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("1000Ki", "1000Ki"),
            ("2048Ki", "2Mi"),
            ("123Mi", "123Mi"),
            ("5G", "5G"),
            ("0.00000000001", "1n"),
            ("1.0000000001", "1000000001n"),
            ("0.0001m", "100n"),
            (".5", "500m"),
            ("1.", "1"),
        ] {
            assert_eq!(canonical(input).as_deref(), Some(want), "{input}");
        }
        for bad in ["", "abc", "1.2.3", "1Q", "--1", "1e", "."] {
            assert_eq!(canonical(bad), None, "{bad}");
        }
    }
}
