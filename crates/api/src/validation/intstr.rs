//! Int-or-percent parsing with Kruise's rules (`util.GetScaledValueFromIntOrPercent`): strings must end in `%`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A percent value (helper for defaults).
pub fn percent(s: &str) -> IntOrString {
    IntOrString::String(s.to_string())
}

/// Renders the value as the user wrote it.
pub fn display(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => format!("\"{s}\""),
    }
}

/// Kruise's float-aware scaling: ints as-is; `"p%"` → p% of `total`, rounded up or down.
/// A string without `%` is an error (`"5"` was silently 5% before Kruise v1.9).
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err("invalid type: string is not a percentage".into());
            };
            // Go's strconv.ParseFloat; no trimming (Kruise does none either).
            let p: f64 = num
                .parse()
                .map_err(|_| format!("strconv.ParseFloat: parsing {num:?}: invalid syntax"))?;
            let raw = p * f64::from(total) / 100.0;
            Ok(if round_up {
                raw.ceil() as i32
            } else {
                raw.floor() as i32
            })
        }
    }
}

/// apimachinery's legacy `intstr.GetValueFromIntOrPercent`, which the Kruise controller uses for
/// maxUnavailable/maxSurge: every string is a percent (`%` stripped), and a non-integer percent is 0.
pub fn legacy_scaled_value(v: &IntOrString, total: i32, round_up: bool) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let Ok(p) = s.trim_end_matches('%').parse::<i64>() else {
                return 0;
            };
            let prod = p * i64::from(total);
            let v = if round_up {
                (prod + 99).div_euclid(100)
            } else {
                prod.div_euclid(100)
            };
            v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_rounding() {
        assert_eq!(scaled_value(&percent("20%"), 3, true), Ok(1));
        assert_eq!(scaled_value(&percent("20%"), 3, false), Ok(0));
        assert_eq!(scaled_value(&percent("12.5%"), 8, true), Ok(1));
        assert!(scaled_value(&percent("5"), 10, true).is_err());
        assert_eq!(legacy_scaled_value(&percent("20%"), 20, true), 4);
        assert_eq!(legacy_scaled_value(&percent("12.5%"), 8, true), 0);
        assert_eq!(legacy_scaled_value(&IntOrString::Int(3), 8, true), 3);
    }
}
