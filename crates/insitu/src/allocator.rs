//! The global allocator: its figures for `/metrics` (`insitu_allocator_bytes{kind}`) and the controller's settings (decay, thread caches).

/// How long the controller's jemalloc keeps freed pages before returning them to the system. jemalloc's
/// default, 10 s, left 5–18 MiB of a 10k-pod rollout's freed pages resident 15 s after it (the background
/// thread purges along a curve, not at the deadline); with 1 s they are back within seconds of the burst.
/// The cost is more `madvise` calls during a burst (CPU unchanged within noise at 10k pods:
/// `docs/benchmarks.md`, "The controller's memory"). The embedded cluster keeps the default: it frees and
/// reuses memory all the time, and RSS is not what it is judged by.
pub const CONTROLLER_DIRTY_DECAY_MS: isize = 1000;

/// Sets jemalloc's dirty-page decay for every arena, the present ones and those made later, unless the
/// operator chose one (`_RJEM_MALLOC_CONF=dirty_decay_ms:…`). Returns whether it was set.
/// Whether the operator's `_RJEM_MALLOC_CONF` sets `option` (theirs wins over the controller's choice).
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
fn operator_chose(option: &str) -> bool {
    std::env::var("_RJEM_MALLOC_CONF").is_ok_and(|c| c.contains(option))
}

#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
pub fn set_dirty_decay(ms: isize) -> bool {
    use tikv_jemalloc_ctl::{Access as _, AsName as _, arenas};
    if operator_chose("dirty_decay_ms") {
        return false;
    }
    if b"arenas.dirty_decay_ms\0".name().write(ms).is_err() {
        return false;
    }
    // Arenas not yet in use refuse the write; they take the default above when they are made.
    for i in 0..arenas::narenas::read().unwrap_or(0) {
        let _ = format!("arena.{i}.dirty_decay_ms\0").as_str().name().write(ms);
    }
    true
}

#[cfg(not(all(target_os = "linux", not(target_env = "msvc"))))]
pub fn set_dirty_decay(_ms: isize) -> bool {
    false
}

/// Turns off jemalloc's cache of freed objects for the calling thread (the controller calls it on every
/// runtime thread), unless the operator chose (`_RJEM_MALLOC_CONF=tcache…`). A thread's cache keeps objects it
/// freed for its next allocations; a runtime thread idle after a rollout keeps them, with the pages under them.
/// Without it: 60.4 / 60.9 MiB after two 10k-pod rollouts instead of 62.5 / 63.3, the same CPU within noise
/// (`docs/benchmarks.md`, "The controller's memory"). Returns whether it was turned off.
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
pub fn disable_thread_cache() -> bool {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    if operator_chose("tcache") {
        return false;
    }
    b"thread.tcache.enabled\0".name().write(false).is_ok()
}

#[cfg(not(all(target_os = "linux", not(target_env = "msvc"))))]
pub fn disable_thread_cache() -> bool {
    false
}

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

    /// The decay is written and reads back (jemalloc is linked into the test binary, if not its allocator).
    #[cfg(all(target_os = "linux", not(target_env = "msvc")))]
    #[test]
    fn sets_the_dirty_decay() {
        use tikv_jemalloc_ctl::{Access as _, AsName as _};
        if std::env::var("_RJEM_MALLOC_CONF").is_ok() {
            return;
        }
        assert!(super::set_dirty_decay(1234));
        let read: isize = b"arenas.dirty_decay_ms\0".name().read().unwrap();
        assert_eq!(read, 1234);
        let arena0: isize = b"arena.0.dirty_decay_ms\0".name().read().unwrap();
        assert_eq!(arena0, 1234);
    }

    /// Per thread: this thread's cache goes off, another thread's stays as it was.
    #[cfg(all(target_os = "linux", not(target_env = "msvc")))]
    #[test]
    fn turns_off_this_threads_cache() {
        use tikv_jemalloc_ctl::{Access as _, AsName as _};
        if std::env::var("_RJEM_MALLOC_CONF").is_ok() {
            return;
        }
        let enabled = || -> bool { b"thread.tcache.enabled\0".name().read().unwrap() };
        let other = std::thread::spawn(move || {
            let before = enabled();
            assert!(super::disable_thread_cache());
            (before, enabled())
        })
        .join()
        .unwrap();
        assert_eq!(other, (true, false));
        assert!(enabled());
    }
}
