//! A policy's declarations (`policy-info.declares`): checked when it loads, and turned
//! into the kinds and label selectors the host watches.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::core::GroupVersionKind;

use super::bindings::{Declarations, GroupVersionKind as WitGvk, RelatedKind, SelectorValue};

/// Declarations that break the contract's rules, and which rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// The PodSet fast path reconciles PodSets and their pods, nothing else.
pub fn podset_kind() -> GroupVersionKind {
    GroupVersionKind::gvk(crate::crd::PODSET_GROUP, "v1alpha1", "PodSet")
}

pub fn pod_kind() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "Pod")
}

pub fn to_gvk(k: &WitGvk) -> GroupVersionKind {
    GroupVersionKind::gvk(&k.group, &k.version, &k.kind)
}

pub fn to_wit(k: &GroupVersionKind) -> WitGvk {
    WitGvk { group: k.group.clone(), version: k.version.clone(), kind: k.kind.clone() }
}

/// `group/version Kind`, as people write it (`v1 Pod` for the core group).
pub fn kind_name(k: &GroupVersionKind) -> String {
    if k.group.is_empty() {
        format!("{} {}", k.version, k.kind)
    } else {
        format!("{}/{} {}", k.group, k.version, k.kind)
    }
}

/// Checks what a policy declares, before the host watches anything for it.
pub fn check(d: &Declarations, podset_world: bool) -> Result<(), Invalid> {
    let invalid = |m: String| Err(Invalid(m));
    let kinds = std::iter::once(&d.parent)
        .chain(&d.children)
        .chain(d.related.iter().map(|r| &r.kind))
        .chain(d.lookups.iter().map(|l| &l.kind));
    for k in kinds {
        if k.version.is_empty() || k.kind.is_empty() {
            return invalid(format!("kind {:?} needs a version and a kind", kind_name(&to_gvk(k))));
        }
        let name_ok = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
        if !name_ok(&k.group) || !name_ok(&k.version) || !k.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
            return invalid(format!("{:?} is not a Kubernetes kind", kind_name(&to_gvk(k))));
        }
    }
    if d.children.contains(&d.parent) {
        return invalid("a parent cannot be its own child kind".into());
    }
    for r in &d.related {
        if r.selector.is_empty() {
            return invalid(format!(
                "related kind {} has an empty selector, which selects nothing",
                kind_name(&to_gvk(&r.kind))
            ));
        }
    }
    for (i, l) in d.lookups.iter().enumerate() {
        let name = kind_name(&to_gvk(&l.kind));
        if d.lookups[..i].iter().any(|earlier| earlier.kind == l.kind) {
            return invalid(format!("lookup kind {name} is declared twice"));
        }
        // A patch changes what someone else owns; the parent and the children are the
        // policy's own, written by status and apply.
        if l.patch && (l.kind == d.parent || d.children.contains(&l.kind)) {
            return invalid(format!(
                "lookup kind {name} is declared with patch, but it is the parent or a child kind, which the policy writes already"
            ));
        }
    }
    if let Some(f) = &d.finalizer
        && !finalizer_ok(f)
    {
        return invalid(format!("finalizer {f:?} must be a qualified name such as example.com/cleanup"));
    }
    if podset_world {
        let ok = to_gvk(&d.parent) == podset_kind()
            && d.children.iter().map(to_gvk).eq([pod_kind()])
            && d.related.is_empty()
            && d.lookups.is_empty()
            && d.finalizer.is_none();
        if !ok {
            return invalid(format!(
                "a podset-policy reconciles {} with {} children and nothing else; use the reconcile-policy world for other kinds",
                kind_name(&podset_kind()),
                kind_name(&pod_kind())
            ));
        }
    }
    Ok(())
}

/// A finalizer is a qualified name with a domain prefix (`domain/name`).
fn finalizer_ok(f: &str) -> bool {
    match f.split_once('/') {
        Some((domain, name)) => {
            !domain.is_empty()
                && domain.contains('.')
                && domain.len() <= 253
                && domain.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-'))
                && !name.is_empty()
                && name.len() <= 63
                && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        }
        None => false,
    }
}

/// The labels a related object must carry for `parent`, or `None` when the parent
/// lacks a label the selector takes a value from (then nothing is related).
pub fn related_selector(related: &RelatedKind, parent: &impl ResourceExt) -> Option<BTreeMap<String, String>> {
    related
        .selector
        .iter()
        .map(|req| {
            let value = match &req.value {
                SelectorValue::Exact(v) => v.clone(),
                SelectorValue::ParentName => parent.name_any(),
                SelectorValue::ParentLabel(key) => parent.labels().get(key)?.clone(),
            };
            Some((req.key.clone(), value))
        })
        .collect()
}

/// Whether `labels` carry every label of `selector`.
pub fn matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::bindings::{LabelRequirement, LookupKind};
    use kube::api::DynamicObject;

    fn gvk(g: &str, v: &str, k: &str) -> WitGvk {
        WitGvk { group: g.into(), version: v.into(), kind: k.into() }
    }

    fn memcached() -> Declarations {
        Declarations {
            parent: gvk("cache.example.com", "v1alpha1", "Memcached"),
            children: vec![gvk("apps", "v1", "Deployment")],
            related: vec![RelatedKind {
                kind: gvk("", "v1", "Pod"),
                selector: vec![LabelRequirement {
                    key: "app.kubernetes.io/instance".into(),
                    value: SelectorValue::ParentName,
                }],
            }],
            finalizer: Some("cache.example.com/finalizer".into()),
            lookups: vec![LookupKind { kind: gvk("", "v1", "Secret"), patch: false }],
        }
    }

    #[test]
    fn sound_declarations_pass_and_broken_ones_say_why() {
        assert!(check(&memcached(), false).is_ok());
        let mut d = memcached();
        d.children.push(d.parent.clone());
        assert!(check(&d, false).is_err());
        let mut d = memcached();
        d.finalizer = Some("no-domain".into());
        assert!(check(&d, false).is_err());
        let mut d = memcached();
        d.related[0].selector.clear();
        assert!(check(&d, false).is_err());
        let mut d = memcached();
        d.parent.kind = "Mem cached".into();
        assert!(check(&d, false).is_err());
        assert!(check(&memcached(), true).is_err(), "the PodSet world reconciles PodSets only");
        let mut d = memcached();
        d.lookups.push(d.lookups[0].clone());
        assert!(check(&d, false).expect_err("twice").0.contains("twice"));
        let mut d = memcached();
        d.lookups.push(LookupKind { kind: gvk("apps", "v1", "Deployment"), patch: true });
        assert!(check(&d, false).expect_err("a child").0.contains("patch"));
        d.lookups[1].patch = false;
        assert!(check(&d, false).is_ok(), "a child kind may be looked up, to read");
        let mut d = memcached();
        d.lookups[0].kind.kind = "Se cret".into();
        assert!(check(&d, false).is_err());
    }

    #[test]
    fn related_selectors_take_their_values_from_the_parent() {
        let mut parent =
            DynamicObject::new("cache-a", &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()));
        parent.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "gold".to_string())]));
        let mut r = memcached().related.remove(0);
        let sel = related_selector(&r, &parent).expect("selector");
        assert_eq!(sel["app.kubernetes.io/instance"], "cache-a");
        r.selector.push(LabelRequirement { key: "tier".into(), value: SelectorValue::ParentLabel("tier".into()) });
        r.selector.push(LabelRequirement { key: "app".into(), value: SelectorValue::Exact("memcached".into()) });
        let sel = related_selector(&r, &parent).expect("selector");
        assert!(matches(
            &sel,
            &BTreeMap::from([
                ("app.kubernetes.io/instance".to_string(), "cache-a".to_string()),
                ("tier".to_string(), "gold".to_string()),
                ("app".to_string(), "memcached".to_string()),
                ("extra".to_string(), "x".to_string()),
            ])
        ));
        r.selector.push(LabelRequirement { key: "zone".into(), value: SelectorValue::ParentLabel("zone".into()) });
        assert_eq!(related_selector(&r, &parent), None, "a parent without the label relates to nothing");
        assert!(!matches(&BTreeMap::new(), &BTreeMap::new()), "an empty selector selects nothing");
    }
}
