//! client-go's EventCorrelator for the CloneSet's Events: aggregate similar ones, count repeats, rate-limit per object.
//!
//! Kruise records events through client-go's recorder, whose correlator decides what reaches the apiserver. A
//! 10,000-pod rollout therefore writes about 25 Events per CloneSet, not 10,000: after 10 events that differ
//! only in their message, one "(combined from similar events)" event is counted up instead; and a token bucket
//! per involved object (burst 25, one more every 5 minutes) drops the rest. Reproduced here so the Events users
//! see with `kubectl describe cloneset` are Kruise's, and so the Events never cost more API writes than pods do.
//! Pure: the caller passes `now`.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::jiff::Timestamp;

/// client-go `maxLruCacheEntries`: each of the three caches forgets its least recently used key beyond this.
const LRU_ENTRIES: usize = 4096;
/// client-go `defaultAggregateMaxEvents`: distinct messages of one reason before they are combined.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go `defaultAggregateIntervalInSeconds`: a similar event older than this starts a fresh group.
const AGGREGATE_INTERVAL_SECONDS: i64 = 600;
/// client-go `defaultSpamBurst` and `defaultSpamQPS`: 25 events per object, then one per 300 s.
const SPAM_BURST: f64 = 25.0;
const SPAM_QPS: f64 = 1.0 / 300.0;
/// client-go `EventAggregatorByReasonMessageFunc`.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// One event as the recorder sees it. Source, kind and API version are the same for every event this
/// controller records (cloneset-controller, CloneSet, apps.kruise.io/v1alpha1), so they are left out of keys.
#[derive(Clone, Copy, Debug)]
pub struct Occurrence<'a> {
    pub namespace: &'a str,
    /// The involved object's name and UID.
    pub object: &'a str,
    pub uid: &'a str,
    pub type_: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
}

/// What to write for one occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Dropped by the spam filter (client-go `EventCorrelateResult.Skip`).
    Skip,
    /// A new Event `name` with count 1.
    Create { name: String, message: String },
    /// The Event `name` seen before: patch count, lastTimestamp and message. Created (with the same name
    /// and count) if it is gone, as client-go's `recordEvent` does.
    Patch {
        name: String,
        message: String,
        count: i32,
        first_timestamp: Timestamp,
    },
}

/// A map that forgets its least recently used key beyond `LRU_ENTRIES` (groupcache `lru.Cache`).
#[derive(Debug)]
struct Lru<V> {
    tick: u64,
    map: HashMap<String, (u64, V)>,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            tick: 0,
            map: HashMap::new(),
        }
    }
}

impl<V> Lru<V> {
    /// The entry for `key`, marked most recently used; `make` fills a missing one.
    fn entry(&mut self, key: String, make: impl FnOnce() -> V) -> &mut V {
        self.tick += 1;
        if !self.map.contains_key(&key) && self.map.len() >= LRU_ENTRIES {
            // O(n), but only when a new key arrives at a full cache.
            if let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone())
            {
                self.map.remove(&oldest);
            }
        }
        let slot = self.map.entry(key).or_insert_with(|| (0, make()));
        slot.0 = self.tick;
        &mut slot.1
    }
}

/// client-go `aggregateRecord`.
#[derive(Debug)]
struct Group {
    messages: BTreeSet<String>,
    last: Option<Timestamp>,
}

/// client-go `eventLog`.
#[derive(Debug)]
struct Logged {
    count: i32,
    first_timestamp: Timestamp,
    name: String,
}

/// client-go token bucket (`flowcontrol.NewTokenBucketRateLimiter`), starting full.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Option<Timestamp>,
}

impl Bucket {
    fn try_accept(&mut self, now: Timestamp) -> bool {
        if let Some(at) = self.at {
            let elapsed = now.duration_since(at).as_secs_f64().max(0.0);
            self.tokens = (self.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// client-go `EventCorrelator` with its default options.
#[derive(Debug, Default)]
pub struct Correlator {
    groups: Lru<Group>,
    logged: Lru<Logged>,
    buckets: Lru<Bucket>,
}

impl Correlator {
    /// client-go `EventCorrelate`: aggregate, then count, then filter. `name` is the name the Event gets if
    /// this occurrence creates one.
    pub fn correlate(&mut self, ev: Occurrence<'_>, name: String, now: Timestamp) -> Write {
        let object = [ev.namespace, ev.object, ev.uid].join("\u{0}");
        let group_key = [object.as_str(), ev.type_, ev.reason].join("\u{0}");

        // EventAggregate: a group of events that differ only by message, renewed after 10 quiet minutes.
        let group = self.groups.entry(group_key.clone(), || Group {
            messages: BTreeSet::new(),
            last: None,
        });
        if group
            .last
            .is_none_or(|last| now.duration_since(last).as_secs() > AGGREGATE_INTERVAL_SECONDS)
        {
            group.messages.clear();
        }
        group.messages.insert(ev.message.to_string());
        group.last = Some(now);
        let (key, name, message) = if group.messages.len() < AGGREGATE_MAX_EVENTS {
            let key = [group_key.as_str(), ev.message].join("\u{0}");
            (key, name, ev.message.to_string())
        } else {
            // Keep the set at its maximum (client-go pops an arbitrary element).
            if let Some(first) = group.messages.iter().next().cloned() {
                group.messages.remove(&first);
            }
            // client-go names it `<object>.<now in ns, hex>`, which is what the caller's `name` is too (made
            // unique, so that two events of one instant on a simulated clock do not collide).
            (group_key, name, format!("{COMBINED_PREFIX}{}", ev.message))
        };

        // eventObserve: the same key again is the same Event with one more count — counted even when the
        // filter then drops it, so the next write carries the true total.
        let logged = self.logged.entry(key, || Logged {
            count: 0,
            first_timestamp: now,
            name,
        });
        logged.count = logged.count.saturating_add(1);
        let write = if logged.count == 1 {
            Write::Create {
                name: logged.name.clone(),
                message,
            }
        } else {
            Write::Patch {
                name: logged.name.clone(),
                message,
                count: logged.count,
                first_timestamp: logged.first_timestamp,
            }
        };

        // EventSourceObjectSpamFilter: one token bucket per source + involved object.
        let bucket = self.buckets.entry(object, || Bucket {
            tokens: SPAM_BURST,
            at: None,
        });
        if bucket.try_accept(now) {
            write
        } else {
            Write::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ<'a>(reason: &'a str, message: &'a str) -> Occurrence<'a> {
        Occurrence {
            namespace: "default",
            object: "sample",
            uid: "u1",
            type_: "Normal",
            reason,
            message,
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn distinct_messages_are_combined_from_the_tenth() {
        let mut c = Correlator::default();
        let mut writes = Vec::new();
        for i in 0..12 {
            let msg = format!("successfully update pod sample-{i} in-place(revision r2)");
            writes.push(c.correlate(
                occ("SuccessfulUpdatePodInPlace", &msg),
                format!("sample.{i}"),
                t(i),
            ));
        }
        for (i, w) in writes.iter().take(9).enumerate() {
            assert_eq!(
                *w,
                Write::Create {
                    name: format!("sample.{i}"),
                    message: format!("successfully update pod sample-{i} in-place(revision r2)")
                }
            );
        }
        let combined_name = "sample.9".to_string();
        assert_eq!(
            writes[9],
            Write::Create {
                name: combined_name.clone(),
                message: format!("{COMBINED_PREFIX}successfully update pod sample-9 in-place(revision r2)")
            }
        );
        assert_eq!(
            writes[11],
            Write::Patch {
                name: combined_name,
                message: format!("{COMBINED_PREFIX}successfully update pod sample-11 in-place(revision r2)"),
                count: 3,
                first_timestamp: t(9),
            }
        );
    }

    #[test]
    fn identical_events_count_up_one_event() {
        let mut c = Correlator::default();
        let first = c.correlate(occ("FailedUpdate", "boom"), "sample.a".into(), t(0));
        assert!(matches!(first, Write::Create { ref name, .. } if name == "sample.a"));
        let again = c.correlate(occ("FailedUpdate", "boom"), "sample.b".into(), t(5));
        assert_eq!(
            again,
            Write::Patch {
                name: "sample.a".into(),
                message: "boom".into(),
                count: 2,
                first_timestamp: t(0)
            }
        );
        // Another reason is another group and another event.
        let other = c.correlate(occ("SuccessfulCreate", "boom"), "sample.c".into(), t(6));
        assert!(matches!(other, Write::Create { ref name, .. } if name == "sample.c"));
    }

    #[test]
    fn a_group_quiet_for_ten_minutes_starts_again() {
        let mut c = Correlator::default();
        for i in 0..9 {
            c.correlate(occ("SuccessfulCreate", &format!("m{i}")), format!("n{i}"), t(i));
        }
        // 601 s after the last one the group is fresh, so the 10th distinct message is not combined.
        let w = c.correlate(occ("SuccessfulCreate", "m9"), "n9".into(), t(8 + 601));
        assert_eq!(
            w,
            Write::Create {
                name: "n9".into(),
                message: "m9".into()
            }
        );
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let written = |w: &Write| !matches!(w, Write::Skip);
        let mut n = 0;
        for i in 0..100 {
            let w = c.correlate(occ("SuccessfulCreate", &format!("m{i}")), format!("n{i}"), t(0));
            n += usize::from(written(&w));
        }
        assert_eq!(n, 25);
        // 299 s later: still no token; 301 s: one, carrying the count of every occurrence so far.
        let w = c.correlate(occ("SuccessfulCreate", "m100"), "x".into(), t(299));
        assert_eq!(w, Write::Skip);
        let w = c.correlate(occ("SuccessfulCreate", "m101"), "y".into(), t(301));
        match w {
            Write::Patch { count, message, .. } => {
                assert_eq!(count, 93, "combined occurrences 10..=102 counted");
                assert_eq!(message, format!("{COMBINED_PREFIX}m101"));
            }
            other => panic!("expected a patch of the combined event, got {other:?}"),
        }
        // Another object has its own bucket.
        let mut other = occ("SuccessfulCreate", "m0");
        other.object = "other";
        other.uid = "u2";
        assert!(written(&c.correlate(other, "o".into(), t(301))));
    }

    #[test]
    fn caches_stay_bounded() {
        let mut c = Correlator::default();
        for i in 0..(LRU_ENTRIES + 100) {
            let name = format!("cs-{i}");
            let o = Occurrence {
                namespace: "default",
                object: &name,
                uid: &name,
                type_: "Normal",
                reason: "SuccessfulCreate",
                message: "m",
            };
            c.correlate(o, name.clone(), t(0));
        }
        assert_eq!(c.groups.map.len(), LRU_ENTRIES);
        assert_eq!(c.logged.map.len(), LRU_ENTRIES);
        assert_eq!(c.buckets.map.len(), LRU_ENTRIES);
    }
}
