//! Registry operations on policy artifacts, over `oci-client`. Every byte read is
//! checked against the digest that named it, here, whatever the client checked.

use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::artifact::{self, digest_of};
use super::auth::Credentials;
use super::cache::Cache;
use super::pulled::Pulled;
use super::{Error, Settings};

/// Connecting to a registry gives up after this: a registry that is down must not
/// hold a policy's load (the cache serves instead).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A read that stalls this long fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The registries as configured for this process.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    settings: Settings,
}

impl Registry {
    pub fn new(settings: Settings) -> Self {
        install_crypto_provider();
        Registry { settings }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A session for operations on `reference`'s registry: `credentials` (a policy's
    /// pull Secrets) before the operator-wide ones, `ca` (a policy's) beside the
    /// operator-wide CAs.
    pub fn session(&self, reference: &Reference, credentials: &Credentials, ca: &[Vec<u8>]) -> Result<Session, Error> {
        let registry = reference.resolve_registry().to_string();
        let certs = |pems: &[Vec<u8>]| {
            pems.iter().map(|p| Certificate { encoding: CertificateEncoding::Pem, data: p.clone() }).collect::<Vec<_>>()
        };
        let mut extra = certs(&self.settings.ca_certificates);
        extra.extend(certs(ca));
        let config = |extra: Vec<Certificate>, only: Vec<Certificate>| ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.settings.insecure.clone()),
            extra_root_certificates: extra,
            tls_certs_only: only,
            // An image index is not a policy: refuse it rather than pick a platform.
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: concat!("podset-host/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        // Not `Client::new`: it falls back to a default client, whose builder panics where the
        // system has no CA certificates (a distroless image). Without system roots, the CAs
        // given are the only ones.
        let client = match Client::try_from(config(extra.clone(), Vec::new())) {
            Ok(c) => c,
            Err(_) if !extra.is_empty() => Client::try_from(config(Vec::new(), extra))
                .map_err(|e| Error::Certificate { registry: registry.clone(), detail: chain(&e) })?,
            Err(e) => return Err(Error::Certificate { registry, detail: chain(&e) }),
        };
        let auth = credentials.clone().then(&self.settings.credentials).for_registry(&registry);
        Ok(Session { client, auth, registry })
    }
}

/// One registry, one set of credentials.
pub struct Session {
    client: Client,
    auth: RegistryAuth,
    registry: String,
}

impl Session {
    /// The digest of the manifest `reference` names now (its own, when it is pinned).
    pub async fn resolve(&self, reference: &Reference) -> Result<String, Error> {
        if let Some(d) = reference.digest() {
            return Ok(d.to_string());
        }
        self.client.fetch_manifest_digest(reference, &self.auth).await.map_err(|e| self.classify(&reference.whole(), e))
    }

    /// The manifest `digest` of `reference`'s repository, its bytes checked.
    pub async fn manifest(&self, reference: &Reference, digest: &str) -> Result<Vec<u8>, Error> {
        let pinned = reference.clone_with_digest(digest.to_string());
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&pinned, &self.auth, &artifact::MANIFEST_MEDIA_TYPES)
            .await
            .map_err(|e| self.classify(&format!("manifest {}", pinned.whole()), e))?;
        let actual = digest_of(&bytes);
        if actual != digest {
            return Err(Error::Digest {
                what: format!("manifest {}", pinned.whole()),
                expected: digest.into(),
                actual,
            });
        }
        Ok(bytes.to_vec())
    }

    /// The manifest a tag names, or `None` when the tag does not exist.
    pub async fn manifest_of_tag(&self, reference: &Reference) -> Result<Option<(Vec<u8>, String)>, Error> {
        match self.client.pull_manifest_raw(reference, &self.auth, &artifact::MANIFEST_MEDIA_TYPES).await {
            Ok((bytes, _)) => {
                let digest = digest_of(&bytes);
                Ok(Some((bytes.to_vec(), digest)))
            }
            Err(e) => match self.classify(&reference.whole(), e) {
                Error::NotFound { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    /// The blob `digest`, which the manifest says is `size` bytes: at most `size`
    /// bytes are read, and their digest checked.
    pub async fn blob(&self, reference: &Reference, digest: &str, size: u64) -> Result<Vec<u8>, Error> {
        let what = format!("blob {digest} of {}", reference.repository());
        let descriptor =
            oci_client::manifest::OciDescriptor { digest: digest.to_string(), size: size as i64, ..Default::default() };
        let mut stream =
            self.client.pull_blob_stream(reference, &descriptor).await.map_err(|e| self.classify(&what, e))?;
        let mut out = Vec::with_capacity(size.min(16 << 20) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                // The client checks the digest as the stream ends, and says so in the error it yields.
                match e.get_ref().and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>()) {
                    Some(oci_client::errors::DigestError::VerificationError { expected, actual }) => {
                        Error::Digest { what: what.clone(), expected: expected.clone(), actual: actual.clone() }
                    }
                    _ => Error::Registry { registry: self.registry.clone(), detail: format!("{what}: {e}") },
                }
            })?;
            if (out.len() + chunk.len()) as u64 > size {
                return Err(Error::Artifact(format!("{what} is longer than the {size} bytes its manifest declares")));
            }
            out.extend_from_slice(&chunk);
        }
        let actual = digest_of(&out);
        if actual != digest {
            return Err(Error::Digest { what, expected: digest.into(), actual });
        }
        Ok(out)
    }

    /// Pulls the policy `reference` names, by the manifest digest it resolves to:
    /// manifest checked as an artifact (media types, one layer, at most `cap` bytes)
    /// before the layer is read; the layer from `cache` when it holds it.
    pub async fn pull(&self, reference: &Reference, cap: usize, cache: Option<&Cache>) -> Result<Pulled, Error> {
        let digest = self.resolve(reference).await?;
        let manifest = self.manifest(reference, &digest).await?;
        let layer = artifact::check(&manifest, cap)?;
        let cached = cache.and_then(|c| c.blob(&layer.digest));
        let module_cached = cached.is_some();
        let module = match cached {
            Some(bytes) => bytes,
            None => self.blob(reference, &layer.digest, layer.size).await?,
        };
        Ok(Pulled {
            reference: reference.clone_with_digest(digest.clone()),
            manifest_digest: digest,
            manifest,
            layer,
            module,
            module_cached,
        })
    }

    /// Uploads a blob (a no-op if the registry has it).
    pub async fn push_blob(&self, reference: &Reference, bytes: Vec<u8>) -> Result<String, Error> {
        let digest = digest_of(&bytes);
        self.authenticate_push(reference).await?;
        match self.client.blob_exists(reference, &digest).await {
            Ok(true) => return Ok(digest),
            Ok(false) => {}
            Err(e) => return Err(self.classify(&format!("blob {digest}"), e)),
        }
        self.client
            .push_blob(reference, bytes, &digest)
            .await
            .map_err(|e| self.classify(&format!("blob {digest}"), e))?;
        Ok(digest)
    }

    /// Uploads `manifest` (of `media_type`) as `reference`'s tag; returns its digest.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        manifest: Vec<u8>,
        media_type: &str,
    ) -> Result<String, Error> {
        let digest = digest_of(&manifest);
        self.authenticate_push(reference).await?;
        let content_type = media_type.parse().map_err(|_| Error::Artifact(format!("media type {media_type:?}")))?;
        self.client
            .push_manifest_raw(reference, manifest, content_type)
            .await
            .map_err(|e| self.classify(&reference.whole(), e))?;
        Ok(digest)
    }

    /// Pushes a built policy artifact to `reference` (its tag); returns the manifest digest.
    pub async fn push_artifact(&self, reference: &Reference, built: artifact::Built) -> Result<String, Error> {
        self.push_blob(reference, built.config).await?;
        self.push_blob(reference, built.layer).await?;
        self.push_manifest(reference, built.manifest, oci_client::manifest::OCI_IMAGE_MEDIA_TYPE).await
    }

    async fn authenticate_push(&self, reference: &Reference) -> Result<(), Error> {
        self.client
            .auth(reference, &self.auth, oci_client::RegistryOperation::Push)
            .await
            .map(|_| ())
            .map_err(|e| self.classify(&reference.whole(), e))
    }

    /// Our error for `oci-client`'s, with the registry named and the cause kept.
    fn classify(&self, what: &str, e: OciDistributionError) -> Error {
        let registry = self.registry.clone();
        match e {
            OciDistributionError::UnauthorizedError { .. } => Error::Unauthorized { registry, detail: String::new() },
            OciDistributionError::AuthenticationFailure(m) => {
                Error::Unauthorized { registry, detail: format!(": {m}") }
            }
            OciDistributionError::ImageManifestNotFoundError(_) => Error::NotFound { what: what.to_string() },
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let detail = envelope.errors.iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("; ");
                if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                    Error::Unauthorized { registry, detail: format!(": {detail}") }
                } else if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    Error::NotFound { what: what.to_string() }
                } else {
                    Error::Registry { registry, detail: format!("{what}: {detail}") }
                }
            }
            OciDistributionError::ServerError { code: 401, message, .. } => {
                Error::Unauthorized { registry, detail: format!(": {}", message.trim()) }
            }
            OciDistributionError::ServerError { code: 404, .. } => Error::NotFound { what: what.to_string() },
            OciDistributionError::ServerError { code, message, .. } if code >= 500 => {
                Error::Unreachable { registry, detail: format!("HTTP {code} {}", message.trim()) }
            }
            OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
                expected,
                actual,
            }) => Error::Digest { what: what.to_string(), expected, actual },
            OciDistributionError::RequestError(r) => {
                let detail = chain(&r);
                if detail.contains("InvalidContentType") {
                    let detail = format!(
                        "it does not answer TLS ({detail}); plain HTTP is spoken only to the registries --insecure-registry names"
                    );
                    Error::Registry { registry, detail }
                } else if detail.contains("certificate") || detail.contains("UnknownIssuer") {
                    Error::Certificate { registry, detail }
                } else if r.is_connect() || r.is_timeout() || r.is_request() {
                    Error::Unreachable { registry, detail }
                } else {
                    Error::Registry { registry, detail: format!("{what}: {detail}") }
                }
            }
            other => Error::Registry { registry, detail: format!("{what}: {}", chain(&other)) },
        }
    }
}

/// The registry client's TLS (rustls without a built-in provider) runs on ring, as the
/// Kubernetes client's does: one crypto stack in the process.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Already installed (by another part of the process) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
