use std::fmt;

use sha2::{Digest as _, Sha256};

/// The sha256 of a module's bytes: its identity in caches, status and pins.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }

    /// The 64 hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses `sha256:<64 hex>` or bare hex.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s);
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex, &mut out).ok()?;
        Some(Digest(out))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Digest;

    #[test]
    fn displays_and_parses_the_pinned_form() {
        let d = Digest::of(b"policy");
        let s = d.to_string();
        assert!(s.starts_with("sha256:") && s.len() == 7 + 64);
        assert_eq!(Digest::parse(&s), Some(d));
        assert_eq!(Digest::parse(&s[7..]), Some(d));
        assert_eq!(Digest::parse("sha256:zz"), None);
    }
}
