//! Typed bindings generated from `wit/` — the only way data crosses the boundary.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "podset-policy",
    // Inputs and actions are also the `policy run` / `policy test` file format, so the
    // WIT stays the one definition of their shape.
    additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
});

pub use exports::podset::policy::policy::{Action, Input, PolicyError as GuestError, PolicyInfo};
pub use podset::policy::log::Level;
pub use podset::policy::types::{
    Condition, ConditionStatus, CreatePod, InFlight, KeyValue, Pod, PodName, PodPhase, Podset, PodsetStatus,
};

/// The WIT source, compiled in so the contract version cannot drift from it.
const WIT: &str = include_str!("../../../wit/policy.wit");

/// The WIT package's version, e.g. "0.1.0": the contract version this host speaks.
pub fn contract_version() -> &'static str {
    WIT.lines()
        .find_map(|l| l.trim().strip_prefix("package podset:policy@"))
        .map(|v| v.trim_end_matches(';'))
        .unwrap_or("unknown")
}

/// `podset:policy/<interface>@<version>`: how an interface of this contract is named
/// in a component's imports and exports.
pub fn interface_name(interface: &str) -> String {
    format!("podset:policy/{interface}@{}", contract_version())
}

#[cfg(test)]
mod tests {
    #[test]
    fn contract_version_is_read_from_the_wit_package() {
        let v = super::contract_version();
        assert_eq!(v.split('.').count(), 3, "{v}");
        assert_eq!(super::interface_name("log"), format!("podset:policy/log@{v}"));
    }
}
