//! The checks a module passes before it may decide anything.

use std::sync::{Arc, Weak};

use super::error::chain;

use super::engine::{Policy, PolicyEngine, World};
use super::{Digest, Error, Result, inspect};
use crate::contract::bindings::{PodsetPolicyPre, ReconcilePolicyPre, contract_version, interface_name};
use crate::contract::declarations;
use crate::heap;

impl PolicyEngine {
    /// Checks and compiles a module, or returns the already compiled one with the same
    /// digest. Blocking (compilation takes milliseconds to seconds): call it off the
    /// async executor, e.g. via [`PolicyEngine::load_async`].
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<Policy>> {
        let digest = Digest::of(bytes);
        if let Some(p) = self.cached(&digest) {
            return Ok(p);
        }
        let loaded = load(self, bytes, digest);
        // Loaded or refused, the compiler's scratch memory is free now.
        heap::release_freed();
        let policy = Arc::new(loaded?);
        let mut compiled = self.compiled.lock().map_err(|_| Error::Engine("policy cache lock poisoned".into()))?;
        compiled.retain(|_, p| p.strong_count() > 0);
        // Two loads of the same bytes may race; the first one in wins.
        if let Some(existing) = compiled.get(&digest).and_then(Weak::upgrade) {
            return Ok(existing);
        }
        compiled.insert(digest, Arc::downgrade(&policy));
        Ok(policy)
    }

    /// [`PolicyEngine::load`] on a blocking thread.
    pub async fn load_async(self: &Arc<Self>, bytes: Vec<u8>) -> Result<Arc<Policy>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.load(&bytes))
            .await
            .map_err(|e| Error::Engine(format!("load task: {e}")))?
    }

    fn cached(&self, digest: &Digest) -> Option<Arc<Policy>> {
        self.compiled.lock().ok()?.get(digest).and_then(Weak::upgrade)
    }
}

/// Bytes → must be a component → small enough to compile → imports within the allowlist → exports `identity`
/// and one world's interface of this contract → links → `info()` runs in the sandbox,
/// reports a compatible contract version and declarations that fit its world.
pub(super) fn load(engine: &PolicyEngine, bytes: &[u8], digest: Digest) -> Result<Policy> {
    let limits = &engine.limits;
    if bytes.len() > limits.module_bytes {
        return Err(Error::TooLarge { size: bytes.len(), limit: limits.module_bytes });
    }
    check_header(bytes)?;
    inspect::check(bytes, limits)?;
    let component =
        engine.compiler.component(&engine.engine, limits, bytes, engine.artifacts.as_ref().map(|c| (c, &digest)))?;

    let ty = component.component_type();
    let imports: Vec<String> = ty.imports(&engine.engine).map(|(name, _)| name.to_string()).collect();
    let exports: Vec<String> = ty.exports(&engine.engine).map(|(name, _)| name.to_string()).collect();
    // A module built against another version of the contract names the same
    // interfaces under that version: say so first, so the fix (a rebuild) is plain and
    // its `log` import is not mistaken for a forbidden capability.
    if let Some(theirs) = other_contract(imports.iter().chain(&exports)) {
        return Err(Error::Incompatible(format!(
            "it was built against contract {theirs} (its interfaces are podset:policy/…@{theirs}); this host speaks \
             {ours} and loads no other contract version: rebuild the policy against wit/ of contract {ours} \
             (policy-sdk {ours})",
            ours = contract_version()
        )));
    }
    // The allowlist is checked before linking so the error names every offending
    // import, not just the first one the linker trips on. `types` holds only type
    // definitions: importing it grants nothing.
    let allowed = vec![interface_name("log"), interface_name("types")];
    let forbidden: Vec<String> = imports.iter().filter(|n| !allowed.contains(n)).cloned().collect();
    if !forbidden.is_empty() {
        return Err(Error::ForbiddenImports { imports: forbidden, allowed });
    }
    let exported = |i: &str| exports.contains(&interface_name(i));
    let wrong_exports = || {
        Error::Incompatible(format!(
            "it exports {exports:?}, but this host calls `{}` and either `{}` or `{}`; rebuild the policy against \
             wit/ of contract {}",
            interface_name("identity"),
            interface_name("podset"),
            interface_name("reconciler"),
            contract_version()
        ))
    };
    if !exported("identity") {
        return Err(wrong_exports());
    }

    let pre = engine.linker.instantiate_pre(&component).map_err(|e| Error::Incompatible(chain(&e)))?;
    let pre = match (exported("podset"), exported("reconciler")) {
        (true, false) => World::PodSet(PodsetPolicyPre::new(pre).map_err(|e| Error::Incompatible(chain(&e)))?),
        (false, true) => World::Reconcile(ReconcilePolicyPre::new(pre).map_err(|e| Error::Incompatible(chain(&e)))?),
        _ => return Err(wrong_exports()),
    };
    let clock = engine.ticker.clock();
    let info = Policy::call_info(&pre, limits, &clock, &digest.to_string())?;
    if !compatible(contract_version(), &info.contract) {
        return Err(Error::Incompatible(format!(
            "{}@{} was built for contract {:?}; this host speaks {}",
            info.name,
            info.version,
            info.contract,
            contract_version()
        )));
    }
    declarations::check(&info.declares, matches!(pre, World::PodSet(_)))?;
    let short = digest.to_string();
    let label: Arc<str> = format!("{}@{} ({})", info.name, info.version, &short[..19]).into();
    Ok(Policy { digest, info, imports, pre, limits: limits.clone(), clock, label })
}

/// The contract version of the first `podset:policy/…@VERSION` name that is not this
/// host's.
fn other_contract<'a>(names: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
    names
        .into_iter()
        .filter_map(|n| n.strip_prefix("podset:policy/")?.split_once('@').map(|(_, v)| v))
        .find(|v| *v != contract_version())
}

fn check_header(bytes: &[u8]) -> Result<()> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(Error::NotWasm { prefix: bytes[..bytes.len().min(8)].to_vec() });
    }
    match bytes[4..8] {
        [1, 0, 0, 0] => Err(Error::CoreModule),
        // Component binary: version 0x0d, layer 1.
        [0x0d, 0, 1, 0] => Ok(()),
        ref other => Err(Error::Invalid(format!("unsupported Wasm version/layer {other:02x?}"))),
    }
}

/// Semver compatibility, as Cargo reads a caret requirement: a policy built for
/// contract `p` loads on a host that speaks `h` when `h` matches `^p`'s major (and,
/// while it is 0, minor) version.
pub(super) fn compatible(host: &str, policy: &str) -> bool {
    let (Ok(host), Ok(policy)) = (semver::Version::parse(host.trim()), semver::Version::parse(policy.trim())) else {
        return false;
    };
    let same_line = semver::VersionReq::parse(&format!("^{}.{}", policy.major, policy.minor));
    same_line.is_ok_and(|req| req.matches(&semver::Version::new(host.major, host.minor, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_compatibility_is_semver() {
        assert!(compatible("0.1.0", "0.1.7"));
        assert!(!compatible("0.1.0", "0.2.0"));
        assert!(compatible("1.2.0", "1.0.3"));
        assert!(!compatible("1.0.0", "2.0.0"));
        assert!(!compatible("0.1.0", "garbage"));
        assert!(!compatible("0.1.0", ""));
    }

    #[test]
    fn another_contract_version_is_found_in_interface_names() {
        let ours = format!("podset:policy/log@{}", contract_version());
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        assert_eq!(other_contract(&names(&[&ours, "wasi:random/random@0.2.0"])), None);
        let old = names(&[&ours, "podset:policy/identity@0.2.0"]);
        assert_eq!(other_contract(&old), Some("0.2.0"));
    }

    #[test]
    fn headers_are_told_apart() {
        assert!(matches!(check_header(b"#!/bin/sh\n"), Err(Error::NotWasm { .. })));
        assert!(matches!(check_header(b"\0as"), Err(Error::NotWasm { .. })));
        assert!(matches!(check_header(b"\0asm\x01\0\0\0"), Err(Error::CoreModule)));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(matches!(check_header(b"\0asm\x0e\0\x01\0"), Err(Error::Invalid(_))));
    }
}
