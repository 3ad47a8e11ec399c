//! `podset-node-sim`: plays kubelet for a node without containers, the way the Kubernetes
//! integration tests drive pods by writing their status. Scale tests and benchmarks run
//! thousands of pods on it, which one real node could not hold. Beside a real node it is
//! tainted `podset.dev/simulated=true:NoSchedule`: only pods that tolerate it (and select
//! the label) are scheduled here; as the only node (`--tainted=false`) it takes every pod. Flags + wiring live here; the work is in `node` and `pods`.

mod node;
mod pods;
mod status;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::info;

#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Kubeconfig to use; without it the usual inference (in-cluster, ~/.kube/config) applies.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,

    /// Name of the simulated Node (the scheduler binds pods to it).
    #[arg(long, env = "SIM_NODE_NAME", default_value = "sim-node")]
    node_name: String,

    /// How long a bound pod stays Pending before it reports Running (e.g. `1s`, `500ms`).
    #[arg(long, env = "SIM_READY_DELAY", default_value = "1s", value_parser = humantime::parse_duration)]
    ready_delay: Duration,

    /// Upper bound on the termination grace period honoured before a deleted pod is removed,
    /// so tests do not wait the default 30 s.
    #[arg(long, env = "SIM_MAX_GRACE", default_value = "2s", value_parser = humantime::parse_duration)]
    max_grace: Duration,

    /// How often the Node's Ready condition is re-asserted.
    #[arg(long, env = "SIM_HEARTBEAT", default_value = "10s", value_parser = humantime::parse_duration)]
    heartbeat: Duration,

    /// Taint the node so that only pods tolerating `podset.dev/simulated` land on it; false
    /// when it is the cluster's only node (no real node), so that every pod runs here.
    #[arg(long, env = "SIM_TAINTED", default_value_t = true, action = clap::ArgAction::Set)]
    tainted: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // Colours only on a terminal: cluster.sh sends this to a log file.
        .with_ansi(std::io::stdout().is_terminal())
        .init();
    let args = Args::parse();
    let client = client(args.kubeconfig.as_deref()).await?;
    info!(node = %args.node_name, ready_delay = ?args.ready_delay, max_grace = ?args.max_grace, "node simulator starting");

    let sim = pods::Simulator::new(
        client.clone(),
        pods::Settings { node_name: args.node_name.clone(), ready_delay: args.ready_delay, max_grace: args.max_grace },
    );
    tokio::select! {
        () = node::heartbeat(client, args.node_name, args.heartbeat, args.tainted) => {}
        () = sim.run() => {}
        res = shutdown_signal() => {
            res?;
            info!("signal received, exiting");
        }
    }
    Ok(())
}

async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => {
            kube::Config::infer().await.context("no --kubeconfig/KUBECONFIG and no usable default configuration")?
        }
    };
    Client::try_from(config).context("building the Kubernetes client")
}

/// Resolves on SIGINT or SIGTERM (what `hack/cluster.sh down` sends).
async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        res = tokio::signal::ctrl_c() => res.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
