//! Registries for the tests: the test cluster's own ([`ClusterRegistry`], TLS from the
//! cluster CA, basic auth), and one a test starts for itself ([`OwnRegistry`]: the
//! same Debian docker-registry, with a self-signed certificate or in plain HTTP, which
//! a test may stop and start). [`TamperProxy`] sits in front of a plain-HTTP one and
//! corrupts what a test tells it to.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cluster::cluster_env;

/// The test cluster's registry, from its env file.
pub struct ClusterRegistry {
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// A Docker config.json with its credentials.
    pub auth: PathBuf,
    /// The cluster CA, which signed its certificate.
    pub ca: PathBuf,
}

pub fn cluster_registry() -> ClusterRegistry {
    let env = |k: &str| {
        cluster_env(k).unwrap_or_else(|| panic!("the cluster's env has no {k}: start it with hack/cluster.sh up"))
    };
    ClusterRegistry { addr: env("REGISTRY"), auth: env("REGISTRY_AUTH").into(), ca: env("CA_CERT").into() }
}

impl ClusterRegistry {
    /// The flags that reach it, for `podset-host run` and `podset-host policy`.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--registry-config".into(),
            self.auth.display().to_string(),
            "--registry-ca".into(),
            self.ca.display().to_string(),
        ]
    }
}

/// `podset-host policy push MODULE REFERENCE FLAGS…`: the pushed reference pinned by
/// digest (`REFERENCE@sha256:…`).
pub fn push(module: &Path, reference: &str, flags: &[String]) -> String {
    let mut args: Vec<std::ffi::OsString> = vec!["push".into(), module.into(), reference.into()];
    args.extend(flags.iter().map(Into::into));
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (ok, out) = crate::policies::policy_cli(&refs);
    assert!(ok, "policy push {} {reference} failed:\n{out}", module.display());
    out.lines()
        .find_map(|l| l.strip_prefix("pushed "))
        .unwrap_or_else(|| panic!("policy push printed no pushed reference:\n{out}"))
        .trim()
        .to_string()
}

/// A registry process of a test's own, on a free loopback port, without auth.
pub struct OwnRegistry {
    pub addr: String,
    /// The CA (made for it) that signed its certificate, when it speaks TLS.
    pub ca: Option<PathBuf>,
    pub log: PathBuf,
    config: PathBuf,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl OwnRegistry {
    /// Starts one with a self-signed certificate (`tls`) or in plain HTTP.
    pub async fn start(tls: bool) -> OwnRegistry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::operator::free_port();
        let addr = format!("127.0.0.1:{port}");
        let d = dir.path();
        // A CA of its own, and a serving certificate it signed: what a private registry has.
        let ca = tls.then(|| {
            let (ca, ca_key) = (d.join("ca.crt"), d.join("ca.key"));
            let (cert, key, csr, ext) =
                (d.join("registry.crt"), d.join("registry.key"), d.join("registry.csr"), d.join("registry.ext"));
            std::fs::write(
                &ext,
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n",
            )
            .expect("ext");
            let openssl = |args: &str| {
                let out = Command::new("openssl").args(args.split(' ')).output().expect("openssl runs");
                assert!(out.status.success(), "openssl {args}: {}", String::from_utf8_lossy(&out.stderr));
            };
            let (ca_s, ca_key_s) = (ca.display(), ca_key.display());
            openssl(&format!(
                "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=own-registry-ca -keyout {ca_key_s} -out {ca_s}"
            ));
            openssl(&format!(
                "req -new -newkey rsa:2048 -nodes -subj /CN=own-registry -keyout {} -out {}",
                key.display(),
                csr.display()
            ));
            openssl(&format!(
                "x509 -req -in {} -CA {ca_s} -CAkey {ca_key_s} -CAcreateserial -days 1 -extfile {} -out {}",
                csr.display(),
                ext.display(),
                cert.display()
            ));
            ca
        });
        let tls_config = match &ca {
            Some(_) => format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("registry.crt").display(),
                d.join("registry.key").display()
            ),
            None => String::new(),
        };
        let config = d.join("config.yml");
        let text = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem: {{ rootdirectory: {} }}\n  delete: {{ enabled: true }}\nhttp:\n  addr: {addr}\n  secret: test\n{tls_config}",
            d.join("data").display()
        );
        std::fs::write(&config, text).expect("registry config");
        let log = d.join("registry.log");
        let mut r = OwnRegistry { addr, ca, log, config, child: None, _dir: dir };
        r.run().await;
        r
    }

    async fn run(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("registry log");
        // distribution reads REGISTRY_* variables as config overrides: none of a shell's may reach it.
        let overrides: Vec<String> = std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("REGISTRY")).collect();
        let mut command = Command::new("docker-registry");
        for k in &overrides {
            command.env_remove(k);
        }
        let child = command
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry runs (apt package docker-registry)");
        self.child = Some(child);
        let addr = self.addr.clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(&addr).await.is_err() {
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || std::time::Instant::now() > deadline {
                panic!("the test's registry did not listen on {addr} ({exited:?}):\n{}", self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops it (SIGKILL: a registry that vanishes).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again, on the same port and storage.
    pub async fn start_again(&mut self) {
        self.stop();
        self.run().await;
    }

    /// Its log (one line per request).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `--insecure-registry ADDR` for plain HTTP, `--registry-ca CA` for TLS.
    pub fn flags(&self) -> Vec<String> {
        match &self.ca {
            Some(ca) => vec!["--registry-ca".into(), ca.display().to_string()],
            None => vec!["--insecure-registry".into(), self.addr.clone()],
        }
    }
}

impl Drop for OwnRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What [`TamperProxy`] corrupts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Tamper {
    #[default]
    Nothing,
    /// One byte of every manifest it passes.
    Manifests,
    /// One byte of the blob with this digest.
    Blob(String),
}

/// A plain-HTTP proxy in front of a plain-HTTP registry that changes one byte of the
/// responses a test chooses, keeping every header (the digest header included): a
/// man in the middle, or a corrupt store.
pub struct TamperProxy {
    pub addr: String,
    tamper: Arc<Mutex<Tamper>>,
    task: tokio::task::JoinHandle<()>,
}

impl TamperProxy {
    pub async fn start(upstream: &str) -> TamperProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("proxy listens");
        let addr = listener.local_addr().expect("address").to_string();
        let tamper = Arc::new(Mutex::new(Tamper::Nothing));
        let state = (tamper.clone(), upstream.to_string(), reqwest::Client::new());
        let app = axum::Router::new().fallback(forward).with_state(Arc::new(state));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TamperProxy { addr, tamper, task }
    }

    pub fn set(&self, t: Tamper) {
        *self.tamper.lock().expect("tamper") = t;
    }
}

impl Drop for TamperProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type ProxyState = Arc<(Arc<Mutex<Tamper>>, String, reqwest::Client)>;

async fn forward(
    axum::extract::State(state): axum::extract::State<ProxyState>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (tamper, upstream, client) = (&state.0, &state.1, &state.2);
    let path = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    let method = request.method().clone();
    let mut outgoing = client.request(method, format!("http://{upstream}{path}"));
    for (name, value) in request.headers() {
        if name != "host" {
            outgoing = outgoing.header(name, value);
        }
    }
    let body = axum::body::to_bytes(request.into_body(), 64 << 20).await.unwrap_or_default();
    let Ok(response) = outgoing.body(body).send().await else {
        return (axum::http::StatusCode::BAD_GATEWAY, "upstream unreachable").into_response();
    };
    let status = response.status();
    let headers = response.headers().clone();
    let mut bytes = response.bytes().await.unwrap_or_default().to_vec();
    let corrupt = match &*tamper.lock().expect("tamper") {
        Tamper::Nothing => false,
        Tamper::Manifests => path.contains("/manifests/"),
        Tamper::Blob(digest) => path.contains(&format!("/blobs/{digest}")),
    };
    if corrupt && status.is_success() && !bytes.is_empty() {
        // Inside the content, not its JSON syntax: a space before the last byte.
        let i = bytes.len().saturating_sub(2);
        bytes[i] ^= 0x01;
    }
    let mut out = axum::response::Response::new(axum::body::Body::from(bytes));
    *out.status_mut() = status;
    for (name, value) in headers.iter() {
        if name != "transfer-encoding" && name != "content-length" {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}
