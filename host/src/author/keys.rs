//! Private keys on disk, for `policy keygen`, `sign` and `sign-blob`.

use anyhow::Context as _;

use crate::signature;

pub(super) fn read_private_key(path: &std::path::Path) -> anyhow::Result<signature::PrivateKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(signature::PrivateKey::from_pem(&text, &path.display().to_string())?)
}

/// Writes a private key readable by its owner only.
pub(super) fn write_private(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes).with_context(|| format!("writing {}", path.display()))
}
