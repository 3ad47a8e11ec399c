//! Fault injection for the fault suite, built only with the `fault-suite` feature: the
//! process dies right after the k-th write request's response arrived, or the k-th
//! write's response is lost (the server applied it; the operator sees an error). Writes
//! to objects are counted (not the Lease, access reviews or Events), from the start of
//! the process, so a test that knows how many writes a flow makes
//! can crash it after each one in turn. Not a timer: the point is exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::Method;
use tower::BoxError;

use super::request::{Answer, WriteHook, is_bookkeeping, is_write};

/// Where the faults land.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Die (SIGABRT, no unwinding, no cleanup) once the response of this write (1-based) arrived.
    pub crash_after_write: Option<u64>,
    /// Drop the response of this write (1-based) and fail the request instead.
    pub lose_response_of_write: Option<u64>,
}

/// The response of a write was lost on purpose.
#[derive(Debug, thiserror::Error)]
#[error("fault injection: the response of write {0} was lost (the server applied it)")]
pub struct LostResponse(pub u64);

/// The client's hook ([`super::request::OnWrites`]) that counts the writes and lands the faults.
#[derive(Clone)]
pub struct InjectFaults {
    faults: Faults,
    writes: Arc<AtomicU64>,
}

impl InjectFaults {
    pub fn new(faults: Faults) -> Self {
        InjectFaults { faults, writes: Arc::default() }
    }
}

/// Takes the writes to objects: not the Lease, access reviews, or Events (published from
/// a queue, in an order of their own: counting them would move the crash points run to run).
impl WriteHook for InjectFaults {
    fn takes(&self, method: &Method, path: &str) -> bool {
        is_write(method) && !is_bookkeeping(path) && !path.starts_with("/apis/events.k8s.io/")
    }

    fn after<R: Send + 'static>(&self, answer: Answer<R>) -> Answer<R> {
        let (faults, writes) = (self.faults.clone(), self.writes.clone());
        Box::pin(async move {
            let response = answer.await?;
            // Counted as the response arrives: the k-th write is the k-th one the server answered.
            let n = writes.fetch_add(1, Ordering::SeqCst) + 1;
            if faults.crash_after_write == Some(n) {
                eprintln!("fault injection: dying after write {n}");
                std::process::abort();
            }
            if faults.lose_response_of_write == Some(n) {
                return Err(Box::new(LostResponse(n)) as BoxError);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use http::Request;
    use tower::{Layer, Service};

    use super::*;
    use crate::kubernetes::request::{Hooked, OnWrites};

    type Inner = tower::util::ServiceFn<fn(Request<()>) -> std::future::Ready<Result<u16, BoxError>>>;

    async fn send(svc: &mut Hooked<Inner, InjectFaults>, method: Method) -> Result<u16, BoxError> {
        std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
        svc.call(Request::builder().method(method).uri("/api/v1/namespaces/a/pods").body(()).expect("request")).await
    }

    #[tokio::test]
    async fn the_kth_write_loses_its_response_and_reads_are_not_counted() {
        let inner: fn(Request<()>) -> std::future::Ready<Result<u16, BoxError>> = |_| std::future::ready(Ok(201));
        let layer = OnWrites(InjectFaults::new(Faults { crash_after_write: None, lose_response_of_write: Some(2) }));
        let mut svc = layer.layer(tower::service_fn(inner));
        assert_eq!(send(&mut svc, Method::GET).await.expect("a read"), 201);
        assert_eq!(send(&mut svc, Method::POST).await.expect("write 1"), 201);
        assert_eq!(send(&mut svc, Method::GET).await.expect("a read"), 201);
        let lost = send(&mut svc, Method::PATCH).await.expect_err("write 2's response is lost");
        assert!(lost.downcast_ref::<LostResponse>().is_some_and(|l| l.0 == 2), "{lost}");
        assert_eq!(send(&mut svc, Method::DELETE).await.expect("write 3"), 201);
    }
}
