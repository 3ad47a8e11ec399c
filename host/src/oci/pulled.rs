//! What a pull brings: the module, checked, and the signatures stored for it.

use oci_client::Reference;

use super::artifact::Layer;

/// A module pulled and checked: manifest and layer digests verified, the layer the
/// manifest's only one.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The reference, pinned to the manifest's digest.
    pub reference: Reference,
    pub manifest_digest: String,
    pub manifest: Vec<u8>,
    pub layer: Layer,
    pub module: Vec<u8>,
    /// The module's bytes came from the cache (the manifest did not).
    pub module_cached: bool,
}

/// One signature: the payload's bytes and the DER signature over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
}
