use crate::kubernetes::client::answer_lost;
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

    /// The API server refused a child the policy decided.
    #[error("{} {key}: {source}", action.verb())]
    Child {
        action: ChildAction,
        key: String,
        #[source]
        source: kube::Error,
    },

    /// A child's create refused because the parent's own namespace is being deleted:
    /// the parent goes with it. Not a failure: `flow::act` ends the reconcile quietly.
    #[error("namespace {0} is being deleted, and the parent with it")]
    NamespaceTerminating(String),

    #[error("{0}")]
    Internal(String),
}

/// What the host was doing to a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildAction {
    Create,
    Apply,
    /// A looked-up object, not a child (contract 0.4).
    Patch,
    Delete,
}

impl ChildAction {
    pub fn verb(self) -> &'static str {
        match self {
            ChildAction::Create => "creating",
            ChildAction::Apply => "applying",
            ChildAction::Patch => "patching",
            ChildAction::Delete => "deleting",
        }
    }

    /// The reason of the `ReconcileFailed` condition and Event (as the ReplicaSet
    /// controller names its own).
    pub fn failed(self) -> &'static str {
        match self {
            ChildAction::Create => "FailedCreate",
            ChildAction::Apply => "FailedApply",
            ChildAction::Patch => "FailedPatch",
            ChildAction::Delete => "FailedDelete",
        }
    }
}

impl Error {
    /// A bounded label for the failures metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Child { action, .. } => action.failed(),
            Error::Policy { source, .. } => source.reason(),
            Error::Rejected { rejection, .. } => rejection.metric_label(),
            Error::NoPolicy(_) => "NoPolicy",
            Error::NamespaceTerminating(_) => "NamespaceTerminating",
            Error::Internal(_) => "internal",
        }
    }

    /// Whether a child's write may have been applied though its answer never came
    /// ([`answer_lost`]).
    pub fn answer_lost(&self) -> bool {
        matches!(self, Error::Child { source, .. } if answer_lost(source))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
