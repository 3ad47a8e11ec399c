//! Performs a checked decision on the cluster: the parent's finalizer, children
//! created in slow-start batches, applied server-side or deleted with a UID
//! precondition, the policy's Events, the status (with the digest that decided) when
//! it changed, and the finalizer's removal when the policy is done.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use serde_json::json;

use super::keys::ChildKey;
use super::observe::Observed;
use super::plan::{Checked, Child, Doomed, Note};
use super::progress;
use super::slots;
use super::status::{self, Ended, Outcome};
use super::waves::{self, Teardown};
use crate::conditions::WAITING_FOR_WAVE;
use crate::kubernetes::client::namespace_terminating;
use crate::kubernetes::events::{Origin, event};
use crate::kubernetes::ledger::{Entry, LedgerKind};
use crate::kubernetes::object::Object;
use crate::kubernetes::scope::api_for;
use crate::kubernetes::store::controller_uid;
use crate::metrics::Deferred;
use crate::reconcile::context::Context;
use crate::reconcile::error::{ChildAction, Error, Result};
use crate::registry::Admitted;

/// The annotation in which earlier versions recorded the deciding digest (now
/// [`status::DIGEST_FIELD`]). Removed where found, so that it cannot go stale.
pub const LEGACY_DIGEST_ANNOTATION: &str = "app.example.com/policy-digest";

/// How soon a parent whose status write met a newer parent is decided again.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);

/// Performs `checked`, decided by `admitted` for the parent of `observed`. Returns
/// when to look again: sooner than `requeue` when the parent turned out to have
/// changed under the decision.
pub async fn execute(
    ctx: &Context,
    observed: &Observed,
    admitted: &Admitted,
    mut checked: Checked,
    requeue: Duration,
) -> Result<Duration> {
    let parent = &observed.parent;
    let parent_api: Api<Object> = api_for(&ctx.client, &observed.parent_resource, parent.namespace().as_deref());
    // A re-decision is not prompted by the parent's own event, and the parents' watch can
    // be behind the children's: an operator resumed after a pause (SIGSTOP) got the
    // garbage collector's deletions of a deleted PodSet's pods before the PodSet's own
    // deletion, and created a pod for it (`time_travel`, `make test`, 2026-11-29). So it
    // writes nothing unless the API server holds the parent as the cache does: one read,
    // only when a re-decision writes (a replacement, a phase's step), never at steady state.
    if observed.redecision && checked.writes_others() && !held_as_cached(&parent_api, parent).await? {
        tracing::debug!("the API server holds another version of the parent, or none: nothing written");
        ctx.metrics.deferred(Deferred::Conflict);
        return Ok(AFTER_CONFLICT);
    }
    // Named by the host, alike on every replica: a create delivered late meets its twin.
    let taken = observed.children.iter().map(|c| c.key()).chain(observed.in_flight.creations.iter().cloned());
    slots::name_by_slot(&mut checked.creates, parent.uid().as_deref().unwrap_or_default(), taken);
    let manager = admitted.field_manager();
    // Children as the service account the policy acts as, if any; the parent as the operator.
    let act = Act { ctx, observed, manager: &manager, client: admitted.writer(&ctx.client) };
    let teardown = waves::needs_teardown(&checked, observed);
    if teardown {
        // Before the finalizer it stands for; a no-op once the kinds are written.
        remember(ctx, admitted).await;
    }
    let patch = metadata(parent, admitted, teardown);
    // Cluster-scoped children go first (a Namespace before what goes in it), applies
    // included: an apply of a child not there yet creates it, and one that meets an
    // object the host did not make fails before anything is written into it.
    let (cluster_applies, applies): (Vec<&Child>, Vec<&Child>) =
        checked.applies.iter().partition(|c| c.key().namespace.is_empty());
    let writes = async {
        for child in &cluster_applies {
            act.apply(child).await?;
        }
        act.create_all(&checked.creates).await
    };
    // A finalizer must be in place before any child exists; the legacy annotation's
    // removal can be written alongside the children.
    let patched = if patch.as_ref().is_some_and(|p| p.adds_finalizer) {
        let patched = patch_metadata(&parent_api, parent, patch).await?;
        writes.await?;
        patched
    } else {
        let (patched, created) = tokio::join!(patch_metadata(&parent_api, parent, patch), writes);
        created?;
        patched?
    };
    for child in applies {
        act.apply(child).await?;
    }
    for object in &checked.patches {
        act.patch(object).await?;
    }
    let deleted = join_all(checked.deletes.iter().map(|d| act.delete(d))).await;
    deleted.into_iter().collect::<Result<Vec<()>>>()?;
    for note in &checked.events {
        act.policy_event(note);
    }

    // After our own metadata write the cached parent is one version behind: writing
    // status against it would only meet a conflict.
    let parent = patched.as_ref().unwrap_or(parent);
    if let Some(waiting) = &checked.waiting
        && !status::has_condition(parent, WAITING_FOR_WAVE, waiting)
    {
        act.host_event(EventType::Normal, "WaveWaiting", "Wait", waiting.clone(), None);
    }
    if !checked.fold_status {
        let digest = admitted.policy.digest().to_string();
        let progress = progress::of(&checked, observed);
        let next = status::next(parent, Ended::Decided { status: checked.status, digest: &digest, progress });
        if status::write(&ctx.client, &ctx.written, &observed.parent_ref(), parent, next).await? == Outcome::Conflict {
            ctx.metrics.deferred(Deferred::Conflict);
            return Ok(AFTER_CONFLICT);
        }
    }

    if checked.finalize
        && let Some(finalizer) = &admitted.resolved.finalizer
    {
        remove_finalizer(&parent_api, parent, finalizer).await?;
        ctx.expectations.forget(&observed.parent_ref());
    }
    Ok(requeue)
}

/// The parent's metadata a decision needs written.
struct MetadataPatch {
    patch: serde_json::Map<String, serde_json::Value>,
    adds_finalizer: bool,
}

/// One metadata patch at most: the policy's finalizer and, for a parent whose children
/// the host tears down (`teardown`: in waves, or marked), the host's teardown finalizer
/// (on a parent not being deleted) when missing, and the legacy digest annotation's
/// removal when present.
fn metadata(parent: &Object, admitted: &Admitted, teardown: bool) -> Option<MetadataPatch> {
    let mut patch = serde_json::Map::new();
    if parent.annotations().contains_key(LEGACY_DIGEST_ANNOTATION) {
        patch.insert("annotations".into(), json!({ LEGACY_DIGEST_ANNOTATION: null }));
    }
    let mut adds_finalizer = false;
    let teardown = teardown.then(|| waves::TEARDOWN_FINALIZER.to_string());
    let missing: Vec<String> = admitted
        .resolved
        .finalizer
        .iter()
        .chain(teardown.iter())
        .filter(|f| !parent.finalizers().contains(f))
        .cloned()
        .collect();
    if parent.metadata.deletion_timestamp.is_none() && !missing.is_empty() {
        let mut finalizers = parent.finalizers().to_vec();
        finalizers.extend(missing);
        patch.insert("finalizers".into(), json!(finalizers));
        // The list is replaced whole: make the write conditional on what it was read from.
        patch.insert("resourceVersion".into(), json!(parent.resource_version()));
        adds_finalizer = true;
    }
    (!patch.is_empty()).then_some(MetadataPatch { patch, adds_finalizer })
}

/// Writes the parent kind and its policy's child kinds into the teardown ledger (those
/// not written yet: the ledger remembers what it wrote), before the teardown finalizer
/// they stand for, so that an operator started later without the policy still tears
/// its parents down. A ledger that cannot be written is said in
/// the log: only that later case is lost.
async fn remember(ctx: &Context, admitted: &Admitted) {
    let Some(ledger) = &ctx.ledger else { return };
    let r = &admitted.resolved;
    let parent = LedgerKind::of(&r.parent, r.parent_is_cluster_scoped());
    let entries: Vec<Entry> = (r.children.iter())
        .map(|c| Entry { parent: parent.clone(), child: LedgerKind::of(c, r.is_cluster_scoped(c)) })
        .collect();
    if let Err(e) = ledger.record(&entries).await {
        tracing::warn!(
            kind = %r.parent.kind,
            "cannot write the teardown ledger {}/{}: {e}; an operator started without this kind's policy will not tear its parents down",
            ledger.namespace(),
            crate::kubernetes::ledger::LEDGER
        );
    }
}

/// Whether the API server holds `parent` as the cache does: the same object (UID) at the
/// same resourceVersion.
async fn held_as_cached(api: &Api<Object>, parent: &Object) -> Result<bool> {
    let held = api.get_opt(&parent.name_any()).await?;
    Ok(held.is_some_and(|h| h.uid() == parent.uid() && h.resource_version() == parent.resource_version()))
}

/// Writes `patch`, if any; returns the parent as the server then holds it.
async fn patch_metadata(api: &Api<Object>, parent: &Object, patch: Option<MetadataPatch>) -> Result<Option<Object>> {
    let Some(MetadataPatch { patch, .. }) = patch else { return Ok(None) };
    let merge = Patch::Merge(json!({ "metadata": patch }));
    Ok(Some(api.patch(&parent.name_any(), &PatchParams::default(), &merge).await?))
}

/// One step of the host's teardown of a deleted parent whose children come in waves or
/// carry its mark:
/// delete the highest wave still there (with UID preconditions), or wait for it to
/// go, or, with nothing left, remove [`waves::TEARDOWN_FINALIZER`]. Needs no policy.
/// Every step is decided from the cache alone, so a restart resumes in order.
pub async fn teardown(ctx: &Context, observed: &Observed, manager: &str) -> Result<()> {
    // Without the policy, so as the operator: only what the parent controls is deleted.
    let act = Act { ctx, observed, manager, client: &ctx.client };
    match waves::teardown(&observed.children, &observed.in_flight.deletions) {
        Teardown::Done => {
            let parent = &observed.parent;
            let api: Api<Object> = api_for(&ctx.client, &observed.parent_resource, parent.namespace().as_deref());
            remove_finalizer(&api, parent, waves::TEARDOWN_FINALIZER).await?;
            ctx.expectations.forget(&observed.parent_ref());
        }
        Teardown::Wait { wave, left } => tracing::debug!(wave, left, "teardown: waiting for the wave to go"),
        Teardown::Delete { wave, children } => {
            let names: Vec<String> = children
                .iter()
                .map(|c| format!("{} {}", c.resource.kind, c.object.metadata.name.as_deref().unwrap_or_default()))
                .collect();
            act.host_event(
                EventType::Normal,
                "TeardownWave",
                "Delete",
                format!("deleting wave {wave}: {}", names.join(", ")),
                None,
            );
            let doomed: Vec<Doomed> = children
                .iter()
                .map(|c| Doomed {
                    resource: c.resource.clone(),
                    key: ChildKey::new(
                        &c.resource,
                        c.object.metadata.namespace.as_deref().unwrap_or_default(),
                        c.object.metadata.name.as_deref().unwrap_or_default(),
                    ),
                    uid: c.object.metadata.uid.clone().unwrap_or_default(),
                })
                .collect();
            let deleted = join_all(doomed.iter().map(|d| act.delete(d))).await;
            deleted.into_iter().collect::<Result<Vec<()>>>()?;
        }
    }
    Ok(())
}

/// Removes `finalizer` from `parent`, conditional on its resourceVersion (a merge patch
/// replaces the whole list: a finalizer added meanwhile must not be lost).
pub(super) async fn remove_finalizer(api: &Api<Object>, parent: &Object, finalizer: &str) -> Result<()> {
    if !parent.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let rest: Vec<&String> = parent.finalizers().iter().filter(|f| *f != finalizer).collect();
    let patch = json!({ "metadata": { "finalizers": rest, "resourceVersion": parent.resource_version() } });
    match api.patch(&parent.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        // Already gone: the finalizer was the last thing holding it.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(|_| ()).map_err(Error::from),
    }
}

struct Act<'a> {
    ctx: &'a Context,
    observed: &'a Observed,
    manager: &'a str,
    /// What writes the children: the operator's client or one acting as the policy's
    /// service account.
    client: &'a kube::Client,
}

impl Act<'_> {
    /// The API of the child `key` names: in its namespace, or cluster-wide for a
    /// cluster-scoped kind (checked: the key's namespace is "" exactly then).
    fn api(&self, resource: &ApiResource, key: &ChildKey) -> Api<DynamicObject> {
        api_for(self.client, resource, Some(&key.namespace))
    }

    /// Creates the cluster-scoped children first (a namespace before what goes in it),
    /// then the rest, 1, 2, 4, … at a time, stopping at the first failure as the
    /// ReplicaSet controller does: a quota or admission error then costs one request,
    /// not one per child. Children not attempted are decided again on the next reconcile.
    async fn create_all(&self, creates: &[Child]) -> Result<()> {
        let (first, then): (Vec<&Child>, Vec<&Child>) = creates.iter().partition(|c| c.key().namespace.is_empty());
        self.create_batches(&first).await?;
        self.create_batches(&then).await
    }

    async fn create_batches(&self, creates: &[&Child]) -> Result<()> {
        let mut batch = 1;
        let mut rest = creates;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(batch.min(rest.len()));
            let results = join_all(now.iter().map(|c| self.create(c))).await;
            let mut failed = None;
            for (child, result) in now.iter().zip(results) {
                if let Err(e) = result {
                    // Made or not: in flight until the cache shows it or lists without it.
                    // Asked for again meanwhile, it would meet itself (AlreadyExists).
                    if e.answer_lost() {
                        self.ctx.expectations.expect_creation(&self.observed.parent_ref(), child.key());
                    }
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            rest = later;
            batch *= 2;
        }
        Ok(())
    }

    /// Creates `child`; returns the key of what the API server made.
    async fn create(&self, child: &Child) -> Result<ChildKey> {
        let pp = PostParams { field_manager: Some(self.manager.into()), ..PostParams::default() };
        let kind = &child.resource.kind;
        let asked = child.key();
        let in_parents_namespace = self.observed.parent.namespace().as_deref() == Some(asked.namespace.as_str());
        // Refused a moment ago for another parent there: this one would be too.
        if in_parents_namespace && self.ctx.terminating.held(&asked.namespace).is_some() {
            return Err(Error::NamespaceTerminating(asked.namespace));
        }
        match self.api(&child.resource, &asked).create(&pp, &child.object).await {
            Ok(created) => {
                let key = ChildKey::new(&child.resource, &asked.namespace, &created.name_any());
                // The watch may have delivered it already; then nothing is in flight.
                if self.observed.child(&key).is_none() {
                    self.ctx.expectations.expect_creation(&self.observed.parent_ref(), key.clone());
                }
                let about = reference(&child.resource, &key, &created.uid().unwrap_or_default());
                let note = format!("Created {}: {}", kind.to_lowercase(), key.name);
                self.host_event(EventType::Normal, "SuccessfulCreate", "Create", note, Some(about));
                Ok(key)
            }
            // Made by this parent a moment ago, its watch event not seen yet: not a failure.
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" && self.already_ours(child, &asked).await => {
                tracing::debug!(child = %asked, "already created by this parent; not seen yet");
                Ok(asked)
            }
            // Its Event would be refused as well (an Event is a create in that namespace).
            Err(e) if in_parents_namespace && namespace_terminating(&e) => {
                self.ctx.terminating.refused(&asked.namespace);
                Err(Error::NamespaceTerminating(asked.namespace))
            }
            Err(e) => {
                let note = format!("Error creating {}: {}", kind.to_lowercase(), refusal(&e));
                self.host_event(EventType::Warning, "FailedCreate", "Create", note, None);
                Err(Error::Child { action: ChildAction::Create, key: child.key().to_string(), source: e })
            }
        }
    }

    /// Whether the object holding `key`'s name is this parent's (by owner reference or
    /// mark): a create that met it raced its own earlier one.
    async fn already_ours(&self, child: &Child, key: &ChildKey) -> bool {
        let uid = self.observed.parent.metadata.uid.as_deref().unwrap_or_default();
        let api: Api<Object> = api_for(self.client, &child.resource, Some(&key.namespace));
        match api.get_opt(&key.name).await {
            Ok(Some(existing)) => !uid.is_empty() && controller_uid(&existing) == Some(uid),
            _ => false,
        }
    }

    /// Server-side apply of a child the parent controls. A child not in the cache is
    /// created instead: an apply would take over an object of the same name that
    /// someone else owns; a create fails on it.
    async fn apply(&self, child: &Child) -> Result<()> {
        if self.observed.child(&child.key()).is_none() {
            return self.create(child).await.map(drop);
        }
        let key = child.key();
        let name = &key.name;
        let pp = PatchParams::apply(self.manager).force();
        match self.api(&child.resource, &key).patch(name, &pp, &Patch::Apply(&child.object)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let note = format!("Error applying {} {name}: {}", child.resource.kind.to_lowercase(), refusal(&e));
                self.host_event(EventType::Warning, "FailedApply", "Apply", note, None);
                Err(Error::Child { action: ChildAction::Apply, key: child.key().to_string(), source: e })
            }
        }
    }

    /// A merge patch of the fields a policy sets on an object it looked up: unlike an
    /// apply, it never creates the object if it went meanwhile (404).
    async fn patch(&self, object: &Child) -> Result<()> {
        let key = object.key();
        let pp = PatchParams { field_manager: Some(self.manager.into()), ..PatchParams::default() };
        match self.api(&object.resource, &key).patch(&key.name, &pp, &Patch::Merge(&object.object)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let note =
                    format!("Error patching {} {}: {}", object.resource.kind.to_lowercase(), key.name, refusal(&e));
                self.host_event(EventType::Warning, "FailedPatch", "Patch", note, None);
                Err(Error::Child { action: ChildAction::Patch, key: key.to_string(), source: e })
            }
        }
    }

    async fn delete(&self, doomed: &Doomed) -> Result<()> {
        let name = &doomed.key.name;
        let about = reference(&doomed.resource, &doomed.key, &doomed.uid);
        let kind = doomed.resource.kind.to_lowercase();
        // The UID precondition: if the child was replaced by a namesake since the
        // policy decided, the namesake is left alone.
        // In the background, as kubectl deletes: what the child owns goes with it. (The
        // API's default for a `batch/v1` Job is to orphan its pods.)
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(doomed.uid.clone()), resource_version: None }),
            ..DeleteParams::background()
        };
        match self.api(&doomed.resource, &doomed.key).delete(name, &dp).await {
            Ok(_) => {
                self.ctx.expectations.expect_deletion(&self.observed.parent_ref(), doomed.key.clone());
                let note = format!("Deleted {kind}: {name}");
                self.host_event(EventType::Normal, "SuccessfulDelete", "Delete", note, Some(about));
                Ok(())
            }
            // Already gone, or no longer the child the policy chose.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => {
                let note = format!("Error deleting {kind} {name}: {}", refusal(&e));
                self.host_event(EventType::Warning, "FailedDelete", "Delete", note, Some(about));
                Err(Error::Child { action: ChildAction::Delete, key: doomed.key.to_string(), source: e })
            }
        }
    }

    fn host_event(&self, t: EventType, reason: &str, action: &str, note: String, about: Option<ObjectReference>) {
        let parent = self.observed.parent_object_reference();
        self.ctx.events.publish(&parent, event(t, reason, action, note, about), Origin::Host);
    }

    fn policy_event(&self, note: &Note) {
        let about = note.regarding.as_ref().and_then(|k| {
            let seen = self.observed.child(k)?;
            Some(reference(&seen.resource, k, &seen.object.uid().unwrap_or_default()))
        });
        let t = if note.warning { EventType::Warning } else { EventType::Normal };
        let ev = event(t, &note.reason, "Reconcile", note.message.clone(), about);
        let parent = self.observed.parent_object_reference();
        self.ctx.events.publish(&parent, ev, Origin::Policy);
    }
}

/// Why the API server refused a request, for people: its message, without the
/// whole `Status` that the error's `Display` appends.
fn refusal(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// A reference to a child for Events, from what is known without fetching it.
fn reference(resource: &ApiResource, key: &ChildKey, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(resource.api_version.clone()),
        kind: Some(resource.kind.clone()),
        namespace: Some(key.namespace.clone()).filter(|ns| !ns.is_empty()),
        name: Some(key.name.clone()),
        uid: Some(uid.into()),
        ..ObjectReference::default()
    }
}
