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
    act.delete_all(&checked.deletes).await?;
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
            act.delete_all(&doomed).await?;
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

    /// Stops at the first batch with a failure; one `SuccessfulCreate` Event per kind
    /// for what the batches made before it (see [`Done`]).
    async fn create_batches(&self, creates: &[&Child]) -> Result<()> {
        let mut made = Done::new(Did::Create);
        let mut failed = None;
        let mut batch = 1;
        let mut rest = creates;
        while !rest.is_empty() && failed.is_none() {
            let (now, later) = rest.split_at(batch.min(rest.len()));
            let results = join_all(now.iter().map(|c| self.create(c))).await;
            for (child, result) in now.iter().zip(results) {
                match result {
                    Ok(Some(child_made)) => made.add(&child.resource, child_made),
                    Ok(None) => {}
                    Err(e) => {
                        // Made or not: in flight until the cache shows it or lists without it.
                        // Asked for again meanwhile, it would meet itself (AlreadyExists).
                        if e.answer_lost() {
                            self.ctx.expectations.expect_creation(&self.observed.parent_ref(), child.key());
                        }
                        failed.get_or_insert(e);
                    }
                }
            }
            rest = later;
            batch *= 2;
        }
        self.report(made);
        failed.map_or(Ok(()), Err)
    }

    /// Creates `child`; returns what the API server made, or `None` when this parent
    /// had made it a moment ago. The caller posts the `SuccessfulCreate` Event.
    async fn create(&self, child: &Child) -> Result<Option<Made>> {
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
                Ok(Some(Made { key, uid: created.uid().unwrap_or_default() }))
            }
            // Made by this parent a moment ago, its watch event not seen yet: not a failure.
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" && self.already_ours(child, &asked).await => {
                tracing::debug!(child = %asked, "already created by this parent; not seen yet");
                Ok(None)
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
            if let Some(child_made) = self.create(child).await? {
                let mut made = Done::new(Did::Create);
                made.add(&child.resource, child_made);
                self.report(made);
            }
            return Ok(());
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

    /// Deletes every one of `doomed` at once; one `SuccessfulDelete` Event per kind for
    /// those deleted, the first failure after.
    async fn delete_all(&self, doomed: &[Doomed]) -> Result<()> {
        let results = join_all(doomed.iter().map(|d| self.delete(d))).await;
        let mut deleted = Done::new(Did::Delete);
        let mut failed = None;
        for (d, result) in doomed.iter().zip(results) {
            match result {
                Ok(true) => deleted.add(&d.resource, Made { key: d.key.clone(), uid: d.uid.clone() }),
                Ok(false) => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        self.report(deleted);
        failed.map_or(Ok(()), Err)
    }

    /// Deletes `doomed`; whether it was there to delete. The caller posts the
    /// `SuccessfulDelete` Event.
    async fn delete(&self, doomed: &Doomed) -> Result<bool> {
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
                Ok(true)
            }
            // Already gone, or no longer the child the policy chose.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
            Err(e) => {
                let note = format!("Error deleting {kind} {name}: {}", refusal(&e));
                self.host_event(EventType::Warning, "FailedDelete", "Delete", note, Some(about));
                Err(Error::Child { action: ChildAction::Delete, key: doomed.key.to_string(), source: e })
            }
        }
    }

    /// One Event per kind of what a decision did: about the child when there is one
    /// (as the ReplicaSet controller posts them), about the parent alone when there are
    /// more, naming them all.
    fn report(&self, done: Done) {
        for (resource, children) in &done.by_kind {
            let about = match children.as_slice() {
                [one] => Some(reference(resource, &one.key, &one.uid)),
                _ => None,
            };
            let names: Vec<&str> = children.iter().map(|c| c.key.name.as_str()).collect();
            let (reason, action) = done.did.said();
            self.host_event(EventType::Normal, reason, action, done.did.note(resource, &names), about);
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

/// A child a decision created or deleted, for its Event.
struct Made {
    key: ChildKey,
    uid: String,
}

/// What a decision did to children, for their Events.
#[derive(Clone, Copy)]
enum Did {
    Create,
    Delete,
}

impl Did {
    /// The Event's reason and action.
    fn said(self) -> (&'static str, &'static str) {
        match self {
            Did::Create => ("SuccessfulCreate", "Create"),
            Did::Delete => ("SuccessfulDelete", "Delete"),
        }
    }

    /// The Event's note for `names` of one kind: "Created pod: web-a" for one (the
    /// ReplicaSet controller's words), "Created 3 pods: web-a, web-b, web-c" for more.
    /// A note too long for the API is cut at its end ([`event`]), after the count.
    fn note(self, resource: &ApiResource, names: &[&str]) -> String {
        let verb = match self {
            Did::Create => "Created",
            Did::Delete => "Deleted",
        };
        match names {
            [one] => format!("{verb} {}: {one}", resource.kind.to_lowercase()),
            _ => format!("{verb} {} {}: {}", names.len(), resource.plural, names.join(", ")),
        }
    }
}

/// The children one decision created (or deleted), by kind in the order first met, for
/// one Event per kind rather than one per child. A PodSet's first reconcile of five
/// pods posted five `SuccessfulCreate` Events, as the ReplicaSet controller does: 5 of
/// the 17 API writes per PodSet at 200 × 5, each ~1.2 ms of the API server's CPU
/// (docs/performance.md, 2026-11-30), on the two cores the pods' own writes share.
struct Done {
    did: Did,
    by_kind: Vec<(ApiResource, Vec<Made>)>,
}

impl Done {
    fn new(did: Did) -> Self {
        Done { did, by_kind: Vec::new() }
    }

    fn add(&mut self, resource: &ApiResource, made: Made) {
        match self.by_kind.iter_mut().find(|(r, _)| r == resource) {
            Some((_, children)) => children.push(made),
            None => self.by_kind.push((resource.clone(), vec![made])),
        }
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

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    fn pods() -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
    }

    fn made(resource: &ApiResource, name: &str) -> Made {
        Made { key: ChildKey::new(resource, "ns", name), uid: format!("uid-{name}") }
    }

    #[test]
    fn one_child_is_named_as_the_replicaset_controller_names_it_and_more_are_counted() {
        assert_eq!(Did::Create.note(&pods(), &["web-a"]), "Created pod: web-a");
        assert_eq!(Did::Delete.note(&pods(), &["web-a", "web-b", "web-c"]), "Deleted 3 pods: web-a, web-b, web-c");
        let policies = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("networking.k8s.io", "v1", "NetworkPolicy"),
            "networkpolicies",
        );
        assert_eq!(Did::Create.note(&policies, &["a", "b"]), "Created 2 networkpolicies: a, b");
    }

    #[test]
    fn what_a_decision_did_is_one_group_per_kind_in_the_order_first_met() {
        let (pods, maps) =
            (pods(), ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps"));
        let mut done = Done::new(Did::Create);
        for (resource, name) in [(&pods, "a"), (&maps, "m"), (&pods, "b")] {
            done.add(resource, made(resource, name));
        }
        let grouped: Vec<(&str, Vec<&str>)> = done
            .by_kind
            .iter()
            .map(|(r, children)| (r.kind.as_str(), children.iter().map(|c| c.key.name.as_str()).collect()))
            .collect();
        assert_eq!(grouped, [("Pod", vec!["a", "b"]), ("ConfigMap", vec!["m"])]);
    }
}
