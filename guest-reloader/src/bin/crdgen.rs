//! Prints the ConfigReload CRD generated from `src/types.rs` (`make manifests`).

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    match guest_reloader::types::crd_yaml() {
        Ok(yaml) => print!("{yaml}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
