//! `podset-host policy …`: one function per subcommand.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use super::cli::{Format, PolicyCommand};
use super::keys::{read_private_key, write_private};
use super::schemas::SchemaArgs;
use super::{bench, componentize, lifecycle, publish, replay as replays, scaffold};
use crate::config::shared::SandboxArgs;
use crate::contract::declarations::{kind_name, to_gvk};
use crate::scenario::Scenario;
use crate::{contract, sandbox, signature};

/// Runs one `policy` subcommand; the exit code says whether what it checked passed.
pub fn run(cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PolicyCommand::Info { module, sandbox } => info(module, sandbox),
        PolicyCommand::Run { module, input, output, sandbox } => decide_once(module, input, output, sandbox),
        PolicyCommand::Test { module, scenarios, schemas, sandbox } => test(module, scenarios, schemas, sandbox),
        PolicyCommand::Replay { module, scenarios, baseline, report_only, schemas, sandbox } => {
            replay(module, scenarios, baseline, report_only, schemas, sandbox)
        }
        PolicyCommand::Record { kind, object, policy: module, output, sandbox } => {
            record(kind, object, module, output, sandbox)
        }
        PolicyCommand::Bench { module, scenarios, related, budget, sandbox } => {
            bench(module, scenarios, related, budget, sandbox)
        }
        PolicyCommand::New { name, dir, group, repo, lang } => new(name, dir, group, repo, lang),
        PolicyCommand::Keygen { prefix, force } => keygen(prefix, force),
        PolicyCommand::SignBlob { module, key, output } => sign_blob(module, key, output),
        PolicyCommand::VerifyBlob { module, keys, signature: sig } => verify_blob(module, keys, sig),
        PolicyCommand::Componentize { core_module, output } => componentize(core_module, output),
        PolicyCommand::History { target } => block_on(lifecycle::history(target)),
        PolicyCommand::Rollback { target, to, wait } => block_on(lifecycle::rollback(target, to, wait)),
        PolicyCommand::Rollout { action, target } => block_on(lifecycle::rollout(action, target)),
        PolicyCommand::Push { .. }
        | PolicyCommand::Pull { .. }
        | PolicyCommand::Inspect { .. }
        | PolicyCommand::Sign { .. }
        | PolicyCommand::Verify { .. } => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(publish::run(cmd))
        }
    }
}

/// Runs a command that talks to the cluster.
fn block_on(command: impl std::future::Future<Output = anyhow::Result<ExitCode>>) -> anyhow::Result<ExitCode> {
    tokio::runtime::Runtime::new().context("starting the async runtime")?.block_on(command)
}

/// Loads a module and prints what it is.
fn info(module: PathBuf, sandbox: SandboxArgs) -> anyhow::Result<ExitCode> {
    let (_engine, policy) = sandbox.load(&module)?;
    let info = policy.info();
    let d = policy.declarations();
    let world = if policy.is_podset_world() { "podset-policy" } else { "reconcile-policy" };
    println!("name:      {}", info.name);
    println!("version:   {}", info.version);
    println!("contract:  {} (host speaks {}), world {world}", info.contract, contract::contract_version());
    println!("digest:    {}", policy.digest());
    let size = sandbox::inspect::size(&std::fs::read(&module)?)?;
    let limits = sandbox.limits();
    println!(
        "size:      {} functions (limit {}), {} bytes of data (limit {})",
        size.functions, limits.max_functions, size.data_bytes, limits.max_data_bytes
    );
    println!("imports:   {}", policy.imports().join(", "));
    println!("parent:    {}", kind_name(&to_gvk(&d.parent)));
    let children: Vec<String> = d.children.iter().map(|k| kind_name(&to_gvk(k))).collect();
    println!("children:  {}", children.join(", "));
    for r in &d.related {
        let sel: Vec<String> = r.selector.iter().map(|l| format!("{}={:?}", l.key, l.value)).collect();
        println!("related:   {} where {}", kind_name(&to_gvk(&r.kind)), sel.join(", "));
    }
    println!("finalizer: {}", d.finalizer.as_deref().unwrap_or("none"));
    Ok(ExitCode::SUCCESS)
}

/// Runs one decision on an input file and prints the actions.
fn decide_once(module: PathBuf, input: PathBuf, output: Format, sandbox: SandboxArgs) -> anyhow::Result<ExitCode> {
    let (_engine, policy) = sandbox.load(&module)?;
    let text = std::fs::read_to_string(&input).with_context(|| format!("reading {}", input.display()))?;
    let file: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", input.display()))?;
    // A scenario file works as an input file too.
    let value = file.get("input").cloned().unwrap_or(file);
    let input = crate::scenario::input_for(&policy, value)?;
    let decision = policy.decide(&input)?;
    let actions = crate::scenario::readable(&decision.actions);
    match output {
        Format::Yaml => print!("{}", serde_yaml::to_string(&actions)?),
        Format::Json => println!("{}", serde_json::to_string_pretty(&actions)?),
    }
    eprintln!("decided in {:?}", decision.spent.wall);
    Ok(ExitCode::SUCCESS)
}

/// Runs scenario files against a module: fails on any mismatch, or on output the
/// kinds' schemas refuse.
fn test(
    module: PathBuf,
    scenarios: Vec<PathBuf>,
    schemas: SchemaArgs,
    sandbox: SandboxArgs,
) -> anyhow::Result<ExitCode> {
    let (_engine, policy) = sandbox.load(&module)?;
    let schemas = schemas.load(&policy)?;
    let (mut passed, mut failed) = (0, 0);
    for path in &scenarios {
        let result = Scenario::read(path).and_then(|s| s.check(&policy, schemas.as_ref()).map(|()| s));
        match result {
            Ok(s) => {
                passed += 1;
                println!("ok   {} {}", path.display(), s.name.as_deref().unwrap_or(""));
            }
            Err(failure) => {
                failed += 1;
                println!("FAIL {}\n{failure}", path.display());
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Replays recorded inputs and compares the decisions with the recorded ones or a baseline's.
fn replay(
    module: PathBuf,
    scenarios: Vec<PathBuf>,
    baseline: Option<PathBuf>,
    report_only: bool,
    schemas: SchemaArgs,
    sandbox: SandboxArgs,
) -> anyhow::Result<ExitCode> {
    use replays::{Against, Report, Summary, files, replay};
    let (engine, policy) = sandbox.load(&module)?;
    let schemas = schemas.load(&policy)?;
    let old = match &baseline {
        Some(path) => {
            let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(engine.load(&bytes).with_context(|| format!("loading {}", path.display()))?)
        }
        None => None,
    };
    let against = old.as_deref().map_or(Against::Recorded, Against::Baseline);
    let files = files(&scenarios).context("listing the scenarios")?;
    anyhow::ensure!(!files.is_empty(), "no scenario files (*.yaml, *.yml) under the paths given");
    let rows = replay(&policy, &against, &files, schemas.as_ref());
    match &old {
        Some(old) => println!("{} against baseline {}\n", policy.label(), old.label()),
        None => println!("{} against the recorded decisions\n", policy.label()),
    }
    print!("{}", Report(&rows));
    if !report_only && !Summary::of(&rows).clean() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Turns a live object of the cluster of KUBECONFIG into a scenario file.
fn record(
    kind: String,
    object: String,
    module: PathBuf,
    output: PathBuf,
    sandbox: SandboxArgs,
) -> anyhow::Result<ExitCode> {
    let (_engine, policy) = sandbox.load(&module)?;
    // A bare name is a cluster-scoped object; snapshot says so if the kind is namespaced.
    let (namespace, name) = object.split_once('/').unwrap_or(("", object.as_str()));
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let text = runtime.block_on(async {
        let client = kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
        crate::reconcile::snapshot::snapshot(&client, &policy, &kind, namespace, name)
            .await
            .map_err(anyhow::Error::from)
    })?;
    if output.as_os_str() == "-" {
        print!("{text}");
    } else {
        std::fs::write(&output, &text).with_context(|| format!("writing {}", output.display()))?;
        eprintln!("{kind} {object} recorded in {}", output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Measures a PodSet policy's decision latency.
fn bench(
    module: PathBuf,
    scenarios: Vec<PathBuf>,
    related: Vec<usize>,
    budget: Duration,
    sandbox: SandboxArgs,
) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    let (_engine, policy) = sandbox.load(&module)?;
    println!("{} — loaded (compile + checks) in {:?}\n", policy.label(), started.elapsed());
    if !scenarios.is_empty() {
        let mut inputs = Vec::new();
        for path in &scenarios {
            let scenario = Scenario::read(path)?;
            let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into());
            let input = scenario.input(&policy)?;
            for &count in &related {
                if let Some(sized) = bench::with_related(&input, count) {
                    inputs.push((format!("{name} @ {count} related"), sized));
                }
            }
            if related.is_empty() {
                inputs.push((name, input));
            }
        }
        print!("{}", bench::ScenarioTable(&bench::scenarios(&policy, &inputs, budget)?));
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(
        policy.is_podset_world(),
        "without scenario files, policy bench measures PodSet policies; {} is not one: give it scenarios",
        policy.label()
    );
    let rows = bench::run(&policy, &[10, 100, 1000], budget)?;
    print!("{}", bench::Table(&rows));
    Ok(ExitCode::SUCCESS)
}

/// Makes a policy crate for the user's own CRD.
fn new(
    name: String,
    dir: PathBuf,
    group: Option<String>,
    repo: Option<PathBuf>,
    lang: scaffold::Lang,
) -> anyhow::Result<ExitCode> {
    let repo = repo.unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
    let repo = repo.canonicalize().with_context(|| format!("repository {}", repo.display()))?;
    let req = scaffold::Request { name: &name, dir: &dir, group: group.as_deref(), repo: &repo, lang };
    let made = scaffold::new_policy(&req)?;
    match lang {
        scaffold::Lang::Rust => {
            println!("made {}: cargo test there, then `make policy` (in this repository) or", made.display());
            println!("`make -C {} policy-crate CRATE={}` builds the component", repo.display(), made.display());
        }
        scaffold::Lang::Ts | scaffold::Lang::Go => {
            let (checks, suffix) =
                if lang == scaffold::Lang::Ts { ("checks its types", "ts") } else { ("runs gofmt and go vet", "go") };
            println!(
                "made {}: `make -C {} policy-crate CRATE={}` {checks},",
                made.display(),
                repo.display(),
                made.display()
            );
            println!(
                "runs its tests and builds target/policy/{name}-{suffix}.wasm (in this repository, `make check` does too)"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Makes an ECDSA P-256 key pair.
fn keygen(prefix: PathBuf, force: bool) -> anyhow::Result<ExitCode> {
    let key = signature::PrivateKey::generate()?;
    let (private, public) = (prefix.with_extension("key"), prefix.with_extension("pub"));
    for path in [&private, &public] {
        anyhow::ensure!(force || !path.exists(), "{} exists; --force overwrites it", path.display());
    }
    write_private(&private, key.to_pem().as_bytes())?;
    std::fs::write(&public, key.public().to_pem()).with_context(|| format!("writing {}", public.display()))?;
    println!(
        "private key {} (keep it secret), public key {} (id {})",
        private.display(),
        public.display(),
        key.public().id()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes a module file's detached signature.
fn sign_blob(module: PathBuf, key: PathBuf, output: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let key = read_private_key(&key)?;
    let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
    let output = output.unwrap_or_else(|| crate::sources::file::signature_path(&module));
    let sig = signature::encode_signature(&key.sign(&bytes)?);
    std::fs::write(&output, format!("{sig}\n")).with_context(|| format!("writing {}", output.display()))?;
    println!("{}: signed {} ({})", output.display(), module.display(), sandbox::Digest::of(&bytes));
    Ok(ExitCode::SUCCESS)
}

/// Verifies a module file's detached signature.
fn verify_blob(module: PathBuf, keys: Vec<PathBuf>, sig: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
    let sig = sig.unwrap_or_else(|| crate::sources::file::signature_path(&module));
    let text = std::fs::read(&sig).with_context(|| format!("reading {}", sig.display()))?;
    let trust = signature::Trust { keys, required: true };
    match trust.verify_blob(&bytes, Some(&text), &sig.display().to_string()) {
        Ok(v) => println!("{}: verified by {}", module.display(), v.key),
        Err(e) => {
            println!("{}: NOT verified: {e}", module.display());
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Wraps a core Wasm module into a component.
fn componentize(core_module: PathBuf, output: PathBuf) -> anyhow::Result<ExitCode> {
    let core = std::fs::read(&core_module).with_context(|| format!("reading {}", core_module.display()))?;
    let component = componentize::componentize(&core)?;
    std::fs::write(&output, &component).with_context(|| format!("writing {}", output.display()))?;
    println!("{}: {} bytes", output.display(), component.len());
    Ok(ExitCode::SUCCESS)
}
