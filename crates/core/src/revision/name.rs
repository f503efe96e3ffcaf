//! Revision names as pods carry them: Kruise's short hash and revision-hash match (vocabulary).

/// Kruise `GetShortHash`: the last `-` segment.
pub fn short_hash(s: &str) -> &str {
    // A byte search, not `rsplit('-')`: this runs for every pod and the char-pattern splitter costs a few
    // hundred instructions per call. `-` is ASCII, so the byte after it starts a char.
    match s.bytes().rposition(|b| b == b'-') {
        Some(i) => &s[i + 1..],
        None => s,
    }
}

/// Kruise `EqualToRevisionHash`: full name match, or short-hash match (covers `CloneSetShortHash` labels).
pub fn equal_to_revision(label: &str, revision: &str) -> bool {
    !label.is_empty() && (label == revision || short_hash(label) == short_hash(revision))
}
