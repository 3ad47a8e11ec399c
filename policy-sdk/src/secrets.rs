//! Secrets' values, read without copying them: a policy that only needs to know
//! whether a Secret changed (to roll what mounts it) hashes its values with [`digest`].
//!
//! Recordings (`--record-dir`, `policy record`) never hold a Secret's values: the host
//! writes each as `REDACTED:sha256:<hex>`, the SHA-256 of the value. [`digest`] of that
//! recorded text is the digest of the value it replaced, so a decision that reads
//! Secrets only through [`digest`] replays exactly.

use sha2::{Digest, Sha256};

/// How the host records a Secret's value: this prefix, then the value's SHA-256 in hex.
pub const RECORDED_PREFIX: &str = "REDACTED:sha256:";

/// The SHA-256 of a Secret's value (as the API serves it, base64 under `data`), in
/// lower-case hex; for a value recorded as `REDACTED:sha256:<hex>`, that `<hex>`.
pub fn digest(value: &str) -> String {
    if let Some(hex) = value.strip_prefix(RECORDED_PREFIX)
        && hex.len() == 64
        && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return hex.to_string();
    }
    hex(&Sha256::digest(value.as_bytes()))
}

/// `bytes` in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 0xf)] as char]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_value_digests_as_the_value_it_replaced() {
        let live = digest("aHVudGVyMg==");
        assert_eq!(live.len(), 64);
        assert_eq!(digest(&format!("{RECORDED_PREFIX}{live}")), live);
        // Anything else after the prefix is an ordinary value.
        assert_ne!(digest("REDACTED:sha256:xyz"), "xyz");
        assert_eq!(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
