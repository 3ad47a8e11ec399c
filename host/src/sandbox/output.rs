//! Structural bounds on what a policy returns. Kubernetes meaning (namespaces,
//! ownership, names) is the reconciler's to check; these keep the host's own
//! resources bounded whatever the policy does.

use super::{Actions, Error, Limits, Result};
use crate::contract::bindings::{KeyValue, podset, reconciler};

pub(super) fn check(actions: &Actions, limits: &Limits) -> Result<()> {
    if actions.len() > limits.max_actions {
        return Err(Error::InvalidOutput(format!(
            "{} actions, more than the {} allowed per decision",
            actions.len(),
            limits.max_actions
        )));
    }
    let bounds = Bounds(limits);
    let statuses = match actions {
        Actions::PodSet(actions) => actions.iter().map(|a| bounds.podset(a)).sum::<Result<usize>>()?,
        Actions::Reconcile(actions) => actions.iter().map(|a| bounds.reconciler(a)).sum::<Result<usize>>()?,
    };
    if statuses > 1 {
        return Err(Error::InvalidOutput(format!("{statuses} status updates in one decision; at most one is allowed")));
    }
    Ok(())
}

struct Bounds<'a>(&'a Limits);

impl Bounds<'_> {
    fn string(&self, what: &str, s: &str) -> Result<()> {
        let max = self.0.max_string_bytes;
        if s.len() > max {
            return Err(Error::InvalidOutput(format!("{what} is {} bytes, over the {max}-byte limit", s.len())));
        }
        Ok(())
    }

    fn object(&self, what: &str, s: &str) -> Result<()> {
        let max = self.0.max_object_bytes;
        if s.len() > max {
            return Err(Error::InvalidOutput(format!(
                "{what} is {} bytes of JSON, over the {max}-byte limit",
                s.len()
            )));
        }
        Ok(())
    }

    fn pairs(&self, what: &str, kvs: &[KeyValue]) -> Result<()> {
        kvs.iter().try_for_each(|kv| {
            self.string(&format!("{what} key"), &kv.key)?;
            self.string(&format!("{what} {:?}", kv.key), &kv.value)
        })
    }

    /// Checks one action; returns 1 for a status update, 0 otherwise.
    fn podset(&self, action: &podset::Action) -> Result<usize> {
        use podset::{Action, CreatePod, PodName, PodsetStatus};
        match action {
            Action::CreatePod(CreatePod { name, labels, annotations }) => {
                let (PodName::Exact(n) | PodName::Prefix(n)) = name;
                self.string("pod name", n)?;
                self.pairs("label", labels)?;
                self.pairs("annotation", annotations)?;
            }
            Action::DeletePod(name) => self.string("pod name", name)?,
            Action::UpdateStatus(PodsetStatus { pod_names, conditions, .. }) => {
                if pod_names.len() > self.0.max_actions {
                    return Err(Error::InvalidOutput(format!("status lists {} pod names", pod_names.len())));
                }
                pod_names.iter().try_for_each(|n| self.string("status pod name", n))?;
                for c in conditions {
                    self.string("condition type", &c.type_)?;
                    self.string("condition reason", &c.reason)?;
                    self.string("condition message", &c.message)?;
                }
                return Ok(1);
            }
            Action::RequeueAfter(_) => {}
        }
        Ok(0)
    }

    fn reconciler(&self, action: &reconciler::Action) -> Result<usize> {
        use reconciler::Action;
        match action {
            Action::Create(json) => self.object("created child", json)?,
            Action::Apply(json) => self.object("applied child", json)?,
            Action::Delete(key) => {
                self.string("deleted child's kind", &key.kind.kind)?;
                self.string("deleted child's name", &key.name)?;
            }
            Action::UpdateStatus(json) => {
                self.object("status", json)?;
                return Ok(1);
            }
            Action::EmitEvent(e) => {
                self.string("event reason", &e.reason)?;
                self.string("event message", &e.message)?;
            }
            Action::LookUp(l) => {
                self.string("looked-up kind", &l.kind.kind)?;
                self.string("looked-up namespace", &l.namespace)?;
                match &l.match_ {
                    reconciler::LookupMatch::Name(n) => self.string("looked-up name", n)?,
                    reconciler::LookupMatch::Labels(labels) => self.pairs("looked-up label", labels)?,
                }
            }
            Action::RequeueAfter(_) | Action::FinalizeDone => {}
        }
        Ok(0)
    }
}
