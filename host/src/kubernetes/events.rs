//! Kubernetes Events on parents, from the host and from policies. A policy's Events
//! are rate-limited per parent (a token bucket, like client-go's spam filter): a
//! policy that emits an Event at every reconcile cannot flood the API server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use parking_lot::Mutex;
use tracing::warn;

/// Events a policy may emit on one parent in a burst, and how fast the allowance refills.
const BURST: f64 = 10.0;
const REFILL_EVERY: Duration = Duration::from_secs(6);

pub struct Events {
    recorder: Recorder,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Whether an Event comes from the host (always published) or a policy (rate-limited).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Host,
    Policy,
}

impl Events {
    pub fn new(recorder: Recorder) -> Self {
        Events { recorder, buckets: Mutex::default() }
    }

    /// Publishes `event` on `parent`. Returns `false` when a policy's Event was dropped
    /// by the rate limit. A failure to publish is logged, never fatal.
    pub async fn publish(&self, parent: &ObjectReference, event: Event, origin: Origin) -> bool {
        if origin == Origin::Policy && !self.take(parent.uid.as_deref().unwrap_or_default()) {
            return false;
        }
        let reason = event.reason.clone();
        if let Err(e) = self.recorder.publish(&event, parent).await {
            warn!(parent = parent.name.as_deref().unwrap_or_default(), "cannot publish event {reason}: {e}");
        }
        true
    }

    fn take(&self, parent_uid: &str) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        // Parents come and go; full buckets carry no information, so drop them.
        if buckets.len() > 10_000 {
            buckets.retain(|_, b| b.tokens < BURST);
        }
        let b = buckets.entry(parent_uid.to_string()).or_insert(Bucket { tokens: BURST, at: now });
        let refill = now.duration_since(b.at).as_secs_f64() / REFILL_EVERY.as_secs_f64();
        b.tokens = (b.tokens + refill).min(BURST);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// An Event, with the child it is about (if any).
pub fn event(type_: EventType, reason: &str, action: &str, note: String, about: Option<ObjectReference>) -> Event {
    Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: about }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_policy_gets_a_burst_then_a_trickle() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("url"))).expect("client");
        let events = Events::new(Recorder::new(client, "test".into()));
        let allowed = (0..25).filter(|_| events.take("uid-a")).count();
        assert_eq!(allowed, BURST as usize);
        assert!(events.take("uid-b"), "parents are limited separately");
    }
}
