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
//!
//! A repeat of an Event (same type, reason, action, note, object and child) within
//! `SERIES_TTL` patches the first one's series count instead of creating another,
//! as client-go's events library does. Only what a repeat needs is remembered (a
//! hash, the Event's name and its count), for at most `MAX_SERIES` Events:
//! kube-runtime's `Recorder`, used before, kept a whole copy of every Event it
//! published for six minutes (12 MB of a 51 MB heap at 1 000 parents) and scanned
//! them all at every publish.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;
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

/// How long after its last repeat an Event can still be repeated (client-go's and
/// kube-runtime's six minutes).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// Events remembered for their repeats; the least recently repeated are forgotten
/// first (a repeat after that is a new Event, which loses nothing but a count).
const MAX_SERIES: usize = 4096;

/// The longest note the API server accepts (events.k8s.io/v1 validation).
const MAX_NOTE: usize = 1024;

/// The reporting controller named in every Event.
const CONTROLLER: &str = "podset-host";

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
    /// Starts the task that publishes with `client`, on the current runtime. It ends
    /// when these `Events` are dropped and what was queued is published.
    pub fn start(client: Client, metrics: Arc<Metrics>) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let publisher = Publisher { client, series: Mutex::default() };
        tokio::spawn(publish_queued(publisher, rx));
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

async fn publish_queued(publisher: Publisher, rx: mpsc::Receiver<(ObjectReference, Event)>) {
    let queued = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    queued
        .for_each_concurrent(PUBLISHING, |(parent, event)| {
            let publisher = &publisher;
            async move {
                if let Err(e) = publisher.publish(&event, &parent).await {
                    let name = parent.name.as_deref().unwrap_or_default();
                    warn!(parent = name, "cannot publish event {}: {e}", event.reason);
                }
            }
        })
        .await;
}

/// Writes Events (`events.k8s.io/v1`), a repeat as its first Event's series.
struct Publisher {
    client: Client,
    series: Mutex<Series>,
}

impl Publisher {
    async fn publish(&self, ev: &Event, regarding: &ObjectReference) -> kube::Result<()> {
        let key = key(ev, regarding);
        let ns = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), ns);
        let now = Timestamp::now();
        let repeat = self.series.lock().repeat(key, Instant::now());
        if let Some(Repeat { name, count }) = repeat {
            let series = EventSeries { count, last_observed_time: MicroTime(now) };
            let patch = json!({ "series": series });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    self.series.lock().remember(key, name, count, Instant::now());
                    return Ok(());
                }
                // The API server's own TTL removed it: start a new one.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let created = api.create(&PostParams::default(), &new_event(ev, regarding, now)).await?;
        self.series.lock().remember(key, created.name_any(), 1, Instant::now());
        Ok(())
    }
}

fn new_event(ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
    let name = regarding.name.as_deref().unwrap_or(CONTROLLER);
    K8sEvent {
        metadata: ObjectMeta {
            // client-go's naming: the object's name and the time in nanoseconds.
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some(match ev.type_ {
            EventType::Normal => "Normal".into(),
            EventType::Warning => "Warning".into(),
        }),
        reason: Some(ev.reason.clone()),
        action: Some(ev.action.clone()),
        note: ev.note.as_deref().map(truncated),
        regarding: Some(regarding.clone()),
        related: ev.secondary.clone(),
        reporting_controller: Some(CONTROLLER.into()),
        reporting_instance: Some(CONTROLLER.into()),
        ..K8sEvent::default()
    }
}

/// `note` cut to what the API server accepts, at a character boundary and marked as
/// cut: an Event refused for its length would say nothing at all.
fn truncated(note: &str) -> String {
    if note.len() <= MAX_NOTE {
        return note.to_string();
    }
    const MORE: &str = "…";
    let mut end = MAX_NOTE - MORE.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &note[..end])
}

/// What makes two Events one series. The note is part of it, as in client-go's
/// core/v1 aggregation: "scaled to 3" repeated as "scaled to 5" would show the old
/// note with a count of two. A 64-bit hash stands for the fields: a collision among a
/// few thousand Events is as likely as a disk's bit error, and would cost a count.
fn key(ev: &Event, regarding: &ObjectReference) -> u64 {
    let mut h = DefaultHasher::new();
    (ev.type_, &ev.reason, &ev.action, &ev.note).hash(&mut h);
    for r in std::iter::once(regarding).chain(ev.secondary.as_ref()) {
        (&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid).hash(&mut h);
    }
    h.finish()
}

/// The Events published lately, by [`key`].
#[derive(Default)]
struct Series(HashMap<u64, Published>);

struct Published {
    name: String,
    count: i32,
    last: Instant,
}

/// A repeat: the Event to patch and its count with this one.
#[derive(Debug, PartialEq)]
struct Repeat {
    name: String,
    count: i32,
}

impl Series {
    /// The repeat that publishing the Event of `key` at `now` is, if it is one.
    fn repeat(&self, key: u64, now: Instant) -> Option<Repeat> {
        let p = self.0.get(&key).filter(|p| now.duration_since(p.last) < SERIES_TTL)?;
        Some(Repeat { name: p.name.clone(), count: p.count + 1 })
    }

    fn remember(&mut self, key: u64, name: String, count: i32, now: Instant) {
        if self.0.len() >= MAX_SERIES && !self.0.contains_key(&key) {
            self.forget_oldest(now);
        }
        self.0.insert(key, Published { name, count, last: now });
    }

    /// Forgets the expired, and if that is not enough the older half: a burst then
    /// costs one sort per `MAX_SERIES / 2` Events, not a scan per Event.
    fn forget_oldest(&mut self, now: Instant) {
        self.0.retain(|_, p| now.duration_since(p.last) < SERIES_TTL);
        if self.0.len() >= MAX_SERIES {
            let mut lasts: Vec<Instant> = self.0.values().map(|p| p.last).collect();
            let middle = lasts.len() / 2;
            let cut = *lasts.select_nth_unstable(middle).1;
            self.0.retain(|_, p| p.last > cut);
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
        let events = Events::start(client, Arc::new(Metrics::default()));
        let allowed = (0..25).filter(|_| events.take("uid-a")).count();
        assert_eq!(allowed, BURST as usize);
        assert!(events.take("uid-b"), "parents are limited separately");
    }

    fn pod_event(note: &str, pod: &str) -> (Event, ObjectReference) {
        let parent = ObjectReference { name: Some("web".into()), namespace: Some("ns".into()), ..Default::default() };
        let about = ObjectReference { kind: Some("Pod".into()), name: Some(pod.into()), ..Default::default() };
        (event(EventType::Normal, "SuccessfulCreate", "Create", note.into(), Some(about)), parent)
    }

    #[test]
    fn a_repeat_counts_on_the_first_event_and_a_different_note_or_child_is_a_new_one() {
        let (ev, parent) = pod_event("Created pod: web-a", "web-a");
        let mut series = Series::default();
        let t0 = Instant::now();
        assert_eq!(series.repeat(key(&ev, &parent), t0), None, "nothing published yet");
        series.remember(key(&ev, &parent), "web.1".into(), 1, t0);
        assert_eq!(series.repeat(key(&ev, &parent), t0), Some(Repeat { name: "web.1".into(), count: 2 }));
        series.remember(key(&ev, &parent), "web.1".into(), 2, t0);
        let later = t0 + SERIES_TTL - Duration::from_secs(1);
        assert_eq!(series.repeat(key(&ev, &parent), later), Some(Repeat { name: "web.1".into(), count: 3 }));
        assert_eq!(series.repeat(key(&ev, &parent), t0 + SERIES_TTL), None, "expired");

        let (other_note, _) = pod_event("Created pod: web-a again", "web-a");
        let (other_child, _) = pod_event("Created pod: web-a", "web-b");
        assert_eq!(series.repeat(key(&other_note, &parent), t0), None);
        assert_eq!(series.repeat(key(&other_child, &parent), t0), None);
    }

    #[test]
    fn a_long_note_is_cut_to_what_the_api_server_accepts() {
        assert_eq!(truncated("short"), "short");
        let long = "é".repeat(MAX_NOTE);
        let cut = truncated(&long);
        assert!(cut.len() <= MAX_NOTE && cut.ends_with('…'), "{} bytes", cut.len());
        assert!(long.starts_with(cut.trim_end_matches('…')));
    }

    #[test]
    fn the_memory_of_events_is_bounded_and_keeps_the_latest() {
        let mut series = Series::default();
        let t0 = Instant::now();
        for i in 0..(MAX_SERIES as u64 * 3) {
            series.remember(i, format!("e.{i}"), 1, t0 + Duration::from_millis(i));
            assert!(series.0.len() <= MAX_SERIES);
        }
        let last = MAX_SERIES as u64 * 3 - 1;
        let at = t0 + Duration::from_millis(last);
        assert_eq!(series.repeat(last, at).map(|r| r.name), Some(format!("e.{last}")));
        assert_eq!(series.repeat(0, at), None, "the oldest forgotten");
    }
}
