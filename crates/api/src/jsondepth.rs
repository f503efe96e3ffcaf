//! JSON nesting depth as Kubernetes allows it: objects up to 10,000 levels deep decode, deeper ones are refused.
//!
//! Kubernetes decodes JSON with `sigs.k8s.io/json` (a fork of Go's `encoding/json`), whose scanner refuses a
//! document once more than `maxNestingDepth = 10000` arrays and objects are open (`scanner.go`,
//! `pushParseState`: "exceeded max depth"). serde_json stops at 128 by default; [`from_slice`] lifts that limit
//! after [`check`] has measured the document without recursing. Decoding, cloning and serialising a
//! `serde_json::Value` recurse once per level, so deep documents need a thread with a large stack:
//! [`DEEP_STACK`] is enough for every operation at [`MAX_DEPTH`] in a debug build (see the tests).

use serde::de::DeserializeOwned;

/// The deepest nesting Kubernetes' JSON decoder accepts (`maxNestingDepth` in `sigs.k8s.io/json`).
pub const MAX_DEPTH: usize = 10_000;

/// Stack size for a thread that decodes, converts, clones or serialises documents up to [`MAX_DEPTH`] deep.
/// Measured: a debug build needs ~3 KiB per level to clone a `Value`; release builds far less. Only the pages
/// a deep document touches are ever committed.
pub const DEEP_STACK: usize = 256 << 20;

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DepthError {
    #[error(
        "the JSON nests more than {limit} levels deep (Kubernetes' JSON decoder refuses documents past its max depth of {limit})"
    )]
    TooDeep { limit: usize },
    #[error("{0}")]
    Json(String),
}

/// The deepest nesting of arrays and objects in `bytes` (a top-level object counts 1), or `TooDeep` as soon as
/// it passes `limit`. Iterative: no recursion, any input size. Malformed JSON is measured as far as it goes
/// (the decoder reports it afterwards).
pub fn check(bytes: &[u8], limit: usize) -> Result<usize, DepthError> {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Err(DepthError::TooDeep { limit });
                }
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(deepest)
}

/// Decodes `bytes` as Kubernetes would: refused past [`MAX_DEPTH`], otherwise without serde_json's limit of 128.
/// Run it on a thread with a [`DEEP_STACK`] when the document may be deep.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DepthError> {
    check(bytes, MAX_DEPTH)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).map_err(|e| DepthError::Json(e.to_string()))?;
    de.end().map_err(|e| DepthError::Json(e.to_string()))?;
    Ok(value)
}

/// `depth` nested one-key objects around `1` (`{"a":{"a":…1…}}`): test input.
pub fn nested_objects(depth: usize) -> String {
    let mut s = String::with_capacity(depth * 6 + 1);
    for _ in 0..depth {
        s.push_str("{\"a\":");
    }
    s.push('1');
    s.push_str(&"}".repeat(depth));
    s
}

/// Runs `f` on a new thread with a [`DEEP_STACK`] and waits for it (a panic is resumed here).
pub fn on_deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("insitu-deep-json".into())
            .stack_size(DEEP_STACK)
            .spawn_scoped(s, f)
            .unwrap_or_else(|e| panic!("spawning a thread for a deep JSON document: {e}"));
        match handle.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn depth_counts_containers_and_skips_strings() {
        assert_eq!(check(b"1", 10), Ok(0));
        assert_eq!(check(br#"{"a":[1,{"b":2}]}"#, 10), Ok(3));
        // Brackets and escaped quotes inside strings are not nesting.
        assert_eq!(check(br#"{"a":"[[[{\"{{"}"#, 10), Ok(1));
        assert_eq!(check(nested_objects(10_000).as_bytes(), MAX_DEPTH), Ok(10_000));
        assert_eq!(
            check(nested_objects(10_001).as_bytes(), MAX_DEPTH),
            Err(DepthError::TooDeep { limit: MAX_DEPTH })
        );
    }

    #[test]
    fn decodes_up_to_the_kubernetes_limit_and_refuses_past_it() {
        let ok = nested_objects(MAX_DEPTH);
        let v: Value = on_deep_stack(|| from_slice::<Value>(ok.as_bytes())).unwrap();
        // Everything a deep value goes through, on the deep stack: clone, compare, serialise.
        let (same, text) = on_deep_stack(|| {
            let copy = v.clone();
            (copy == v, serde_json::to_string(&copy).unwrap())
        });
        assert!(same);
        assert_eq!(text, ok);
        // serde_json's own limit would have refused it.
        assert!(serde_json::from_str::<Value>(&ok).is_err());
        // Dropping is recursive too: it fits the default 2 MiB stack of a test thread at the limit.
        drop(v);
        let err = from_slice::<Value>(nested_objects(MAX_DEPTH + 1).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("max depth of 10000"), "{err}");
    }
}
