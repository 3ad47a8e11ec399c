use super::auth;

/// Where registries are reached and what they are trusted with.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// PEM CA certificates trusted for every registry, besides the system's.
    pub ca_certificates: Vec<Vec<u8>>,
    /// Registries (`host[:port]`) spoken to in plain HTTP: only these.
    pub insecure: Vec<String>,
    /// Docker config files (`auths`), the operator-wide credentials.
    pub credentials: auth::Credentials,
}
