//! Bounded polling: tests wait for the cluster to reach a state, never for a fixed time.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match within(timeout, check).await {
        Some(v) => v,
        None => panic!("timed out after {timeout:?} waiting for: {what}"),
    }
}

/// As [`eventually`], without the panic: `None` once `timeout` passed, for a test that
/// counts what did not happen (a fault point a run did not reach) instead of failing.
pub async fn within<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if started.elapsed() >= timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// As [`eventually`], for probes that say why they are not done yet: the panic after
/// `timeout` carries the last observation, so a failure says what the cluster looked like.
pub async fn eventually_ok<T, E, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    E: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last observation: {last:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
