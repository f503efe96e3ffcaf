//! Controller errors, with a short category used as a metric/event label.

/// Anything that ends a reconcile early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("{action} failed: {source}")]
    Action {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("serialization error: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("invalid CloneSet: {0}")]
    Invalid(String),
}

impl Error {
    /// Short label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Action { .. } => "action",
            Error::Serde(_) => "serde",
            Error::Invalid(_) => "invalid",
        }
    }
}

/// Whether `e` is an API error with HTTP status `code` (404 gone, 409 conflict, …).
pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Whether a create was refused because the object exists (409 reason `AlreadyExists`). A 409 `Conflict` on a
/// create (etcd contention, an overloaded apiserver) means nothing was written: treating it as "already there"
/// would wait on an expectation for an object that never comes (Kruise checks `errors.IsAlreadyExists`).
pub(crate) fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}
