//! Ordered waves: a child a policy annotates `podset.dev/wave: "n"` is created or
//! applied only once every child of a lower wave is ready ([`super::readiness`]), as
//! Argo CD's sync waves and kro's graph order them. Between check and execute, after
//! the policy: the decision is not changed (replay is unaffected), only held back in
//! part, and decided again when a child changes.
//!
//! The gate reads only what is observed and what the plan writes, and each child's
//! wave is on the child itself, so a restart computes the same gate and never creates
//! out of order. Deletes and the status are never held.

use super::keys::ChildKey;
use super::observe::{Observation, Observed};
use super::plan::{Checked, Child};
use super::readiness::{READY_WHEN, ready, rules, view};
use crate::kubernetes::mark::{has_controller_reference, marked_uid};
use crate::kubernetes::object::Object;

/// The annotation that puts a child in a wave: a number, 0 when absent.
pub const WAVE: &str = "podset.dev/wave";

/// The largest wave accepted: waves order a handful of steps, not a queue.
pub const MAX_WAVE: u32 = 100;

/// The finalizer the host puts on a parent once it has children in waves or children
/// it marked ([`needs_teardown`]): deleting the parent then deletes them in reverse
/// wave order (highest first, each wave gone before the next), by the host, without the
/// policy ([`teardown`]).
pub const TEARDOWN_FINALIZER: &str = "podset.dev/teardown";

/// The field manager of the host's own writes during a teardown (deletes carry none).
pub const TEARDOWN_MANAGER: &str = "podset-host/teardown";

/// The wave of an observed child (0 when not annotated).
pub fn wave_of_object(o: &Object) -> u32 {
    wave_of(o.metadata.annotations.as_ref())
}

/// Whether a parent needs the host's teardown: its decision puts children in waves, or
/// in places the garbage collector cannot reach from the parent (children carrying the
/// host's mark instead of an owner reference: [`crate::kubernetes::mark`]).
pub fn needs_teardown(checked: &Checked, observed: &Observed) -> bool {
    let planned = checked
        .creates
        .iter()
        .chain(&checked.applies)
        .any(|c| wave_of(c.object.metadata.annotations.as_ref()) > 0 || marked_uid(&c.object.metadata).is_some());
    planned
        || observed.children.iter().any(|c| {
            wave_of_object(&c.object) > 0
                || (!has_controller_reference(&c.object.metadata) && marked_uid(&c.object.metadata).is_some())
        })
}

/// The next step of a parent's teardown.
#[derive(Debug)]
pub enum Teardown<'a> {
    /// No child left: the finalizer can go.
    Done,
    /// Delete these children of `wave`, the highest left (the others of that wave are
    /// already going).
    Delete { wave: u32, children: Vec<&'a Observation> },
    /// Every child of the highest wave left is going: wait for them.
    Wait { wave: u32, left: usize },
}

/// What to do next to tear down `children` (all the parent controls, terminating ones
/// included): the highest wave still there first; a lower wave only once it is gone.
/// A child whose deletion was sent and not yet seen (`deleting`, the expectations)
/// counts as going: a reconcile from a cache one event behind does not delete it twice.
pub fn teardown<'a>(children: &'a [Observation], deleting: &[ChildKey]) -> Teardown<'a> {
    let Some(wave) = children.iter().map(|c| wave_of_object(&c.object)).max() else { return Teardown::Done };
    let in_wave: Vec<&Observation> = children.iter().filter(|c| wave_of_object(&c.object) == wave).collect();
    let sent = |c: &Observation| {
        deleting
            .iter()
            .any(|k| k.api_version == c.resource.api_version && k.kind == c.resource.kind && k.names(&c.object))
    };
    let mut standing: Vec<&Observation> =
        in_wave.iter().copied().filter(|c| c.object.metadata.deletion_timestamp.is_none() && !sent(c)).collect();
    // By kind and name: the Event that names them reads the same whatever the cache's order.
    standing.sort_by(|a, b| {
        (&a.resource.kind, a.object.metadata.name.as_deref())
            .cmp(&(&b.resource.kind, b.object.metadata.name.as_deref()))
    });
    if standing.is_empty() {
        Teardown::Wait { wave, left: in_wave.len() }
    } else {
        Teardown::Delete { wave, children: standing }
    }
}

/// Why a wave annotation or a ready-when rule is refused.
pub fn check_annotations(annotations: &std::collections::BTreeMap<String, String>) -> Result<(), (String, String)> {
    if let Some(w) = annotations.get(WAVE) {
        match w.parse::<u32>() {
            Ok(n) if n <= MAX_WAVE => {}
            _ => return Err((WAVE.into(), format!("{w:?} is not a wave from 0 to {MAX_WAVE}"))),
        }
    }
    if let Some(r) = annotations.get(READY_WHEN) {
        rules(r).map_err(|why| (READY_WHEN.into(), why))?;
    }
    Ok(())
}

fn wave_of(annotations: Option<&std::collections::BTreeMap<String, String>>) -> u32 {
    annotations.and_then(|a| a.get(WAVE)).and_then(|w| w.parse().ok()).unwrap_or(0)
}

/// What holds a wave back: a child of a lower wave, and why it is not ready.
struct Blocker {
    wave: u32,
    why: String,
}

/// Holds back the creates and applies whose wave has a lower wave not ready. Returns
/// what waits for what, for the parent's condition and Event, when anything was held.
pub fn gate(checked: &mut Checked, observed: &Observed) -> Option<String> {
    let planned = |c: &Child| wave_of(c.object.metadata.annotations.as_ref());
    let highest = checked.creates.iter().chain(&checked.applies).map(planned).max().unwrap_or(0);
    if highest == 0 {
        return None;
    }
    let mut blockers: Vec<Blocker> = Vec::new();
    for c in &checked.creates {
        blockers.push(Blocker { wave: planned(c), why: format!("{} {}: being created", c.resource.kind, name(c)) });
    }
    // An apply of a child not observed yet creates it (execute.rs).
    for c in &checked.applies {
        let verb = if observed.child(&c.key()).is_some() { "being changed" } else { "being created" };
        blockers.push(Blocker { wave: planned(c), why: format!("{} {}: {verb}", c.resource.kind, name(c)) });
    }
    // Created and not yet seen: its wave is not known here, so it holds every later one.
    for key in &observed.in_flight.creations {
        blockers.push(Blocker { wave: 0, why: format!("{} {}: created, not yet observed", key.kind, key.name) });
    }
    let leaving = |o: &Object| checked.deletes.iter().any(|d| d.uid == o.metadata.uid.clone().unwrap_or_default());
    for seen in &observed.children {
        let o = &seen.object;
        if o.metadata.deletion_timestamp.is_some() || leaving(o) {
            continue;
        }
        let wave = wave_of(o.metadata.annotations.as_ref());
        if wave >= highest {
            continue;
        }
        if let Err(why) = ready(&seen.resource.kind, &view(&seen.resource.kind, o)) {
            let name = o.metadata.name.clone().unwrap_or_default();
            blockers.push(Blocker { wave, why: format!("{} {name}: {why}", seen.resource.kind) });
        }
    }
    let first_blocker = |wave: u32| blockers.iter().filter(|b| b.wave < wave).min_by_key(|b| b.wave);
    let mut held: Vec<(u32, String)> = Vec::new();
    for list in [&mut checked.creates, &mut checked.applies] {
        list.retain(|c| {
            let wave = planned(c);
            let hold = first_blocker(wave).is_some();
            if hold {
                held.push((wave, format!("{} {}", c.resource.kind, name(c))));
            }
            !hold
        });
    }
    let (wave, _) = held.iter().min_by_key(|(w, _)| *w)?.clone();
    let waiting: Vec<&str> = held.iter().filter(|(w, _)| *w == wave).map(|(_, n)| n.as_str()).collect();
    let blocker = first_blocker(wave)?;
    Some(format!("wave {wave} ({}) waits for wave {}: {}", waiting.join(", "), blocker.wave, blocker.why))
}

fn name(c: &Child) -> &str {
    c.object.metadata.name.as_deref().or(c.object.metadata.generate_name.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::{ApiResource, DynamicObject};
    use serde_json::json;

    use super::*;
    use crate::reconcile::observe::fixtures::{observed, podset};
    use podset_test_support::objects::configmaps;

    fn namespaces() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&())
    }

    fn child(resource: ApiResource, name: &str, wave: Option<u32>) -> Child {
        let mut o = DynamicObject::new(name, &resource);
        if let Some(w) = wave {
            o.metadata.annotations = Some([(WAVE.to_string(), w.to_string())].into());
        }
        Child { resource: Arc::new(resource), object: o }
    }

    fn namespace(phase: &str) -> DynamicObject {
        let mut ns = DynamicObject::new("team-a", &namespaces());
        ns.metadata.uid = Some("uid-ns".into());
        ns.data = json!({"status": {"phase": phase}});
        ns
    }

    #[test]
    fn a_later_wave_waits_while_an_earlier_one_is_created_or_not_ready() {
        // The first decision: the namespace (wave 0) and what goes in it (wave 1).
        let mut checked = Checked {
            creates: vec![child(namespaces(), "team-a", None), child(configmaps(), "quota", Some(1))],
            ..Checked::default()
        };
        let o = observed(podset(1), Vec::new());
        let why = gate(&mut checked, &o).expect("held");
        assert_eq!(checked.creates.len(), 1, "only the namespace goes");
        assert_eq!(why, "wave 1 (ConfigMap quota) waits for wave 0: Namespace team-a: being created");

        // The namespace observed, not yet Active.
        let mut checked = Checked { creates: vec![child(configmaps(), "quota", Some(1))], ..Checked::default() };
        let o = observed(podset(1), vec![(namespaces(), namespace(""))]);
        let why = gate(&mut checked, &o).expect("held");
        assert!(checked.creates.is_empty());
        assert!(why.ends_with("Namespace team-a: phase \"\", not Active"), "{why}");

        // Created and not yet observed: held too.
        let mut checked = Checked { creates: vec![child(configmaps(), "quota", Some(1))], ..Checked::default() };
        let mut o = observed(podset(1), Vec::new());
        o.in_flight.creations.push(ChildKey::of("v1", "Namespace", "", "team-a"));
        assert!(gate(&mut checked, &o).is_some() && checked.creates.is_empty());

        // Active: wave 1 goes.
        let mut checked = Checked { creates: vec![child(configmaps(), "quota", Some(1))], ..Checked::default() };
        let o = observed(podset(1), vec![(namespaces(), namespace("Active"))]);
        assert_eq!(gate(&mut checked, &o), None);
        assert_eq!(checked.creates.len(), 1);
    }

    #[test]
    fn a_restart_sees_the_same_gate_from_the_annotated_children_alone() {
        // Wave 2 asked for, with wave 1 observed (annotated on the child) and not ready.
        let mut cm = DynamicObject::new("settings", &configmaps());
        cm.metadata.annotations = Some(
            [
                (WAVE.to_string(), "1".to_string()),
                (READY_WHEN.to_string(), r#"[{"field": "/data/ready", "equals": "yes"}]"#.to_string()),
            ]
            .into(),
        );
        cm.data = json!({"data": {"ready": "no"}});
        let mut checked = Checked { applies: vec![child(configmaps(), "app", Some(2))], ..Checked::default() };
        let o = observed(podset(1), vec![(configmaps(), cm.clone())]);
        let why = gate(&mut checked, &o).expect("held");
        assert!(why.contains("wave 2 (ConfigMap app) waits for wave 1: ConfigMap settings: /data/ready is"), "{why}");
        // A wave-0 child that is not ready does not hold wave 0 itself.
        let mut checked = Checked { applies: vec![child(configmaps(), "peer", None)], ..Checked::default() };
        assert_eq!(gate(&mut checked, &o), None);
        cm.data = json!({"data": {"ready": "yes"}});
        let mut checked = Checked { applies: vec![child(configmaps(), "app", Some(2))], ..Checked::default() };
        assert_eq!(gate(&mut checked, &observed(podset(1), vec![(configmaps(), cm)])), None);
    }

    #[test]
    fn teardown_goes_from_the_highest_wave_down_each_gone_before_the_next() {
        let cm = |name: &str, wave: u32, going: bool| {
            let mut o = DynamicObject::new(name, &configmaps());
            o.metadata.annotations = Some([(WAVE.to_string(), wave.to_string())].into());
            if going {
                o.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
            }
            Observation { resource: Arc::new(configmaps()), object: Arc::new(o.into()) }
        };
        let names = |t: Teardown<'_>| match t {
            Teardown::Delete { wave, children } => {
                (wave, children.iter().map(|c| c.object.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>())
            }
            other => panic!("{other:?}"),
        };
        let all = [cm("a", 0, false), cm("b", 1, false), cm("c", 2, false), cm("d", 2, false)];
        assert_eq!(names(teardown(&all, &[])), (2, vec!["c".to_string(), "d".to_string()]));
        // Wave 2 going: wait, even though wave 1 stands (a restart sees the same).
        let going = [cm("a", 0, false), cm("b", 1, false), cm("c", 2, true), cm("d", 2, true)];
        assert!(matches!(teardown(&going, &[]), Teardown::Wait { wave: 2, left: 2 }));
        let one_left = [cm("a", 0, false), cm("b", 1, false), cm("d", 2, true)];
        assert!(matches!(teardown(&one_left, &[]), Teardown::Wait { wave: 2, left: 1 }));
        assert_eq!(names(teardown(&[cm("a", 0, false), cm("b", 1, false)], &[])), (1, vec!["b".to_string()]));
        assert_eq!(names(teardown(&[cm("a", 0, false)], &[])), (0, vec!["a".to_string()]));
        assert!(matches!(teardown(&[], &[]), Teardown::Done));
        // Deleted a moment ago and not yet seen so in the cache: going, not deleted again.
        let sent = [ChildKey::of("v1", "ConfigMap", "", "d")];
        let stale = [cm("a", 0, false), cm("c", 2, true), cm("d", 2, false)];
        assert!(matches!(teardown(&stale, &sent), Teardown::Wait { wave: 2, left: 2 }));
    }

    #[test]
    fn wave_annotations_are_checked() {
        let with = |k: &str, v: &str| [(k.to_string(), v.to_string())].into();
        assert!(check_annotations(&with(WAVE, "3")).is_ok());
        assert!(check_annotations(&with(WAVE, "-1")).is_err());
        assert!(check_annotations(&with(WAVE, "101")).is_err());
        assert!(check_annotations(&with(READY_WHEN, "nope")).is_err());
    }
}
