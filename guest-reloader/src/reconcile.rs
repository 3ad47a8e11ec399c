//! The decision, as stakater/Reloader's annotation strategy takes it:
//!
//! 1. look up the Deployment the spec names;
//! 2. look up every ConfigMap and Secret its pod template uses (volumes, projected
//!    volumes, `envFrom`, `env[].valueFrom`, in containers and init containers);
//! 3. hash their contents;
//! 4. if the hash differs from the one the pod template carries, patch the template's
//!    annotation with the new one: the Deployment controller rolls the pods.
//!
//! Like Reloader, the first sight of a Deployment rolls nothing: it only records the
//! hash. A ConfigMap or Secret the pods need (referenced without `optional: true`) that
//! is not found rolls nothing either and records no hash: pods started without it could
//! not run, and the host's caches are watched apart, so a Secret created just before its
//! ConfigReload may not be in them yet (that first sight once hashed it as missing and
//! rolled the Deployment when it arrived, 1 run in about 20 of the cluster test). Like
//! Reloader without `--reload-on-delete`, deleting one rolls nothing; it coming back
//! different does. Secrets' values enter the hash only through `policy_sdk::secrets::digest`, so
//! a recorded decision (whose Secrets hold `REDACTED:sha256:<hex>`) replays exactly.

use std::collections::BTreeMap;
use std::fmt;

use policy_sdk::conditions::{self, Condition};
use policy_sdk::secrets::{digest, hex};
use policy_sdk::time::rfc3339;
use policy_sdk::{Action, Input, Kind, Lookups, Object, PolicyError, Status, apply, event};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::types::{ConfigReloadSpec, ConfigReloadStatus};
use crate::{CONFIG_MAP, DEPLOYMENT, SECRET};

/// The pod template annotation that carries the hash of the configuration the pods
/// were started with. Changing it is what rolls the Deployment.
pub const HASH_ANNOTATION: &str = "reloader.example.com/config-hash";

pub fn reconcile(input: &Input) -> Result<Vec<Action>, PolicyError> {
    let parent = &input.parent;
    if parent.meta.deleting {
        // Nothing is owned, nothing to clean up.
        return Ok(Vec::new());
    }
    let spec: ConfigReloadSpec = parent.spec()?;
    let current: ConfigReloadStatus = parent.status()?;
    let mut lookups = Lookups::new(input);

    // 1. The Deployment.
    let deployment = lookups.named(DEPLOYMENT, &spec.deployment);
    if !lookups.answered() {
        return Ok(lookups.finish());
    }
    let Some(deployment) = deployment else {
        let mut actions: Vec<Action> = not_found(input, &spec, &current).update_from(&current)?.into_iter().collect();
        actions.extend(lookups.finish());
        return Ok(actions);
    };

    // 2. What its pods use.
    let template = deployment.parse::<DeploymentBody>()?.spec.template;
    let mut missing = Vec::new();
    let watched: Vec<(Source, Option<&Object>)> = sources(&template.spec)
        .into_iter()
        .map(|(source, need)| {
            let found = lookups.named(source.kind(), source.name());
            if found.is_none() && need == Need::Required {
                missing.push(source.to_string());
            }
            (source, found)
        })
        .collect();
    if !lookups.answered() {
        return Ok(lookups.finish());
    }
    if !missing.is_empty() {
        let mut actions: Vec<Action> =
            waiting(input, &spec, &current, &watched, &missing).update_from(&current)?.into_iter().collect();
        actions.extend(lookups.finish());
        return Ok(actions);
    }

    // 3. Their hash.
    let hash = config_hash(&watched)?;

    // 4. The roll. The annotation says what the pods run with; without it, the status
    // says what was seen last; with neither, this is the first sight.
    let mut actions = Vec::new();
    let mut next = watching(input, &spec, &current, &watched, &hash);
    let previous = template.metadata.annotations.get(HASH_ANNOTATION).or(current.config_hash.as_ref());
    if let Some(previous) = previous
        && *previous != hash
    {
        actions.push(apply(&patch(&spec.deployment, &hash))?);
        // The status already holding this hash means the roll was decided before and the
        // Deployment in the cache predates its patch: patch again (the same value rolls
        // nothing twice), but it is not another reload.
        if current.config_hash.as_ref() != Some(&hash) {
            let message = format!(
                "Deployment {}: configuration changed ({} → {})",
                spec.deployment,
                prefix(previous),
                prefix(&hash)
            );
            actions.push(event(false, "Reloaded", message));
            next.reloads = current.reloads + 1;
            next.last_reload_time = Some(rfc3339(input.now));
        }
    }
    actions.extend(next.update_from(&current)?);
    actions.extend(lookups.finish());
    Ok(actions)
}

/// A ConfigMap or Secret a pod template uses. Ordered as `Kind/name` sorts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    ConfigMap(String),
    Secret(String),
}

impl Source {
    pub fn kind(&self) -> Kind {
        match self {
            Source::ConfigMap(_) => CONFIG_MAP,
            Source::Secret(_) => SECRET,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Source::ConfigMap(n) | Source::Secret(n) => n,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind().kind, self.name())
    }
}

// What the decision reads of a Deployment: the pod template's annotations and the
// references to ConfigMaps and Secrets, nothing else (a small parse, also on wasm32).

#[derive(Deserialize, Default)]
#[serde(default)]
struct DeploymentBody {
    spec: DeploymentSpec,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DeploymentSpec {
    template: PodTemplate,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodTemplate {
    metadata: TemplateMeta,
    spec: PodSpec,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TemplateMeta {
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpec {
    volumes: Vec<Volume>,
    containers: Vec<Container>,
    init_containers: Vec<Container>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Volume {
    config_map: Option<Named>,
    secret: Option<SecretVolume>,
    projected: Option<Projected>,
}

/// `name` of a LocalObjectReference and of the selectors and projections built on it,
/// and whether the pods start without it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Named {
    name: String,
    optional: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SecretVolume {
    secret_name: String,
    optional: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Projected {
    sources: Vec<Projection>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Projection {
    config_map: Option<Named>,
    secret: Option<Named>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Container {
    env_from: Vec<EnvFrom>,
    env: Vec<EnvVar>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EnvFrom {
    config_map_ref: Option<Named>,
    secret_ref: Option<Named>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EnvVar {
    value_from: Option<ValueFrom>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ValueFrom {
    config_map_key_ref: Option<Named>,
    secret_key_ref: Option<Named>,
}

/// Whether the pods start without a ConfigMap or Secret. Ordered so that the strongest
/// of several references to one object is the greatest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    Optional,
    Required,
}

impl Need {
    fn of(optional: Option<bool>) -> Self {
        if optional == Some(true) { Need::Optional } else { Need::Required }
    }
}

/// Every ConfigMap and Secret `pod` uses, once each, sorted, with whether the pods need
/// it: required if any reference to it is not `optional`.
fn sources(pod: &PodSpec) -> BTreeMap<Source, Need> {
    let config_map = |n: &Named| (Source::ConfigMap(n.name.clone()), n.optional);
    let secret = |n: &Named| (Source::Secret(n.name.clone()), n.optional);
    let mut references = Vec::new();
    for v in &pod.volumes {
        references.extend(v.config_map.as_ref().map(config_map));
        references.extend(v.secret.as_ref().map(|s| (Source::Secret(s.secret_name.clone()), s.optional)));
        for p in v.projected.iter().flat_map(|p| &p.sources) {
            references.extend(p.config_map.as_ref().map(config_map));
            references.extend(p.secret.as_ref().map(secret));
        }
    }
    for c in pod.containers.iter().chain(&pod.init_containers) {
        for e in &c.env_from {
            references.extend(e.config_map_ref.as_ref().map(config_map));
            references.extend(e.secret_ref.as_ref().map(secret));
        }
        for e in c.env.iter().filter_map(|e| e.value_from.as_ref()) {
            references.extend(e.config_map_key_ref.as_ref().map(config_map));
            references.extend(e.secret_key_ref.as_ref().map(secret));
        }
    }
    let mut found = BTreeMap::new();
    // A reference without a name names nothing the API server could serve.
    for (source, optional) in references.into_iter().filter(|(s, _)| !s.name().is_empty()) {
        let need = found.entry(source).or_insert(Need::Optional);
        *need = (*need).max(Need::of(optional));
    }
    found
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ConfigMapBody {
    data: Option<BTreeMap<String, String>>,
    binary_data: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SecretBody {
    data: Option<BTreeMap<String, String>>,
    string_data: Option<BTreeMap<String, String>>,
}

/// The SHA-256, in hex, of what `watched` holds, in its order: for each source its
/// `Kind/name`, then whether it exists, then its entries in key order. A Secret's values
/// enter as their digests. Every string is length-prefixed and every map counted, so no
/// two different contents frame to the same bytes.
pub fn config_hash(watched: &[(Source, Option<&Object>)]) -> Result<String, PolicyError> {
    let mut hasher = Sha256::new();
    for (source, object) in watched {
        frame(&mut hasher, &source.to_string());
        let Some(object) = object else {
            hasher.update([0]);
            continue;
        };
        hasher.update([1]);
        match source {
            Source::ConfigMap(_) => {
                let body: ConfigMapBody = object.parse()?;
                entries(&mut hasher, &body.data.unwrap_or_default(), str::to_string);
                entries(&mut hasher, &body.binary_data.unwrap_or_default(), str::to_string);
            }
            Source::Secret(_) => {
                let body: SecretBody = object.parse()?;
                entries(&mut hasher, &body.data.unwrap_or_default(), digest);
                entries(&mut hasher, &body.string_data.unwrap_or_default(), digest);
            }
        }
    }
    Ok(hex(&hasher.finalize()))
}

fn frame(hasher: &mut Sha256, text: &str) {
    hasher.update((text.len() as u64).to_le_bytes());
    hasher.update(text.as_bytes());
}

fn entries(hasher: &mut Sha256, map: &BTreeMap<String, String>, value: impl Fn(&str) -> String) {
    hasher.update((map.len() as u64).to_le_bytes());
    for (k, v) in map {
        frame(hasher, k);
        frame(hasher, &value(v));
    }
}

/// The patch that rolls `deployment`: the hash annotation on its pod template, and no
/// other field (a server-side apply owns exactly the fields it sets).
pub fn patch(deployment: &str, hash: &str) -> Value {
    json!({
        "apiVersion": DEPLOYMENT.api_version(),
        "kind": DEPLOYMENT.kind,
        "metadata": { "name": deployment },
        "spec": { "template": { "metadata": { "annotations": { HASH_ANNOTATION: hash } } } }
    })
}

/// The first 12 hex digits, as an Event shows a hash.
fn prefix(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn ready(input: &Input, current: &ConfigReloadStatus, ok: bool, reason: &str, message: String) -> Vec<Condition> {
    let mut conditions = current.conditions.clone();
    let generation = input.parent.meta.generation;
    conditions::set(&mut conditions, Condition::new("Ready", ok, reason, message, input.now).generation(generation));
    conditions
}

/// The status while the Deployment is missing: what was seen before stays, so that
/// its return with the same configuration rolls nothing.
fn not_found(input: &Input, spec: &ConfigReloadSpec, current: &ConfigReloadStatus) -> ConfigReloadStatus {
    let message = format!("Deployment {} not found in namespace {}", spec.deployment, input.parent.meta.namespace);
    ConfigReloadStatus {
        observed_generation: input.parent.meta.generation,
        watching: Vec::new(),
        conditions: ready(input, current, false, "DeploymentNotFound", message),
        ..current.clone()
    }
}

/// The status while a ConfigMap or Secret the pods need is not found: watched, but the
/// hash last seen stays (a roll now would start pods that cannot run).
fn waiting(
    input: &Input,
    spec: &ConfigReloadSpec,
    current: &ConfigReloadStatus,
    watched: &[(Source, Option<&Object>)],
    missing: &[String],
) -> ConfigReloadStatus {
    let message = format!(
        "Deployment {}: {} not found in namespace {}; its pods need {}",
        spec.deployment,
        missing.join(", "),
        input.parent.meta.namespace,
        if missing.len() == 1 { "it" } else { "them" }
    );
    ConfigReloadStatus {
        observed_generation: input.parent.meta.generation,
        watching: watched.iter().map(|(s, _)| s.to_string()).collect(),
        conditions: ready(input, current, false, "ConfigurationNotFound", message),
        ..current.clone()
    }
}

/// The status with the Deployment found (before any roll: `reloads` as it was).
fn watching(
    input: &Input,
    spec: &ConfigReloadSpec,
    current: &ConfigReloadStatus,
    watched: &[(Source, Option<&Object>)],
    hash: &str,
) -> ConfigReloadStatus {
    let config_maps = watched.iter().filter(|(s, _)| matches!(s, Source::ConfigMap(_))).count();
    let secrets = watched.len() - config_maps;
    let message =
        format!("Deployment {}: {}, {}", spec.deployment, count(config_maps, "ConfigMap"), count(secrets, "Secret"));
    ConfigReloadStatus {
        observed_generation: input.parent.meta.generation,
        config_hash: Some(hash.to_string()),
        watching: watched.iter().map(|(s, _)| s.to_string()).collect(),
        conditions: ready(input, current, true, "Watching", message),
        ..current.clone()
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

#[cfg(test)]
mod tests {
    use policy_sdk::testing::{answered, applied, input, looked_up, object, status};
    use policy_sdk::{EventType, Lookup, LookupMatch};

    use super::*;
    use crate::CONFIG_RELOAD;

    fn config_reload(status: Value) -> Object {
        object(CONFIG_RELOAD, "web", json!({ "spec": { "deployment": "web" }, "status": status }))
    }

    /// The Deployment `web`, its pod template carrying `annotations` and `pod` as spec.
    fn deployment(annotations: Value, pod: Value) -> Object {
        object(
            DEPLOYMENT,
            "web",
            json!({ "spec": {
                "selector": { "matchLabels": { "app": "web" } },
                "template": { "metadata": { "labels": { "app": "web" }, "annotations": annotations }, "spec": pod }
            } }),
        )
    }

    /// A pod that mounts the ConfigMap `web-config` and takes the Secret `web-credentials` as environment.
    fn pod() -> Value {
        json!({
            "containers": [{
                "name": "web", "image": "busybox:1.35",
                "envFrom": [{ "secretRef": { "name": "web-credentials" } }],
                "volumeMounts": [{ "name": "config", "mountPath": "/config" }]
            }],
            "volumes": [{ "name": "config", "configMap": { "name": "web-config" } }]
        })
    }

    fn config_map(name: &str, data: Value) -> Object {
        object(CONFIG_MAP, name, json!({ "data": data }))
    }

    fn secret(name: &str, data: Value) -> Object {
        object(SECRET, name, json!({ "type": "Opaque", "data": data }))
    }

    /// An input for a ConfigReload of `status`, with every lookup answered.
    fn answered_all(status: Value, deployment: Object, config: Object, credentials: Object) -> Input {
        let i = answered(input(config_reload(status)), DEPLOYMENT, "web", Some(deployment));
        let i = answered(i, CONFIG_MAP, "web-config", Some(config));
        answered(i, SECRET, "web-credentials", Some(credentials))
    }

    fn by_name(kind: Kind, name: &str) -> Lookup {
        Lookup { kind: kind.gvk(), namespace: String::new(), match_: LookupMatch::Name(name.into()) }
    }

    fn hash_of(watched: &[(Source, Option<&Object>)]) -> String {
        config_hash(watched).expect("hashes")
    }

    #[test]
    fn first_it_asks_only_for_the_deployment() {
        let actions = reconcile(&input(config_reload(json!({})))).expect("decides");
        assert_eq!(actions, vec![Action::LookUp(by_name(DEPLOYMENT, "web"))]);
    }

    #[test]
    fn then_it_asks_for_every_config_map_and_secret_the_pod_template_uses_once() {
        let pod = json!({
            "volumes": [
                { "name": "a", "configMap": { "name": "cm-volume" } },
                { "name": "b", "secret": { "secretName": "s-volume" } },
                { "name": "c", "projected": { "sources": [
                    { "configMap": { "name": "cm-projected" } },
                    { "secret": { "name": "s-projected" } },
                    { "downwardAPI": { "items": [] } }
                ] } },
                { "name": "d", "emptyDir": {} }
            ],
            "initContainers": [{
                "name": "init",
                "envFrom": [{ "configMapRef": { "name": "cm-env-from" } }],
                "env": [{ "name": "K", "valueFrom": { "secretKeyRef": { "name": "s-key", "key": "k" } } }]
            }],
            "containers": [{
                "name": "web",
                "envFrom": [{ "secretRef": { "name": "s-env-from" } }, { "configMapRef": { "name": "cm-volume" } }],
                "env": [
                    { "name": "A", "value": "literal" },
                    { "name": "B", "valueFrom": { "configMapKeyRef": { "name": "cm-key", "key": "b" } } },
                    { "name": "C", "valueFrom": { "secretKeyRef": { "name": "s-volume", "key": "c" } } },
                    { "name": "D", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }
                ]
            }]
        });
        let i = answered(input(config_reload(json!({}))), DEPLOYMENT, "web", Some(deployment(json!({}), pod)));
        let actions = reconcile(&i).expect("decides");
        let mut expected = vec![by_name(DEPLOYMENT, "web")];
        expected
            .extend(["cm-env-from", "cm-key", "cm-projected", "cm-volume"].into_iter().map(|n| by_name(CONFIG_MAP, n)));
        expected.extend(["s-env-from", "s-key", "s-projected", "s-volume"].into_iter().map(|n| by_name(SECRET, n)));
        assert_eq!(looked_up(&actions), expected);
        assert_eq!(actions.len(), expected.len(), "nothing but the lookups until they are answered: {actions:?}");
    }

    #[test]
    fn on_first_sight_it_records_the_hash_and_rolls_nothing() {
        let config = config_map("web-config", json!({ "greeting": "hello" }));
        let credentials = secret("web-credentials", json!({ "password": "aHVudGVyMg==" }));
        let i = answered_all(json!({}), deployment(json!({}), pod()), config.clone(), credentials.clone());
        let actions = reconcile(&i).expect("decides");
        assert!(applied(&actions).is_empty(), "{actions:?}");
        assert!(!actions.iter().any(|a| matches!(a, Action::EmitEvent(_))), "{actions:?}");
        let s: ConfigReloadStatus = status(&actions).expect("a status");
        let expected = hash_of(&[
            (Source::ConfigMap("web-config".into()), Some(&config)),
            (Source::Secret("web-credentials".into()), Some(&credentials)),
        ]);
        assert_eq!(s.config_hash.as_deref(), Some(expected.as_str()));
        assert_eq!(s.watching, vec!["ConfigMap/web-config", "Secret/web-credentials"]);
        assert_eq!((s.reloads, s.last_reload_time.as_deref(), s.observed_generation), (0, None, 1));
        let ready = conditions::find(&s.conditions, "Ready").expect("Ready");
        assert!(ready.is_true());
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            ("Watching", "Deployment web: 1 ConfigMap, 1 Secret")
        );
        let lookups = looked_up(&actions);
        assert_eq!(lookups.len(), 3);
        assert_eq!(actions.len(), 4, "the status and the lookups: {actions:?}");
    }

    #[test]
    fn a_changed_config_map_rolls_the_deployment_with_only_the_annotation() {
        let credentials = secret("web-credentials", json!({ "password": "aHVudGVyMg==" }));
        let before = config_map("web-config", json!({ "greeting": "hello" }));
        let old = hash_of(&[
            (Source::ConfigMap("web-config".into()), Some(&before)),
            (Source::Secret("web-credentials".into()), Some(&credentials)),
        ]);
        let after = config_map("web-config", json!({ "greeting": "hello, world" }));
        let annotated = deployment(json!({ HASH_ANNOTATION: old }), pod());
        let status = json!({ "configHash": old, "reloads": 3 });
        let actions = reconcile(&answered_all(status, annotated, after.clone(), credentials.clone())).expect("decides");
        let new = hash_of(&[
            (Source::ConfigMap("web-config".into()), Some(&after)),
            (Source::Secret("web-credentials".into()), Some(&credentials)),
        ]);
        assert_ne!(old, new);
        assert_eq!(applied(&actions), vec![patch("web", &new)]);
        assert_eq!(
            patch("web", &new),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web" },
                "spec": { "template": { "metadata": { "annotations": { "reloader.example.com/config-hash": new } } } }
            })
        );
        let Some(Action::EmitEvent(e)) = actions.iter().find(|a| matches!(a, Action::EmitEvent(_))) else {
            panic!("an event: {actions:?}")
        };
        assert_eq!((e.type_, e.reason.as_str()), (EventType::Normal, "Reloaded"));
        assert!(e.message.contains("web") && e.message.contains(&old[..12]) && e.message.contains(&new[..12]));
        let s: ConfigReloadStatus = policy_sdk::testing::status(&actions).expect("a status");
        assert_eq!(s.config_hash.as_deref(), Some(new.as_str()));
        assert_eq!(s.reloads, 4);
        assert_eq!(s.last_reload_time.as_deref(), Some(rfc3339(1_700_000_100_000).as_str()));
    }

    #[test]
    fn the_annotation_is_the_previous_hash_before_the_status() {
        // The pods run with the hash of the annotation: a status that already names
        // the new hash (a roll whose patch did not land) does not stop the roll.
        let config = config_map("web-config", json!({ "greeting": "hello" }));
        let credentials = secret("web-credentials", json!({}));
        let new = hash_of(&[
            (Source::ConfigMap("web-config".into()), Some(&config)),
            (Source::Secret("web-credentials".into()), Some(&credentials)),
        ]);
        let annotated = deployment(json!({ HASH_ANNOTATION: "0".repeat(64) }), pod());
        let actions =
            reconcile(&answered_all(json!({ "configHash": new, "reloads": 4 }), annotated, config, credentials))
                .expect("decides");
        assert_eq!(applied(&actions), vec![patch("web", &new)]);
        // Decided before (the status holds the hash): the same roll, not another reload.
        assert!(!actions.iter().any(|a| matches!(a, Action::EmitEvent(_))), "{actions:?}");
        assert!(status::<ConfigReloadStatus>(&actions).is_none_or(|s| s.reloads == 4), "{actions:?}");
    }

    #[test]
    fn an_unchanged_config_does_nothing() {
        let config = config_map("web-config", json!({ "greeting": "hello" }));
        let credentials = secret("web-credentials", json!({ "password": "aHVudGVyMg==" }));
        let first = answered_all(json!({}), deployment(json!({}), pod()), config.clone(), credentials.clone());
        let recorded: ConfigReloadStatus = status(&reconcile(&first).expect("decides")).expect("a status");
        let hash = recorded.config_hash.clone().expect("a hash");
        let annotated = deployment(json!({ HASH_ANNOTATION: hash }), pod());
        let current = serde_json::to_value(&recorded).expect("json");
        let mut later = answered_all(current, annotated, config, credentials);
        later.now += 3_600_000;
        let actions = reconcile(&later).expect("decides");
        assert_eq!(
            actions,
            vec![
                Action::LookUp(by_name(DEPLOYMENT, "web")),
                Action::LookUp(by_name(CONFIG_MAP, "web-config")),
                Action::LookUp(by_name(SECRET, "web-credentials")),
            ]
        );
    }

    #[test]
    fn a_recorded_secret_hashes_as_its_live_value() {
        let live = secret("web-credentials", json!({ "password": "aHVudGVyMg==" }));
        let recorded_value = format!("{}{}", policy_sdk::secrets::RECORDED_PREFIX, digest("aHVudGVyMg=="));
        let recorded = secret("web-credentials", json!({ "password": recorded_value }));
        let other = secret("web-credentials", json!({ "password": "c2VjcmV0" }));
        let of = |o: &Object| hash_of(&[(Source::Secret("web-credentials".into()), Some(o))]);
        assert_eq!(of(&live), of(&recorded));
        assert_ne!(of(&live), of(&other));
    }

    #[test]
    fn a_missing_deployment_is_reported_and_what_was_seen_stays() {
        let status = json!({ "configHash": "ab".repeat(32), "reloads": 2, "watching": ["ConfigMap/web-config"] });
        let i = answered(input(config_reload(status)), DEPLOYMENT, "web", None);
        let actions = reconcile(&i).expect("decides");
        assert!(applied(&actions).is_empty());
        assert_eq!(looked_up(&actions), vec![by_name(DEPLOYMENT, "web")]);
        let s: ConfigReloadStatus = policy_sdk::testing::status(&actions).expect("a status");
        let ready = conditions::find(&s.conditions, "Ready").expect("Ready");
        assert!(!ready.is_true());
        assert_eq!(ready.reason, "DeploymentNotFound");
        assert!(ready.message.contains("Deployment web"), "{}", ready.message);
        assert!(s.watching.is_empty());
        assert_eq!((s.config_hash, s.reloads), (Some("ab".repeat(32)), 2));
    }

    #[test]
    fn a_missing_config_map_hashes_apart_from_an_empty_one() {
        let empty = object(CONFIG_MAP, "web-config", json!({}));
        let source = || Source::ConfigMap("web-config".into());
        assert_ne!(hash_of(&[(source(), None)]), hash_of(&[(source(), Some(&empty))]));
        // Nor does a key move between `data` and `binaryData` unseen.
        let data = object(CONFIG_MAP, "web-config", json!({ "data": { "k": "dg==" } }));
        let binary = object(CONFIG_MAP, "web-config", json!({ "binaryData": { "k": "dg==" } }));
        assert_ne!(hash_of(&[(source(), Some(&data))]), hash_of(&[(source(), Some(&binary))]));
    }

    #[test]
    fn a_configuration_the_pods_need_not_found_rolls_nothing_and_keeps_the_hash() {
        // Not yet in the caches on first sight (a Secret applied just before its
        // ConfigReload), or deleted since: no hash recorded, no roll, said in Ready; the
        // lookups are named, so its arrival re-queues the ConfigReload.
        let config = config_map("web-config", json!({ "greeting": "hello" }));
        for (before, annotations) in [
            (json!({}), json!({})),
            (json!({ "configHash": "ab".repeat(32), "reloads": 2 }), json!({ HASH_ANNOTATION: "ab".repeat(32) })),
        ] {
            let i =
                answered(input(config_reload(before.clone())), DEPLOYMENT, "web", Some(deployment(annotations, pod())));
            let i = answered(i, CONFIG_MAP, "web-config", Some(config.clone()));
            let i = answered(i, SECRET, "web-credentials", None);
            let actions = reconcile(&i).expect("decides");
            assert!(applied(&actions).is_empty(), "{actions:?}");
            assert!(!actions.iter().any(|a| matches!(a, Action::EmitEvent(_))), "{actions:?}");
            assert_eq!(looked_up(&actions).len(), 3);
            let s: ConfigReloadStatus = status(&actions).expect("a status");
            assert_eq!(s.config_hash, before["configHash"].as_str().map(str::to_string));
            assert_eq!(s.reloads, before["reloads"].as_i64().unwrap_or(0));
            assert_eq!(s.watching, vec!["ConfigMap/web-config", "Secret/web-credentials"]);
            let ready = conditions::find(&s.conditions, "Ready").expect("Ready");
            assert!(!ready.is_true());
            assert_eq!(
                (ready.reason.as_str(), ready.message.as_str()),
                (
                    "ConfigurationNotFound",
                    "Deployment web: Secret/web-credentials not found in namespace default; its pods need it"
                )
            );
        }
    }

    #[test]
    fn an_optional_configuration_not_found_is_watched_as_missing() {
        let pod = json!({
            "containers": [{
                "name": "web",
                "envFrom": [{ "secretRef": { "name": "web-credentials", "optional": true } }],
                "env": [{ "name": "K", "valueFrom": { "configMapKeyRef": { "name": "web-config", "key": "k", "optional": true } } }]
            }],
            "volumes": [{ "name": "config", "configMap": { "name": "web-config" } }]
        });
        let i = answered(input(config_reload(json!({}))), DEPLOYMENT, "web", Some(deployment(json!({}), pod)));
        let i = answered(i, CONFIG_MAP, "web-config", Some(config_map("web-config", json!({}))));
        let i = answered(i, SECRET, "web-credentials", None);
        let s: ConfigReloadStatus = status(&reconcile(&i).expect("decides")).expect("a status");
        let expected = hash_of(&[
            (Source::ConfigMap("web-config".into()), Some(&config_map("web-config", json!({})))),
            (Source::Secret("web-credentials".into()), None),
        ]);
        assert_eq!(s.config_hash, Some(expected));
        assert!(conditions::find(&s.conditions, "Ready").expect("Ready").is_true());
        // The ConfigMap is optional in one reference and mounted in another: needed.
        let needed = sources(&serde_json::from_value(json!({
            "volumes": [{ "name": "config", "configMap": { "name": "web-config" } }],
            "containers": [{ "name": "web", "env": [{ "name": "K", "valueFrom": { "configMapKeyRef": { "name": "web-config", "key": "k", "optional": true } } }] }]
        })).expect("a pod spec"));
        assert_eq!(
            needed.into_iter().collect::<Vec<_>>(),
            vec![(Source::ConfigMap("web-config".into()), Need::Required)]
        );
    }

    #[test]
    fn a_config_reload_being_deleted_decides_nothing() {
        let parent = policy_sdk::testing::deleting(config_reload(json!({})));
        assert!(reconcile(&input(parent)).expect("decides").is_empty());
    }

    /// `scenarios/`, decided natively. The host runs them on the compiled component
    /// (`podset-host policy test`); this reads them the same way (the contract's records,
    /// snake_case, variants as tags, bodies and JSON payloads as YAML) so that they stay
    /// in step with the decision wherever the host cannot run.
    mod scenarios {
        use policy_sdk::{Answer, GroupVersionKind, InFlight, KeyValue, ObjectMeta};
        use serde_yaml::Value as Yaml;

        use super::*;

        const FILES: [(&str, &str); 3] = [
            ("rolls-on-change", include_str!("../scenarios/rolls-on-change.yaml")),
            ("asks-for-mounts", include_str!("../scenarios/asks-for-mounts.yaml")),
            ("waits-for-secret", include_str!("../scenarios/waits-for-secret.yaml")),
        ];

        /// YAML as JSON, a tagged value `!Tag v` as `{"Tag": v}`.
        fn json(y: &Yaml) -> Value {
            match y {
                Yaml::Tagged(t) => json!({ t.tag.to_string().trim_start_matches('!'): json(&t.value) }),
                Yaml::Mapping(m) => {
                    Value::Object(m.iter().map(|(k, v)| (k.as_str().expect("a string key").into(), json(v))).collect())
                }
                Yaml::Sequence(s) => Value::Array(s.iter().map(json).collect()),
                scalar => serde_json::to_value(scalar).expect("a scalar"),
            }
        }

        fn text(v: &Value) -> String {
            v.as_str().unwrap_or_else(|| panic!("a string: {v}")).into()
        }

        fn gvk(v: &Value) -> GroupVersionKind {
            GroupVersionKind { group: text(&v["group"]), version: text(&v["version"]), kind: text(&v["kind"]) }
        }

        fn pairs(v: &Value) -> Vec<KeyValue> {
            let list = v.as_array().expect("a list");
            list.iter().map(|kv| KeyValue { key: text(&kv["key"]), value: text(&kv["value"]) }).collect()
        }

        fn objects(v: &Value) -> Vec<Object> {
            v.as_array().expect("a list").iter().map(object).collect()
        }

        fn object(v: &Value) -> Object {
            let m = &v["meta"];
            Object {
                kind: gvk(&v["kind"]),
                meta: ObjectMeta {
                    name: text(&m["name"]),
                    namespace: text(&m["namespace"]),
                    uid: text(&m["uid"]),
                    generation: m["generation"].as_i64().expect("generation"),
                    resource_version: text(&m["resource_version"]),
                    labels: pairs(&m["labels"]),
                    annotations: pairs(&m["annotations"]),
                    created_at: m["created_at"].as_i64().expect("created_at"),
                    deleting: m["deleting"].as_bool().expect("deleting"),
                    finalizers: m["finalizers"].as_array().expect("finalizers").iter().map(text).collect(),
                },
                body: v["body"].to_string(),
            }
        }

        fn lookup(v: &Value) -> Lookup {
            let name = text(&v["match_"]["Name"]);
            Lookup { kind: gvk(&v["kind"]), namespace: text(&v["namespace"]), match_: LookupMatch::Name(name) }
        }

        fn input(v: &Value) -> Input {
            let answers = v["looked_up"].as_array().expect("looked_up");
            assert_eq!(
                v["in_flight"],
                json!({ "creations": [], "deletions": [] }),
                "nothing in flight for this policy"
            );
            Input {
                parent: object(&v["parent"]),
                children: objects(&v["children"]),
                related: objects(&v["related"]),
                looked_up: answers
                    .iter()
                    .map(|a| Answer { lookup: lookup(&a["lookup"]), objects: objects(&a["objects"]) })
                    .collect(),
                in_flight: InFlight { creations: Vec::new(), deletions: Vec::new() },
                now: v["now"].as_i64().expect("now"),
            }
        }

        /// An action as the file writes it.
        fn written(a: &Action) -> Value {
            let payload = |s: &str| serde_json::from_str::<Value>(s).expect("JSON");
            match a {
                Action::Apply(s) => json!({ "Apply": payload(s) }),
                Action::UpdateStatus(s) => json!({ "UpdateStatus": payload(s) }),
                Action::EmitEvent(e) => {
                    let type_ = if e.type_ == EventType::Normal { "Normal" } else { "Warning" };
                    assert!(e.regarding.is_none());
                    json!({ "EmitEvent": { "type_": type_, "reason": e.reason, "message": e.message, "regarding": null } })
                }
                Action::LookUp(l) => {
                    let LookupMatch::Name(name) = &l.match_ else { panic!("{l:?}") };
                    let kind = json!({ "group": l.kind.group, "version": l.kind.version, "kind": l.kind.kind });
                    json!({ "LookUp": { "kind": kind, "namespace": l.namespace, "match_": { "Name": name } } })
                }
                other => panic!("not an action of this policy: {other:?}"),
            }
        }

        fn read(text: &str) -> (Input, Vec<Value>) {
            let file = json(&serde_yaml::from_str(text).expect("YAML"));
            let expected = file["expect"]["actions"].as_array().expect("expected actions").clone();
            (input(&file["input"]), expected)
        }

        #[test]
        fn the_scenarios_decide_as_written() {
            for (name, text) in FILES {
                let (input, expected) = read(text);
                let actual: Vec<Value> = reconcile(&input).expect("decides").iter().map(written).collect();
                assert_eq!(actual, expected, "scenarios/{name}.yaml");
            }
        }

        #[test]
        fn the_hash_rolled_from_is_that_of_the_configuration_before() {
            let (mut input, _) = read(FILES[0].1);
            let config = &mut input.looked_up[1].objects[0];
            assert_eq!(config.meta.name, "web-config");
            config.body = json!({ "data": { "greeting": "hello" } }).to_string();
            // With the greeting as it was, the annotation and the status hold: nothing to do.
            let actions = reconcile(&input).expect("decides");
            assert_eq!(looked_up(&actions).len(), 3);
            assert_eq!(actions.len(), 3, "{actions:?}");
        }
    }
}
