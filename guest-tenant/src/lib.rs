//! Namespace-as-a-service as a reconcile policy: a cluster-scoped `Tenant` owns a
//! namespace under the `restricted` Pod Security profile and, inside it, a
//! ResourceQuota, a LimitRange, a RoleBinding of the tenant's group to `edit` and a
//! default-deny NetworkPolicy. `reconcile.rs` holds the decision; this file declares
//! what it reconciles and exports it.
//!
//! The operator's administrator grants it the cluster-scoped kind `Namespace` and the
//! namespaces it owns (`podset-host run --reach manifests/reach/tenant.yaml`); without
//! that grant the host refuses to load it.

pub mod reconcile;
pub mod types;

use policy_sdk::{Declarations, Kind, PolicyError, Reconciler};

pub const TENANT: Kind = Kind::new("tenancy.example.com", "v1alpha1", "Tenant");
pub const NAMESPACE: Kind = Kind::new("", "v1", "Namespace");
pub const RESOURCE_QUOTA: Kind = Kind::new("", "v1", "ResourceQuota");
pub const LIMIT_RANGE: Kind = Kind::new("", "v1", "LimitRange");
pub const ROLE_BINDING: Kind = Kind::new("rbac.authorization.k8s.io", "v1", "RoleBinding");
pub const NETWORK_POLICY: Kind = Kind::new("networking.k8s.io", "v1", "NetworkPolicy");

pub struct TenantPolicy;

impl Reconciler for TenantPolicy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        Declarations {
            parent: TENANT.gvk(),
            children: vec![
                NAMESPACE.gvk(),
                RESOURCE_QUOTA.gvk(),
                LIMIT_RANGE.gvk(),
                ROLE_BINDING.gvk(),
                NETWORK_POLICY.gvk(),
            ],
            related: Vec::new(),
            finalizer: None,
            lookups: Vec::new(),
        }
    }

    fn reconcile(input: &policy_sdk::Input) -> Result<Vec<policy_sdk::Action>, PolicyError> {
        reconcile::reconcile(input)
    }
}

policy_sdk::export_reconciler!(TenantPolicy);
