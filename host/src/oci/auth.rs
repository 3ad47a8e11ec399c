//! Registry credentials from Docker config files (`{"auths": {...}}`), the format of
//! `~/.docker/config.json`, of `kubernetes.io/dockerconfigjson` Secrets and of the
//! embedded cluster's `registry/auth.json`. Only what is written in them: no
//! credential helpers (`credsStore`, `credHelpers`) are run.

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize, Clone)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, alias = "registrytoken")]
    identitytoken: Option<String>,
}

/// Credentials by registry host, merged from several files: the first to name a
/// registry wins.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    by_registry: BTreeMap<String, Login>,
}

#[derive(Clone, PartialEq, Eq)]
enum Login {
    Basic(String, String),
    Bearer(String),
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        match self {
            Login::Basic(user, _) => write!(f, "Basic({user}, ***)"),
            Login::Bearer(_) => write!(f, "Bearer(***)"),
        }
    }
}

impl Credentials {
    /// Adds the entries of one Docker config file (`source` names it in errors).
    pub fn add(&mut self, json: &[u8], source: &str) -> Result<(), String> {
        let file: ConfigFile =
            serde_json::from_slice(json).map_err(|e| format!("{source}: not a Docker config: {e}"))?;
        for (key, entry) in file.auths {
            let login = login(&entry).map_err(|e| format!("{source}: auths[{key:?}]: {e}"))?;
            if let Some(login) = login {
                self.by_registry.entry(host_of(&key)).or_insert(login);
            }
        }
        Ok(())
    }

    /// These credentials, then `other`'s for registries these do not name.
    pub fn then(mut self, other: &Credentials) -> Credentials {
        for (k, v) in &other.by_registry {
            self.by_registry.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self
    }

    /// What to present to `registry` (`host[:port]`); anonymous when nothing names it.
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(registry) {
            Some(Login::Basic(u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            Some(Login::Bearer(t)) => RegistryAuth::Bearer(t.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

fn login(entry: &Entry) -> Result<Option<Login>, String> {
    if let Some(token) = &entry.identitytoken {
        return Ok(Some(Login::Bearer(token.clone())));
    }
    if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
        return Ok(Some(Login::Basic(u.clone(), p.clone())));
    }
    let Some(auth) = &entry.auth else { return Ok(None) };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|e| format!("`auth` is not base64: {e}"))?;
    let text = String::from_utf8(decoded).map_err(|_| "`auth` is not UTF-8".to_string())?;
    let (u, p) = text.split_once(':').ok_or("`auth` is not base64 of user:password")?;
    Ok(Some(Login::Basic(u.to_string(), p.to_string())))
}

/// The registry host of an `auths` key: `https://host:port/v1/` and `host:port` alike.
/// Docker Hub's legacy key is the host the client resolves `docker.io` to.
fn host_of(key: &str) -> String {
    let bare = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    let host = bare.split('/').next().unwrap_or(bare);
    match host {
        "index.docker.io" | "docker.io" => "index.docker.io".to_string(),
        h => h.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_form_docker_writes() {
        let mut c = Credentials::default();
        let json = br#"{"auths": {
            "127.0.0.1:5000": {"auth": "cG9kc2V0OnNlY3JldA=="},
            "https://registry.example/v1/": {"username": "u", "password": "p"},
            "tokens.example": {"identitytoken": "t"},
            "helper.example": {}
        }, "credsStore": "desktop"}"#;
        c.add(json, "config.json").expect("parses");
        assert!(c.for_registry("127.0.0.1:5000") == RegistryAuth::Basic("podset".into(), "secret".into()));
        assert!(c.for_registry("registry.example") == RegistryAuth::Basic("u".into(), "p".into()));
        assert!(c.for_registry("tokens.example") == RegistryAuth::Bearer("t".into()));
        assert!(c.for_registry("helper.example") == RegistryAuth::Anonymous);
        assert!(c.for_registry("other:1") == RegistryAuth::Anonymous);
        assert!(!format!("{c:?}").contains("secret"), "credentials stay out of logs");
    }

    #[test]
    fn the_first_file_to_name_a_registry_wins_and_bad_files_say_where() {
        let mut secret = Credentials::default();
        secret.add(br#"{"auths":{"r:1":{"username":"new","password":"p"}}}"#, "Secret a").expect("ok");
        let mut flag = Credentials::default();
        flag.add(br#"{"auths":{"r:1":{"username":"old","password":"p"},"s:2":{"username":"s","password":"p"}}}"#, "f")
            .expect("ok");
        let both = secret.then(&flag);
        assert!(both.for_registry("r:1") == RegistryAuth::Basic("new".into(), "p".into()));
        assert!(both.for_registry("s:2") == RegistryAuth::Basic("s".into(), "p".into()));
        let err = Credentials::default().add(br#"{"auths":{"r":{"auth":"***"}}}"#, "Secret b").expect_err("bad");
        assert!(err.contains("Secret b") && err.contains("base64"), "{err}");
    }
}
