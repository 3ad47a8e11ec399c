//! stakater/Reloader as a reconcile policy: a `ConfigReload` names a Deployment in its
//! namespace, and when a ConfigMap or Secret that Deployment's pods use changes, the
//! policy rolls it by writing a hash of their contents into the pod template's
//! annotations (Reloader's `annotations` strategy). `reconcile.rs` holds the decision;
//! this file declares what it reconciles and exports it.
//!
//! Nothing here is owned: the Deployment, ConfigMaps and Secrets are looked up by name
//! (the Deployment from the spec, the rest from its pod template), and the Deployment
//! is patched with that one annotation and nothing else. The host re-triggers a
//! ConfigReload when any object its last decision looked up changes.

pub mod reconcile;
pub mod types;

use policy_sdk::{Declarations, Kind, LookupKind, PolicyError, Reconciler};

pub const CONFIG_RELOAD: Kind = Kind::new("reloader.example.com", "v1alpha1", "ConfigReload");
pub const DEPLOYMENT: Kind = Kind::new("apps", "v1", "Deployment");
pub const CONFIG_MAP: Kind = Kind::new("", "v1", "ConfigMap");
pub const SECRET: Kind = Kind::new("", "v1", "Secret");

pub struct ReloaderPolicy;

impl Reconciler for ReloaderPolicy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        Declarations {
            parent: CONFIG_RELOAD.gvk(),
            children: Vec::new(),
            related: Vec::new(),
            finalizer: None,
            lookups: vec![
                // Patched: only the pod template's hash annotation, never owned.
                LookupKind { kind: DEPLOYMENT.gvk(), patch: true },
                LookupKind { kind: CONFIG_MAP.gvk(), patch: false },
                LookupKind { kind: SECRET.gvk(), patch: false },
            ],
        }
    }

    fn reconcile(input: &policy_sdk::Input) -> Result<Vec<policy_sdk::Action>, PolicyError> {
        reconcile::reconcile(input)
    }
}

policy_sdk::export_reconciler!(ReloaderPolicy);
