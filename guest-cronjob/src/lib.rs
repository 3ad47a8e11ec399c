//! The kubebuilder tutorial's CronJob controller as a reconcile policy: a `CronJob`
//! (`batch.tutorial.kubebuilder.io/v1`) runs a `batch/v1` Job from its template at each
//! time of its cron schedule, with `startingDeadlineSeconds`, `concurrencyPolicy`,
//! `suspend` and history limits, and says in its status which Jobs run and when it last
//! scheduled one. `reconcile.rs` holds the decision; this file declares what it
//! reconciles and exports it.

pub mod reconcile;
pub mod types;

use policy_sdk::{Declarations, Kind, PolicyError, Reconciler};

pub const CRONJOB: Kind = Kind::new("batch.tutorial.kubebuilder.io", "v1", "CronJob");
pub const JOB: Kind = Kind::new("batch", "v1", "Job");

pub struct CronJobPolicy;

impl Reconciler for CronJobPolicy {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn declarations() -> Declarations {
        Declarations {
            parent: CRONJOB.gvk(),
            children: vec![JOB.gvk()],
            related: Vec::new(),
            finalizer: None,
            lookups: Vec::new(),
        }
    }

    fn reconcile(input: &policy_sdk::Input) -> Result<Vec<policy_sdk::Action>, PolicyError> {
        reconcile::reconcile(input)
    }
}

policy_sdk::export_reconciler!(CronJobPolicy);
