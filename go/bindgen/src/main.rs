//! Writes the Go bindings of the contract's worlds (`wit/`), for the Go policy SDK:
//! `go-bindgen WIT_DIR OUT_DIR --package podset.dev/policy-sdk/internal
//! --world reconcile-policy=wit --world podset-policy=witpodset`: each world's packages
//! under OUT_DIR/SUBDIR (a policy links one world's exports, so each world is a package
//! tree of its own), and `contract/contract.go`, the package's version. `make go-bindings`
//! runs it (and `gofmt`); `make check` runs it into a temporary directory and fails on any
//! difference from the committed copy.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use wit_bindgen_core::Files;
use wit_bindgen_core::wit_parser::Resolve;

#[derive(Parser)]
struct Args {
    /// The WIT package (a directory or a file).
    wit: PathBuf,
    /// Where the Go packages go.
    out: PathBuf,
    /// WORLD=SUBDIR: the bindings of WORLD into OUT/SUBDIR (one directory per interface,
    /// and `wit_exports/`). Repeat for each world.
    #[arg(long = "world", required = true, value_parser = parse_world)]
    worlds: Vec<(String, String)>,
    /// The Go import path of OUT.
    #[arg(long)]
    package: String,
}

fn parse_world(arg: &str) -> Result<(String, String), String> {
    arg.split_once('=')
        .map(|(world, dir)| (world.to_string(), dir.to_string()))
        .ok_or_else(|| format!("`{arg}` is not WORLD=SUBDIR"))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut version = None;
    for (world, dir) in &args.worlds {
        // A resolve per world: `generate` takes the one it is given mutably.
        let mut resolve = Resolve::default();
        let (package, _) = resolve.push_path(&args.wit).with_context(|| format!("reading {}", args.wit.display()))?;
        let id = resolve.select_world(&[package], Some(world))?;
        version = resolve.packages[package].name.version.as_ref().map(ToString::to_string);
        let opts = wit_bindgen_go::Opts {
            // `make go-bindings` runs gofmt itself: the generator would format only when it
            // finds gofmt, and an unformatted copy would read as drift.
            format: wit_bindgen_go::Format::False,
            pkg_name: Some(format!("{}/{dir}", args.package)),
            ..Default::default()
        };
        let mut files = Files::default();
        opts.build().generate(&mut resolve, id, &mut files)?;
        for (name, bytes) in files.iter() {
            write(&args.out.join(dir).join(name), bytes)?;
        }
    }
    let version = version
        .with_context(|| format!("{} names no version: the contract's version is its package's", args.wit.display()))?;
    // The contract's version, for `info()` (the host refuses another major, or minor while 0).
    write(
        &args.out.join("contract/contract.go"),
        format!(
            "// Generated from the WIT package's version by go-bindgen: do not edit.\n\n\
             // Package contract is the version of the contract these bindings are of.\n\
             package contract\n\n\
             const Version = \"{version}\"\n"
        )
        .as_bytes(),
    )
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
