//! Link settings for the wasm32 build of the policy.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        // Rust's default wasm stack is 1 MiB at the bottom of linear memory, which puts
        // data and heap above it. A decision needs a few KiB of stack; 64 KiB keeps
        // everything a decision touches within the pages the host keeps resident
        // between instances, so a fresh instance costs no page faults.
        println!("cargo:rustc-link-arg-cdylib=-zstack-size=65536");
    }
}
