//! A TCP proxy a test can cut and restore (a network partition between the operator
//! and the API server, on loopback), or hold: it stops forwarding, keeps what it
//! received, and delivers it when released, as a congested or paused path does.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    held: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy listens");
        let addr = listener.local_addr().expect("proxy address");
        let (tx, _) = watch::channel(false);
        let cut = Arc::new(tx);
        let state = cut.clone();
        let held = Arc::new(watch::channel(false).0);
        let holding = held.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // Refused while cut: the connection is dropped at once.
                if *state.borrow() {
                    continue;
                }
                let mut cut = state.subscribe();
                let up = (holding.subscribe(), state.subscribe());
                let down = (holding.subscribe(), state.subscribe());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let (client_r, client_w) = client.into_split();
                    let (server_r, server_w) = server.into_split();
                    tokio::select! {
                        _ = async { tokio::join!(pump(client_r, server_w, up), pump(server_r, client_w, down)) } => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Proxy { addr, cut, held, task }
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }

    /// Stops forwarding: what arrives waits in the proxy (and, past its buffer, in the
    /// senders' sockets) until [`Proxy::release`]. Holding outlives [`Proxy::cut`] and
    /// [`Proxy::restore`]: a path is whole again only once released and restored.
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

/// Copies `from` to `to`, waiting while held before each write; ends at EOF or an error
/// (closing `to`'s write side, as the sender closed). What it holds is dropped if the
/// proxy is cut meanwhile, even when released at once after: a cut path delivers nothing.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    (mut held, cut): (watch::Receiver<bool>, watch::Receiver<bool>),
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if held.wait_for(|h| !*h).await.is_err() || *cut.borrow() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    if held.wait_for(|h| !*h).await.is_ok() && !*cut.borrow() {
        let _ = to.shutdown().await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
