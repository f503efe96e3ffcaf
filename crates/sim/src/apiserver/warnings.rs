//! `Warning` response headers as kube-apiserver's recorder writes them: de-duplicated, 4,096 runes of text in
//! all, each cut to 256 runes once the total is exceeded (k8s.io/apiserver/pkg/endpoints/filters/warning.go,
//! `recorder.AddWarning`), each formatted by `net.NewWarningHeader` (k8s.io/apimachinery/pkg/util/net/http.go).

use std::collections::HashSet;

use axum::http::{HeaderMap, HeaderValue};

/// `truncateAtTotalRunes`: the text of all warnings before the recorder starts truncating.
const TOTAL_RUNES: usize = 4 * 1024;
/// `truncateItemRunes`: each warning's text once truncating.
const ITEM_RUNES: usize = 256;

/// One response's warnings (agent `-`, code 299, as every warning kube-apiserver's handlers add).
#[derive(Debug, Default)]
pub(super) struct Recorder {
    recorded: HashSet<String>,
    /// In the order added, for the replay when truncation starts.
    ordered: Vec<String>,
    /// Runes of text written as headers.
    written: usize,
    truncating: bool,
    headers: Vec<HeaderValue>,
}

impl Recorder {
    /// Records `text`, as `AddWarning("", text)`: an empty or repeated text is ignored; over the total, earlier
    /// headers are rewritten with their text cut to [`ITEM_RUNES`], later ones cut too, and once the total is
    /// reached again the rest are dropped.
    pub(super) fn add(&mut self, text: &str) {
        if text.is_empty() || (self.written >= TOTAL_RUNES && self.truncating) {
            return;
        }
        if !self.recorded.insert(text.to_string()) {
            return;
        }
        self.ordered.push(text.to_string());
        let (text, runes) = if self.truncating {
            cut(text)
        } else {
            (text, text.chars().count())
        };
        let Some(value) = header(text) else {
            return;
        };
        if self.written + runes <= TOTAL_RUNES || self.truncating {
            self.written += runes;
            self.headers.push(value);
            return;
        }
        self.truncating = true;
        self.written = 0;
        self.headers.clear();
        for text in &self.ordered {
            let (text, runes) = cut(text);
            if let Some(h) = header(text) {
                self.written += runes;
                self.headers.push(h);
            }
        }
    }

    /// Appends the recorded headers to `headers`.
    pub(super) fn write(self, headers: &mut HeaderMap) {
        for h in self.headers {
            headers.append("warning", h);
        }
    }
}

/// `text` cut to [`ITEM_RUNES`] runes, and its rune count.
fn cut(text: &str) -> (&str, usize) {
    match text.char_indices().nth(ITEM_RUNES) {
        Some((end, _)) => (&text[..end], ITEM_RUNES),
        None => (text, text.chars().count()),
    }
}

/// `NewWarningHeader(299, "", text)`: `299 - "<text>"` with `"` and `\` escaped; `None` for a text with a
/// control character (which kube-apiserver refuses to write, as a header cannot carry it).
fn header(text: &str) -> Option<HeaderValue> {
    if text.chars().any(char::is_control) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str("299 - \"");
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    // Go writes the UTF-8 bytes as they are; `from_bytes` takes them (obs-text), `from_str` would not.
    HeaderValue::from_bytes(out.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(r: Recorder) -> Vec<String> {
        let mut h = HeaderMap::new();
        r.write(&mut h);
        h.get_all("warning")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    #[test]
    fn dedups_escapes_and_skips_control_characters() {
        let mut r = Recorder::default();
        for t in ["a", "", "a", "say \"hi\" \\o/", "bad\ntext", "Iñtërnâtiônàl"] {
            r.add(t);
        }
        assert_eq!(
            written(r),
            vec![
                r#"299 - "a""#,
                r#"299 - "say \"hi\" \\o/""#,
                "299 - \"Iñtërnâtiônàl\""
            ]
        );
    }

    /// kube's `TestTruncation` at full scale: items fit until the total is crossed, then every item (earlier
    /// ones replayed) is cut to 256 runes, and once the total is reached again the rest are dropped.
    #[test]
    fn truncates_as_kube_recorder() {
        let mut r = Recorder::default();
        let long = |c: char| c.to_string().repeat(1000);
        r.add(&long('a'));
        r.add(&long('b'));
        r.add(&long('c'));
        r.add("short");
        assert_eq!(r.written, 3005);
        assert!(!r.truncating);
        // 3,005 + 1,200 runes crosses 4,096.
        r.add(&"d".repeat(1200));
        assert!(r.truncating);
        assert_eq!(r.written, 256 * 3 + 5 + 256);
        for c in 'e'..='t' {
            r.add(&long(c));
        }
        let got = written(r);
        // 1,029 runes, then 256 per item while under 4,096: 12 more items are written (the 12th crossing it).
        assert_eq!(got.len(), 5 + 12, "{got:?}");
        assert_eq!(got[0], format!("299 - \"{}\"", "a".repeat(256)));
        assert_eq!(got[3], "299 - \"short\"");
        assert_eq!(got[16], format!("299 - \"{}\"", "p".repeat(256)));
    }

    #[test]
    fn a_hundred_thousand_warnings_give_a_bounded_header_set() {
        let mut r = Recorder::default();
        for i in 0..100_000 {
            r.add(&format!("unknown field \"spec.f{i}\""));
        }
        let got = written(r);
        let bytes: usize = got.iter().map(String::len).sum();
        assert!(got.len() < 250, "{}", got.len());
        assert!(bytes < 6 * 1024, "{bytes}");
        assert_eq!(got[0], "299 - \"unknown field \\\"spec.f0\\\"\"");
    }
}
