//! Kubernetes Events on parents, from the host and from policies.
//!
//! Publishing is off the reconcile path, as client-go's broadcaster does it: a
//! reconcile queues its Events and goes on, and one task publishes them. Awaiting
//! each Event made every pod creation cost two round trips in a row, and a first
//! reconcile of five pods eight; an Event is a record for people, not a step the
//! next write depends on. The queue is bounded; when it is full, Events are dropped
//! and counted rather than slowing reconciles down.
//!
//! A policy's Events are also rate-limited per parent (a token bucket, like
//! client-go's spam filter): a policy that emits an Event at every reconcile cannot
//! flood the API server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tracing::warn;

use crate::metrics::Metrics;

/// Events a policy may emit on one parent in a burst, and how fast the allowance refills.
const BURST: f64 = 10.0;
const REFILL_EVERY: Duration = Duration::from_secs(6);

/// Events waiting to be published (client-go's broadcaster queues 1000 too).
const QUEUE: usize = 1000;
/// Events published at once: enough to keep up with reconciles that create in
/// parallel, few enough not to crowd the writes that matter.
const PUBLISHING: usize = 8;

pub struct Events {
    queue: mpsc::Sender<(ObjectReference, Event)>,
    buckets: Mutex<HashMap<String, Bucket>>,
    metrics: Arc<Metrics>,
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
    /// Starts the task that publishes with `recorder`, on the current runtime. It ends
    /// when these `Events` are dropped and what was queued is published.
    pub fn start(recorder: Recorder, metrics: Arc<Metrics>) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(publish_queued(recorder, rx));
        Events { queue, buckets: Mutex::default(), metrics }
    }

    /// Queues `event` on `parent` for publishing. A policy's Event over its rate limit,
    /// or any Event when the queue is full, is dropped and counted. A failure to
    /// publish is logged, never fatal.
    pub fn publish(&self, parent: &ObjectReference, event: Event, origin: Origin) {
        if origin == Origin::Policy && !self.take(parent.uid.as_deref().unwrap_or_default()) {
            self.metrics.event_dropped("rate-limited");
            return;
        }
        if let Err(e) = self.queue.try_send((parent.clone(), event)) {
            let (parent, event) = match e {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            };
            warn!(
                parent = parent.name.as_deref().unwrap_or_default(),
                "event queue full; dropping event {}", event.reason
            );
            self.metrics.event_dropped("queue-full");
        }
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

async fn publish_queued(recorder: Recorder, rx: mpsc::Receiver<(ObjectReference, Event)>) {
    let queued = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    queued
        .for_each_concurrent(PUBLISHING, |(parent, event)| {
            let recorder = &recorder;
            async move {
                if let Err(e) = recorder.publish(&event, &parent).await {
                    let name = parent.name.as_deref().unwrap_or_default();
                    warn!(parent = name, "cannot publish event {}: {e}", event.reason);
                }
            }
        })
        .await;
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
        let events = Events::start(Recorder::new(client, "test".into()), Arc::new(Metrics::default()));
        let allowed = (0..25).filter(|_| events.take("uid-a")).count();
        assert_eq!(allowed, BURST as usize);
        assert!(events.take("uid-b"), "parents are limited separately");
    }
}
