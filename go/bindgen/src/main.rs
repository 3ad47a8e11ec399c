//! Writes the Go bindings of one world of the contract (`wit/`), for the Go policy SDK:
//! `go-bindgen WIT_DIR OUT_DIR --world reconcile-policy --package podset.dev/policy-sdk/wit`.
//! Also writes `contract/contract.go`, the package's version. `make go-bindings` runs it (and `gofmt`); `make check` runs it into a temporary
//! directory and fails on any difference from the committed copy.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use wit_bindgen_core::Files;
use wit_bindgen_core::wit_parser::Resolve;

#[derive(Parser)]
struct Args {
    /// The WIT package (a directory or a file).
    wit: PathBuf,
    /// Where the Go packages go: one directory per interface, and `wit_exports/`.
    out: PathBuf,
    /// The world the bindings are for.
    #[arg(long)]
    world: String,
    /// The Go import path of OUT.
    #[arg(long)]
    package: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_path(&args.wit).with_context(|| format!("reading {}", args.wit.display()))?;
    let world = resolve.select_world(&[package], Some(&args.world))?;
    let version = resolve.packages[package]
        .name
        .version
        .as_ref()
        .with_context(|| format!("{} names no version: the contract's version is its package's", args.wit.display()))?
        .to_string();
    let opts = wit_bindgen_go::Opts {
        // `make go-bindings` runs gofmt itself: the generator would format only when it finds
        // gofmt, and an unformatted copy would read as drift.
        format: wit_bindgen_go::Format::False,
        pkg_name: Some(args.package),
        ..Default::default()
    };
    let mut files = Files::default();
    opts.build().generate(&mut resolve, world, &mut files)?;
    for (name, bytes) in files.iter() {
        let path = args.out.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    // The contract's version, for `info()` (the host refuses another major, or minor while 0).
    let contract = args.out.join("contract/contract.go");
    std::fs::create_dir_all(args.out.join("contract"))?;
    std::fs::write(
        &contract,
        format!(
            "// Generated from the WIT package's version by go-bindgen: do not edit.\n\n\
             // Package contract is the version of the contract these bindings are of.\n\
             package contract\n\n\
             const Version = \"{version}\"\n"
        ),
    )
    .with_context(|| format!("writing {}", contract.display()))?;
    Ok(())
}
