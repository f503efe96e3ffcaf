//! The global allocator's figures for `/metrics` (`insitu_allocator_bytes{kind}`), read from jemalloc.

/// jemalloc's `stats.*` after refreshing them (`epoch`): `allocated` is the live heap, `active` the pages
/// holding it, `resident` what jemalloc has in memory (active, its metadata, and freed pages not yet returned),
/// `retained` address space kept without memory behind it. RSS above `resident` is code, stacks and others'
/// allocations. Empty when the figures cannot be read (the binary built without jemalloc).
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
pub fn stats() -> Vec<(&'static str, i64)> {
    use tikv_jemalloc_ctl::{epoch, stats};
    type Read = fn() -> tikv_jemalloc_ctl::Result<usize>;
    if epoch::advance().is_err() {
        return Vec::new();
    }
    let read: [(&'static str, Read); 6] = [
        ("allocated", stats::allocated::read),
        ("active", stats::active::read),
        ("resident", stats::resident::read),
        ("mapped", stats::mapped::read),
        ("retained", stats::retained::read),
        ("metadata", stats::metadata::read),
    ];
    read.into_iter()
        .filter_map(|(kind, f)| f().ok().map(|b| (kind, i64::try_from(b).unwrap_or(i64::MAX))))
        .collect()
}

#[cfg(not(all(target_os = "linux", not(target_env = "msvc"))))]
pub fn stats() -> Vec<(&'static str, i64)> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    /// The test binary does not use jemalloc as its allocator, but jemalloc is linked and answers: its own
    /// figures are read (the library allocates its bookkeeping at least).
    #[cfg(all(target_os = "linux", not(target_env = "msvc")))]
    #[test]
    fn reads_jemallocs_figures() {
        let stats = super::stats();
        let kinds: Vec<&str> = stats.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [
                "allocated",
                "active",
                "resident",
                "mapped",
                "retained",
                "metadata"
            ]
        );
        assert!(stats.iter().all(|(_, b)| *b >= 0));
    }
}
