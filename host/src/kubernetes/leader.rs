//! Leader election on a `coordination.k8s.io/v1` Lease, so that several replicas of
//! the operator can run and only one acts.
//!
//! `kube-lease-manager` acquires, renews and releases the Lease. Two things it does not
//! do are added here, both from one watch of the Lease:
//! - **A local deadline.** A leader cut off from the API server keeps believing it
//!   leads (the manager only logs its errors) while a standby takes the Lease over:
//!   two leaders. Here a replica acts only while the Lease, as last seen, names it with
//!   a renewal recent enough that nobody else may have taken over yet
//!   (`renewTime + duration − grace/2`); it steps down on its own clock.
//! - **A prompt handover.** A standby sleeps until the Lease it saw would expire, so a
//!   graceful release would wait for that expiry. Seeing the Lease freed, the standby
//!   starts a fresh manager, which reads the Lease and takes it at once.
//!
//! Losing leadership (other than by shutting down) ends the process, as
//! controller-runtime does: writes in flight end with it, and the pod restarts as a
//! standby with fresh state.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::fence::Fence;

/// How a replica takes part in the election.
#[derive(Clone, Debug)]
pub struct Settings {
    pub lease: String,
    pub namespace: String,
    /// Unique among the replicas (the pod name in a Deployment).
    pub identity: String,
    /// How long a Lease holds after its last renewal.
    pub duration: Duration,
    /// How long the holder has, from a renewal, to renew again before it gives up;
    /// less than `duration`.
    pub renew_deadline: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("the lease duration ({duration:?}) must be whole seconds, at least 2 s")]
    Duration { duration: Duration },
    #[error(
        "the renew deadline ({deadline:?}) must be whole seconds, at least 1 s and less than the lease duration ({duration:?})"
    )]
    Deadline { deadline: Duration, duration: Duration },
}

impl Settings {
    /// Checks what `kube-lease-manager` would otherwise panic on: grace (duration −
    /// renew deadline) and duration must be whole, positive seconds.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let (d, r) = (self.duration, self.renew_deadline);
        if d.subsec_nanos() != 0 || d.as_secs() < 2 {
            return Err(SettingsError::Duration { duration: d });
        }
        if r.subsec_nanos() != 0 || r.as_secs() < 1 || r >= d {
            return Err(SettingsError::Deadline { deadline: r, duration: d });
        }
        Ok(())
    }

    fn grace(&self) -> Duration {
        self.duration.saturating_sub(self.renew_deadline)
    }
}

/// Where this replica stands; cheap to clone and to ask.
#[derive(Clone)]
pub struct Leadership {
    acting: watch::Receiver<bool>,
    /// True once the Lease is released (or was never ours to release).
    released: watch::Receiver<bool>,
    elected: bool,
}

impl Leadership {
    /// A replica without leader election: it always acts.
    pub fn alone() -> Self {
        let (_, acting) = watch::channel(true);
        let (_, released) = watch::channel(true);
        Leadership { acting, released, elected: false }
    }

    pub fn is_acting(&self) -> bool {
        *self.acting.borrow()
    }

    /// Resolves once this replica may act (at once without leader election).
    pub async fn acting(&self) {
        let mut rx = self.acting.clone();
        let _ = rx.wait_for(|a| *a).await;
    }

    /// Resolves once the Lease has been released after `release` was cancelled. The
    /// process must not exit before: a Lease left to expire keeps the standby waiting
    /// for the whole lease duration.
    pub async fn released(&self) {
        let mut rx = self.released.clone();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// `leader`, `standby`, or `single` (no election), for `/readyz` and logs.
    pub fn role(&self) -> &'static str {
        match (self.elected, self.is_acting()) {
            (false, _) => "single",
            (true, true) => "leader",
            (true, false) => "standby",
        }
    }
}

/// What the Lease says, as last seen.
#[derive(Clone, Debug, Default)]
struct Seen {
    holder: Option<String>,
    renewed: Option<SystemTime>,
    duration: Option<Duration>,
}

impl Seen {
    /// Until when `identity` may act on this Lease, on its own clock: `renewTime +
    /// duration − margin`, if the Lease as last seen names it.
    fn deadline(&self, identity: &str, margin: Duration) -> Option<SystemTime> {
        match (self.holder.as_deref() == Some(identity), self.renewed, self.duration) {
            (true, Some(renewed), Some(duration)) => Some(renewed + duration.saturating_sub(margin)),
            _ => None,
        }
    }
}

/// Takes part in the election on `settings.lease`. Returns the [`Leadership`] to gate
/// writes on. Acting stops at `shutdown`; the Lease is released at `release` (after
/// the writes in flight have finished, so that two replicas never write at once).
/// `lost` is cancelled if this replica loses leadership while running.
pub fn start(
    client: Client,
    settings: Settings,
    fence: Fence,
    shutdown: CancellationToken,
    release: CancellationToken,
    lost: CancellationToken,
    on_change: impl Fn(bool) + Send + Sync + 'static,
) -> Leadership {
    let (acting_tx, acting_rx) = watch::channel(false);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let freed = Arc::new(Notify::new());
    let elected = watch::channel(false);
    tokio::spawn(watch_lease(client.clone(), settings.clone(), seen.clone(), freed.clone(), release.clone()));
    let (released_tx, released_rx) = watch::channel(false);
    let electing = elect(client, settings.clone(), elected.0, freed, release, seen.clone());
    tokio::spawn(async move {
        electing.await;
        let _ = released_tx.send(true);
    });
    tokio::spawn(decide_acting(settings, seen, elected.1, (acting_tx, fence), shutdown, lost, on_change));
    Leadership { acting: acting_rx, released: released_rx, elected: true }
}

/// Follows the Lease: who holds it, when it was renewed; wakes a standby when it is freed.
async fn watch_lease(client: Client, s: Settings, seen: Arc<Mutex<Seen>>, freed: Arc<Notify>, stop: CancellationToken) {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", s.lease));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff().touched_objects());
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            Some(Ok(lease)) => {
                let spec = lease.spec.unwrap_or_default();
                let now = Seen {
                    holder: spec.holder_identity.filter(|h| !h.is_empty()),
                    renewed: spec.renew_time.map(|t| t.0.into()),
                    duration: spec.lease_duration_seconds.and_then(|d| u64::try_from(d).ok()).map(Duration::from_secs),
                };
                let was_held = seen.lock().holder.is_some();
                if was_held && now.holder.is_none() {
                    freed.notify_one();
                }
                *seen.lock() = now;
            }
            Some(Err(e)) => warn!(lease = %s.lease, "watching the lease: {e}"),
            None => return,
        }
    }
}

/// Runs `kube-lease-manager`, rebuilding it when the Lease is freed so a standby does
/// not sleep until the old lock would have expired.
async fn elect(
    client: Client,
    s: Settings,
    elected: watch::Sender<bool>,
    freed: Arc<Notify>,
    stop: CancellationToken,
    seen: Arc<Mutex<Seen>>,
) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let manager = tokio::select! {
            _ = stop.cancelled() => return,
            m = build(&client, &s) => m,
        };
        let manager = match manager {
            Ok(m) => m,
            Err(e) => {
                warn!(lease = %s.lease, "cannot reach the lease: {e}; retrying in {backoff:?}");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {},
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        backoff = Duration::from_millis(500);
        loop {
            let leading = *elected.borrow();
            tokio::select! {
                _ = stop.cancelled() => {
                    // Released, not left to expire: a standby takes over at once. Only a
                    // Lease still ours by our own clock: the manager releases by an
                    // unconditional patch, judged from its cached state, so a replica cut
                    // off past its lease would clear the Lease its successor now holds
                    // (tests/leader.rs, the cut-off leader, once its path heals).
                    let ours = seen.lock().deadline(&s.identity, s.grace() / 2);
                    if ours.is_some_and(|d| SystemTime::now() < d) {
                        match manager.release().await {
                            Err(e) => warn!(lease = %s.lease, "releasing the lease: {e}"),
                            Ok(()) => info!(lease = %s.lease, "lease released"),
                        }
                    } else if leading {
                        info!(lease = %s.lease, "not releasing the lease: as last seen, it is no longer ours");
                    }
                    let _ = elected.send(false);
                    return;
                }
                changed = manager.changed() => match changed {
                    Ok(now) => {
                        let _ = elected.send(now);
                    }
                    Err(e) => {
                        warn!(lease = %s.lease, "lease: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
                _ = freed.notified(), if !leading => break,
            }
        }
    }
}

async fn build(client: &Client, s: &Settings) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
    LeaseManagerBuilder::new(client.clone(), &s.lease)
        .with_namespace(&s.namespace)
        .with_identity(&s.identity)
        .with_field_manager(format!("podset-host-{}", s.identity))
        .with_duration(s.duration.as_secs())
        .with_grace(s.grace().as_secs())
        .build()
        .await
}

/// Acting = elected by the manager, and the Lease as last seen names us with a renewal
/// recent enough. Re-evaluated often, on this replica's clock; the fence gets the same
/// deadline, and checks it at every write.
async fn decide_acting(
    s: Settings,
    seen: Arc<Mutex<Seen>>,
    mut elected: watch::Receiver<bool>,
    (acting, fence): (watch::Sender<bool>, Fence),
    stop: CancellationToken,
    lost: CancellationToken,
    on_change: impl Fn(bool),
) {
    let margin = s.grace() / 2;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                // The controllers have stopped by now or are stopping: nothing more goes out.
                fence.until(None);
                let _ = acting.send(false);
                return;
            }
            _ = tick.tick() => {}
            _ = elected.changed() => {}
        }
        // The deadline the fence checks each write against, at the moment it is sent; the
        // acting flag follows it here, every tick.
        let deadline = seen.lock().deadline(&s.identity, margin).filter(|_| *elected.borrow());
        fence.until(deadline);
        let now = deadline.is_some_and(|d| SystemTime::now() < d);
        let was = *acting.borrow();
        if now != was {
            let _ = acting.send(now);
            on_change(now);
            if now {
                info!(lease = %s.lease, identity = %s.identity, "leading: reconciling");
            } else if !stop.is_cancelled() {
                error!(lease = %s.lease, identity = %s.identity, "lost the lease; exiting so a fresh standby takes this replica's place");
                lost.cancel();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(duration: u64, deadline: u64) -> Settings {
        Settings {
            lease: "l".into(),
            namespace: "ns".into(),
            identity: "me".into(),
            duration: Duration::from_secs(duration),
            renew_deadline: Duration::from_secs(deadline),
        }
    }

    #[test]
    fn settings_that_would_panic_the_lease_manager_are_refused() {
        assert!(settings(15, 10).validate().is_ok());
        assert!(settings(15, 15).validate().is_err(), "no grace left");
        assert!(settings(1, 0).validate().is_err());
        let mut s = settings(15, 10);
        s.duration = Duration::from_millis(1500);
        assert!(s.validate().is_err());
    }

    #[test]
    fn a_single_replica_always_acts() {
        let l = Leadership::alone();
        assert!(l.is_acting());
        assert_eq!(l.role(), "single");
    }
}
