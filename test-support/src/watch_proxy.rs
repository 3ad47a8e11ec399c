//! An HTTP proxy between the operator and the real API server that bends watch streams
//! the way stale caches, lagging API servers and broken middleboxes do: events delayed,
//! duplicated, reordered, malformed, and streams closed early. Everything else passes
//! as it came.
//!
//! It can also lag: [`WatchProxy::lag`] makes it answer the lists an API server may
//! serve from its watch cache (`resourceVersion=0`) with the last such list it
//! forwarded, as an API server whose cache is older than the operator's last write does.
//! A list asking for the most recent state (no `resourceVersion`) is always forwarded.
//!
//! The operator speaks plain HTTP to the proxy on loopback (its kubeconfig names
//! `http://127.0.0.1:PORT`); the proxy forwards over the test's own client (TLS, the
//! test's credentials), keeping the operator's User-Agent so that the audit log still
//! tells its requests apart.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

/// How the proxy bends the watches of one resource.
#[derive(Clone, Copy, Debug)]
pub enum Bend {
    /// Events as the API server sent them.
    None,
    /// Each event arrives this much later than the API server sent it (order kept).
    Delay(Duration),
    /// Each event arrives twice.
    Duplicate,
    /// Each pair of events arrives swapped (a lone event after 300 ms).
    Reorder,
    /// Before every `n`th event, a line that is not a watch event.
    Malformed { every: usize },
    /// The stream ends after this long, as a proxy's idle or request timeout does.
    Close(Duration),
}

pub struct WatchProxy {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    upstream: kube::Client,
    /// The resource path segment whose watches are bent, e.g. `pods`.
    resource: String,
    bend: Bend,
    lagging: AtomicBool,
    /// The last list of `resource` forwarded, by path and query (without its resourceVersion).
    lists: parking_lot::Mutex<HashMap<String, (http::response::Parts, Vec<u8>)>>,
}

impl WatchProxy {
    /// Bends watches of `resource` (the plural in the path, e.g. `pods`) with `bend`.
    pub async fn start(resource: &str, bend: Bend) -> WatchProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("watch proxy listens");
        let addr = listener.local_addr().expect("address");
        let shared = Arc::new(Shared {
            upstream: crate::client().await,
            resource: resource.into(),
            bend,
            lagging: AtomicBool::new(false),
            lists: Default::default(),
        });
        let app = axum::Router::new().fallback(forward).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        WatchProxy { addr, shared, task }
    }

    /// From now on, lists that may come from the API server's cache get the last one
    /// forwarded before.
    pub fn lag(&self) {
        self.shared.lagging.store(true, Ordering::SeqCst);
    }

    /// A kubeconfig at `path` that reaches the API server through this proxy.
    pub fn kubeconfig(&self, path: &std::path::Path) {
        crate::write_kubeconfig(path, &format!("http://{}", self.addr), "unused-the-proxy-authenticates");
    }
}

impl Drop for WatchProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A read of `resource`: a watch (`Some(true)`), a list (`Some(false)`), or neither.
fn read_of(req: &Request, resource: &str) -> Option<bool> {
    let query = req.uri().query().unwrap_or_default();
    let last = req.uri().path().trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    (req.method() == http::Method::GET && last == resource)
        .then(|| query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

/// A list's key: its path and query but the resourceVersion.
fn list_key(uri: &http::Uri) -> (String, bool) {
    let query = uri.query().unwrap_or_default();
    let cached = query.split('&').any(|kv| kv == "resourceVersion=0");
    let rest: Vec<&str> = query.split('&').filter(|kv| !kv.starts_with("resourceVersion=")).collect();
    (format!("{}?{}", uri.path(), rest.join("&")), cached)
}

async fn forward(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let read = read_of(&req, &shared.resource);
    let bent = read == Some(true);
    let list = (read == Some(false)).then(|| list_key(req.uri()));
    if let Some((key, true)) = &list
        && shared.lagging.load(Ordering::SeqCst)
        && let Some((parts, body)) = shared.lists.lock().get(key).cloned()
    {
        return Response::from_parts(parts, Body::from(body));
    }
    let (parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(e) => return failure(format!("reading the request: {e}")),
    };
    let mut upstream = http::Request::builder().method(parts.method).uri(parts.uri);
    for (name, value) in &parts.headers {
        // The upstream client sets its own credentials, host and length.
        if !matches!(name.as_str(), "authorization" | "host" | "content-length") {
            upstream = upstream.header(name, value);
        }
    }
    let Ok(upstream) = upstream.body(kube::client::Body::from(bytes)) else {
        return failure("a request the proxy cannot rebuild".into());
    };
    let response = match shared.upstream.send(upstream).await {
        Ok(r) => r,
        Err(e) => return failure(format!("upstream: {e}")),
    };
    let (mut parts, body) = response.into_parts();
    // How the body is framed is this hop's business: a list re-sent whole with the
    // upstream's `transfer-encoding: chunked` is a response hyper refuses to send.
    for hop in [http::header::TRANSFER_ENCODING, http::header::CONTENT_LENGTH, http::header::CONNECTION] {
        parts.headers.remove(hop);
    }
    if let Some((key, _)) = list
        && parts.status.is_success()
    {
        let bytes = match body.collect().await {
            Ok(b) => b.to_bytes().to_vec(),
            Err(e) => return failure(format!("reading the list: {e}")),
        };
        if !shared.lagging.load(Ordering::SeqCst) {
            shared.lists.lock().insert(key, (parts.clone(), bytes.clone()));
        }
        return Response::from_parts(parts, Body::from(bytes));
    }
    let data = body.into_data_stream().map(|chunk| chunk.map(|b| b.to_vec()));
    let body = if bent && parts.status.is_success() {
        Body::from_stream(bend(lines(data), shared.bend))
    } else {
        Body::from_stream(data.map(|c| c.map(Bytes::from)))
    };
    Response::from_parts(parts, body)
}

fn failure(message: String) -> Response {
    let mut r = Response::new(Body::from(message));
    *r.status_mut() = http::StatusCode::BAD_GATEWAY;
    r
}

type Chunk = Result<Vec<u8>, kube::Error>;

/// The stream's watch events, one per item, each with its newline.
fn lines(data: impl Stream<Item = Chunk> + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(async move {
        let mut data = std::pin::pin!(data);
        let mut pending = Vec::new();
        while let Some(Ok(chunk)) = data.next().await {
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// `events` bent by `bend`, as a response body.
fn bend(events: mpsc::Receiver<Vec<u8>>, bend: Bend) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(1024);
    match bend {
        Bend::Delay(d) => {
            tokio::spawn(delayed(events, d, tx));
        }
        _ => {
            tokio::spawn(rearranged(events, bend, tx));
        }
    }
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(|v| Ok(Bytes::from(v)))
}

/// Each event `d` after it arrived, in order: stamped on arrival by one task, released
/// by another, so that delays do not add up.
async fn delayed(mut events: mpsc::Receiver<Vec<u8>>, d: Duration, tx: mpsc::Sender<Vec<u8>>) {
    let (stamped_tx, mut stamped) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            if stamped_tx.send((tokio::time::Instant::now(), e)).is_err() {
                return;
            }
        }
    });
    while let Some((at, e)) = stamped.recv().await {
        tokio::time::sleep_until(at + d).await;
        if tx.send(e).await.is_err() {
            return;
        }
    }
}

/// Not a watch event: a pod whose name is a number. (A line cut short is no test:
/// kube's decoder skips a line whose JSON ends early, as the tail of a closed stream.)
const MALFORMED: &[u8] = b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":7}}}\n";

async fn rearranged(mut events: mpsc::Receiver<Vec<u8>>, bend: Bend, tx: mpsc::Sender<Vec<u8>>) {
    let started = tokio::time::Instant::now();
    let mut count = 0usize;
    let mut held: Option<Vec<u8>> = None;
    loop {
        let next = match bend {
            Bend::Close(after) => match tokio::time::timeout_at(started + after, events.recv()).await {
                Ok(next) => next,
                Err(_) => return,
            },
            // A held event waits for the next one 300 ms at most, then goes alone.
            Bend::Reorder if held.is_some() => {
                match tokio::time::timeout(Duration::from_millis(300), events.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        if let Some(h) = held.take()
                            && tx.send(h).await.is_err()
                        {
                            return;
                        }
                        continue;
                    }
                }
            }
            _ => events.recv().await,
        };
        let Some(event) = next else { break };
        count += 1;
        let out: Vec<Vec<u8>> = match bend {
            Bend::Duplicate => vec![event.clone(), event],
            Bend::Reorder => match held.take() {
                Some(first) => vec![event, first],
                None => {
                    held = Some(event);
                    Vec::new()
                }
            },
            Bend::Malformed { every } if count.is_multiple_of(every.max(1)) => vec![MALFORMED.to_vec(), event],
            Bend::Malformed { .. } | Bend::Close(_) | Bend::Delay(_) | Bend::None => vec![event],
        };
        for o in out {
            if tx.send(o).await.is_err() {
                return;
            }
        }
    }
    if let Some(h) = held {
        let _ = tx.send(h).await;
    }
}
