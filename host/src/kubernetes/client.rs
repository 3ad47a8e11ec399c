//! The Kubernetes client, with a layer that counts every write request. The count is
//! a metric (`podset_api_writes_total`) and what the tests use to prove a converged
//! PodSet costs no writes. Outside it, the write fence ([`super::fence`]).

use std::task::{Context, Poll};

use http::Request;
use kube::client::ClientBuilder;
use kube::{Client, Config};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::{Layer, Service};

use super::request::is_write;
use crate::metrics::WriteLabels;

/// A client whose requests carry `agent` as their User-Agent (audit logs record it),
/// whose writes pass `fence` first and are then counted.
pub async fn client(
    writes: Family<WriteLabels, Counter>,
    agent: &str,
    fence: super::fence::Fence,
    #[cfg(feature = "fault-suite")] faults: super::faults::Faults,
) -> Result<Client, kube::Error> {
    let mut config = Config::infer().await.map_err(kube::Error::InferConfig)?;
    // Invalid header bytes (from a strange pod name) only cost the attribution.
    if let Ok(agent) = http::HeaderValue::from_str(agent) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    // Said once up front: when the server does not answer, the caches' errors follow.
    tracing::info!(server = %config.cluster_url, "Kubernetes API server");
    // The outer layer sees a request first: a fenced write is never counted as sent.
    let builder = ClientBuilder::try_from(config)?;
    // Fault-suite builds: faults next to the wire, so a lost response was still counted as sent.
    #[cfg(feature = "fault-suite")]
    let builder = builder.with_layer(&super::faults::InjectFaults::new(faults));
    Ok(builder.with_layer(&CountWrites(writes)).with_layer(&super::fence::FenceWrites(fence)).build())
}

#[derive(Clone)]
pub struct CountWrites(Family<WriteLabels, Counter>);

impl<S> Layer<S> for CountWrites {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Counted { inner, writes: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    writes: Family<WriteLabels, Counter>,
}

impl<S, B> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if is_write(req.method()) {
            let labels = WriteLabels { verb: req.method().to_string(), resource: resource_of(req.uri().path()) };
            self.writes.get_or_create(&labels).inc();
        }
        self.inner.call(req)
    }
}

/// `/api/v1/namespaces/ns/pods/x` → `pods`; `/apis/g/v/namespaces/ns/podsets/x/status`
/// → `podsets/status`. Bounded by the resources this operator writes.
fn resource_of(path: &str) -> String {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.iter().position(|s| *s == "namespaces") {
        Some(i) if segs.len() > i + 2 => &segs[i + 2..],
        _ => {
            let skip = if segs.first() == Some(&"api") { 2 } else { 3 };
            segs.get(skip..).unwrap_or(&[])
        }
    };
    match rest {
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
        [resource, ..] => (*resource).to_string(),
        [] => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_map_to_resources() {
        assert_eq!(super::resource_of("/api/v1/namespaces/a/pods"), "pods");
        assert_eq!(super::resource_of("/api/v1/namespaces/a/pods/web-x"), "pods");
        assert_eq!(
            super::resource_of("/apis/app.example.com/v1alpha1/namespaces/a/podsets/web/status"),
            "podsets/status"
        );
        assert_eq!(super::resource_of("/apis/events.k8s.io/v1/namespaces/a/events"), "events");
        assert_eq!(super::resource_of("/api/v1/nodes"), "nodes");
    }
}
