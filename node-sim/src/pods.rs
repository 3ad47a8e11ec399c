//! The pod lifecycle on our node: report the pods the scheduler bound here Running (or
//! Failed), and finish their deletions after the (capped) grace period, as kubelet does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Error, ResourceExt};
use tracing::{debug, info, warn};

use crate::status;

/// How often, and how far apart, a failed step is tried again.
const STEP_ATTEMPTS: u32 = 60;
const STEP_RETRY: Duration = Duration::from_secs(1);

pub struct Settings {
    pub node_name: String,
    pub ready_delay: Duration,
    pub max_grace: Duration,
}

/// What a pod needs from us next. Derived from the pod's current state only, so a pod that
/// already shows the result of a step is never touched again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Bound to our node but not yet reported Running/Failed.
    Start,
    /// Being deleted: wait out the grace period, then remove it.
    Finalize,
}

fn next_step(pod: &Pod, node: &str) -> Option<Step> {
    let spec = pod.spec.as_ref()?;
    let on_our_node = spec.node_name.as_deref() == Some(node);
    if pod.metadata.deletion_timestamp.is_some() {
        // A zero grace period means the apiserver removes the pod itself as soon as no
        // finalizers are left; deleting again would only add a write (and an event).
        let apiserver_finishes = pod.metadata.deletion_grace_period_seconds == Some(0);
        return (on_our_node && !apiserver_finishes).then_some(Step::Finalize);
    }
    // Unscheduled pods are the scheduler's; pods on other nodes, their kubelets'.
    (on_our_node && !is_started(pod)).then_some(Step::Start)
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn is_started(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Running" | "Succeeded" | "Failed"))
}

fn is_terminated(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Succeeded" | "Failed"))
}

#[derive(Clone)]
pub struct Simulator {
    client: Client,
    settings: Arc<Settings>,
    /// Pods (by uid) that a task is working on, and on which step. Watch events for a pod
    /// whose step is already in flight are dropped, so each pod is handled once per state.
    in_flight: Arc<Mutex<HashMap<String, Step>>>,
}

impl Simulator {
    pub fn new(client: Client, settings: Settings) -> Self {
        Self { client, settings: Arc::new(settings), in_flight: Arc::default() }
    }

    /// Watches every pod in the cluster until the process ends. The watcher re-lists and
    /// backs off on its own after errors, so this never returns in practice.
    pub async fn run(self) {
        loop {
            let pods: Api<Pod> = Api::all(self.client.clone());
            let mut events = watcher(pods, watcher::Config::default()).default_backoff().boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => self.dispatch(pod),
                    Ok(watcher::Event::Delete(pod)) => self.forget(&pod),
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(e) => {
                        warn!(error = %e, "pod watch error (the watcher retries with backoff)")
                    }
                }
            }
            warn!("pod watch ended; restarting it");
        }
    }

    fn dispatch(&self, pod: Pod) {
        let Some(step) = next_step(&pod, &self.settings.node_name) else {
            return;
        };
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            match in_flight.get(&uid) {
                // Deletion overrides a start in progress; anything else waits for the task.
                Some(Step::Finalize) => return,
                Some(_) if step != Step::Finalize => return,
                _ => {}
            }
            in_flight.insert(uid.clone(), step);
        }
        let this = self.clone();
        tokio::spawn(async move {
            let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
            // A step that fails (the API server restarting, say) is retried: the pod may
            // never change again, and a kubelet does not forget a pod it runs either.
            for attempt in 1..=STEP_ATTEMPTS {
                let result = match step {
                    Step::Start => this.start(&pod).await,
                    Step::Finalize => this.finalize(&pod).await,
                };
                match result {
                    Ok(()) => break,
                    // Gone, or changed under us: the watch brings what to do next.
                    Err(Error::Api(s)) if s.code == 404 || s.code == 409 => break,
                    Err(e) => {
                        warn!(pod = %format!("{ns}/{name}"), ?step, attempt, error = %e, "step failed; retrying");
                        tokio::time::sleep(STEP_RETRY).await;
                    }
                }
            }
            let mut in_flight = this.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            if in_flight.get(&uid) == Some(&step) {
                in_flight.remove(&uid);
            }
        });
    }

    fn forget(&self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.in_flight.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
        }
    }

    fn api(&self, pod: &Pod) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default())
    }

    async fn start(&self, pod: &Pod) -> Result<(), Error> {
        tokio::time::sleep(self.settings.ready_delay).await;
        let failed = status::wants_failure(pod);
        let patch = status::patch(pod, failed);
        let (api, name, pp) = (self.api(pod), pod.name_any(), PatchParams::default());
        let patch = Patch::Merge(&patch);
        match retry(|| api.patch_status(&name, &pp, &patch)).await {
            Ok(_) => {
                info!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                      phase = if failed { "Failed" } else { "Running" }, "pod status set");
                Ok(())
            }
            // Gone, or the name now belongs to another pod (uid precondition): nothing to do.
            Err(Error::Api(s)) if s.is_not_found() || s.is_conflict() || s.is_invalid() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn finalize(&self, pod: &Pod) -> Result<(), Error> {
        // Terminated pods have nothing left to stop; running ones get their grace period, capped.
        if !is_terminated(pod) {
            let grace = pod
                .metadata
                .deletion_grace_period_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(Duration::ZERO, Duration::from_secs);
            tokio::time::sleep(grace.min(self.settings.max_grace)).await;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        let (api, name) = (self.api(pod), pod.name_any());
        match retry(|| api.delete(&name, &params)).await {
            Ok(_) => {
                info!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), "pod deletion finished");
                Ok(())
            }
            // Already gone, or replaced by a new pod of the same name (uid precondition).
            Err(Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Retries transient failures (connection errors, 5xx, 429) a few times with a short backoff,
/// because a failed step is otherwise only retried on the pod's next watch event.
async fn retry<T, F, Fut>(mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut delay = Duration::from_millis(200);
    for _ in 0..4 {
        match op().await {
            Err(Error::Api(s)) if s.code < 500 && s.code != 429 => return Err(Error::Api(s)),
            Err(e) => {
                debug!(error = %e, ?delay, "transient error; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            ok => return ok,
        }
    }
    op().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use kube::api::ObjectMeta;

    fn pod(node: Option<&str>, phase: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some("p".into()), uid: Some("u".into()), ..Default::default() },
            spec: Some(PodSpec { node_name: node.map(Into::into), ..Default::default() }),
            status: Some(PodStatus { phase: phase.map(Into::into), ..Default::default() }),
        }
    }

    fn deleting(mut p: Pod, grace: i64, finalizers: &[&str]) -> Pod {
        p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        p.metadata.deletion_grace_period_seconds = Some(grace);
        p.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        p
    }

    #[test]
    fn steps_follow_the_pod_state() {
        let n = "sim-node";
        assert_eq!(next_step(&pod(None, Some("Pending")), n), None, "the scheduler binds, not the node");
        assert_eq!(next_step(&pod(Some(""), None), n), None);
        assert_eq!(next_step(&pod(Some(n), Some("Pending")), n), Some(Step::Start));
        assert_eq!(next_step(&pod(Some(n), Some("Running")), n), None);
        assert_eq!(next_step(&pod(Some(n), Some("Failed")), n), None);
        assert_eq!(next_step(&pod(Some("other"), Some("Pending")), n), None);
        assert_eq!(next_step(&deleting(pod(Some(n), Some("Running")), 30, &[]), n), Some(Step::Finalize));
        assert_eq!(next_step(&deleting(pod(Some(n), Some("Running")), 0, &["x"]), n), None);
        assert_eq!(next_step(&deleting(pod(Some(n), Some("Failed")), 0, &[]), n), None);
        assert_eq!(next_step(&deleting(pod(Some("other"), Some("Running")), 30, &[]), n), None);
    }

    #[test]
    fn missing_spec_is_ignored() {
        let mut p = pod(None, None);
        p.spec = None;
        assert_eq!(next_step(&p, "sim-node"), None);
    }
}
