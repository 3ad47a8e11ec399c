//! Hostile policies for the sandbox tests: each cargo feature builds a component that
//! misbehaves in one way. Built for wasm32 by `hack/policy.sh --fixtures`; never run
//! natively.

#[cfg(not(feature = "wasi-import"))]
wit_bindgen::generate!({ path: "../wit", world: "podset-policy" });

#[cfg(feature = "wasi-import")]
wit_bindgen::generate!({ path: ["../wit", "wit"], world: "podset:fixtures/wasi-import", generate_all });

use exports::podset::policy::policy::{Action, Guest, Input, PolicyError, PolicyInfo};

struct Fixture;

impl Guest for Fixture {
    fn info() -> PolicyInfo {
        let contract = if cfg!(feature = "wrong-contract") { "9.0.0" } else { "0.1.0" };
        PolicyInfo {
            name: "hostile-fixture".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract: contract.into(),
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn decide(input: Input) -> Result<Vec<Action>, PolicyError> {
        #[cfg(feature = "infinite-loop")]
        {
            let mut n = 0u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        #[cfg(feature = "memory-bomb")]
        {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        #[cfg(feature = "panic")]
        {
            // Like the default policy: report the panic message before aborting.
            std::panic::set_hook(Box::new(|info| {
                podset::policy::log::log(podset::policy::log::Level::Error, &info.to_string())
            }));
            panic!("replicas {} is out of this policy's range", input.podset.replicas);
        }
        #[cfg(feature = "action-flood")]
        {
            return Ok((0..100_000).map(|i| Action::DeletePod(format!("{}-{i}", input.podset.name))).collect());
        }
        #[cfg(feature = "wasi-import")]
        {
            let n = wasi::random::random::get_random_u64();
            return Ok(if n % 2 == 0 { Vec::new() } else { vec![Action::RequeueAfter(1)] });
        }
        Ok(Vec::new())
    }
}

// Component export names are not valid native symbols; only wasm32 builds export.
#[cfg(target_arch = "wasm32")]
export!(Fixture);
