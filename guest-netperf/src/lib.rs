//! The Netperf operator as a reconcile policy: a `Netperf` measures the TCP throughput
//! between two pods. It is a state machine (Initial → Server → Test → Done, or Error)
//! whose state lives in the parent's status, because a policy is a pure function with
//! a fresh instance per call. `reconcile.rs` holds the machine, `iperf.rs` reads the
//! measurement; this file declares what it reconciles and exports it.

pub mod iperf;
pub mod reconcile;
pub mod types;

use policy_sdk::{Declarations, Kind, PolicyError, Reconciler};

pub const NETPERF: Kind = Kind::new("app.example.com", "v1alpha1", "Netperf");
pub const POD: Kind = Kind::new("", "v1", "Pod");

pub struct NetperfPolicy;

impl Reconciler for NetperfPolicy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        // The pods are the parent's children (owner references): deleting a Netperf
        // deletes them, and no finalizer is needed.
        Declarations {
            parent: NETPERF.gvk(),
            children: vec![POD.gvk()],
            related: vec![],
            finalizer: None,
            lookups: vec![],
        }
    }

    fn reconcile(input: &policy_sdk::Input) -> Result<Vec<policy_sdk::Action>, PolicyError> {
        reconcile::reconcile(input)
    }
}

policy_sdk::export_reconciler!(NetperfPolicy);
