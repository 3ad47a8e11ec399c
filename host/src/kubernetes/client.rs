//! The Kubernetes clients, with a layer that counts every write request. The count is
//! a metric (`podset_api_writes_total`) and what the tests use to prove a converged
//! PodSet costs no writes. Outside it, the write fence ([`super::fence`]).

use http::Method;
use kube::client::ClientBuilder;
use kube::{Client, Config};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::BoxError;

use super::request::{OnWrites, WriteHook};
use crate::metrics::WriteLabels;

/// Makes the operator's clients: its own, and one acting as each service account a
/// policy acts as ([`super::identity`]). Each request carries `agent` as its User-Agent
/// (audit logs record it); writes pass the fence first and are then counted, whoever
/// they act as.
#[derive(Clone)]
pub struct Maker {
    config: Config,
    writes: Family<WriteLabels, Counter>,
    fence: super::fence::Fence,
    /// One for every client: the writes it counts are the operator's, whoever they act as.
    #[cfg(feature = "fault-suite")]
    faults: super::faults::InjectFaults,
}

impl Maker {
    /// From the kubeconfig or the pod's service account, as `kubectl` finds them.
    pub async fn infer(
        writes: Family<WriteLabels, Counter>,
        agent: &str,
        fence: super::fence::Fence,
        #[cfg(feature = "fault-suite")] faults: super::faults::Faults,
    ) -> Result<Maker, kube::Error> {
        let mut config = Config::infer().await.map_err(kube::Error::InferConfig)?;
        // Invalid header bytes (from a strange pod name) only cost the attribution.
        if let Ok(agent) = http::HeaderValue::from_str(agent) {
            config.headers.push((http::header::USER_AGENT, agent));
        }
        // Said once up front: when the server does not answer, the caches' errors follow.
        tracing::info!(server = %config.cluster_url, "Kubernetes API server");
        Ok(Maker {
            config,
            writes,
            fence,
            #[cfg(feature = "fault-suite")]
            faults: super::faults::InjectFaults::new(faults),
        })
    }

    /// A client with the operator's identity, or impersonating `acting_as` (a user name
    /// such as `system:serviceaccount:NS:NAME`; the API server adds its groups). Its
    /// own connections: a client per identity.
    pub fn client(&self, acting_as: Option<&str>) -> Result<Client, kube::Error> {
        let mut config = self.config.clone();
        config.auth_info.impersonate = acting_as.map(String::from);
        // The outer layer sees a request first: a fenced write is never counted as sent.
        let builder = ClientBuilder::try_from(config)?;
        // Fault-suite builds: faults next to the wire, so a lost response was still counted as sent.
        #[cfg(feature = "fault-suite")]
        let builder = builder.with_layer(&OnWrites(self.faults.clone()));
        Ok(builder
            .with_layer(&OnWrites(CountWrites(self.writes.clone())))
            .with_layer(&OnWrites(self.fence.clone()))
            .build())
    }
}

/// The hook that counts every write as it is sent, by verb and resource.
#[derive(Clone)]
pub struct CountWrites(Family<WriteLabels, Counter>);

impl WriteHook for CountWrites {
    fn before(&self, method: &Method, path: &str) -> Result<(), BoxError> {
        let labels = WriteLabels { verb: method.to_string(), resource: resource_of(path) };
        self.0.get_or_create(&labels).inc();
        Ok(())
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

/// Whether a write that failed with `e` may have been applied though its answer never
/// came: the request went out and no answer, or a timeout (504), came back. A refused
/// connection sent nothing. (The ReplicaSet controller likewise takes a timed-out create
/// as made.)
pub fn answer_lost(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.reason == "Timeout",
        kube::Error::Service(source) => !never_sent(source.as_ref()),
        kube::Error::HyperError(_) | kube::Error::ReadEvents(_) | kube::Error::SerdeError(_) => true,
        _ => false,
    }
}

/// Whether the API server refused a create because the namespace it was for is being
/// deleted (the `NamespaceTerminating` cause, which the ReplicaSet controller tests too).
pub fn namespace_terminating(e: &kube::Error) -> bool {
    let kube::Error::Api(status) = e else {
        return false;
    };
    status.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

/// Whether `e`, or an error under it, is the HTTP client failing to connect.
fn never_sent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(client) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
            return client.is_connect();
        }
        next = err.source();
    }
    false
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

    /// A write to `addr` through a kube client, as the host sends one.
    async fn create_at(addr: std::net::SocketAddr) -> kube::Error {
        use k8s_openapi::api::core::v1::ConfigMap;
        let config = kube::Config::new(format!("http://{addr}").parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "ns");
        api.create(&Default::default(), &ConfigMap::default()).await.expect_err("nothing answers")
    }

    #[tokio::test]
    async fn a_refused_connection_sent_nothing() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
        let e = create_at(addr).await;
        assert!(!super::answer_lost(&e), "{e}: never sent, so never applied");
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_request_may_have_applied_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a listener");
        let addr = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let (mut conn, _) = listener.accept().await.expect("the client connects");
            // Read the request, then hang up without an answer.
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
        });
        let e = create_at(addr).await;
        server.await.expect("the server task");
        assert!(super::answer_lost(&e), "{e}: sent, and no answer came");
    }
}
