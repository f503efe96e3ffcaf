//! Seeded fault injection at the API boundary: latency and error answers (409, 429/503 with Retry-After, 500, 410 on
//! watch), as a flaky or overloaded kube-apiserver gives them. Decisions come from one seeded RNG, so a run is reproducible.
//!
//! A rule matches requests by verb and resource; each matching request draws once against the rule's
//! probability. A fault answers with a Status instead of running the request (nothing is written), so the
//! client sees exactly what a refused request looks like on a real apiserver.

use std::sync::Mutex;
use std::time::Duration;

use axum::http::Method;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::ApiRequest;
use super::errors::ApiError;

/// The verb of a request, as kube-apiserver's audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    pub(crate) fn of(req: &ApiRequest) -> Option<Verb> {
        let watch = req.watch_path || req.flag("watch");
        Some(match (&req.method, req.name.is_some()) {
            (&Method::GET, _) if watch => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::GET, true) => Verb::Get,
            (&Method::POST, _) => Verb::Create,
            (&Method::PUT, _) => Verb::Update,
            (&Method::PATCH, _) => Verb::Patch,
            (&Method::DELETE, _) => Verb::Delete,
            _ => return None,
        })
    }

    pub fn is_write(self) -> bool {
        matches!(self, Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
    }
}

/// What a matching request gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answered with this Status code (409 Conflict, 429 TooManyRequests, 500 InternalError, 410 Expired, 503).
    Status(u16),
    /// Served after this much (virtual) time.
    Latency(Duration),
    /// Answered with this Status code (429, 503) and `Retry-After` of `seconds` (kube-apiserver's APF and
    /// max-in-flight filters send 1; a server under load may ask for more).
    RetryAfter { code: u16, seconds: u64 },
}

/// One injection rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Verbs it applies to (empty: all).
    pub verbs: Vec<Verb>,
    /// Plural resource names it applies to, e.g. `pods`, `clonesets` (empty: all).
    pub resources: Vec<String>,
    /// Chance per matching request, in [0, 1].
    pub probability: f64,
    pub fault: Fault,
    /// Stop after this many injections (`None`: unlimited).
    pub budget: Option<u64>,
}

impl Rule {
    /// Every matching request gets `fault`.
    pub fn always(verbs: &[Verb], resources: &[&str], fault: Fault) -> Self {
        Rule {
            verbs: verbs.to_vec(),
            resources: resources.iter().map(|r| r.to_string()).collect(),
            probability: 1.0,
            fault,
            budget: None,
        }
    }

    fn matches(&self, verb: Verb, resource: &str) -> bool {
        (self.verbs.is_empty() || self.verbs.contains(&verb))
            && (self.resources.is_empty() || self.resources.iter().any(|r| r == resource))
    }
}

/// Counts of injected faults, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Injected {
    pub statuses: u64,
    pub latencies: u64,
    /// Status answers by HTTP code (409, 410, 429, 500, ...).
    pub by_code: std::collections::BTreeMap<u16, u64>,
}

struct State {
    rng: ChaCha8Rng,
    rules: Vec<Rule>,
    injected: Injected,
}

/// The injector of one apiserver (no rules: no faults, no RNG draws).
pub struct Faults {
    state: Mutex<State>,
}

impl Faults {
    pub fn new(seed: u64) -> Self {
        Faults {
            state: Mutex::new(State {
                rng: ChaCha8Rng::seed_from_u64(seed ^ 0xfa17),
                rules: Vec::new(),
                injected: Injected::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn add(&self, rule: Rule) {
        self.lock().rules.push(rule);
    }

    /// Removes every rule (faults stop; what is in flight finishes).
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    pub fn injected(&self) -> Injected {
        self.lock().injected.clone()
    }

    /// The faults for one request: at most one latency and one Status (the first matching rule of each kind
    /// that fires).
    pub(crate) fn decide(&self, req: &ApiRequest) -> (Option<Duration>, Option<ApiError>) {
        let mut st = self.lock();
        if st.rules.is_empty() {
            return (None, None);
        }
        let Some(verb) = Verb::of(req) else {
            return (None, None);
        };
        let resource = req.rt.resource;
        let (mut latency, mut error) = (None, None);
        let State { rng, rules, injected } = &mut *st;
        for rule in rules.iter_mut() {
            if !rule.matches(verb, resource) || rule.budget == Some(0) {
                continue;
            }
            let fire = rule.probability >= 1.0 || rng.random_bool(rule.probability.clamp(0.0, 1.0));
            if !fire {
                continue;
            }
            match &rule.fault {
                Fault::Latency(d) if latency.is_none() => {
                    latency = Some(*d);
                    injected.latencies += 1;
                }
                Fault::Status(code) if error.is_none() => {
                    error = Some(status(*code, verb, resource));
                    injected.statuses += 1;
                    *injected.by_code.entry(*code).or_default() += 1;
                }
                Fault::RetryAfter { code, seconds } if error.is_none() => {
                    let mut e = status(*code, verb, resource);
                    e.details = Some(serde_json::json!({ "retryAfterSeconds": seconds }));
                    error = Some(e);
                    injected.statuses += 1;
                    *injected.by_code.entry(*code).or_default() += 1;
                }
                _ => continue,
            }
            if let Some(b) = rule.budget.as_mut() {
                *b -= 1;
            }
        }
        (latency, error)
    }
}

fn status(code: u16, verb: Verb, resource: &str) -> ApiError {
    let what = format!("{verb:?} {resource}").to_lowercase();
    match code {
        409 => ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource}: the object has been modified; please apply your changes to the latest version and try again (injected, {what})"
            ),
        ),
        410 => ApiError::new(
            410,
            "Expired",
            format!("too old resource version (injected, {what})"),
        ),
        429 => retry_after(ApiError::new(
            429,
            "TooManyRequests",
            format!(
                "the server has received too many requests and has asked us to try again later (injected, {what})"
            ),
        )),
        503 => retry_after(ApiError::new(
            503,
            "ServiceUnavailable",
            format!("the server is currently unable to handle the request (injected, {what})"),
        )),
        c => ApiError::new(
            c,
            "InternalError",
            format!("an error on the server has prevented the request from succeeding (injected, {what})"),
        ),
    }
}

/// kube-apiserver's max-in-flight filter answers 429 with `Retry-After: 1` (and `details.retryAfterSeconds`).
fn retry_after(mut e: ApiError) -> ApiError {
    e.details = Some(serde_json::json!({"retryAfterSeconds": 1}));
    e
}
