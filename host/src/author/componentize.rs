//! Core Wasm module → component.
//!
//! `wit-bindgen` (Rust) embeds the world in a custom section of the core module;
//! `wit-component` reads it and wraps the module accordingly. A core module without one
//! (Go's: its bindings are generated ahead of time, and `go build` keeps no custom
//! section) gets the contract's world compiled into this binary: `podset-policy` when it
//! exports the PodSet interface, else `reconcile-policy`.
//!
//! A core module importing `wasi_snapshot_preview1` (Go's runtime does) gets the
//! deterministic WASI adapter (`deterministic_wasi.wat`) inside the component, so that
//! the component still imports only `log`, and every instance answers the same.

use wasmparser::{Parser, Payload};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

use crate::contract::bindings::{WIT, interface_name};
use crate::sandbox::{Error, Result};

/// The WASI preview 1 module name of an import, and of the adapter that answers it.
const WASI_P1: &str = "wasi_snapshot_preview1";

pub fn componentize(core_module: &[u8]) -> Result<Vec<u8>> {
    let shape = Shape::of(core_module)?;
    let mut module = core_module.to_vec();
    if !shape.has_world {
        let world = if shape.exports_podset { "podset-policy" } else { "reconcile-policy" };
        embed_world(&mut module, world)?;
    }
    let mut encoder = ComponentEncoder::default().module(&module).map_err(invalid)?;
    if shape.imports_wasi {
        encoder = encoder.adapter(WASI_P1, &deterministic_wasi()?).map_err(invalid)?;
    }
    encoder.validate(true).encode().map_err(invalid)
}

fn invalid(e: anyhow::Error) -> Error {
    Error::Invalid(format!("cannot make a component of this module: {e:#}"))
}

/// What componentizing a core module depends on.
struct Shape {
    /// A `component-type` custom section names its world.
    has_world: bool,
    imports_wasi: bool,
    /// It exports the PodSet interface's `decide`.
    exports_podset: bool,
}

impl Shape {
    fn of(core_module: &[u8]) -> Result<Shape> {
        let podset_decide = format!("{}#decide", interface_name("podset"));
        let mut shape = Shape { has_world: false, imports_wasi: false, exports_podset: false };
        for payload in Parser::new(0).parse_all(core_module) {
            match payload.map_err(|e| Error::Invalid(format!("not a core Wasm module: {e}")))? {
                Payload::Version { encoding: wasmparser::Encoding::Component, .. } => {
                    return Err(Error::Invalid("this is a component already, not a core module".into()));
                }
                Payload::CustomSection(section) if section.name().starts_with("component-type") => {
                    shape.has_world = true;
                }
                Payload::ImportSection(imports) => {
                    for import in imports.into_imports() {
                        let import = import.map_err(|e| Error::Invalid(format!("reading imports: {e}")))?;
                        shape.imports_wasi |= import.module == WASI_P1;
                    }
                }
                Payload::ExportSection(exports) => {
                    for export in exports {
                        let export = export.map_err(|e| Error::Invalid(format!("reading exports: {e}")))?;
                        shape.exports_podset |= export.name == podset_decide;
                    }
                }
                _ => {}
            }
        }
        Ok(shape)
    }
}

/// The contract's WIT, parsed.
fn contract() -> Result<(Resolve, wit_parser::PackageId)> {
    let mut resolve = Resolve::default();
    let package = resolve
        .push_source("policy.wit", WIT)
        .map_err(|e| Error::Invalid(format!("the contract's WIT does not parse: {e:#}")))?;
    Ok((resolve, package))
}

/// Embeds `world` of the contract as the module's `component-type` section.
fn embed_world(module: &mut Vec<u8>, world: &str) -> Result<()> {
    let (resolve, package) = contract()?;
    let world = resolve.select_world(&[package], Some(world)).map_err(invalid)?;
    wit_component::embed_component_metadata(module, &resolve, world, StringEncoding::UTF8).map_err(invalid)
}

/// The deterministic WASI adapter, with its world (it imports `log`) embedded.
fn deterministic_wasi() -> Result<Vec<u8>> {
    let mut adapter = wat::parse_str(include_str!("deterministic_wasi.wat"))
        .map_err(|e| Error::Invalid(format!("the WASI adapter does not parse: {e}")))?;
    let (mut resolve, _) = contract()?;
    let source = format!("package podset:wasi-adapter;\nworld adapter {{ import {}; }}\n", interface_name("log"));
    let package = resolve
        .push_source("adapter.wit", &source)
        .map_err(|e| Error::Invalid(format!("the WASI adapter's world does not parse: {e:#}")))?;
    let world = resolve.select_world(&[package], Some("adapter")).map_err(invalid)?;
    wit_component::embed_component_metadata(&mut adapter, &resolve, world, StringEncoding::UTF8).map_err(invalid)?;
    Ok(adapter)
}
