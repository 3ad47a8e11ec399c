//! A TCP proxy a test can cut and restore: a network partition between the operator
//! and the API server, on loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
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
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // Refused while cut: the connection is dropped at once.
                if *state.borrow() {
                    continue;
                }
                let mut cut = state.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
                    let mut client = client;
                    tokio::select! {
                        _ = copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Proxy { addr, cut, task }
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
