//! The checks a module passes before it may decide anything.

use std::sync::Arc;

use wasmtime::component::Component;

use super::bindings::{PodsetPolicyPre, contract_version, interface_name};
use super::error::chain;
use super::{Digest, Error, Policy, PolicyEngine, Result};

/// Bytes → must be a component → imports within the allowlist → exports this
/// contract's `policy` interface → links → `info()` runs in the sandbox and reports a
/// compatible contract version.
pub(super) fn load(engine: &PolicyEngine, bytes: &[u8], digest: Digest) -> Result<Policy> {
    let limits = &engine.limits;
    if bytes.len() > limits.module_bytes {
        return Err(Error::TooLarge { size: bytes.len(), limit: limits.module_bytes });
    }
    check_header(bytes)?;
    let component = Component::new(&engine.engine, bytes).map_err(|e| Error::Invalid(chain(&e)))?;

    // The allowlist is checked before linking so the error names every offending
    // import, not just the first one the linker trips on.
    let ty = component.component_type();
    // `types` holds only type definitions: importing it grants nothing.
    let allowed = vec![interface_name("log"), interface_name("types")];
    let imports: Vec<String> = ty.imports(&engine.engine).map(|(name, _)| name.to_string()).collect();
    let forbidden: Vec<String> = imports.iter().filter(|n| !allowed.contains(n)).cloned().collect();
    if !forbidden.is_empty() {
        return Err(Error::ForbiddenImports { imports: forbidden, allowed });
    }
    let wanted = interface_name("policy");
    let exports: Vec<String> = ty.exports(&engine.engine).map(|(name, _)| name.to_string()).collect();
    if !exports.contains(&wanted) {
        return Err(Error::Incompatible(format!(
            "it exports {exports:?}, but this host calls `{wanted}`; rebuild the policy against wit/ of contract {}",
            contract_version()
        )));
    }

    let pre = engine.linker.instantiate_pre(&component).map_err(|e| Error::Incompatible(chain(&e)))?;
    let pre = PodsetPolicyPre::new(pre).map_err(|e| Error::Incompatible(chain(&e)))?;
    let info = Policy::call_info(&pre, limits, &digest.to_string())?;
    if !compatible(contract_version(), &info.contract) {
        return Err(Error::Incompatible(format!(
            "{}@{} was built for contract {:?}; this host speaks {}",
            info.name,
            info.version,
            info.contract,
            contract_version()
        )));
    }
    let short = digest.to_string();
    let label: Arc<str> = format!("{}@{} ({})", info.name, info.version, &short[..19]).into();
    Ok(Policy { digest, info, imports, pre, limits: limits.clone(), label })
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

/// Semver compatibility: the same major version, and while it is 0 the same minor.
pub(super) fn compatible(host: &str, policy: &str) -> bool {
    fn parse(v: &str) -> Option<(u64, u64)> {
        let mut parts = v.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        parts.next()?.split(['-', '+']).next()?.parse::<u64>().ok()?;
        Some((major, minor))
    }
    match (parse(host), parse(policy)) {
        (Some((0, h)), Some((0, p))) => h == p,
        (Some((h, _)), Some((p, _))) => h == p,
        _ => false,
    }
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
    fn headers_are_told_apart() {
        assert!(matches!(check_header(b"#!/bin/sh\n"), Err(Error::NotWasm { .. })));
        assert!(matches!(check_header(b"\0as"), Err(Error::NotWasm { .. })));
        assert!(matches!(check_header(b"\0asm\x01\0\0\0"), Err(Error::CoreModule)));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(matches!(check_header(b"\0asm\x0e\0\x01\0"), Err(Error::Invalid(_))));
    }
}
