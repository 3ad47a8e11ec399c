//! The `podset-host` command: the operator and the policy author's tools.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use podset_host::author::cli::PolicyCommand;
use podset_host::config::RunArgs;
use podset_host::config::shared::SandboxArgs;
use podset_host::{author, crd, operator, reference};

#[derive(Parser)]
#[command(name = "podset-host", version, about = "Kubernetes operator whose reconcile logic is WebAssembly policies")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions (YAML).
    Crd,
    /// Build, check and benchmark policy modules without a cluster.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Print a reference page (Markdown) generated from this binary: every command and
    /// flag, or every metric. `schemas` writes the built-in kinds' schemas that `policy
    /// test` checks against, from the cluster of KUBECONFIG, into --dir.
    Reference {
        #[arg(value_enum)]
        page: Page,
        /// Where `schemas` writes its files.
        #[arg(long, default_value = "host/src/scenario/builtin")]
        dir: PathBuf,
    },
    /// Compile a module read from stdin for `run`'s engine and write the artifact to
    /// stdout: `run` starts itself as this, so that the compiler never runs in the
    /// operator's process.
    #[command(name = podset_host::sandbox::compile::COMMAND, hide = true)]
    CompilePolicy {
        #[command(flatten)]
        sandbox: SandboxArgs,
        /// The compiler's heap, in MiB: past it, the child aborts.
        #[arg(long, default_value_t = podset_host::sandbox::compile::HEAP_LIMIT >> 20)]
        heap_mib: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Page {
    Cli,
    Metrics,
    Schemas,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The platform verifier logs every refused certificate at ERROR; the error we return says it.
    // kube-runtime's controller (the policy sources run one) opens an INFO span for every
    // reconcile it starts: 726 bytes while open and 343 kept by the subscriber once closed
    // (a scratch count of 1000 such spans); `RUST_LOG=info` brings them back, with the
    // reason each was started. A parent's reconcile has a span of our own (reconcile::flow).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube_runtime::controller=warn,rustls_platform_verifier=off".into());
    let json = matches!(&cli.command, Command::Run(a) if a.log_json);
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let settings = args.settings()?;
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(async {
                let shutdown = tokio_util::sync::CancellationToken::new();
                tokio::spawn(operator::cancel_on_signal(shutdown.clone()));
                operator::build(settings, shutdown).await?.run().await
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Crd => {
            print!("{}", crd::crds_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy(cmd) => author::command::run(cmd),
        Command::Reference { page, dir } => {
            match page {
                Page::Cli => print!("{}", reference::cli(&Cli::command())),
                Page::Metrics => print!("{}", reference::metrics()),
                Page::Schemas => {
                    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
                    let documents = runtime.block_on(async {
                        let client =
                            kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
                        author::schemas::builtin_from_cluster(&client).await
                    })?;
                    for (path, text) in documents {
                        let file = dir.join(author::schemas::builtin_file(&path));
                        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
                        println!("{}", file.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::CompilePolicy { sandbox, heap_mib } => {
            Ok(ExitCode::from(podset_host::sandbox::compile::serve(&sandbox.limits(), heap_mib << 20)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The committed reference pages are what this binary prints (`make docs` writes them).
    #[test]
    fn the_reference_pages_match_the_binary() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference");
        for (file, generated) in [("cli.md", reference::cli(&Cli::command())), ("metrics.md", reference::metrics())] {
            let committed = std::fs::read_to_string(docs.join(file)).unwrap_or_default();
            assert!(
                committed == generated,
                "docs/reference/{file} is stale: run `make docs` and commit it.\n{}",
                similar::TextDiff::from_lines(&committed, &generated).unified_diff().header("committed", "generated")
            );
        }
    }
}
