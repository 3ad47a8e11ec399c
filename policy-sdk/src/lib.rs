//! Write a podset-host reconcile policy as a plain Rust function over typed structs.
//!
//! The contract is `wit/policy.wit`; this crate holds the wit-bindgen glue for both of
//! its worlds and the serde helpers around it, so that a policy is:
//!
//! ```ignore
//! struct Cache;
//! impl policy_sdk::Reconciler for Cache {
//!     fn declarations() -> Declarations { … }
//!     fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> { … }
//! }
//! policy_sdk::export_reconciler!(Cache);
//! ```
//!
//! `reconcile` is an ordinary function: unit-test it natively with inputs built by
//! [`testing`]. On wasm32 the crate also brings what every policy wants: a panic hook
//! that logs the panic's message before the instance aborts (so the host reports why),
//! and a bump allocator (an instance lives for one decision; freeing is wasted work)
//! that starts in the module's initial memory. Link a small stack and an initial memory
//! the size of a decision's peak (`.cargo/config.toml`), so that a decision grows no
//! memory and its pages stay within those the host keeps resident between instances.

pub mod conditions;
#[cfg(all(feature = "schemars", feature = "k8s", not(target_arch = "wasm32")))]
pub mod crd;
pub mod heap;
#[cfg(feature = "reconcile")]
pub mod lookups;
#[cfg(feature = "reconcile")]
pub mod objects;
pub mod secrets;
#[cfg(feature = "reconcile")]
pub mod testing;
pub mod time;

/// The any-kind world (`reconcile-policy`): bindings generated from `wit/`.
///
/// Only this world's bindings live here. A component embeds the world of every
/// bindings module linked into it, so a PodSet fast-path policy (which generates its
/// own `podset-policy` bindings) turns this feature off and uses the world-neutral
/// parts: the allocator, conditions, time and [`contract_version`].
#[cfg(feature = "reconcile")]
pub mod reconcile {
    wit_bindgen::generate!({
        path: "../wit",
        world: "reconcile-policy",
        pub_export_macro: true,
        export_macro_name: "export_world",
        default_bindings_module: "policy_sdk::reconcile",
        additional_derives: [PartialEq],
    });
}

pub use conditions::Condition;
#[cfg(feature = "reconcile")]
pub use lookups::Lookups;
#[cfg(feature = "reconcile")]
pub use objects::{Kind, Status, apply, create, delete, error, event, in_wave, update_status};
#[cfg(feature = "reconcile")]
pub use reconcile::exports::podset::policy::reconciler::{
    Action, Answer, Event, EventType, InFlight, Input, Lookup, LookupMatch, Object, ObjectKey, ObjectMeta,
};
#[cfg(feature = "reconcile")]
pub use reconcile::podset::policy::log::{Level, log};
#[cfg(feature = "reconcile")]
pub use reconcile::podset::policy::types::{
    Declarations, GroupVersionKind, KeyValue, LabelRequirement, LookupKind, PolicyError, PolicyInfo, RelatedKind,
    SelectorValue,
};

/// The WIT source, compiled in so the contract version cannot drift from it.
const WIT: &str = include_str!("../../wit/policy.wit");

/// The contract version this SDK was built against (the WIT package's), e.g. "0.4.0".
pub fn contract_version() -> String {
    WIT.lines()
        .find_map(|l| l.trim().strip_prefix("package podset:policy@"))
        .map(|v| v.trim_end_matches(';').to_string())
        .unwrap_or_default()
}

/// A reconcile policy for any kind.
#[cfg(feature = "reconcile")]
pub trait Reconciler {
    /// The policy's name (defaults to the crate's).
    const NAME: &'static str;
    /// The policy's version.
    const VERSION: &'static str;

    /// What it reconciles: the parent kind, child kinds, related kinds, finalizer, lookup kinds.
    fn declarations() -> Declarations;

    /// One decision. A pure function of `input`: nothing survives between calls.
    fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError>;
}

/// `PolicyInfo` for `R`: name, version, this SDK's contract version, declarations.
#[cfg(feature = "reconcile")]
pub fn info<R: Reconciler>() -> PolicyInfo {
    PolicyInfo {
        name: R::NAME.into(),
        version: R::VERSION.into(),
        contract: contract_version(),
        declares: R::declarations(),
    }
}

/// Routes a panic's message to the host's log before the instance aborts, so the
/// operator's `PolicyFailed` condition says what went wrong, not just "unreachable".
#[cfg(feature = "reconcile")]
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| log(Level::Error, &info.to_string())));
}

/// Exports `$policy` (a [`Reconciler`]) as the component's `identity` and
/// `reconciler` interfaces. Only wasm32 builds export: component export names are
/// not valid symbols of a native library, and native builds are for tests.
#[macro_export]
macro_rules! export_reconciler {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct Exported;
            impl $crate::reconcile::exports::podset::policy::identity::Guest for Exported {
                fn info() -> $crate::PolicyInfo {
                    $crate::info::<$policy>()
                }
            }
            impl $crate::reconcile::exports::podset::policy::reconciler::Guest for Exported {
                fn decide(input: $crate::Input) -> Result<Vec<$crate::Action>, $crate::PolicyError> {
                    $crate::install_panic_hook();
                    <$policy as $crate::Reconciler>::reconcile(&input)
                }
            }
    $crate::reconcile::export_world!(Exported with_types_in $crate::reconcile);
        };
    };
}

/// Every decision runs in a fresh instance that the host discards afterwards: see
/// [`heap`].
#[cfg(all(target_arch = "wasm32", feature = "allocator"))]
#[global_allocator]
static ALLOCATOR: heap::Bump<heap::Linear> = heap::Bump::new(heap::Linear);

#[cfg(test)]
mod tests {
    #[test]
    fn the_contract_version_is_the_wit_packages() {
        let v = super::contract_version();
        assert_eq!(v.split('.').count(), 3, "{v}");
    }
}
