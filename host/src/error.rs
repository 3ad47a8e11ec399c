use crate::reconcile::check::Rejection;
use crate::sandbox;

/// Why a reconcile failed. Each is retried with per-object exponential backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    #[error("policy {policy}: {source}")]
    Policy {
        policy: String,
        #[source]
        source: sandbox::Error,
    },

    #[error("policy {policy} returned a decision the operator refuses: {rejection}")]
    Rejected { policy: String, rejection: Rejection },

    #[error("no policy can decide for this object: {0}")]
    NoPolicy(String),

    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// A bounded label for the failures metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Policy { source, .. } => source.reason(),
            Error::Rejected { rejection, .. } => rejection.metric_label(),
            Error::NoPolicy(_) => "NoPolicy",
            Error::Internal(_) => "internal",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
