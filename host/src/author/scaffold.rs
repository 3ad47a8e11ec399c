//! `podset-host policy new NAME`: a compiling policy crate for the user's own CRD, with
//! its CRD types, a reconcile function, a unit test and a scenario, in one step.
//!
//! Made inside this repository (the default), the crate is `guest-NAME/`, a member
//! of the workspace that `make policy` builds to `target/policy/NAME.wasm`. Made
//! elsewhere (`--dir`), it is a workspace of its own that points at this repository's
//! `policy-sdk`. With `--lang ts`, an npm package instead: `typescript/guest-NAME/` in
//! this repository (`make check` tests and builds it to `target/policy/NAME-ts.wasm`),
//! or `guest-NAME/` elsewhere, whose tsconfig points at this repository's SDK. With
//! `--lang go`, a Go module: `go/guest-NAME/` in this repository (added to `go/go.work`;
//! `make check` tests and builds it to `target/policy/NAME-go.wasm`), or `guest-NAME/`
//! elsewhere, whose go.mod replaces the SDK by this repository's copy.

use std::path::{Path, PathBuf};

/// The template, compiled in: the binary makes crates without the repository's files
/// beyond `policy-sdk` itself.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../templates/policy/Cargo.toml.tmpl")),
    ("README.md", include_str!("../../templates/policy/README.md")),
    ("src/lib.rs", include_str!("../../templates/policy/src/lib.rs")),
    ("src/bin/crdgen.rs", include_str!("../../templates/policy/src/bin/crdgen.rs")),
    ("scenarios/create.yaml", include_str!("../../templates/policy/scenarios/create.yaml")),
];

/// The TypeScript template: the same scenario as the Rust one (the two decide alike).
const TS_FILES: &[(&str, &str)] = &[
    ("package.json", include_str!("../../templates/policy-ts/package.json.tmpl")),
    ("README.md", include_str!("../../templates/policy-ts/README.md")),
    ("crd.yaml", include_str!("../../templates/policy-ts/crd.yaml")),
    ("src/policy.ts", include_str!("../../templates/policy-ts/src/policy.ts")),
    ("src/component.ts", include_str!("../../templates/policy-ts/src/component.ts")),
    ("test/policy.test.ts", include_str!("../../templates/policy-ts/test/policy.test.ts")),
    ("scenarios/create.yaml", include_str!("../../templates/policy/scenarios/create.yaml")),
];

/// The Go template: the same scenario and CRD as the others (they decide alike).
const GO_FILES: &[(&str, &str)] = &[
    ("go.mod", include_str!("../../templates/policy-go/go.mod.tmpl")),
    ("README.md", include_str!("../../templates/policy-go/README.md")),
    ("crd.yaml", include_str!("../../templates/policy-ts/crd.yaml")),
    ("main.go", include_str!("../../templates/policy-go/main.go")),
    ("policy.go", include_str!("../../templates/policy-go/policy.go")),
    ("policy_test.go", include_str!("../../templates/policy-go/policy_test.go")),
    ("scenarios/create.yaml", include_str!("../../templates/policy/scenarios/create.yaml")),
];

/// Written only for a package outside this repository (inside, the root tsconfig.json
/// covers `typescript/*`).
const TS_CONFIG: (&str, &str) = ("tsconfig.json", include_str!("../../templates/policy-ts/tsconfig.json.tmpl"));

/// The language of the policy to make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    #[default]
    Rust,
    /// TypeScript (`typescript/policy-sdk`, built by jco).
    Ts,
    /// Go (`go/policy-sdk`, built by Go for wasip1 with wizer).
    Go,
}

/// Written only for a crate outside this repository's workspace (inside, the
/// workspace's own `.cargo/config.toml` applies).
const CARGO_CONFIG: (&str, &str) = (".cargo/config.toml", include_str!("../../templates/policy/.cargo/config.toml"));

const STANDALONE: &str = r#"[profile.wasm]
# Small and fast components; panics abort (no unwinding across the component boundary).
inherits = "release"
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true

# A workspace of its own, outside podset-host's.
[workspace]
"#;

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{0:?} is not a policy name: use lowercase letters, digits and '-', starting with a letter")]
    Name(String),
    #[error("{0} exists already; choose another name or directory")]
    Exists(PathBuf),
    #[error("the policy SDK is not at {0}: run podset-host from its repository, or pass --repo")]
    NoSdk(PathBuf),
    #[error("{0} has no `use (` block to add the policy to")]
    GoWork(PathBuf),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// What to make.
pub struct Request<'a> {
    /// The policy's name, e.g. `widget`: crate `guest-widget`, component `widget.wasm`.
    pub name: &'a str,
    /// Where to make `guest-NAME/`.
    pub dir: &'a Path,
    /// The CRD's API group.
    pub group: Option<&'a str>,
    /// The repository holding `policy-sdk/` and `typescript/policy-sdk/`.
    pub repo: &'a Path,
    pub lang: Lang,
}

/// Makes the crate; returns its directory.
pub fn new_policy(req: &Request<'_>) -> Result<PathBuf, ScaffoldError> {
    let name = req.name;
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !valid {
        return Err(ScaffoldError::Name(name.into()));
    }
    let (sdk, manifest) = match req.lang {
        Lang::Rust => (req.repo.join("policy-sdk"), "Cargo.toml"),
        Lang::Ts => (req.repo.join("typescript/policy-sdk"), "package.json"),
        Lang::Go => (req.repo.join("go/policy-sdk"), "go.mod"),
    };
    if !sdk.join(manifest).is_file() {
        return Err(ScaffoldError::NoSdk(sdk));
    }
    let member = same_dir(req.dir, req.repo);
    let crate_dir = match req.lang {
        Lang::Ts if member => req.repo.join("typescript").join(format!("guest-{name}")),
        Lang::Go if member => req.repo.join("go").join(format!("guest-{name}")),
        _ => req.dir.join(format!("guest-{name}")),
    };
    if crate_dir.exists() {
        return Err(ScaffoldError::Exists(crate_dir));
    }
    let kind: String = name.split('-').map(capitalize).collect();
    let group = req.group.map(String::from).unwrap_or_else(|| format!("{name}.example.com"));
    let crate_name = format!("guest-{name}");
    let vars = [
        ("{{crate_ident}}", crate_name.replace('-', "_")),
        ("{{crate}}", crate_name.clone()),
        ("{{Kind}}", kind.clone()),
        ("{{KIND}}", kind.to_uppercase()),
        ("{{kind_snake}}", name.replace('-', "_")),
        ("{{kind_plural}}", format!("{}s", kind.to_lowercase())),
        ("{{kind_lower}}", kind.to_lowercase()),
        ("{{group}}", group),
        ("{{name}}", name.into()),
        ("{{sdk}}", if member { "../policy-sdk".into() } else { sdk.display().to_string() }),
        ("{{repo}}", req.repo.display().to_string()),
        ("{{standalone}}", if member { String::new() } else { STANDALONE.into() }),
        ("{{go_replace}}", if member { String::new() } else { go_replace(req.repo) }),
    ];
    let files: Vec<&(&str, &str)> = match req.lang {
        Lang::Rust => FILES.iter().chain((!member).then_some(&CARGO_CONFIG)).collect(),
        Lang::Ts => TS_FILES.iter().chain((!member).then_some(&TS_CONFIG)).collect(),
        Lang::Go => GO_FILES.iter().collect(),
    };
    for (path, template) in files {
        let text = vars.iter().fold(template.to_string(), |t, (k, v)| t.replace(k, v));
        let path = crate_dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ScaffoldError::Write { path: parent.into(), source })?;
        }
        std::fs::write(&path, text).map_err(|source| ScaffoldError::Write { path: path.clone(), source })?;
    }
    if req.lang == Lang::Go && member {
        use_in_go_work(&req.repo.join("go/go.work"), &crate_name)?;
    }
    Ok(crate_dir)
}

/// A module outside this repository reaches the SDK, and the runtime package its bindings
/// import, through `replace` directives (no version of either is published).
fn go_replace(repo: &Path) -> String {
    let go = repo.join("go");
    format!(
        "\nrequire go.bytecodealliance.org/pkg v0.2.2\n\nreplace (\n\tpodset.dev/policy-sdk => {}\n\tgo.bytecodealliance.org/pkg => {}\n)\n",
        go.join("policy-sdk").display(),
        go.join("go-pkg").display()
    )
}

/// Adds `./MODULE` to the `use` block of the repository's go.work, in order.
fn use_in_go_work(work: &Path, module: &str) -> Result<(), ScaffoldError> {
    let write = |source| ScaffoldError::Write { path: work.into(), source };
    let text = std::fs::read_to_string(work).map_err(write)?;
    let start = text.find("use (\n").ok_or_else(|| ScaffoldError::GoWork(work.into()))? + "use (\n".len();
    let end = start + text[start..].find(')').ok_or_else(|| ScaffoldError::GoWork(work.into()))?;
    let mut uses: Vec<&str> = text[start..end].lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let entry = format!("./{module}");
    uses.push(&entry);
    uses.sort_unstable();
    let block: String = uses.iter().map(|u| format!("\t{u}\n")).collect();
    std::fs::write(work, format!("{}{block}{}", &text[..start], &text[end..])).map_err(write)
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_crates_kinds_and_groups() {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = tempfile::tempdir().expect("tempdir");
        let req = Request { name: "web-cache", dir: out.path(), group: None, repo: &repo, lang: Lang::Rust };
        let dir = new_policy(&req).expect("made");
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).expect("lib.rs");
        assert!(lib.contains("kind = \"WebCache\"") && lib.contains("web-cache.example.com"), "{lib}");
        assert!(!lib.contains("{{"), "every placeholder is filled");
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        assert!(cargo.contains("[workspace]") && cargo.contains("policy-sdk"), "standalone outside the repo");
        assert!(dir.join(".cargo/config.toml").is_file());
        assert!(matches!(new_policy(&req), Err(ScaffoldError::Exists(_))));
        let bad = Request { name: "Web", ..req };
        assert!(matches!(new_policy(&bad), Err(ScaffoldError::Name(_))));
    }

    #[test]
    fn a_typescript_package_outside_the_repository_points_at_its_sdk() {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository");
        let out = tempfile::tempdir().expect("tempdir");
        let req =
            Request { name: "web-cache", dir: out.path(), group: Some("cache.acme.io"), repo: &repo, lang: Lang::Ts };
        let dir = new_policy(&req).expect("made");
        assert_eq!(dir, out.path().join("guest-web-cache"));
        for file in
            ["package.json", "crd.yaml", "src/policy.ts", "src/component.ts", "test/policy.test.ts", "tsconfig.json"]
        {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!text.contains("{{"), "every placeholder of {file} is filled: {text}");
        }
        let policy = std::fs::read_to_string(dir.join("src/policy.ts")).expect("policy.ts");
        assert!(policy.contains("new Kind('cache.acme.io', 'v1alpha1', 'WebCache')"), "{policy}");
        let crd = std::fs::read_to_string(dir.join("crd.yaml")).expect("crd.yaml");
        assert!(crd.contains("name: webcaches.cache.acme.io") && crd.contains("singular: webcache"), "{crd}");
        let tsconfig = std::fs::read_to_string(dir.join("tsconfig.json")).expect("tsconfig.json");
        assert!(tsconfig.contains(&format!("{}/typescript/policy-sdk/src/index.ts", repo.display())), "{tsconfig}");
        // The scenario is the Rust template's: the two decide alike.
        let scenario = std::fs::read_to_string(dir.join("scenarios/create.yaml")).expect("the scenario");
        assert!(scenario.contains("kind: WebCache") && scenario.contains("sample-data"), "{scenario}");
    }

    #[test]
    fn a_go_module_outside_the_repository_replaces_the_sdk_by_the_repositorys() {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository");
        let out = tempfile::tempdir().expect("tempdir");
        let req =
            Request { name: "web-cache", dir: out.path(), group: Some("cache.acme.io"), repo: &repo, lang: Lang::Go };
        let dir = new_policy(&req).expect("made");
        for file in ["go.mod", "crd.yaml", "main.go", "policy.go", "policy_test.go", "README.md"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!text.contains("{{"), "every placeholder of {file} is filled: {text}");
        }
        let policy = std::fs::read_to_string(dir.join("policy.go")).expect("policy.go");
        assert!(
            policy.contains(r#"policy.Kind{Group: "cache.acme.io", Version: "v1alpha1", Kind: "WebCache"}"#),
            "{policy}"
        );
        let module = std::fs::read_to_string(dir.join("go.mod")).expect("go.mod");
        assert!(module.contains(&format!("podset.dev/policy-sdk => {}/go/policy-sdk", repo.display())), "{module}");
    }

    #[test]
    fn a_go_module_in_the_repository_joins_its_go_work_in_order() {
        let work = tempfile::NamedTempFile::new().expect("a file");
        std::fs::write(work.path(), "go 1.25\n\nuse (\n\t./go-pkg\n\t./policy-sdk\n)\n").expect("written");
        use_in_go_work(work.path(), "guest-web").expect("added");
        let text = std::fs::read_to_string(work.path()).expect("read");
        assert_eq!(text, "go 1.25\n\nuse (\n\t./go-pkg\n\t./guest-web\n\t./policy-sdk\n)\n");
    }
}
