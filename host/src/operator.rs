//! `podset-host run`: wires the client, the policy engine, the policy sources, the
//! controller and the HTTP endpoint together, and shuts them down on SIGTERM.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::sources::cluster::PolicyController;

use crate::crd::PodSet;
use crate::metrics::Metrics;
use crate::policy::{Limits, PolicyEngine};
use crate::reconcile::expectations::Expectations;
use crate::reconcile::{self, Context};
use crate::registry::Policies;
use crate::{kube_client, sources};

/// What `podset-host run` needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The default policy module; watched for changes.
    pub policy: PathBuf,
    /// Only this namespace, or all when `None`.
    pub namespace: Option<String>,
    pub concurrency: u16,
    pub resync: Duration,
    pub metrics_addr: SocketAddr,
    pub limits: Limits,
}

pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::default());
    let client = kube_client::client(metrics.api_writes.clone()).await?;
    let engine = Arc::new(PolicyEngine::new(settings.limits.clone())?);

    // The default policy must load at start: an operator that cannot decide anything
    // should say so at once, not serve failures.
    let bytes = tokio::fs::read(&settings.policy)
        .await
        .map_err(|e| anyhow::anyhow!("reading policy {}: {e}", settings.policy.display()))?;
    let default = engine
        .load_async(bytes)
        .await
        .map_err(|e| anyhow::anyhow!("loading policy {}: {e}", settings.policy.display()))?;
    metrics.policy_loaded("file", true);
    info!(policy = %default.label(), file = %settings.policy.display(), "default policy loaded");
    let policies = Arc::new(Policies::with_default(default));

    let ns = settings.namespace.as_deref();
    let (pods_api, podsets_api): (Api<Pod>, Api<PodSet>) = (scoped(&client, ns), scoped(&client, ns));
    let (pod_reader, pod_writer) = reflector::store();
    let (podset_reader, podset_writer) = reflector::store();
    let expectations = Arc::new(Expectations::default());
    let podset_stream = reconcile::podset_events(podsets_api, podset_writer, expectations.clone());
    let recorder = Recorder::new(client.clone(), Reporter { controller: "podset-host".into(), instance: None });
    let ctx = Arc::new(Context {
        client: client.clone(),
        pods: pod_reader,
        podsets: podset_reader,
        expectations: expectations.clone(),
        engine: engine.clone(),
        policies: policies.clone(),
        recorder,
        metrics: metrics.clone(),
        resync: settings.resync,
        failures: Default::default(),
    });
    let pod_stream = reconcile::pod_events(pods_api, pod_writer, expectations);

    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown = || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };

    // Policy sources re-queue the PodSets whose policy changed.
    let (requeue_tx, requeue_rx) = futures::channel::mpsc::unbounded();
    let file_watch = sources::file::watch(settings.policy.clone(), ctx.clone(), requeue_tx.clone(), stop_rx.clone());
    let (rp_reader, rp_writer) = reflector::store();
    let policy_ctl = Arc::new(PolicyController { ctx: ctx.clone(), requeue: requeue_tx });
    let rp_stream = sources::cluster::events(scoped(&client, ns), rp_writer, policy_ctl.clone());
    let configmaps: Api<PartialObjectMeta<ConfigMap>> = scoped(&client, ns);
    let policy_controller = sources::cluster::run(policy_ctl, rp_stream, rp_reader.clone(), configmaps, shutdown());

    // Ready once the pod and PodSet caches hold a first full list: before that a
    // reconcile would decide from a partial view.
    let ready = Arc::new(AtomicBool::new(false));
    let readiness = {
        let (ready, ctx, stopped) = (ready.clone(), ctx.clone(), shutdown());
        async move {
            // A shutdown before the caches sync (say, the API is unreachable) must not wait for them.
            tokio::select! {
                _ = async { tokio::join!(ctx.pods.wait_until_ready(), ctx.podsets.wait_until_ready()) } => {
                    ready.store(true, Ordering::Relaxed);
                    info!("caches synced; ready");
                }
                _ = stopped => {}
            }
        }
    };
    let http = serve(settings.metrics_addr, metrics.clone(), ready.clone(), stop_rx.clone());
    let controller = async {
        // PodSets naming a ReconcilePolicy wait for the first list of them, so an
        // operator restart does not flag those PodSets' policies as missing.
        let listed = tokio::select! {
            r = tokio::time::timeout(POLICY_LIST_WAIT, rp_reader.wait_until_ready()) => r.is_ok(),
            _ = shutdown() => true,
        };
        if !listed {
            warn!(
                "ReconcilePolicies not listed after {POLICY_LIST_WAIT:?} (is the CRD installed? `make install`); \
                 PodSets with spec.policyRef report PolicyUnavailable until they are"
            );
        }
        reconcile::run(ctx.clone(), podset_stream, pod_stream, requeue_rx, settings.concurrency, shutdown()).await;
    };
    let controller = bounded("PodSet controller", controller, shutdown(), || ready.load(Ordering::Relaxed));
    let policy_controller = bounded("ReconcilePolicy controller", policy_controller, shutdown(), || {
        rp_reader.wait_until_ready().now_or_never().is_some()
    });
    let file_watch = async {
        file_watch.await;
        debug!("policy file watch stopped");
    };
    info!(namespace = settings.namespace.as_deref().unwrap_or("<all>"), "podset-host started");
    let signal = async {
        shutdown_signal().await;
        info!("shutting down");
        let _ = stop_tx.send(true);
    };
    let (_, _, http_result, _, _, _) = tokio::join!(controller, policy_controller, http, file_watch, readiness, signal);
    http_result?;
    info!("stopped");
    Ok(())
}

/// How long reconciles in flight get to finish after a shutdown request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs a controller until it stops after `stop`, giving reconciles in flight
/// [`SHUTDOWN_GRACE`]. A controller whose cache never synced has nothing in flight
/// (kube-runtime starts no reconcile before the sync) but also never completes its
/// graceful shutdown, waiting for that sync: it is dropped at once.
async fn bounded(
    name: &str,
    controller: impl Future<Output = ()>,
    stop: impl Future<Output = ()>,
    synced: impl Fn() -> bool,
) {
    let deadline = async {
        stop.await;
        if synced() {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
            warn!("{name} did not stop within {SHUTDOWN_GRACE:?} of the shutdown request; dropping it");
        }
    };
    tokio::select! {
        _ = controller => debug!("{name} stopped"),
        _ = deadline => debug!("{name} dropped at shutdown"),
    }
}

/// How long the PodSet controller waits for the first list of ReconcilePolicies.
const POLICY_LIST_WAIT: Duration = Duration::from_secs(15);

/// An Api for the operator's scope: one namespace, or all.
fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                error!("cannot listen for SIGTERM: {e}");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// `/metrics`, `/healthz` and `/readyz` (503 until `ready`) on `addr` until `stop`.
async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/metrics", get(|State(m): State<Arc<Metrics>>| async move { m.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state(metrics);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} for metrics: {e}"))?;
    info!(addr = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await?;
    Ok(())
}
