use oci_client::Reference;

/// Why a registry operation failed. [`Error::reason`] is the condition reason.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{reference:?} is not an image reference: {message}")]
    Reference { reference: String, message: String },
    #[error("{registry} refused the credentials (HTTP 401 Unauthorized{detail})")]
    Unauthorized { registry: String, detail: String },
    #[error("{what} not found in the registry")]
    NotFound { what: String },
    #[error("registry {registry} is unreachable: {detail}")]
    Unreachable { registry: String, detail: String },
    #[error(
        "registry {registry}'s TLS certificate is not trusted ({detail}); give its CA with --registry-ca or spec.registryCA"
    )]
    Certificate { registry: String, detail: String },
    #[error("{0}")]
    Artifact(String),
    #[error("{what} is corrupt: its bytes hash to {actual}, but {expected} was asked for")]
    Digest { what: String, expected: String, actual: String },
    #[error("registry {registry}: {detail}")]
    Registry { registry: String, detail: String },
    #[error("{0}")]
    Signature(#[from] crate::signature::Error),
    #[error("the policy cache {path}: {source}")]
    Cache { path: std::path::PathBuf, source: std::io::Error },
}

impl Error {
    /// The reason a ReconcilePolicy's condition gives.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Reference { .. } => "InvalidImage",
            Error::Unauthorized { .. } => "Unauthorized",
            Error::NotFound { .. } => "ImageNotFound",
            Error::Unreachable { .. } => "RegistryUnreachable",
            Error::Certificate { .. } => "RegistryCertificate",
            Error::Artifact(_) => "InvalidArtifact",
            Error::Digest { .. } => "DigestMismatch",
            Error::Registry { .. } => "RegistryError",
            Error::Signature(e) => e.reason(),
            Error::Cache { .. } => "CacheError",
        }
    }

    /// Worth trying again later without anything changing here: the registry may come
    /// back, credentials may be fixed in a Secret, a tag may be pushed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unauthorized { .. }
                | Error::NotFound { .. }
                | Error::Unreachable { .. }
                | Error::Registry { .. }
                | Error::Certificate { .. }
        )
    }

    /// The registry could not be reached: a cached module may serve instead.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. })
    }
}

/// Parses `reference` (`registry/repository:tag` or `…@sha256:…`), with or without
/// an `oci://` prefix.
pub fn parse_reference(reference: &str) -> Result<Reference, Error> {
    let bare = reference.strip_prefix("oci://").unwrap_or(reference);
    bare.parse::<Reference>().map_err(|e| Error::Reference { reference: reference.to_string(), message: e.to_string() })
}
