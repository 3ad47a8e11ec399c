//! Typed bindings generated from `wit/` — the only way data crosses the boundary.
//! One module per world; the interfaces both worlds import (`types`, `log`) are
//! generated once, in [`podset_world`], and shared by [`reconcile_world`].

pub mod podset_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "podset-policy",
        // Inputs and actions are also the `policy run` / `policy test` file format, so
        // the WIT stays the one definition of their shape.
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

pub mod reconcile_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "reconcile-policy",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
        with: {
            "podset:policy/types": super::podset_world::podset::policy::types,
            "podset:policy/log": super::podset_world::podset::policy::log,
        },
    });
}

pub use podset_world::podset::policy::log::Level;
pub use podset_world::podset::policy::types::{
    Condition, ConditionStatus, Declarations, GroupVersionKind, KeyValue, LabelRequirement, LookupKind,
    PolicyError as GuestError, PolicyInfo, RelatedKind, SelectorValue,
};
pub use podset_world::{PodsetPolicy, PodsetPolicyPre};
pub use reconcile_world::{ReconcilePolicy, ReconcilePolicyPre};

/// The PodSet world's own types.
pub mod podset {
    pub use super::podset_world::exports::podset::policy::podset::{
        Action, CreatePod, InFlight, Input, Pod, PodName, PodPhase, Podset, PodsetStatus,
    };
}

/// The any-kind world's own types.
pub mod reconciler {
    pub use super::reconcile_world::exports::podset::policy::reconciler::{
        Action, Answer, Event, EventType, InFlight, Input, Lookup, LookupMatch, Object, ObjectKey, ObjectMeta,
    };
}

/// The WIT source, compiled in so the contract version cannot drift from it.
pub const WIT: &str = include_str!("../../../wit/policy.wit");

/// The WIT package's version, e.g. "0.4.0": the contract version this host speaks.
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
