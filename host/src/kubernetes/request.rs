//! What kind of request the client is sending, and the one client layer that checks a
//! write before and after it is sent: the write counter ([`super::client`]), the fence
//! ([`super::fence`]) and the fault injector each are a [`WriteHook`] put on the client
//! by [`OnWrites`], so the tower plumbing is written once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower::{BoxError, Layer, Service};

/// A request that asks the API server to change something (anything but GET, HEAD, OPTIONS).
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A write about the operator's own standing rather than the objects it reconciles: its
/// Lease (renewal, release), and access reviews (POSTed, but they change nothing).
pub fn is_bookkeeping(path: &str) -> bool {
    let lease = path.starts_with("/apis/coordination.k8s.io/") && path.split('/').any(|s| s == "leases");
    lease || path.starts_with("/apis/authorization.k8s.io/")
}

/// The answer to a request, still to come.
pub type Answer<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

/// What a client layer does to the requests it takes. A request it does not take
/// passes untouched.
pub trait WriteHook: Clone {
    /// Whether the hook takes this request: every write, unless it says otherwise.
    fn takes(&self, method: &Method, _path: &str) -> bool {
        is_write(method)
    }

    /// Runs as a taken request is handed on, before it is sent. An error refuses it:
    /// the request is never sent, and the caller gets the error.
    fn before(&self, _method: &Method, _path: &str) -> Result<(), BoxError> {
        Ok(())
    }

    /// What the caller of a taken request waits on instead of its answer: the answer
    /// itself, unless the hook waits on it, stops waiting, or changes what came.
    fn after<R: Send + 'static>(&self, answer: Answer<R>) -> Answer<R> {
        answer
    }
}

/// The client layer that puts a [`WriteHook`] on every request.
#[derive(Clone)]
pub struct OnWrites<H>(pub H);

impl<S, H: Clone> Layer<S> for OnWrites<H> {
    type Service = Hooked<S, H>;
    fn layer(&self, inner: S) -> Self::Service {
        Hooked { inner, hook: self.0.clone() }
    }
}

/// A client service behind [`OnWrites`].
#[derive(Clone)]
pub struct Hooked<S, H> {
    inner: S,
    hook: H,
}

impl<S, H, B> Service<Request<B>> for Hooked<S, H>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
    H: WriteHook,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Answer<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let taken = self.hook.takes(req.method(), req.uri().path());
        if taken && let Err(refused) = self.hook.before(req.method(), req.uri().path()) {
            return Box::pin(std::future::ready(Err(refused)));
        }
        let call = self.inner.call(req);
        let answer: Answer<S::Response> = Box::pin(async move { call.await.map_err(Into::into) });
        if taken { self.hook.after(answer) } else { answer }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;

    /// Takes the writes to pods, refuses those to `/refused`, and notes each answer.
    #[derive(Clone, Default)]
    struct Probe {
        answers: Arc<Mutex<Vec<u16>>>,
    }

    impl WriteHook for Probe {
        fn takes(&self, method: &Method, path: &str) -> bool {
            is_write(method) && path.contains("/pods")
        }

        fn before(&self, _: &Method, path: &str) -> Result<(), BoxError> {
            if path.ends_with("/refused") { Err("refused".into()) } else { Ok(()) }
        }

        fn after<R: Send + 'static>(&self, answer: Answer<R>) -> Answer<R> {
            let answers = self.answers.clone();
            Box::pin(async move {
                let answer = answer.await?;
                // The test's answers are status codes.
                if let Some(code) = (&answer as &dyn std::any::Any).downcast_ref::<u16>() {
                    answers.lock().push(*code);
                }
                Ok(answer)
            })
        }
    }

    #[tokio::test]
    async fn a_refused_write_is_never_sent_and_what_is_not_taken_passes_untouched() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let probe = Probe::default();
        let mut svc = OnWrites(probe.clone()).layer(tower::service_fn({
            let sent = sent.clone();
            move |req: Request<()>| {
                sent.lock().push(format!("{} {}", req.method(), req.uri().path()));
                let code = if req.method() == Method::GET { 200 } else { 201 };
                std::future::ready(Ok::<u16, BoxError>(code))
            }
        }));
        let mut send = async |method: Method, path: &str| {
            std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
            svc.call(Request::builder().method(method).uri(path).body(()).expect("request")).await
        };
        let err = send(Method::POST, "/api/v1/namespaces/a/pods/refused").await.expect_err("refused");
        assert_eq!(err.to_string(), "refused");
        assert_eq!(send(Method::GET, "/api/v1/namespaces/a/pods/web").await.expect("a read"), 200);
        assert_eq!(send(Method::POST, "/api/v1/namespaces/a/configmaps").await.expect("not taken"), 201);
        assert_eq!(send(Method::POST, "/api/v1/namespaces/a/pods").await.expect("taken"), 201);
        assert_eq!(
            *sent.lock(),
            [
                "GET /api/v1/namespaces/a/pods/web",
                "POST /api/v1/namespaces/a/configmaps",
                "POST /api/v1/namespaces/a/pods"
            ]
        );
        assert_eq!(*probe.answers.lock(), [201], "the after-part saw the taken write's answer, and only it");
    }
}
