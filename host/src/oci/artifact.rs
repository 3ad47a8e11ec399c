//! The layout of a policy artifact: the CNCF Wasm OCI artifact (TAG Runtime's
//! "Wasm OCI Artifact layout"): an image manifest whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm`. Kubewarden's older pair (`application/vnd.wasm.config.v1+json`
//! with `application/vnd.wasm.content.layer.v1+wasm`) is read too.
//!
//! Everything is checked on the manifest, before a byte of the module is downloaded:
//! the media types, exactly one layer, and its declared size against the module cap.

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::Error;

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Kubewarden's (and wasm-to-oci's) pair.
pub const LEGACY_CONFIG_MEDIA_TYPE: &str = oci_client::manifest::WASM_CONFIG_MEDIA_TYPE;
pub const LEGACY_LAYER_MEDIA_TYPE: &str = oci_client::manifest::WASM_LAYER_MEDIA_TYPE;
/// The manifest types pulled: OCI's and Docker's v2 image manifests (an index is not
/// a policy).
pub const MANIFEST_MEDIA_TYPES: [&str; 2] =
    [oci_client::manifest::OCI_IMAGE_MEDIA_TYPE, oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE];
/// Largest manifest read: a policy's is ~500 bytes, a cosign signature's grows by one
/// layer per signature.
pub const MAX_MANIFEST_BYTES: usize = 256 << 10;

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The module's layer, as the manifest describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
    pub media_type: String,
}

/// Parses a manifest's bytes and returns its one Wasm layer, or says why it is not a
/// policy artifact. `cap`: the largest module accepted.
pub fn check(manifest: &[u8], cap: usize) -> Result<Layer, Error> {
    if manifest.len() > MAX_MANIFEST_BYTES {
        return Err(Error::Artifact(format!(
            "the manifest is {} bytes, over the {MAX_MANIFEST_BYTES} a policy artifact's needs",
            manifest.len()
        )));
    }
    let m: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| Error::Artifact(format!("the manifest is not an OCI image manifest: {e}")))?;
    let config = m.config.media_type.as_str();
    let layer_type = match config {
        CONFIG_MEDIA_TYPE => LAYER_MEDIA_TYPE,
        LEGACY_CONFIG_MEDIA_TYPE => LEGACY_LAYER_MEDIA_TYPE,
        other => {
            return Err(Error::Artifact(format!(
                "its config is {other:?}, not a Wasm artifact's ({CONFIG_MEDIA_TYPE:?}, or \
                 {LEGACY_CONFIG_MEDIA_TYPE:?}): is this a container image?"
            )));
        }
    };
    let [layer] = m.layers.as_slice() else {
        return Err(Error::Artifact(format!(
            "it has {} layers; a policy artifact has exactly one, the component",
            m.layers.len()
        )));
    };
    if layer.media_type != layer_type {
        return Err(Error::Artifact(format!(
            "its layer is {:?}; with config {config:?} it must be {layer_type:?}",
            layer.media_type
        )));
    }
    let size = u64::try_from(layer.size).map_err(|_| Error::Artifact(format!("layer size {}", layer.size)))?;
    if size > cap as u64 {
        return Err(Error::Artifact(format!(
            "its layer is {size} bytes, over the {cap}-byte module cap; refused before downloading it"
        )));
    }
    if !layer.digest.starts_with("sha256:") {
        return Err(Error::Artifact(format!("layer digest {:?}: only sha256 is supported", layer.digest)));
    }
    Ok(Layer { digest: layer.digest.clone(), size, media_type: layer.media_type.clone() })
}

/// The config blob, as the CNCF layout describes it: what the component imports and
/// exports, so that a registry UI or `policy inspect` can tell without the module.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig<'a> {
    architecture: &'static str,
    os: &'static str,
    layer_digests: [&'a str; 1],
    component: Component<'a>,
}

#[derive(Serialize)]
struct Component<'a> {
    imports: &'a [String],
    exports: &'a [String],
}

/// A policy artifact, ready to push: config, layer and manifest bytes.
pub struct Built {
    pub config: Vec<u8>,
    pub layer: Vec<u8>,
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

/// Lays `module` out as a CNCF Wasm artifact. `annotations` go on the manifest.
pub fn build(module: Vec<u8>, imports: &[String], exports: &[String], annotations: BTreeMap<String, String>) -> Built {
    let layer_digest = digest_of(&module);
    let config = WasmConfig {
        architecture: "wasm",
        os: "wasip2",
        layer_digests: [&layer_digest],
        component: Component { imports, exports },
    };
    // Plain strings: serialising cannot fail.
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: OciDescriptor {
            media_type: CONFIG_MEDIA_TYPE.to_string(),
            digest: digest_of(&config),
            size: config.len() as i64,
            ..Default::default()
        },
        layers: vec![OciDescriptor {
            media_type: LAYER_MEDIA_TYPE.to_string(),
            digest: layer_digest,
            size: module.len() as i64,
            ..Default::default()
        }],
        artifact_type: None,
        subject: None,
        annotations: (!annotations.is_empty()).then_some(annotations),
    };
    let manifest_bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    Built { manifest_digest: digest_of(&manifest_bytes), config, layer: module, manifest: manifest_bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[(&str, i64)]) -> Vec<u8> {
        let layers: Vec<serde_json::Value> = layers
            .iter()
            .map(|(t, size)| serde_json::json!({"mediaType": t, "digest": format!("sha256:{}", "a".repeat(64)), "size": size}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": config, "digest": format!("sha256:{}", "b".repeat(64)), "size": 2},
            "layers": layers,
        }))
        .expect("json")
    }

    #[test]
    fn both_layouts_are_read() {
        let l = check(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 100)]), 1000).expect("CNCF layout");
        assert_eq!(l.size, 100);
        check(&manifest(LEGACY_CONFIG_MEDIA_TYPE, &[(LEGACY_LAYER_MEDIA_TYPE, 100)]), 1000).expect("Kubewarden's");
    }

    #[test]
    fn what_is_not_one_small_wasm_layer_is_refused_with_the_reason() {
        let two = check(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 1), (LAYER_MEDIA_TYPE, 1)]), 1000);
        assert!(matches!(&two, Err(Error::Artifact(m)) if m.contains("2 layers")), "{two:?}");
        let big = check(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 1001)]), 1000);
        assert!(matches!(&big, Err(Error::Artifact(m)) if m.contains("before downloading")), "{big:?}");
        let image = check(
            &manifest("application/vnd.oci.image.config.v1+json", &[("application/vnd.oci.image.layer.v1.tar", 1)]),
            1000,
        );
        assert!(matches!(&image, Err(Error::Artifact(m)) if m.contains("container image")), "{image:?}");
        let mixed = check(&manifest(CONFIG_MEDIA_TYPE, &[(LEGACY_LAYER_MEDIA_TYPE, 1)]), 1000);
        assert!(mixed.is_err());
        assert!(check(b"{}", 1000).is_err());
    }

    #[test]
    fn a_built_artifact_passes_its_own_check() {
        let built = build(b"\0asm\x0d\0\x01\0".to_vec(), &["log".into()], &["podset".into()], BTreeMap::new());
        let layer = check(&built.manifest, 100).expect("valid");
        assert_eq!(layer.digest, digest_of(&built.layer));
        assert_eq!(built.manifest_digest, digest_of(&built.manifest));
        let config: serde_json::Value = serde_json::from_slice(&built.config).expect("config json");
        assert_eq!(config["layerDigests"][0], serde_json::json!(layer.digest));
    }
}
