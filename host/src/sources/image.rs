//! Modules from registries, for `--policy oci://…` and `ReconcilePolicy.spec.image`:
//! pulled by digest and checked (`oci`), their cosign signature verified when
//! signatures are required, and remembered in the cache once they loaded.
//!
//! A registry that cannot be reached is not an outage: the module the cache last
//! verified for the same reference serves (its signatures verified again, against the
//! keys trusted now), and the caller says so in status.

use oci::cosign::{self, Signature};

use super::Sources;
use crate::oci::{self, Pulled};

/// A module ready to load.
pub struct Fetched {
    pub pulled: Pulled,
    pub signatures: Vec<Signature>,
    /// Why the registry was not used: it could not be reached and the cache served.
    pub from_cache: Option<oci::Error>,
    /// The key that verified its signature, when signatures are required.
    pub signed_by: Option<String>,
    /// What the reference's tag names now (none for a digest reference, or from the cache).
    pub tag_now: Option<String>,
}

/// Where and how to pull.
pub struct Request<'a> {
    /// As the user wrote it (the cache's key).
    pub reference: &'a str,
    /// The manifest digest to pull instead of resolving the reference's tag again.
    pub resolved: Option<&'a str>,
    /// A policy's own pull Secrets' credentials (the operator-wide ones follow).
    pub credentials: &'a oci::auth::Credentials,
    /// A policy's own registry CA.
    pub ca: &'a [Vec<u8>],
}

/// Pulls (or recalls) and verifies what `request` names; counts how it ended
/// (`podset_registry_fetches_total`).
pub async fn fetch(src: &Sources, request: &Request<'_>) -> Result<Fetched, oci::Error> {
    let fetched = pull(src, request).await;
    let result = match &fetched {
        Ok(f) if f.from_cache.is_some() => "cached",
        Ok(_) => "fetched",
        Err(e) if e.is_unreachable() => "unreachable",
        Err(_) => "failed",
    };
    src.ctx.metrics.registry_fetched(result);
    fetched
}

async fn pull(src: &Sources, request: &Request<'_>) -> Result<Fetched, oci::Error> {
    let named = oci::parse_reference(request.reference)?;
    let r = match request.resolved {
        Some(d) => named.clone_with_digest(d.to_string()),
        None => named.clone(),
    };
    let session = src.oci.session(&r, request.credentials, request.ca)?;
    let cap = src.ctx.engine.limits().module_bytes;
    let pulled = match session.pull(&r, cap, src.module_cache.as_ref()).await {
        Ok(pulled) => pulled,
        Err(e) if e.is_unreachable() => return recall(src, request, e),
        Err(e) => return Err(e),
    };
    let signatures = if src.trust.required {
        match cosign::fetch(&session, &r, &pulled.manifest_digest).await {
            Ok(s) => s,
            Err(e) if e.is_unreachable() => return recall(src, request, e),
            Err(e) => return Err(e),
        }
    } else {
        Vec::new()
    };
    let signed_by = verify(src, &pulled, &signatures)?;
    // A tag pulled by the digest it once resolved to: where it points now (a failure to
    // ask only leaves it unknown). Just resolved, it points to what was pulled.
    let tag_now = match (named.digest(), request.resolved) {
        (Some(_), _) => None,
        (None, Some(_)) => session.resolve(&named).await.ok(),
        (None, None) => Some(pulled.manifest_digest.clone()),
    };
    Ok(Fetched { pulled, signatures, from_cache: None, signed_by, tag_now })
}

/// The cached module for the reference, when the registry is unreachable.
fn recall(src: &Sources, request: &Request<'_>, unreachable: oci::Error) -> Result<Fetched, oci::Error> {
    let cached =
        src.module_cache.as_ref().and_then(|c| c.recall(request.reference, src.ctx.engine.limits().module_bytes));
    let Some((pulled, signatures)) = cached else { return Err(unreachable) };
    if request.resolved.is_some_and(|d| d != pulled.manifest_digest) {
        return Err(unreachable);
    }
    let signed_by = verify(src, &pulled, &signatures)?;
    Ok(Fetched { pulled, signatures, from_cache: Some(unreachable), signed_by, tag_now: None })
}

fn verify(src: &Sources, pulled: &Pulled, signatures: &[Signature]) -> Result<Option<String>, oci::Error> {
    if !src.trust.required {
        return Ok(None);
    }
    Ok(Some(cosign::verify(&src.trust, &pulled.manifest_digest, signatures)?.key))
}

/// Remembers a fetched module that loaded, so that it serves when the registry is
/// down, and after a restart. A cache that cannot be written is logged, not fatal.
pub fn remember(src: &Sources, reference: &str, fetched: &Fetched) {
    if fetched.from_cache.is_some() {
        return;
    }
    if let Some(cache) = &src.module_cache
        && let Err(e) = cache.remember(reference, &fetched.pulled, &fetched.signatures)
    {
        tracing::warn!(reference, "cannot cache the module: {e}");
    }
}
