//! An API server's `/openapi/v3` documents: the schemas of the kinds it serves, CRDs
//! included, one document per group version (`api/v1`, `apis/apps/v1`, …).

use serde_json::Value;

use crate::contract::bindings::Declarations;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("GET {path}: {source}")]
    Get { path: String, source: kube::Error },
    #[error("GET {path}: not JSON: {source}")]
    Json { path: String, source: serde_json::Error },
}

/// The `/openapi/v3` path of a group version's document: `api/v1` for the core group.
pub fn path_of(group: &str, version: &str) -> String {
    match group {
        "" => format!("api/{version}"),
        g => format!("apis/{g}/{version}"),
    }
}

/// The paths of the documents of the kinds a policy writes: its parent, its children
/// and what it may patch through lookups; sorted, once each.
pub fn paths_of(d: &Declarations) -> Vec<String> {
    let mut paths: Vec<String> = std::iter::once(&d.parent)
        .chain(d.children.iter())
        .chain(d.lookups.iter().map(|l| &l.kind))
        .map(|k| path_of(&k.group, &k.version))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The group versions the server publishes, by path, with the URL that serves each.
pub async fn index(client: &kube::Client) -> Result<Vec<(String, String)>, Error> {
    let index = get(client, "/openapi/v3").await?;
    let paths = index.get("paths").and_then(Value::as_object).cloned().unwrap_or_default();
    Ok(paths
        .into_iter()
        .filter_map(|(path, v)| Some((path, v.get("serverRelativeURL")?.as_str()?.to_string())))
        .collect())
}

/// The documents of `paths` (those the server publishes; others are passed over).
pub async fn documents(client: &kube::Client, paths: &[String]) -> Result<Vec<(String, Value)>, Error> {
    let index = index(client).await?;
    let mut out = Vec::new();
    for path in paths {
        if let Some((_, url)) = index.iter().find(|(p, _)| p == path) {
            out.push((path.clone(), get(client, url).await?));
        }
    }
    Ok(out)
}

async fn get(client: &kube::Client, path: &str) -> Result<Value, Error> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| Error::Get { path: path.into(), source: kube::Error::HttpError(e) })?;
    let text = client.request_text(request).await.map_err(|source| Error::Get { path: path.into(), source })?;
    serde_json::from_str(&text).map_err(|source| Error::Json { path: path.into(), source })
}
