//! Prints the {{Kind}} CRD generated from the Rust types: `cargo run --bin crdgen > crd.yaml`.

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    match {{crate_ident}}::crd_yaml() {
        Ok(yaml) => print!("{yaml}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
