//! `podset-host policy new NAME`: a compiling policy crate for the user's own CRD, with
//! its CRD types, a reconcile function, a unit test and a scenario, in one step.
//!
//! Made inside this repository (the default), the crate is `guest-NAME/`, a member
//! of the workspace that `make policy` builds to `target/policy/NAME.wasm`. Made
//! elsewhere (`--dir`), it is a workspace of its own that points at this repository's
//! `policy-sdk`.

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
    #[error("policy-sdk not found at {0}: run podset-host from its repository, or pass --sdk")]
    NoSdk(PathBuf),
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
    /// The repository holding `policy-sdk/`.
    pub repo: &'a Path,
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
    let sdk = req.repo.join("policy-sdk");
    if !sdk.join("Cargo.toml").is_file() {
        return Err(ScaffoldError::NoSdk(sdk));
    }
    let crate_dir = req.dir.join(format!("guest-{name}"));
    if crate_dir.exists() {
        return Err(ScaffoldError::Exists(crate_dir));
    }
    let member = same_dir(req.dir, req.repo);
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
        ("{{group}}", group),
        ("{{name}}", name.into()),
        ("{{sdk}}", if member { "../policy-sdk".into() } else { sdk.display().to_string() }),
        ("{{repo}}", req.repo.display().to_string()),
        ("{{standalone}}", if member { String::new() } else { STANDALONE.into() }),
    ];
    let files = FILES.iter().chain((!member).then_some(&CARGO_CONFIG));
    for (path, template) in files {
        let text = vars.iter().fold(template.to_string(), |t, (k, v)| t.replace(k, v));
        let path = crate_dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ScaffoldError::Write { path: parent.into(), source })?;
        }
        std::fs::write(&path, text).map_err(|source| ScaffoldError::Write { path: path.clone(), source })?;
    }
    Ok(crate_dir)
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
        let req = Request { name: "web-cache", dir: out.path(), group: None, repo: &repo };
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
}
