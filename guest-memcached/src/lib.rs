//! The operator-sdk Memcached operator as a reconcile policy: a `Memcached` owns a
//! Deployment of memcached pods, kept at `spec.size`, with its status filled from the
//! Deployment and its pods, and the seed's finalizer flow on deletion. `reconcile.rs`
//! holds the decision; this file declares what it reconciles and exports it.

pub mod reconcile;
pub mod types;

use policy_sdk::{Declarations, Kind, LabelRequirement, PolicyError, Reconciler, RelatedKind, SelectorValue};

pub const MEMCACHED: Kind = Kind::new("cache.example.com", "v1alpha1", "Memcached");
pub const DEPLOYMENT: Kind = Kind::new("apps", "v1", "Deployment");
pub const POD: Kind = Kind::new("", "v1", "Pod");
/// The seed's finalizer.
pub const FINALIZER: &str = "cache.example.com/finalizer";
/// The labels on every memcached pod; the related pods are selected by them.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

pub struct MemcachedPolicy;

impl Reconciler for MemcachedPolicy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        Declarations {
            parent: MEMCACHED.gvk(),
            children: vec![DEPLOYMENT.gvk()],
            related: vec![RelatedKind {
                kind: POD.gvk(),
                selector: vec![
                    LabelRequirement { key: NAME_LABEL.into(), value: SelectorValue::Exact("memcached".into()) },
                    LabelRequirement { key: INSTANCE_LABEL.into(), value: SelectorValue::ParentName },
                ],
            }],
            finalizer: Some(FINALIZER.into()),
            lookups: Vec::new(),
        }
    }

    fn reconcile(input: &policy_sdk::Input) -> Result<Vec<policy_sdk::Action>, PolicyError> {
        reconcile::reconcile(input)
    }
}

policy_sdk::export_reconciler!(MemcachedPolicy);
