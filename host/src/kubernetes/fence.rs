//! Write fencing: a replica sends a write only while it holds the Lease, checked at
//! the moment each request goes out, not when the reconcile that makes it started.
//!
//! The leader ([`super::leader`]) keeps the fence's deadline at
//! `renewTime + duration − margin` of the Lease as last seen naming it; a standby's
//! fence is shut. A write request (any method but GET, HEAD, OPTIONS) after the
//! deadline fails at once with [`Fenced`], before it reaches the connection: a leader
//! paused (SIGSTOP, a GC pause, a frozen VM) past its lease wakes up to writes that fail,
//! whatever its tasks had in flight. Writes to Leases pass (they are how a leader renews
//! or gives its Lease up), and so do access reviews (POSTed, but they change nothing).
//!
//! A write still unanswered when the deadline passes is abandoned then: the reconcile
//! fails with [`Abandoned`] instead of waiting on a path that may never answer, and
//! goes no further. Its request may still be applied: it left before the deadline.
//!
//! The bound: a write can reach the API server after the deadline only if it was
//! handed to the connection before it, so its lateness is what the network adds to a
//! request already sent. The margin (half the lease's grace, 2.5 s by default) is kept
//! between the deadline and the earliest moment a standby may take over. A path that
//! holds what it was given (a buffering middlebox, TCP retransmitting after a
//! partition heals) can exceed the margin; no client-side check can stop that, only
//! the API server's preconditions (`resourceVersion` on the parent's writes, the UID
//! on deletes). Creates carry none: that is the one write such a path can duplicate.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use http::Method;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tower::BoxError;

use super::request::{Answer, WriteHook, is_bookkeeping, is_write};

/// Until when this replica may write: always (no election), never (a standby), or
/// until a deadline (the leader).
#[derive(Clone)]
pub struct Fence {
    state: Arc<Mutex<State>>,
    refused: Counter,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Until(SystemTime),
    Shut,
}

/// A write refused by the fence.
#[derive(Debug, thiserror::Error)]
#[error("write fenced: this replica's lease deadline has passed (or it does not lead); the request was not sent")]
pub struct Fenced;

/// A write sent before the deadline and still unanswered at it.
#[derive(Debug, thiserror::Error)]
#[error("write abandoned at this replica's lease deadline: sent before it, unanswered at it; it may have been applied")]
pub struct Abandoned;

impl Fence {
    /// A fence that never refuses: a single replica without election.
    pub fn open(refused: Counter) -> Self {
        Fence { state: Arc::new(Mutex::new(State::Open)), refused }
    }

    /// A fence that refuses every write until [`Fence::until`] opens it.
    pub fn shut(refused: Counter) -> Self {
        Fence { state: Arc::new(Mutex::new(State::Shut)), refused }
    }

    /// Writes pass until `deadline` (on this replica's clock); `None` shuts it.
    pub fn until(&self, deadline: Option<SystemTime>) {
        let mut s = self.state.lock();
        if *s != State::Open {
            *s = deadline.map_or(State::Shut, State::Until);
        }
    }

    /// Whether a write may go out at `now`.
    pub fn allows(&self, now: SystemTime) -> bool {
        self.left(now).is_none_or(|left| !left.is_zero())
    }

    /// How long a write in flight may still wait at `now`: `None` without a deadline.
    fn left(&self, now: SystemTime) -> Option<Duration> {
        match *self.state.lock() {
            State::Open => None,
            State::Until(deadline) => Some(deadline.duration_since(now).unwrap_or(Duration::ZERO)),
            State::Shut => Some(Duration::ZERO),
        }
    }
}

/// Takes the writes to objects (not Leases or access reviews): refused once the
/// deadline passed, abandoned if it passes before their answer comes.
impl WriteHook for Fence {
    fn takes(&self, method: &Method, path: &str) -> bool {
        is_write(method) && !is_bookkeeping(path)
    }

    fn before(&self, _: &Method, _: &str) -> Result<(), BoxError> {
        if self.allows(SystemTime::now()) {
            return Ok(());
        }
        self.refused.inc();
        Err(Box::new(Fenced))
    }

    fn after<R: Send + 'static>(&self, mut answer: Answer<R>) -> Answer<R> {
        let fence = self.clone();
        let mut wake = Box::pin(tokio::time::sleep(Duration::ZERO));
        Box::pin(std::future::poll_fn(move |cx| {
            // The deadline is read on the wall clock at every wake, before the request is
            // polled: a replica resumed past it (SIGSTOP) drops a request its connection has
            // not taken yet instead of sending it then. Polled first, as a biased
            // `select!` did, the request went on at the first wake after the pause: in one
            // `make test` run a create let through before a SIGSTOP reached the API server
            // after the deadline. It moves with each renewal, so it is read each time.
            while let Some(left) = fence.left(SystemTime::now()) {
                if left.is_zero() {
                    fence.refused.inc();
                    return Poll::Ready(Err(Box::new(Abandoned) as BoxError));
                }
                // Wakes this future at the deadline; if that is already due, read it again.
                wake.as_mut().reset(tokio::time::Instant::now() + left);
                if wake.as_mut().poll(cx).is_pending() {
                    break;
                }
            }
            answer.as_mut().poll(cx)
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::Request;
    use tower::{Layer, Service};

    use super::*;
    use crate::kubernetes::request::{Hooked, OnWrites};

    type Inner = tower::util::ServiceFn<fn(Request<()>) -> std::future::Ready<Result<u16, BoxError>>>;

    fn request(method: Method, path: &str) -> Request<()> {
        Request::builder().method(method).uri(path).body(()).expect("request")
    }

    async fn send(svc: &mut Hooked<Inner, Fence>, method: Method, path: &str) -> Result<u16, BoxError> {
        std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
        svc.call(request(method, path)).await
    }

    fn fenced(fence: &Fence) -> Hooked<Inner, Fence> {
        let inner: fn(Request<()>) -> std::future::Ready<Result<u16, BoxError>> = |_| std::future::ready(Ok(200));
        OnWrites(fence.clone()).layer(tower::service_fn(inner))
    }

    #[tokio::test]
    async fn writes_pass_until_the_deadline_reads_and_lease_writes_always() {
        let refused = Counter::default();
        let fence = Fence::shut(refused.clone());
        let mut svc = fenced(&fence);
        let pods = "/api/v1/namespaces/a/pods";
        assert_eq!(send(&mut svc, Method::GET, pods).await.expect("a read passes a shut fence"), 200);
        let err = send(&mut svc, Method::POST, pods).await.expect_err("a standby's write is refused");
        assert!(err.downcast_ref::<Fenced>().is_some(), "{err}");
        let lease = "/apis/coordination.k8s.io/v1/namespaces/a/leases/podset-host";
        assert_eq!(send(&mut svc, Method::PUT, lease).await.expect("a Lease write passes"), 200);
        let review = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        assert_eq!(send(&mut svc, Method::POST, review).await.expect("an access review passes"), 200);

        fence.until(Some(SystemTime::now() + Duration::from_secs(60)));
        assert_eq!(send(&mut svc, Method::PATCH, pods).await.expect("the leader writes"), 200);
        // The deadline passed while nothing ran (a SIGSTOP): the next write is refused at once.
        fence.until(Some(SystemTime::now() - Duration::from_millis(1)));
        assert!(send(&mut svc, Method::DELETE, pods).await.is_err());
        fence.until(None);
        assert!(send(&mut svc, Method::POST, pods).await.is_err());
        assert_eq!(refused.get(), 3);
    }

    /// A write answered after `delay`.
    fn slow(fence: &Fence, delay: Duration) -> impl Service<Request<()>, Response = u16, Error = BoxError> {
        OnWrites(fence.clone()).layer(tower::service_fn(move |_: Request<()>| async move {
            tokio::time::sleep(delay).await;
            Ok::<u16, BoxError>(200)
        }))
    }

    // Real time, not tokio's paused clock: the deadline is on the wall clock.
    #[tokio::test]
    async fn a_write_unanswered_at_the_deadline_is_abandoned_unless_the_lease_was_renewed() {
        let ms = Duration::from_millis;
        let refused = Counter::default();
        let fence = Fence::shut(refused.clone());
        let pods = "/api/v1/namespaces/a/pods";
        fence.until(Some(SystemTime::now() + ms(200)));
        let err = slow(&fence, ms(60_000)).call(request(Method::POST, pods)).await.expect_err("abandoned");
        assert!(err.downcast_ref::<Abandoned>().is_some(), "{err}");
        assert_eq!(refused.get(), 1);

        // Renewed while the write waits: it is answered.
        fence.until(Some(SystemTime::now() + ms(200)));
        let renew = async {
            tokio::time::sleep(ms(100)).await;
            fence.until(Some(SystemTime::now() + ms(60_000)));
        };
        let (answer, ()) = tokio::join!(slow(&fence, ms(400)).call(request(Method::PATCH, pods)), renew);
        assert_eq!(answer.expect("answered within the renewed deadline"), 200);
        // Reads wait as long as they take, even on a shut fence.
        fence.until(None);
        assert_eq!(slow(&fence, ms(400)).call(request(Method::GET, pods)).await.expect("a read"), 200);
        assert_eq!(refused.get(), 1);
    }

    /// The window a SIGSTOP finds: the write was let through and is waiting for a
    /// connection when the process stops; it resumes past the deadline with the
    /// connection ready. The request must be dropped unsent, not sent late.
    #[tokio::test]
    async fn a_write_still_waiting_to_be_sent_at_the_deadline_is_never_sent() {
        let sent = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let connected = Arc::new(tokio::sync::Notify::new());
        let fence = Fence::shut(Counter::default());
        let mut svc = OnWrites(fence.clone()).layer(tower::service_fn({
            let (sent, connected) = (sent.clone(), connected.clone());
            move |_: Request<()>| {
                let (sent, connected) = (sent.clone(), connected.clone());
                async move {
                    connected.notified().await;
                    sent.store(true, std::sync::atomic::Ordering::SeqCst);
                    Ok::<u16, BoxError>(200)
                }
            }
        }));
        fence.until(Some(SystemTime::now() + Duration::from_millis(50)));
        let mut write = svc.call(request(Method::POST, "/api/v1/namespaces/a/pods"));
        std::future::poll_fn(|cx| {
            assert!(write.as_mut().poll(cx).is_pending(), "waiting for its connection");
            Poll::Ready(())
        })
        .await;
        // Stopped: nothing of this process runs, the clock goes on. Then the connection is ready.
        std::thread::sleep(Duration::from_millis(100));
        connected.notify_one();
        let err = write.await.expect_err("resumed past the deadline");
        assert!(err.downcast_ref::<Abandoned>().is_some(), "{err}");
        assert!(!sent.load(std::sync::atomic::Ordering::SeqCst), "the request was never handed on");
        assert_eq!(fence.refused.get(), 1);
    }

    #[test]
    fn an_open_fence_stays_open() {
        let fence = Fence::open(Counter::default());
        fence.until(None);
        assert!(fence.allows(SystemTime::now()));
    }
}
