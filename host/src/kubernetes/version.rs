//! The API server's version against the range this build is made for. The client
//! types come from k8s-openapi 0.29, whose features cover Kubernetes 1.33 to 1.37; we
//! build with its `earliest` feature (1.33), so every type and field the host uses
//! exists from 1.33 on. Outside that range the operator still runs (a newer server
//! usually serves what an older client asks for), but says so once in the log and on
//! `/readyz`, so that whoever runs it knows it is untested there.

use std::fmt;

use kube::Client;
use parking_lot::RwLock;

/// The oldest and newest minor of Kubernetes 1.x this build supports.
pub const SUPPORTED: (u32, u32) = (33, 37);

/// A Kubernetes version as `/version` reports it, reduced to what the range compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the API server's /version: {0}")]
    Request(#[from] kube::Error),
    #[error("the API server's /version says {0:?}, which is not a Kubernetes version")]
    Unparsable(String),
}

/// Reads `v1.34.4`, `v1.34.4-gke.100` or `1.34`; the leading major and minor count.
pub fn parse(git_version: &str) -> Option<Version> {
    let mut parts = git_version.trim_start_matches('v').split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(Version { major, minor })
}

/// Whether this build supports `v`.
pub fn supported(v: Version) -> bool {
    v.major == 1 && (SUPPORTED.0..=SUPPORTED.1).contains(&v.minor)
}

/// What the operator learnt of the server's version: nothing yet, or a warning to show.
#[derive(Debug, Default)]
pub struct Check {
    warning: RwLock<Option<String>>,
}

impl Check {
    /// Asks the server once. Logs one warning, and keeps it for `/readyz`, when the
    /// server is outside [`SUPPORTED`].
    pub async fn run(&self, client: &Client) -> Result<Version, Error> {
        let info = client.apiserver_version().await?;
        let version = parse(&info.git_version).ok_or_else(|| Error::Unparsable(info.git_version.clone()))?;
        if supported(version) {
            tracing::info!(server = %info.git_version, "Kubernetes API server version is supported");
            *self.warning.write() = None;
        } else {
            let warning = warning(&info.git_version);
            tracing::warn!(server = %info.git_version, "{warning}");
            *self.warning.write() = Some(warning);
        }
        Ok(version)
    }

    /// The warning for `/readyz`, if the server is outside the supported range.
    pub fn warning(&self) -> Option<String> {
        self.warning.read().clone()
    }
}

fn warning(git_version: &str) -> String {
    format!(
        "the API server runs Kubernetes {git_version}, outside the range podset-host {} is built and tested for \
         (1.{}..=1.{}); running anyway",
        env!("CARGO_PKG_VERSION"),
        SUPPORTED.0,
        SUPPORTED.1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_servers_report() {
        assert_eq!(parse("v1.34.4"), Some(Version { major: 1, minor: 34 }));
        assert_eq!(parse("v1.33.5-gke.1200"), Some(Version { major: 1, minor: 33 }));
        assert_eq!(parse("v1.37.0-alpha.1+abc"), Some(Version { major: 1, minor: 37 }));
        assert_eq!(parse("1.20"), Some(Version { major: 1, minor: 20 }));
        assert_eq!(parse("v0.0.0-master+$Format:%H$"), Some(Version { major: 0, minor: 0 }));
        assert_eq!(parse("banana"), None);
    }

    #[test]
    fn the_range_is_k8s_openapis() {
        for (v, ok) in [("v1.20.2", false), ("v1.32.9", false), ("v1.33.0", true), ("v1.34.4", true), ("v1.37.2", true)]
        {
            assert_eq!(supported(parse(v).expect(v)), ok, "{v}");
        }
        assert!(!supported(parse("v1.38.0").expect("parses")));
        assert!(!supported(parse("v2.34.0").expect("parses")));
    }

    /// A client whose API server answers `/version` with `git_version`, in process.
    fn server_of(git_version: &'static str) -> Client {
        use http::{Request, Response};
        use kube::client::Body;
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        tokio::spawn(async move {
            while let Some((req, respond)) = handle.next_request().await {
                assert_eq!(req.uri().path(), "/version");
                let minor = git_version.split('.').nth(1).unwrap_or_default();
                let body = serde_json::json!({
                    "major": "1", "minor": minor, "gitVersion": git_version, "gitCommit": "", "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64"
                });
                respond.send_response(Response::new(Body::from(body.to_string().into_bytes())));
            }
        });
        Client::new(svc, "default")
    }

    #[tokio::test]
    async fn an_old_server_is_warned_about_and_served() {
        let check = Check::default();
        let v = check.run(&server_of("v1.20.2")).await.expect("the check runs");
        assert_eq!(v, Version { major: 1, minor: 20 });
        let warning = check.warning().expect("a warning for 1.20");
        assert!(warning.contains("v1.20.2") && warning.contains("1.33..=1.37"), "{warning}");
    }

    #[tokio::test]
    async fn a_current_server_is_not_warned_about() {
        let check = Check::default();
        check.run(&server_of("v1.34.4")).await.expect("the check runs");
        assert_eq!(check.warning(), None);
    }

    /// The floor is the client's: k8s-openapi's `earliest` feature, which we enable,
    /// selects 1.33. A bump of that feature without this range fails here.
    #[test]
    fn the_floor_is_the_feature_we_build_with() {
        // Exactly one of these expands; with none, `floor` returns () and this fails to compile.
        #[allow(clippy::needless_return)]
        fn floor() -> u32 {
            k8s_openapi::k8s_if_1_33! { return 33; }
            k8s_openapi::k8s_if_1_34! { return 34; }
            k8s_openapi::k8s_if_1_35! { return 35; }
            k8s_openapi::k8s_if_1_36! { return 36; }
            k8s_openapi::k8s_if_1_37! { return 37; }
        }
        let floor = floor();
        assert_eq!(floor, SUPPORTED.0, "k8s-openapi is built for another version than SUPPORTED's floor");
    }
}
