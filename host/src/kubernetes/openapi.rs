//! An API server's `/openapi/v3` documents: the schemas of the kinds it serves, CRDs
//! included, one document per group version (`api/v1`, `apis/apps/v1`, …).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

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

/// The documents of `paths` (those the server publishes; others are passed over), each
/// as `{"components": {"schemas": …}}` without descriptions: all that anything here
/// reads of them.
pub async fn documents(client: &kube::Client, paths: &[String]) -> Result<Vec<(String, Value)>, Error> {
    let index = index(client).await?;
    let mut out = Vec::new();
    for path in paths {
        if let Some((_, url)) = index.iter().find(|(p, _)| p == path) {
            out.push((path.clone(), schemas_of(&text(client, url).await?, url)?));
        }
    }
    Ok(out)
}

/// What of a served document is read: its components' schemas, each as its text.
#[derive(Deserialize)]
struct Served<'a> {
    #[serde(default, borrow)]
    components: Option<Components<'a>>,
}

#[derive(Deserialize)]
struct Components<'a> {
    #[serde(default, borrow)]
    schemas: BTreeMap<String, &'a RawValue>,
}

/// The components' schemas of the document `text`, without descriptions. Read one
/// schema at a time: the Kubernetes 1.34 API server's `api/v1` is 1.49 MB of JSON, of
/// which 1.05 MB lists the operations on its paths and most of the rest describes
/// fields; parsed whole into a `Value` (a map per schema node), that transient took
/// 9.4 of the 12.7 MB peak heap of an operator with a shadow (heaptrack, 2026-12-01),
/// and an allocator gives such memory back only in part.
fn schemas_of(text: &str, path: &str) -> Result<Value, Error> {
    let json = |source| Error::Json { path: path.into(), source };
    let served: Served = serde_json::from_str(text).map_err(json)?;
    let mut schemas = serde_json::Map::new();
    for (id, raw) in served.components.map(|c| c.schemas).unwrap_or_default() {
        let mut schema: Value = serde_json::from_str(raw.get()).map_err(json)?;
        undescribed(&mut schema);
        schemas.insert(id, schema);
    }
    Ok(serde_json::json!({ "components": { "schemas": schemas } }))
}

async fn text(client: &kube::Client, path: &str) -> Result<String, Error> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| Error::Get { path: path.into(), source: kube::Error::HttpError(e) })?;
    client.request_text(request).await.map_err(|source| Error::Get { path: path.into(), source })
}

async fn get(client: &kube::Client, path: &str) -> Result<Value, Error> {
    serde_json::from_str(&text(client, path).await?).map_err(|source| Error::Json { path: path.into(), source })
}

/// Drops `description` from a schema and the schemas in it (not from a `properties`
/// map, where `description` may be a field's name).
pub fn undescribed(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    node.remove("description");
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(undescribed);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = node.get_mut(key) {
            undescribed(sub);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = node.get_mut(key) {
            subs.iter_mut().for_each(undescribed);
        }
    }
}

/// A document as an API server serves it, for the tests here and of the schemas kept
/// from it (`scenario::schemas`): operations on paths, descriptions everywhere, and a
/// field named `description` that is the schema's, not documentation.
#[cfg(test)]
pub(crate) fn served_note() -> serde_json::Value {
    serde_json::json!({
        "openapi": "3.0.0",
        "paths": { "/api/v1/namespaces/{namespace}/notes": { "get": { "description": "list notes" } } },
        "components": { "schemas": { "io.example.v1.Note": {
            "description": "A note.",
            "type": "object",
            "x-kubernetes-group-version-kind": [{ "group": "", "version": "v1", "kind": "Note" }],
            "properties": {
                "apiVersion": { "type": "string" }, "kind": { "type": "string" },
                "metadata": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                "description": { "description": "What the note says.", "type": "string" },
                "tags": { "type": "array", "items": { "description": "A tag.", "type": "string" } },
                "size": { "allOf": [{ "description": "Its size.", "type": "integer" }] }
            }
        } } }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_served_document_is_read_as_its_schemas_without_descriptions() {
        let served = served_note();
        let read = schemas_of(&served.to_string(), "api/v1").expect("JSON");
        assert_eq!(
            read,
            json!({ "components": { "schemas": { "io.example.v1.Note": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{ "group": "", "version": "v1", "kind": "Note" }],
                "properties": {
                    "apiVersion": { "type": "string" },
                    "kind": { "type": "string" },
                    "metadata": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    "description": { "type": "string" },
                    "tags": { "type": "array", "items": { "type": "string" } },
                    "size": { "allOf": [{ "type": "integer" }] }
                }
            } } } })
        );
        // A document without components has no schemas; one that is not JSON says where.
        assert_eq!(schemas_of("{}", "api/v1").expect("JSON"), json!({ "components": { "schemas": {} } }));
        let e = schemas_of("{", "apis/apps/v1").expect_err("not JSON");
        assert!(e.to_string().starts_with("GET apis/apps/v1: not JSON"), "{e}");
    }
}
