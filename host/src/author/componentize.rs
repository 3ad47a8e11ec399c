//! Core Wasm module → component. `wit-bindgen` embeds the world in a custom section of
//! the core module; `wit-component` reads it and wraps the module accordingly.

use wit_component::ComponentEncoder;

use crate::sandbox::{Error, Result};

pub fn componentize(core_module: &[u8]) -> Result<Vec<u8>> {
    ComponentEncoder::default()
        .module(core_module)
        .and_then(|e| e.validate(true).encode())
        .map_err(|e| Error::Invalid(format!("cannot make a component of this module: {e:#}")))
}
