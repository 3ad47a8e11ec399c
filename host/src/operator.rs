//! `podset-host run`: [`build`] makes, from the [`Settings`] of [`crate::config`], the
//! reconcilers' [`Context`] and the policy [`Sources`] and loads the policy files, failing fast on what a user must fix (a taken metrics port, a policy that
//! cannot load or may not do what it declares); [`Operator::run`] starts the
//! controllers of the kinds served, the policy sources and the HTTP endpoint, until
//! the shutdown token is cancelled.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector;
use kube::{Api, Client};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::config::Settings;
use crate::crd::{PolicyMode, ReconcilePolicy};
use crate::kubernetes::fence::Fence;
use crate::kubernetes::identity::Identities;
use crate::kubernetes::leader::{self, Leadership};
use crate::kubernetes::ledger::{self, Ledger};
use crate::kubernetes::shard::{Change, Shard};
use crate::kubernetes::version;
use crate::kubernetes::{access, client};
use crate::metrics::Metrics;
use crate::oci;
use crate::reconcile::context::{Context, ContextSettings};
use crate::reconcile::controller::SHUTDOWN_GRACE;
use crate::reconcile::record;
use crate::sandbox::{ArtifactCache, PolicyEngine};
use crate::sources::{self, SourceSettings, Sources};

/// A built operator, ready to run.
pub struct Operator {
    src: Arc<Sources>,
    /// `/metrics`, `/healthz` and `/readyz`, served from before the policies load.
    http: tokio::task::JoinHandle<anyhow::Result<()>>,
    server_version: Arc<version::Check>,
    files: Vec<(PathBuf, PolicyMode)>,
    /// Files whose policy could not be admitted yet (a CRD not installed, the API
    /// server unreachable): retried while running.
    pending: BTreeSet<PathBuf>,
    /// Cancelled after the controllers stopped: releases the Lease.
    release: CancellationToken,
    /// Cancelled if this replica loses leadership.
    lost: CancellationToken,
    /// The changes to a shard's namespaces.
    selected: BoxStream<'static, Change>,
}

/// Everything that can fail because of the user's input fails here, before anything
/// runs: the metrics address, the cluster configuration, a policy module that cannot
/// load or that asks for what the operator may not do.
pub async fn build(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<Operator> {
    // Bound first: an operator without /readyz would never be marked ready, and the
    // cause would otherwise only surface at shutdown.
    let listener = TcpListener::bind(settings.metrics_addr).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {} for /metrics, /healthz and /readyz: {e}", settings.metrics_addr)
    })?;
    if settings.policies.is_empty() {
        anyhow::bail!("no policy given: pass --policy FILE (one per kind served)");
    }
    if let Some(l) = &settings.leader {
        l.validate()?;
    }
    let metrics = Arc::new(Metrics::default());
    let agent = format!("podset-host/{} ({})", env!("CARGO_PKG_VERSION"), settings.identity);
    // Shut until the Lease names this replica; open without election.
    let fence = match &settings.leader {
        Some(_) => Fence::shut(metrics.writes_fenced.clone()),
        None => Fence::open(metrics.writes_fenced.clone()),
    };
    let maker = client::Maker::infer(
        metrics.api_writes.clone(),
        &agent,
        fence.clone(),
        #[cfg(feature = "fault-suite")]
        settings.faults.clone(),
    )
    .await?;
    let client = maker.client(None)?;
    let (shard, selected) = match &settings.namespace_selector {
        Some(selector) => {
            let (shard, selected) = Shard::selected(&client, selector, settings.cluster_scoped_parents);
            (shard, selected.boxed())
        }
        None => (Shard::all(), futures::stream::empty().boxed()),
    };
    let (release, lost) = (CancellationToken::new(), CancellationToken::new());
    let leadership = match settings.leader.clone() {
        Some(l) => {
            info!(lease = %l.lease, namespace = %l.namespace, identity = %l.identity, "leader election on; standing by");
            let m = metrics.clone();
            let changed = move |a| m.leading(a);
            leader::start(client.clone(), l, fence, shutdown.clone(), release.clone(), lost.clone(), changed)
        }
        None => {
            metrics.leading(true);
            Leadership::alone()
        }
    };
    let (ledger, remembered) = ledger(&client, &settings).await;
    let engine = policy_engine(&settings)?;
    let recorder = recorder(&settings, &metrics)?;
    let module_cache = module_cache(&settings);
    if settings.trust.required {
        let keys = settings.trust.public_keys()?;
        info!(keys = keys.len(), "signatures required: only modules a trusted key signed load");
    }
    let knobs = ContextSettings {
        namespace: settings.namespace.clone(),
        resync: settings.resync,
        finalizer_timeout: settings.finalizer_timeout,
        concurrency: settings.concurrency,
        debounce: settings.debounce,
        metrics,
        leadership,
        shard,
        recorder,
        ledger: Some(ledger),
        identities: Identities::new(maker),
    };
    let ctx = Context::new(client, engine, knobs, shutdown)
        .map_err(|e| anyhow::anyhow!("cannot start the shadow decisions' thread: {e}"))?;
    let src = Sources::new(
        ctx,
        SourceSettings {
            registry: settings.registry.clone(),
            module_cache,
            trust: settings.trust.clone(),
            registry_poll: settings.registry_poll,
            reaches: settings.reaches.clone(),
            reach_namespace: settings.reach_namespace.clone(),
            default_service_account: settings.default_service_account.clone(),
            revisions: revision_store(&settings),
            revision_history: settings.revision_history.max(1),
        },
    );
    src.kinds.remember(&remembered);

    // Served from here, while the policy files load: compiling them is the slow part of
    // a start (six modules took 46 s in a pod on a loaded 2-core node, 2026-11-28), and a
    // liveness probe that saw no answer for that long restarted the pod, which started
    // compiling again. /readyz says what is loading; a start that fails stops it.
    let server_version = Arc::new(version::Check::default());
    let (served, loaded) = (src.ctx.shutdown.child_token(), CancellationToken::new());
    let http = tokio::spawn(serve(listener, src.clone(), server_version.clone(), loaded.clone(), served.clone()));
    let stop_serving = served.drop_guard();

    let mut pending = BTreeSet::new();
    let files: Vec<(PathBuf, PolicyMode)> = (settings.policies.iter().map(|p| (p.clone(), PolicyMode::Enforce)))
        .chain(settings.shadows.iter().map(|p| (p.clone(), PolicyMode::Shadow)))
        .collect();
    for (path, mode) in &files {
        match sources::file::load(&src, path, *mode).await {
            Ok(_) => {}
            Err(e) if e.is_retryable() => {
                warn!("{e}; serving the other policies and retrying every {:?}", sources::file::RETRY);
                src.ctx.registry.refuse_file(path, e.to_string());
                pending.insert(path.clone());
            }
            Err(e) => return Err(e.into()),
        }
    }
    loaded.cancel();
    stop_serving.disarm();
    Ok(Operator { src, http, server_version, files, pending, release, lost, selected })
}

/// The teardown ledger, in the operator's own namespace (where its Lease is: the
/// pod's, else the kubeconfig's), and the kinds it remembers that this operator may tear
/// down where it serves. One that cannot be read costs only the teardown of kinds no
/// policy serves since the start.
async fn ledger(client: &kube::Client, settings: &Settings) -> (Ledger, Vec<ledger::Entry>) {
    let namespace = settings.own_namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let ledger = Ledger::new(client, &namespace);
    let read = ledger.load(client).await.unwrap_or_else(|e| {
        warn!("cannot read the teardown ledger {namespace}/{}: {e}", ledger::LEDGER);
        Vec::new()
    });
    let mut remembered = Vec::new();
    for e in read {
        let (parent, child) =
            ((&e.parent.resource(), e.parent.cluster_scoped), (&e.child.resource(), e.child.cluster_scoped));
        match access::may_tear_down(client, settings.namespace.as_deref(), parent, child).await {
            Ok(()) => remembered.push(e),
            Err(why) => info!(key = e.key(), "teardown ledger: not served here: {why}"),
        }
    }
    (ledger, remembered)
}

/// The sandbox, with the limits given, compiling where the settings say (and, in
/// benchmark builds, guest-podset native).
fn policy_engine(settings: &Settings) -> anyhow::Result<Arc<PolicyEngine>> {
    let mut engine = PolicyEngine::new(settings.limits.clone())?;
    if let Some(program) = &settings.compiler {
        engine.compile_in_child(program.clone());
    }
    // A cache that cannot be opened costs compiles, not service.
    if let Some(dir) = &settings.compiled_cache {
        match ArtifactCache::open(dir) {
            Ok(cache) => engine.keep_compiled_in(cache),
            Err(e) => warn!("compiled modules are not kept ({}): {e}", dir.display()),
        }
    }
    #[cfg(feature = "native-podset")]
    engine.decide_natively(settings.native_podset);
    Ok(Arc::new(engine))
}

/// The recorder of `--record-dir`, when asked for.
fn recorder(settings: &Settings, metrics: &Arc<Metrics>) -> anyhow::Result<Option<record::Recorder>> {
    let Some(r) = settings.record.clone() else { return Ok(None) };
    let dir = r.dir.display().to_string();
    let recorder = record::Recorder::start(r, metrics.clone())
        .map_err(|e| anyhow::anyhow!("cannot record decisions under {dir}: {e}"))?;
    info!(dir, "recording every decision as a scenario file");
    Ok(Some(recorder))
}

/// The cache of modules pulled from registries. One that cannot be made (a read-only
/// file system) costs only the fallback.
fn module_cache(settings: &Settings) -> Option<oci::cache::Cache> {
    oci::cache::Cache::open(&settings.policy_cache_dir)
        .map_err(|e| warn!("{e}; modules from registries will not be cached (nothing serves while a registry is down)"))
        .ok()
}

/// The modules of recent revisions. One that cannot be made costs only rollbacks
/// without their source.
fn revision_store(settings: &Settings) -> Option<sources::revisions::Store> {
    sources::revisions::Store::open(&settings.policy_cache_dir.join("revisions"))
        .map_err(|e| warn!("{e}; a revision can be brought back only from its source"))
        .ok()
}

impl Operator {
    pub fn context(&self) -> &Arc<Context> {
        &self.src.ctx
    }

    /// Runs until the shutdown token given to [`build`] is cancelled, then stops
    /// gracefully.
    pub async fn run(self) -> anyhow::Result<()> {
        let Operator { src, http, server_version, files, pending, release, lost, selected } = self;
        let ctx = src.ctx.clone();
        let shutdown = ctx.shutdown.clone();
        src.kinds.sync(&ctx).await;

        let file_watch = sources::file::watch(src.clone(), files, pending, shutdown.clone());
        let rp_writer = reflector::store::Writer::default();
        let rp_reader = rp_writer.as_reader();
        let rp_stream = sources::cluster::events(src.clone(), scoped(&ctx.client, ctx.namespace.as_deref()), rp_writer);
        let configmaps: Api<PartialObjectMeta<ConfigMap>> = scoped(&ctx.client, ctx.namespace.as_deref());
        let (rp_requeue, rp_requeued) = futures::channel::mpsc::unbounded();
        let shard_watch = joined(src.clone(), selected, rp_reader.clone(), rp_requeue.clone());
        let shadow_reports = sources::cluster::report_shadows(src.clone(), rp_reader.clone());
        let rollouts = sources::rollout::drive(src.clone(), rp_reader.clone(), rp_requeue.clone());
        let policy_controller = sources::cluster::run(
            src.clone(),
            rp_stream,
            rp_reader,
            configmaps,
            rp_requeued,
            shutdown.clone().cancelled_owned(),
        );
        let rp_synced = ctx.policy_cache.clone();
        let policy_controller =
            bounded("ReconcilePolicy controller", policy_controller, &shutdown, move || rp_synced.is_synced());
        let version_check = check_version(ctx.client.clone(), server_version, shutdown.clone());
        let http = async { http.await.map_err(|e| anyhow::anyhow!("the /metrics server: {e}"))? };
        info!(
            namespace = ctx.namespace.as_deref().unwrap_or("<all>"),
            selector = ctx.shard.selector().unwrap_or("<none>"),
            "podset-host started"
        );
        let controllers = async {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = lost.cancelled() => shutdown.cancel(),
            }
            src.kinds.stop_all().await;
            // Only now: a standby taking over must not overlap this replica's writes.
            release.cancel();
            // And the process waits for it: exiting first would leave the Lease to
            // expire, and the standby waiting for the whole lease duration.
            if tokio::time::timeout(Duration::from_secs(5), ctx.leadership.released()).await.is_err() {
                warn!("the lease was not released within 5 s; the standby takes over when it expires");
            }
        };
        let file_watch = async {
            file_watch.await;
            debug!("policy file watch stopped");
        };
        let shard_watch = async {
            tokio::select! {
                _ = shard_watch => {}
                _ = shutdown.cancelled() => {}
            }
        };
        let (_, _, http_result, _, _, _, _, _) = tokio::join!(
            controllers,
            policy_controller,
            http,
            file_watch,
            shard_watch,
            version_check,
            shadow_reports,
            rollouts
        );
        http_result?;
        if lost.is_cancelled() {
            anyhow::bail!("lost the leader lease");
        }
        info!("stopped");
        Ok(())
    }
}

/// Re-queues the parents and ReconcilePolicies of each namespace joining the shard:
/// nothing else about them changed, so no watch event would bring them.
async fn joined(
    src: Arc<Sources>,
    mut changes: BoxStream<'static, Change>,
    policies: reflector::Store<ReconcilePolicy>,
    requeue: futures::channel::mpsc::UnboundedSender<reflector::ObjectRef<ReconcilePolicy>>,
) {
    while let Some(change) = changes.next().await {
        src.ctx.metrics.shard_serves(change.served);
        let Some(ns) = change.joined else { continue };
        let parents = src.kinds.requeue_namespace(&ns);
        for rp in policies.state().iter().filter(|rp| rp.metadata.namespace.as_deref() == Some(ns.as_str())) {
            let _ = requeue.unbounded_send(reflector::ObjectRef::from_obj(rp.as_ref()));
        }
        info!(namespace = %ns, parents, "namespace joined this shard");
    }
}

/// Reads the API server's version once it answers (retrying with backoff until then,
/// or until shutdown): a server outside the supported range is warned about, never
/// refused.
async fn check_version(client: Client, check: Arc<version::Check>, stop: CancellationToken) {
    let mut wait = Duration::from_secs(1);
    loop {
        match check.run(&client).await {
            Ok(_) => return,
            Err(e @ version::Error::Unparsable(_)) => return warn!("{e}; not checking the supported range"),
            Err(e) => debug!("{e}; asking again in {wait:?}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

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

/// `/metrics`, `/healthz` and `/readyz` until shutdown. `/readyz` is 503 while any
/// cache is not synced or a policy file is not serving, and its body names each and
/// why (a missing CRD, an API server that does not answer, a broken watch being
/// listed again). An API server outside the supported range adds a warning line
/// without making the operator unready.
/// `loaded` is cancelled once the policy files given at the start have loaded (until
/// then /readyz says so); the server stops when `stop` is cancelled.
async fn serve(
    listener: TcpListener,
    src: Arc<Sources>,
    server_version: Arc<version::Check>,
    loaded: CancellationToken,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    type Shared = (Arc<Sources>, Arc<version::Check>, CancellationToken);
    let app = Router::new()
        .route(
            "/metrics",
            get(|State((src, _, _)): State<Shared>| async move {
                let caches = src.caches();
                src.ctx.metrics.watches(caches.len());
                src.ctx.metrics.cached(caches.sizes());
                if let Some(bytes) = crate::heap::resident_bytes(None) {
                    src.ctx.metrics.resident(bytes);
                }
                src.ctx.metrics.encode()
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State((src, server_version, loaded)): State<Shared>| async move {
                let mut problems = Vec::new();
                if !loaded.is_cancelled() {
                    problems.push("loading the policy files (compiling their modules)".to_string());
                }
                problems.extend(src.ctx.registry.file_problems());
                problems.extend(src.caches().problems());
                let warning = server_version.warning().map(|w| format!("\nwarning: {w}")).unwrap_or_default();
                if problems.is_empty() {
                    (StatusCode::OK, format!("ok ({}){warning}", src.ctx.leadership.role()))
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, format!("not ready:\n{}{warning}\n", problems.join("\n")))
                }
            }),
        )
        .with_state((src, server_version, loaded));
    info!(addr = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await?;
    Ok(())
}
