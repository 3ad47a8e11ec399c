//! `podset-host run`: [`build`] wires the client, the policy engine, the caches, the
//! controllers and the HTTP endpoint together and fails fast on what a user must fix
//! (a taken metrics port, an unloadable policy); [`Operator::run`] runs them until the
//! shutdown token is cancelled.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use kube::{Api, Client};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::crd::{PodSet, ReconcilePolicy};
use crate::kubernetes::cache::{CacheHealth, Caches};
use crate::kubernetes::client;
use crate::metrics::Metrics;
use crate::policy::{Limits, PolicyEngine};
use crate::reconcile::expectations::Expectations;
use crate::reconcile::{self, Context};
use crate::registry::Policies;
use crate::sources;
use crate::sources::cluster::PolicyController;

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

/// A built operator, ready to run.
pub struct Operator {
    settings: Settings,
    ctx: Arc<Context>,
    listener: TcpListener,
    /// Every cache; `/readyz` is ready when all are synced.
    caches: Caches,
    pods: (reflector::store::Writer<Pod>, CacheHealth),
    podsets: (reflector::store::Writer<PodSet>, CacheHealth),
}

/// Everything that can fail because of the user's input fails here, before anything
/// runs: the metrics address, the cluster configuration, the default policy.
pub async fn build(settings: Settings) -> anyhow::Result<Operator> {
    // Bound first: an operator without /readyz would never be marked ready, and the
    // cause would otherwise only surface at shutdown.
    let listener = TcpListener::bind(settings.metrics_addr).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {} for /metrics, /healthz and /readyz: {e}", settings.metrics_addr)
    })?;
    let metrics = Arc::new(Metrics::default());
    let client = client::client(metrics.api_writes.clone()).await?;
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

    let (pods, podsets, policy_cache) =
        (CacheHealth::of::<Pod>(), CacheHealth::of::<PodSet>(), CacheHealth::of::<ReconcilePolicy>());
    let caches = Caches::new([podsets.clone(), pods.clone(), policy_cache.clone()]);
    let (pod_reader, pod_writer) = reflector::store();
    let (podset_reader, podset_writer) = reflector::store();
    let recorder = Recorder::new(client.clone(), Reporter { controller: "podset-host".into(), instance: None });
    let ctx = Arc::new(Context {
        client,
        pods: pod_reader,
        podsets: podset_reader,
        expectations: Arc::new(Expectations::default()),
        engine,
        policies: Arc::new(Policies::with_default(default)),
        recorder,
        metrics,
        resync: settings.resync,
        failures: Default::default(),
        caches: Caches::new([podsets.clone(), pods.clone()]),
        policy_cache,
    });
    Ok(Operator { settings, ctx, listener, caches, pods: (pod_writer, pods), podsets: (podset_writer, podsets) })
}

impl Operator {
    /// Runs until `shutdown` is cancelled, then stops gracefully.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Operator { settings, ctx, listener, caches, pods, podsets } = self;
        let ns = settings.namespace.as_deref();
        let client = ctx.client.clone();
        let podset_stream =
            reconcile::podset_events(scoped(&client, ns), podsets.0, ctx.expectations.clone(), podsets.1);
        let pod_stream = reconcile::pod_events(scoped(&client, ns), pods.0, ctx.expectations.clone(), pods.1);

        // Policy sources re-queue the PodSets whose policy changed.
        let (requeue_tx, requeue_rx) = futures::channel::mpsc::unbounded();
        let file_watch =
            sources::file::watch(settings.policy.clone(), ctx.clone(), requeue_tx.clone(), shutdown.clone());
        let (rp_reader, rp_writer) = reflector::store();
        let policy_ctl = Arc::new(PolicyController { ctx: ctx.clone(), requeue: requeue_tx });
        let rp_stream = sources::cluster::events(scoped(&client, ns), rp_writer, policy_ctl.clone());
        let configmaps: Api<PartialObjectMeta<ConfigMap>> = scoped(&client, ns);
        let policy_controller =
            sources::cluster::run(policy_ctl, rp_stream, rp_reader, configmaps, shutdown.clone().cancelled_owned());

        let http = serve(listener, ctx.metrics.clone(), caches.clone(), shutdown.clone());
        let controller = reconcile::run(
            ctx.clone(),
            podset_stream,
            pod_stream,
            requeue_rx,
            settings.concurrency,
            shutdown.clone().cancelled_owned(),
        );
        let (synced, rp_synced) = (ctx.caches.clone(), ctx.policy_cache.clone());
        let controller = bounded("PodSet controller", controller, &shutdown, move || synced.all_synced());
        let policy_controller =
            bounded("ReconcilePolicy controller", policy_controller, &shutdown, move || rp_synced.is_synced());
        let file_watch = async {
            file_watch.await;
            debug!("policy file watch stopped");
        };
        info!(namespace = settings.namespace.as_deref().unwrap_or("<all>"), "podset-host started");
        let (_, _, http_result, _) = tokio::join!(controller, policy_controller, http, file_watch);
        http_result?;
        info!("stopped");
        Ok(())
    }
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
    stop: &CancellationToken,
    synced: impl Fn() -> bool,
) {
    let deadline = async {
        stop.cancelled().await;
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

/// Cancels `token` on SIGTERM or Ctrl-C.
pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(e) => {
                error!("cannot listen for SIGTERM: {e}");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    info!("shutting down");
    token.cancel();
}

/// `/metrics`, `/healthz` and `/readyz` until `stop`. `/readyz` is 503 while any cache
/// is not synced, and its body names each such cache and why (a missing CRD, an API
/// server that does not answer, a broken watch being listed again).
async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    caches: Caches,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/metrics", get(|State(m): State<Arc<Metrics>>| async move { m.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                let problems = caches.problems();
                if problems.is_empty() {
                    (StatusCode::OK, "ok".to_string())
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, format!("caches not synced:\n{}\n", problems.join("\n")))
                }
            }),
        )
        .with_state(metrics);
    info!(addr = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await?;
    Ok(())
}
