//! The OpenAPI v3 schemas of Kubernetes kinds, and a policy's output checked against
//! them before it ships: the bodies it creates and applies, and the status it writes,
//! as the API server would check them.
//!
//! The schemas come from an API server's `/openapi/v3` documents (the built-in kinds'
//! are shipped with the binary, [`Schemas::builtin`]) and from CRD files. Two
//! well-kept crates do the checking: `boon` (JSON Schema draft 4, the dialect OpenAPI
//! 3.0 schemas are written in) for the structure — types, required fields, enums,
//! formats, bounds, patterns — and `kube-cel` (kube-rs's evaluator of CRD validation
//! rules, with Kubernetes' CEL libraries) for the `x-kubernetes-validations` of CRDs.
//! What Kubernetes adds to JSON Schema is given to `boon` as JSON Schema:
//! - an object's fields are those its schema declares: a field it does not declare is
//!   refused ("unknown field"), as the API server refuses it under strict field
//!   validation, unless the schema preserves unknown fields;
//! - an int-or-string is an integer or a string;
//! - a `null` value is left out, as the API server drops it;
//! - `int32` and `int64` bound their integers, `byte` is base64.
//!
//! An apply is a partial object (the server merges it with what is there): its missing
//! required fields are not reported. The built-in kinds' validation written in Go (a
//! Deployment's selector matching its template, say) is not in their schemas, so not
//! here either; nor are CEL rules that compare with the old object (`oldSelf`).

use std::collections::HashMap;
use std::fmt;

use parking_lot::Mutex;
use serde_json::{Map, Value};

/// A kind whatever its resource: `group` is "" for the core group.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    /// The kind of an object, from its `apiVersion` and `kind`.
    pub fn of(object: &Value) -> Option<Gvk> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?.to_string();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Some(Gvk { group: group.into(), version: version.into(), kind })
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group.as_str() {
            "" => write!(f, "{} {}", self.version, self.kind),
            g => write!(f, "{g}/{} {}", self.version, self.kind),
        }
    }
}

/// One thing the schema refuses: where, in the API server's field path form
/// (`spec.template.spec.containers[0].image`), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.as_str() {
            "" => write!(f, "{}", self.message),
            p => write!(f, "{p}: {}", self.message),
        }
    }
}

/// Why schemas could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{name}: not YAML or JSON: {message}")]
    Parse { name: String, message: String },
    #[error("{name}: schema of {kind} does not compile: {message}")]
    Compile { name: String, kind: String, message: String },
}

/// Where a kind's schema is: a document of [`Schemas::documents`], the pointer to it
/// there, and the schema as written when it carries CEL rules.
struct Entry {
    document: usize,
    /// `#/components/schemas/<id>` of an API server's document, `#` for a CRD's schema.
    at: String,
    /// The schema as written, when it carries CEL rules (`x-kubernetes-validations`).
    rules: Option<Value>,
    /// Where it came from, for messages.
    from: String,
}

/// A kind's schema compiled, the first time it was needed.
#[derive(Clone, Copy)]
struct Compiled {
    whole: Option<boon::SchemaIndex>,
    status: Option<boon::SchemaIndex>,
}

/// Schemas by kind. A kind's schema is compiled the first time an object of it is
/// checked: the built-in documents hold hundreds of kinds, of which a policy writes a
/// few (compiling them all took 0.5 s of every `policy test` in a debug build).
#[derive(Default)]
pub struct Schemas {
    /// The documents, as JSON Schema (`structural`), each with its URL; kept as JSON
    /// text and parsed again for each kind compiled (once per kind). Parsed, a document
    /// of small objects takes twenty to forty times its text, a map per schema node: the
    /// shipped seven, 360 KB of text, took 13.4–13.9 MiB (2026-11-29).
    documents: Vec<(String, Box<str>)>,
    kinds: HashMap<Gvk, Entry>,
    compiled: Mutex<(boon::Schemas, HashMap<Gvk, Compiled>)>,
}

/// The built-in kinds' `/openapi/v3` documents from the Kubernetes version the
/// embedded cluster runs, descriptions left out (`podset-host reference schemas`
/// writes them; a cluster test compares them with the live API server's).
const BUILTIN: &[(&str, &str)] = &[
    ("api/v1", include_str!("builtin/api__v1.json")),
    ("apis/apps/v1", include_str!("builtin/apis__apps__v1.json")),
    ("apis/batch/v1", include_str!("builtin/apis__batch__v1.json")),
    ("apis/networking.k8s.io/v1", include_str!("builtin/apis__networking.k8s.io__v1.json")),
    ("apis/policy/v1", include_str!("builtin/apis__policy__v1.json")),
    ("apis/rbac.authorization.k8s.io/v1", include_str!("builtin/apis__rbac.authorization.k8s.io__v1.json")),
    ("apis/autoscaling/v2", include_str!("builtin/apis__autoscaling__v2.json")),
];

/// The `/openapi/v3` paths whose documents are shipped.
pub fn builtin_paths() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(path, _)| *path)
}

/// The shipped document of `path`, as committed.
pub fn builtin_document(path: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(p, _)| *p == path).map(|(_, text)| *text)
}

impl Schemas {
    /// The built-in kinds' schemas, shipped with the binary.
    pub fn builtin() -> Schemas {
        Schemas::builtin_of(|_| true)
    }

    /// The built-in kinds' schemas of the shipped documents whose `/openapi/v3` path
    /// `wanted` accepts: each document parsed costs memory for as long as the schemas
    /// are kept (all seven took 13.4–13.9 MiB in a test process on glibc's malloc,
    /// 2026-11-29).
    pub fn builtin_of(wanted: impl Fn(&str) -> bool) -> Schemas {
        let mut s = Schemas::default();
        for (path, text) in BUILTIN.iter().filter(|(path, _)| wanted(path)) {
            // Committed and checked by a unit test: a failure here is a build's bug,
            // and leaves only that group unchecked.
            match serde_json::from_str(text) {
                Ok(doc) => {
                    if let Err(e) = s.add_document(doc, path) {
                        tracing::warn!("shipped schemas: {e}");
                    }
                }
                Err(e) => tracing::warn!("shipped schemas {path}: {e}"),
            }
        }
        s
    }

    /// Whether a schema of `gvk` is known.
    pub fn knows(&self, gvk: &Gvk) -> bool {
        self.kinds.contains_key(gvk)
    }

    /// The kinds known.
    pub fn kinds(&self) -> impl Iterator<Item = &Gvk> {
        self.kinds.keys()
    }

    /// Adds every kind of an `/openapi/v3` document (its components that name a
    /// `x-kubernetes-group-version-kind`); later ones replace earlier ones. Returns how
    /// many kinds it added.
    pub fn add_document(&mut self, doc: Value, name: &str) -> Result<usize, Error> {
        let mut doc = doc;
        let components: Vec<(String, Vec<Gvk>, bool)> = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .map(|schemas| {
                schemas
                    .iter()
                    .filter_map(|(id, schema)| {
                        let kinds = kinds_named(schema);
                        (!kinds.is_empty()).then(|| (id.clone(), kinds, has_rules(schema)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rules: HashMap<String, Value> = components
            .iter()
            .filter(|(_, _, rules)| *rules)
            .filter_map(|(id, _, _)| {
                Some((id.clone(), doc.pointer(&format!("/components/schemas/{}", escape(id)))?.clone()))
            })
            .collect();
        // Only the components are kept: an API server's document also lists every
        // operation on its paths, and describes every field; neither is checked. Its
        // `api/v1`, 1.45 MB of JSON (Kubernetes 1.34), held whole with a PodSet CRD's
        // group cost an operator with a shadow 20 MiB of heap (2026-11-29).
        let mut schemas = doc.pointer_mut("/components/schemas").map(Value::take).unwrap_or_default();
        if let Value::Object(schemas) = &mut schemas {
            schemas.values_mut().for_each(structural);
        }
        let doc = serde_json::json!({ "components": { "schemas": schemas } }).to_string().into_boxed_str();
        let document = self.documents.len();
        self.documents.push((format!("https://schemas.podset.dev/{document}/{}", sanitize(name)), doc));
        let mut added = 0;
        for (id, kinds, _) in &components {
            for gvk in kinds {
                let entry = Entry {
                    document,
                    at: format!("#/components/schemas/{}", escape(id)),
                    rules: rules.get(id).cloned(),
                    from: name.to_string(),
                };
                self.kinds.insert(gvk.clone(), entry);
                self.compiled.get_mut().1.remove(gvk);
                added += 1;
            }
        }
        Ok(added)
    }

    /// Adds the kinds of the CustomResourceDefinitions in `text` (YAML, several
    /// documents allowed; other documents are passed over). Returns how many versions
    /// it added.
    pub fn add_crds(&mut self, text: &str, name: &str) -> Result<usize, Error> {
        let mut added = 0;
        for document in serde_yaml::Deserializer::from_str(text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .map_err(|e| Error::Parse { name: name.to_string(), message: e.to_string() })?;
            if value.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let group = value.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default().to_string();
            let kind = value.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default().to_string();
            for version in value.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
                let Some(schema) = version.pointer("/schema/openAPIV3Schema") else { continue };
                let gvk = Gvk {
                    group: group.clone(),
                    version: version.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    kind: kind.clone(),
                };
                self.add_schema(gvk, schema.clone(), name)?;
                added += 1;
            }
        }
        Ok(added)
    }

    /// Adds the schema of one kind, as a CRD's `openAPIV3Schema` has it.
    pub fn add_schema(&mut self, gvk: Gvk, schema: Value, name: &str) -> Result<(), Error> {
        let rules = has_rules(&schema).then(|| schema.clone());
        let mut structural_schema = schema;
        // Every object has these, declared or not: a CRD's schema need not say so (its
        // metadata is checked by the API server apart, as ObjectMeta).
        if let Some(Value::Object(properties)) = structural_schema.get_mut("properties") {
            for (field, kind) in [("apiVersion", "string"), ("kind", "string"), ("metadata", "object")] {
                properties.entry(field).or_insert_with(|| serde_json::json!({ "type": kind }));
            }
            if let Some(Value::Object(meta)) = properties.get_mut("metadata") {
                meta.entry("x-kubernetes-preserve-unknown-fields").or_insert(Value::Bool(true));
            }
        }
        structural(&mut structural_schema);
        let document = self.documents.len();
        let url = format!("https://schemas.podset.dev/{document}/{}", sanitize(name));
        // Compiled now: a CRD's schema is one kind, and one that does not compile is
        // the author's to know about at once.
        let mut compiler = compiler();
        let kind = gvk.to_string();
        let text = structural_schema.to_string().into_boxed_str();
        compiler.add_resource(&url, structural_schema).map_err(|e| compile_error(name, &kind, &e))?;
        let mut compiled = self.compiled.lock();
        let whole = compiler.compile(&url, &mut compiled.0).map_err(|e| compile_error(name, &kind, &e))?;
        let status = compiler.compile(&format!("{url}#/properties/status"), &mut compiled.0).ok();
        compiled.1.insert(gvk.clone(), Compiled { whole: Some(whole), status });
        drop(compiled);
        self.documents.push((url, text));
        self.kinds.insert(gvk, Entry { document, at: "#".into(), rules, from: name.to_string() });
        Ok(())
    }

    /// The schema of `gvk` compiled (now, the first time).
    fn compiled(&self, gvk: &Gvk) -> Option<Compiled> {
        let entry = self.kinds.get(gvk)?;
        let mut guard = self.compiled.lock();
        if let Some(c) = guard.1.get(gvk) {
            return Some(*c);
        }
        let (url, text) = self.documents.get(entry.document)?;
        let mut compiler = compiler();
        let at = format!("{url}{}", entry.at);
        // Written by `to_string` above: it parses.
        let doc = serde_json::from_str(text).map_err(|e| tracing::warn!("the schema of {gvk}: {e}")).ok()?;
        let c = match compiler.add_resource(url, doc) {
            Ok(()) => {
                let whole = compiler.compile(&at, &mut guard.0);
                if let Err(e) = &whole {
                    tracing::warn!("the schema of {gvk} ({}) does not compile: {e:#}", entry.from);
                }
                let status = compiler.compile(&format!("{at}/properties/status"), &mut guard.0).ok();
                Compiled { whole: whole.ok(), status }
            }
            Err(_) => Compiled { whole: None, status: None },
        };
        guard.1.insert(gvk.clone(), c);
        Some(c)
    }

    /// Checks `object` (its kind from its `apiVersion` and `kind`) against its schema;
    /// `partial` for an apply, whose missing required fields the server fills from what
    /// is there. `None` when no schema of its kind is known.
    pub fn check(&self, object: &Value, partial: bool) -> Option<Vec<Violation>> {
        let gvk = Gvk::of(object)?;
        let entry = self.kinds.get(&gvk)?;
        let index = self.compiled(&gvk)?.whole?;
        let object = without_nulls(object);
        let mut out = structure(&self.compiled.lock().0, index, &object, "", partial);
        if let Some(rules) = &entry.rules {
            out.extend(cel(rules, &object, ""));
        }
        Some(out)
    }

    /// Checks a status of a `gvk` object against the schema of its `status`. `None`
    /// when no schema of the kind (or of its status) is known.
    pub fn check_status(&self, gvk: &Gvk, status: &Value) -> Option<Vec<Violation>> {
        let entry = self.kinds.get(gvk)?;
        let index = self.compiled(gvk)?.status?;
        let status = without_nulls(status);
        let mut out = structure(&self.compiled.lock().0, index, &status, "status", false);
        if let Some(rules) = entry.rules.as_ref().and_then(|r| r.pointer("/properties/status")) {
            out.extend(cel(rules, &status, "status"));
        }
        Some(out)
    }

    /// Where the schema of `gvk` came from.
    pub fn source(&self, gvk: &Gvk) -> Option<&str> {
        self.kinds.get(gvk).map(|e| e.from.as_str())
    }
}

fn compiler() -> boon::Compiler {
    let mut compiler = boon::Compiler::new();
    compiler.set_default_draft(boon::Draft::V4);
    compiler.register_format(boon::Format { name: "int32", func: int32 });
    compiler.register_format(boon::Format { name: "int64", func: int64 });
    compiler.register_format(boon::Format { name: "byte", func: base64 });
    compiler
}

fn compile_error(name: &str, kind: &str, e: &boon::CompileError) -> Error {
    Error::Compile { name: name.to_string(), kind: kind.to_string(), message: format!("{e:#}") }
}

fn int32(v: &Value) -> Result<(), Box<dyn std::error::Error>> {
    match v.as_i64() {
        Some(n) if i32::try_from(n).is_err() => Err(format!("{n} is out of the range of a 32-bit integer").into()),
        _ => Ok(()),
    }
}

fn int64(v: &Value) -> Result<(), Box<dyn std::error::Error>> {
    match v {
        Value::Number(n) if n.is_u64() && n.as_i64().is_none() => {
            Err(format!("{n} is out of the range of a 64-bit integer").into())
        }
        _ => Ok(()),
    }
}

fn base64(v: &Value) -> Result<(), Box<dyn std::error::Error>> {
    use base64::Engine as _;
    match v.as_str() {
        Some(s) => base64::engine::general_purpose::STANDARD.decode(s).map(drop).map_err(|e| e.into()),
        None => Ok(()),
    }
}

/// The kinds a component names (`x-kubernetes-group-version-kind`).
fn kinds_named(schema: &Value) -> Vec<Gvk> {
    schema
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|k| {
            Some(Gvk {
                group: k.get("group")?.as_str()?.to_string(),
                version: k.get("version")?.as_str()?.to_string(),
                kind: k.get("kind")?.as_str()?.to_string(),
            })
        })
        .collect()
}

fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// A JSON pointer token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
}

/// Rewrites a Kubernetes schema, in place, into the JSON Schema that checks the same:
/// undeclared fields refused, int-or-string as a choice, `nullable` dropped (nulls are
/// left out of what is checked), descriptions dropped (nothing checks them).
fn structural(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    let int_or_string = node.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
        || node.get("format").and_then(Value::as_str) == Some("int-or-string");
    if int_or_string {
        node.remove("type");
        node.remove("format");
        if !node.contains_key("anyOf") && !node.contains_key("oneOf") {
            node.insert("anyOf".into(), serde_json::json!([{ "type": "integer" }, { "type": "string" }]));
        }
    }
    node.remove("nullable");
    node.remove("description");
    let preserves = node.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    if node.contains_key("properties") && !node.contains_key("additionalProperties") && !preserves {
        node.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(structural);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub @ Value::Object(_)) = node.get_mut(key) {
            structural(sub);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = node.get_mut(key) {
            subs.iter_mut().for_each(structural);
        }
    }
}

/// `value` without the object fields whose value is null.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// What the structure of `value` violates, its paths under `prefix`.
fn structure(
    compiled: &boon::Schemas,
    index: boon::SchemaIndex,
    value: &Value,
    prefix: &str,
    partial: bool,
) -> Vec<Violation> {
    let Err(error) = compiled.validate(value, index) else { return Vec::new() };
    let mut out = Vec::new();
    leaves(&error, value, prefix, partial, &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path).then_with(|| a.message.cmp(&b.message)));
    out.dedup();
    out
}

/// The errors at the leaves of boon's tree, in the API server's words.
fn leaves(e: &boon::ValidationError, root: &Value, prefix: &str, partial: bool, out: &mut Vec<Violation>) {
    use boon::ErrorKind as K;
    let path = field_path(prefix, &e.instance_location.tokens);
    let at = |name: &str| if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
    let got = || shown(pointer(root, &e.instance_location.tokens));
    match &e.kind {
        K::Group | K::Schema { .. } | K::Reference { .. } | K::AllOf => {
            e.causes.iter().for_each(|c| leaves(c, root, prefix, partial, out));
        }
        // One alternative of several (an int-or-string, a quantity): the types wanted.
        K::AnyOf | K::OneOf(None) if e.causes.iter().all(|c| matches!(c.kind, K::Type { .. })) => {
            let wanted: Vec<String> = e
                .causes
                .iter()
                .filter_map(|c| match &c.kind {
                    K::Type { want, .. } => Some(types(want)),
                    _ => None,
                })
                .collect();
            out.push(Violation {
                path,
                message: format!("Invalid value: {}: must be of type {}", got(), wanted.join(" or ")),
            });
        }
        K::AnyOf | K::OneOf(_) => e.causes.iter().for_each(|c| leaves(c, root, prefix, partial, out)),
        K::Type { want, .. } => {
            out.push(Violation { path, message: format!("Invalid value: {}: must be of type {}", got(), types(want)) })
        }
        K::Required { want } if !partial => {
            out.extend(want.iter().map(|w| Violation { path: at(w), message: "Required value".into() }))
        }
        K::Required { .. } => {}
        K::AdditionalProperties { got: names } => out.extend(names.iter().map(|n| Violation {
            path: at(n),
            message: "unknown field: the schema declares no such field (a misspelling?)".into(),
        })),
        K::Enum { want } => {
            let allowed: Vec<String> = want.iter().map(|w| w.to_string()).collect();
            out.push(Violation {
                path,
                message: format!("Unsupported value: {}: supported values: {}", got(), allowed.join(", ")),
            })
        }
        K::Format { want, err, .. } => {
            out.push(Violation { path, message: format!("Invalid value: {}: not a valid {want}: {err}", got()) })
        }
        kind => out.push(Violation { path, message: format!("Invalid value: {}: {kind}", got()) }),
    }
}

/// The CEL rules of `schema` that `value` breaks, its paths under `prefix`.
fn cel(schema: &Value, value: &Value, prefix: &str) -> Vec<Violation> {
    let Err(errors) = kube::core::cel::Validator::new().validate(schema, value, None) else { return Vec::new() };
    errors
        .into_vec()
        .into_iter()
        .map(|e| {
            let path = match (prefix, e.field_path.as_str()) {
                (p, "") => p.to_string(),
                ("", f) => f.to_string(),
                (p, f) => format!("{p}.{f}"),
            };
            let message = match e.kind {
                kube::core::cel::ErrorKind::ValidationFailure => {
                    format!("Invalid value: {} (rule: {})", e.message, e.rule)
                }
                _ => format!("rule {:?} could not be evaluated here: {}", e.rule, e.message),
            };
            Violation { path, message }
        })
        .collect()
}

/// `integer or string`.
fn types(t: &boon::Types) -> String {
    t.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or ")
}

/// `spec.containers[0].image` from boon's tokens.
fn field_path(prefix: &str, tokens: &[boon::InstanceToken]) -> String {
    let mut out = prefix.to_string();
    for t in tokens {
        match t {
            boon::InstanceToken::Prop(p) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(p);
            }
            boon::InstanceToken::Item(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn pointer<'v>(root: &'v Value, tokens: &[boon::InstanceToken]) -> Option<&'v Value> {
    let mut at = root;
    for t in tokens {
        at = match t {
            boon::InstanceToken::Prop(p) => at.get(p.as_ref())?,
            boon::InstanceToken::Item(i) => at.get(*i)?,
        };
    }
    Some(at)
}

/// A value as the API server shows it in a message: strings quoted, objects by type.
fn shown(v: Option<&Value>) -> String {
    match v {
        Some(Value::Object(_)) => "\"object\"".into(),
        Some(Value::Array(_)) => "\"array\"".into(),
        Some(v) => v.to_string(),
        None => "null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "labels": { "app": "web" } },
            "spec": {
                "replicas": 3,
                "selector": { "matchLabels": { "app": "web" } },
                "template": {
                    "metadata": { "labels": { "app": "web" } },
                    "spec": { "containers": [{ "name": "web", "image": "nginx", "ports": [{ "containerPort": 80 }],
                        "resources": { "limits": { "cpu": 1, "memory": "64Mi" } } }] }
                },
                "strategy": { "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": 1 } }
            }
        })
    }

    #[test]
    fn a_valid_deployment_passes_and_a_misspelled_field_is_named_by_its_path() {
        let s = Schemas::builtin();
        assert!(s.knows(&Gvk { group: "apps".into(), version: "v1".into(), kind: "Deployment".into() }));
        assert_eq!(s.check(&deployment(), false), Some(vec![]), "int-or-string, quantities and nulls are fine");
        let mut typo = deployment();
        typo["spec"]["template"]["spec"]["containers"][0]["imagee"] = json!("nginx");
        typo["spec"]["replicas"] = json!("three");
        typo["spec"]["template"]["metadata"]["annotations"] = Value::Null;
        let v = s.check(&typo, false).expect("a known kind");
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(v.len(), 2, "{shown:#?}");
        assert!(shown[0].starts_with("spec.replicas: Invalid value: \"three\": must be of type integer"), "{shown:#?}");
        assert!(shown[1].starts_with("spec.template.spec.containers[0].imagee: unknown field"), "{shown:#?}");
    }

    #[test]
    fn a_served_document_is_kept_without_its_paths_and_descriptions_and_still_checks() {
        let served = crate::kubernetes::openapi::served_note();
        let mut s = Schemas::default();
        assert_eq!(s.add_document(served, "served").expect("it compiles"), 1);
        let kept: Value = serde_json::from_str(&s.documents[0].1).expect("JSON");
        assert!(kept.get("paths").is_none(), "{kept}");
        let note = &kept["components"]["schemas"]["io.example.v1.Note"];
        assert!(note.get("description").is_none() && note["properties"]["description"].get("description").is_none());
        let object = |text: Value| json!({ "apiVersion": "v1", "kind": "Note", "metadata": {}, "description": text });
        assert_eq!(s.check(&object(json!("milk")), false), Some(vec![]));
        let refused = s.check(&object(json!(3)), false).expect("a known kind");
        assert!(
            refused[0].to_string().starts_with("description: Invalid value: 3: must be of type string"),
            "{refused:?}"
        );
    }

    #[test]
    fn only_the_shipped_documents_wanted_are_read() {
        let kind = |group: &str, kind: &str| Gvk { group: group.into(), version: "v1".into(), kind: kind.into() };
        let core = Schemas::builtin_of(|path| path == "api/v1");
        assert!(core.knows(&kind("", "Pod")) && !core.knows(&kind("apps", "Deployment")));
        assert!(Schemas::builtin().knows(&kind("apps", "Deployment")));
    }

    #[test]
    fn required_fields_are_required_of_a_create_not_of_an_apply() {
        let s = Schemas::builtin();
        let partial = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web" },
            "spec": { "template": { "metadata": { "annotations": { "reloaded": "1" } } } } });
        let v = s.check(&partial, false).expect("known");
        assert!(v.iter().any(|v| v.path == "spec.selector" && v.message == "Required value"), "{v:#?}");
        assert_eq!(s.check(&partial, true), Some(vec![]));
        let bad_port = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "s" },
            "spec": { "ports": [{ "port": 4294967296_i64 }] } });
        let v = s.check(&bad_port, true).expect("known");
        assert!(v.iter().any(|v| v.path == "spec.ports[0].port" && v.message.contains("32-bit")), "{v:#?}");
        assert_eq!(s.check(&json!({ "apiVersion": "example.com/v1", "kind": "Widget" }), false), None, "unknown kind");
    }

    #[test]
    fn a_crd_brings_its_schema_and_its_cel_rules() {
        let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.example.com }
spec:
  group: example.com
  names: { kind: Widget, plural: widgets }
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.min <= self.max"
              message: "min must not exceed max"
            properties:
              min: { type: integer }
              max: { type: integer }
              mode: { type: string, enum: [Fast, Safe] }
              extra: { type: object, x-kubernetes-preserve-unknown-fields: true }
          status:
            type: object
            properties:
              ready: { type: boolean }
"#;
        let mut s = Schemas::default();
        assert_eq!(s.add_crds(crd, "widget.yaml").expect("CRDs"), 1);
        let gvk = Gvk { group: "example.com".into(), version: "v1".into(), kind: "Widget".into() };
        let ok = json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w" },
            "spec": { "min": 1, "max": 2, "mode": "Fast", "extra": { "anything": [1, "two"] } } });
        assert_eq!(s.check(&ok, false), Some(vec![]));
        let bad = json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w" },
            "spec": { "min": 3, "max": 2, "mode": "Slow" } });
        let v: Vec<String> = s.check(&bad, false).expect("known").iter().map(ToString::to_string).collect();
        assert!(v.iter().any(|v| v.starts_with("spec.mode: Unsupported value: \"Slow\"")), "{v:#?}");
        assert!(
            v.iter().any(|v| v.starts_with("spec")
                && v.contains("min must not exceed max")
                && v.contains("self.min <= self.max")),
            "{v:#?}"
        );
        assert_eq!(s.check_status(&gvk, &json!({ "ready": true })), Some(vec![]));
        let v = s.check_status(&gvk, &json!({ "ready": "yes", "phase": "Up" })).expect("a status schema");
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 2, "{shown:#?}");
        assert!(shown.iter().any(|s| s.starts_with("status.phase: unknown field")), "{shown:#?}");
    }

    #[test]
    fn the_shipped_documents_are_the_shipped_form_of_themselves() {
        // What `reference schemas` writes, read back and written again, is the same:
        // the committed files are in that form (no description, sorted keys).
        for path in builtin_paths() {
            let text = builtin_document(path).expect("shipped");
            let doc: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            let schemas = doc.pointer("/components/schemas").and_then(Value::as_object).expect("schemas");
            assert!(schemas.len() > 10, "{path}");
            assert!(!text.contains("\"description\":\""), "{path} has descriptions left");
        }
    }
}
