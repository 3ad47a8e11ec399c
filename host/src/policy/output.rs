//! Structural bounds on what a policy returns. Kubernetes meaning (namespaces,
//! ownership, names) is the controller's to check; these keep the host's own
//! resources bounded whatever the policy does.

use super::bindings::{Action, CreatePod, KeyValue, PodName, PodsetStatus};
use super::{Error, Limits, Result};

pub(super) fn check(actions: &[Action], limits: &Limits) -> Result<()> {
    if actions.len() > limits.max_actions {
        return Err(Error::InvalidOutput(format!(
            "{} actions, more than the {} allowed per decision",
            actions.len(),
            limits.max_actions
        )));
    }
    let max = limits.max_string_bytes;
    let long = |what: &str, s: &str| -> Result<()> {
        if s.len() > max {
            return Err(Error::InvalidOutput(format!("{what} is {} bytes, over the {max}-byte limit", s.len())));
        }
        Ok(())
    };
    let pairs = |what: &str, kvs: &[KeyValue]| -> Result<()> {
        kvs.iter().try_for_each(|kv| {
            long(&format!("{what} key"), &kv.key)?;
            long(&format!("{what} {:?}", kv.key), &kv.value)
        })
    };
    let mut statuses = 0;
    for action in actions {
        match action {
            Action::CreatePod(CreatePod { name, labels, annotations }) => {
                let (PodName::Exact(n) | PodName::Prefix(n)) = name;
                long("pod name", n)?;
                pairs("label", labels)?;
                pairs("annotation", annotations)?;
            }
            Action::DeletePod(name) => long("pod name", name)?,
            Action::UpdateStatus(PodsetStatus { pod_names, conditions, .. }) => {
                statuses += 1;
                if pod_names.len() > limits.max_actions {
                    return Err(Error::InvalidOutput(format!("status lists {} pod names", pod_names.len())));
                }
                pod_names.iter().try_for_each(|n| long("status pod name", n))?;
                for c in conditions {
                    long("condition type", &c.type_)?;
                    long("condition reason", &c.reason)?;
                    long("condition message", &c.message)?;
                }
            }
            Action::RequeueAfter(_) => {}
        }
    }
    if statuses > 1 {
        return Err(Error::InvalidOutput(format!("{statuses} status updates in one decision; at most one is allowed")));
    }
    Ok(())
}
