//! JSON nested as deep as Kubernetes' decoders allow (10,000 levels, Go's `encoding/json` `maxNestingDepth`,
//! kept by sigs.k8s.io/json), without risking the stack: deep documents are found by a byte scan, parsed
//! without serde_json's recursion limit, and every request that holds one runs on a thread with a large stack.

use serde::de::DeserializeOwned;

/// Go's `encoding/json` `maxNestingDepth`: a document nesting deeper fails with `exceeded max depth`.
pub(crate) const MAX_DEPTH: usize = 10_000;

/// Nesting up to which a request is handled on the async worker that received it: serde_json's own recursion
/// limit is 128, and every recursive walk over a value this shallow fits a worker's 2 MiB stack.
pub(crate) const SHALLOW: usize = 100;

/// The stack of the thread a deep request runs on. Every recursion over a value (parse, schema walk, merge,
/// clone, serialize, drop) takes at most a few KiB a level in a debug build; the memory is only reserved, and
/// touched as deep as a request goes.
const DEEP_STACK: usize = 512 << 20;

/// The error Go's scanner gives past [`MAX_DEPTH`] (`scanner.pushParseState`: `invalid character '['
/// exceeded max depth`), for the bracket that went past it.
pub(crate) fn exceeded(bracket: u8) -> String {
    format!("invalid character '{}' exceeded max depth", char::from(bracket))
}

/// How deeply `json` nests objects and arrays (0 for a scalar), counting as Go's scanner does; strings (and
/// the brackets in them) are skipped. Stops counting once past [`MAX_DEPTH`]. Not a validator: the parser
/// reports malformed JSON.
pub(crate) fn nesting(json: &[u8]) -> usize {
    scan(json).0
}

/// [`nesting`], and the bracket that went past [`MAX_DEPTH`] (the scan stops there), if one did.
pub(crate) fn scan(json: &[u8]) -> (usize, Option<u8>) {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut bytes = json.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    max = depth;
                    if max > MAX_DEPTH {
                        return (max, Some(b));
                    }
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                while let Some(&c) = bytes.next() {
                    match c {
                        b'\\' => {
                            bytes.next();
                        }
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (max, None)
}

/// `serde_json::from_slice` without its recursion limit of 128: callers have bounded the nesting by
/// [`nesting`] (a request's body at dispatch, a stored object when it was written) and run on a stack that
/// holds it ([`run`]).
pub(crate) fn from_slice<T: DeserializeOwned>(json: &[u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(json);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Runs `f` on a thread with a [`DEEP_STACK`] stack and waits for it (blocking the caller: deep requests are
/// rare, and the work is the request's own). A panic in `f` is resumed here, as if `f` had run inline; so is a
/// failure to start the thread (the process is out of threads or memory).
/// The caller's tokio runtime is entered on that thread (a watch's deadline is a tokio timer).
pub(crate) fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let runtime = tokio::runtime::Handle::try_current().ok();
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("sim-apiserver-deep".into())
            .stack_size(DEEP_STACK)
            .spawn_scoped(s, move || {
                let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
                f()
            })
            .expect("a thread for a deeply nested request");
        handle.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// The nesting of a value, without recursion (a value built from a deep patch is measured before anything
/// walks it recursively on a small stack).
pub(crate) fn value_nesting(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    let mut max = 0;
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Object(m) => {
                max = max.max(d + 1);
                stack.extend(m.values().map(|c| (c, d + 1)));
            }
            Value::Array(a) => {
                max = max.max(d + 1);
                stack.extend(a.iter().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn counts_nesting_as_go_scanner() {
        assert_eq!(nesting(b"1"), 0);
        assert_eq!(nesting(br#"{"a":[1,{"b":"[[[{{"}],"c":{}}"#), 3);
        assert_eq!(nesting(br#"{"a":"\"[[[\\","b":[]}"#), 2);
        assert_eq!(nesting(nested(MAX_DEPTH).as_bytes()), MAX_DEPTH);
        assert_eq!(nesting(nested(MAX_DEPTH + 5).as_bytes()), MAX_DEPTH + 1);
    }

    #[test]
    fn parses_and_drops_ten_thousand_levels_on_the_deep_stack() {
        let text = nested(MAX_DEPTH);
        let depth = run(|| {
            let v: serde_json::Value = from_slice(text.as_bytes()).expect("parses");
            let back = serde_json::to_string(&v).expect("serializes");
            assert_eq!(back, text);
            value_nesting(&v)
        });
        assert_eq!(depth, MAX_DEPTH);
        assert!(serde_json::from_str::<serde_json::Value>(&nested(200)).is_err());
    }
}
