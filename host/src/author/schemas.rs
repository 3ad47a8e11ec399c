//! `--schemas` of `policy test` and `policy replay`: which schemas a decision's output
//! is checked against, read from CRD files, directories, or a cluster's
//! `/openapi/v3`, besides the built-in kinds' shipped with the binary; and the shipped
//! documents themselves, taken from a cluster (`podset-host reference schemas`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;

use crate::kubernetes::openapi;
use crate::sandbox::Policy;
use crate::scenario::schemas::{self, Schemas};

/// Which schemas a decision's output is checked against.
#[derive(Args, Clone, Default)]
pub struct SchemaArgs {
    /// Check each decision's creates, applies and status against the OpenAPI v3
    /// schemas of their kinds: the built-in kinds' (shipped with this binary), and those
    /// given here: a file of CustomResourceDefinitions, a directory of them (*.yaml,
    /// *.yml), or `cluster`, the /openapi/v3 documents of the cluster of KUBECONFIG for
    /// the kinds the policy declares. Repeatable. `none` checks nothing.
    #[arg(long = "schemas", value_name = "FILE|DIR|cluster|none")]
    pub schemas: Vec<String>,
}

impl SchemaArgs {
    /// The schemas to check `policy`'s decisions against; `None` for `--schemas none`.
    pub fn load(&self, policy: &Policy) -> anyhow::Result<Option<Schemas>> {
        if self.schemas.iter().any(|s| s == "none") {
            anyhow::ensure!(self.schemas.len() == 1, "--schemas none goes alone");
            return Ok(None);
        }
        let mut schemas = Schemas::builtin();
        for source in &self.schemas {
            if source == "cluster" {
                from_cluster(&mut schemas, policy)?;
            } else {
                from_path(&mut schemas, Path::new(source))?;
            }
        }
        Ok(Some(schemas))
    }
}

fn from_path(schemas: &mut Schemas, path: &Path) -> anyhow::Result<()> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("--schemas {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut added = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).with_context(|| format!("--schemas {}", file.display()))?;
        added += schemas.add_crds(&text, &file.display().to_string())?;
    }
    anyhow::ensure!(added > 0, "--schemas {}: no CustomResourceDefinition found", path.display());
    Ok(())
}

/// The documents of the group versions `policy` declares (its parent, children and
/// lookups), from the cluster of KUBECONFIG.
fn from_cluster(schemas: &mut Schemas, policy: &Policy) -> anyhow::Result<()> {
    let paths = openapi::paths_of(policy.declarations());
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let documents = runtime.block_on(async {
        let client = kube::Client::try_default().await.context("connecting to the cluster of KUBECONFIG")?;
        openapi::documents(&client, &paths).await.map_err(anyhow::Error::from)
    })?;
    for (path, doc) in documents {
        schemas.add_document(doc, &format!("cluster {path}"))?;
    }
    Ok(())
}

/// The shipped documents, from the cluster of KUBECONFIG, as committed: descriptions
/// left out (most of their size), keys sorted, one JSON value a line per schema.
pub async fn builtin_from_cluster(client: &kube::Client) -> anyhow::Result<Vec<(String, String)>> {
    let paths: Vec<String> = schemas::builtin_paths().map(String::from).collect();
    let documents = openapi::documents(client, &paths).await?;
    anyhow::ensure!(documents.len() == paths.len(), "the cluster publishes only {} of {:?}", documents.len(), paths);
    Ok(documents.into_iter().map(|(path, doc)| (path, shipped_form(&doc))).collect())
}

/// A document as shipped: only its components' schemas, without descriptions.
pub fn shipped_form(doc: &Value) -> String {
    let mut schemas = doc.pointer("/components/schemas").cloned().unwrap_or_default();
    if let Value::Object(map) = &mut schemas {
        map.values_mut().for_each(openapi::undescribed);
    }
    let doc = serde_json::json!({ "components": { "schemas": schemas } });
    let mut out = String::from("{\"components\": {\"schemas\": {\n");
    let entries: Vec<String> = doc["components"]["schemas"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{}: {}", Value::String(k.clone()), v)).collect())
        .unwrap_or_default();
    out.push_str(&entries.join(",\n"));
    out.push_str("\n}}}\n");
    out
}

/// The file under `host/src/scenario/builtin/` that holds the document of `path`.
pub fn builtin_file(path: &str) -> String {
    format!("{}.json", path.replace('/', "__"))
}
