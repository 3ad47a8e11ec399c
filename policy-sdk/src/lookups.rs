//! Lookups: objects a decision reads that it could not declare statically (the
//! Deployment a spec names, the ConfigMaps that Deployment mounts).
//!
//! A decision names every lookup it reads, on every call. [`Lookups`] reads the
//! answers the host put in the input and remembers what was asked; [`Lookups::finish`]
//! turns that into the `look-up` actions. A lookup with no answer yet reads as "nothing
//! found": the host performs none of such a call's other actions, answers, and calls
//! again, so a decision made from a missing answer never takes effect.
//!
//! ```ignore
//! let mut lookups = Lookups::new(input);
//! let Some(deployment) = lookups.named(DEPLOYMENT, &spec.deployment) else { … };
//! for name in mounted_config_maps(deployment) { lookups.named(CONFIG_MAP, &name); }
//! if !lookups.answered() { return Ok(lookups.finish()); } // skip the work, ask first
//! …
//! actions.extend(lookups.finish());
//! ```

use crate::objects::Kind;
use crate::{Action, Input, KeyValue, Lookup, LookupMatch, Object};

/// The lookups of one decision, and their answers.
pub struct Lookups<'a> {
    input: &'a Input,
    asked: Vec<Lookup>,
    unanswered: usize,
}

impl<'a> Lookups<'a> {
    pub fn new(input: &'a Input) -> Self {
        Lookups { input, asked: Vec::new(), unanswered: 0 }
    }

    /// The object of `kind` named `name` in the parent's namespace, if there is one.
    pub fn named(&mut self, kind: Kind, name: &str) -> Option<&'a Object> {
        self.named_in(kind, "", name)
    }

    /// The object of `kind` named `name` in `namespace` ("" for the parent's, or for a
    /// cluster-scoped kind).
    pub fn named_in(&mut self, kind: Kind, namespace: &str, name: &str) -> Option<&'a Object> {
        let lookup = Lookup { kind: kind.gvk(), namespace: namespace.into(), match_: LookupMatch::Name(name.into()) };
        self.ask(lookup).first()
    }

    /// The objects of `kind` in the parent's namespace carrying every label of `labels`.
    pub fn labelled(&mut self, kind: Kind, labels: &[(&str, &str)]) -> &'a [Object] {
        let labels = labels.iter().map(|(k, v)| KeyValue { key: (*k).into(), value: (*v).into() }).collect();
        self.ask(Lookup { kind: kind.gvk(), namespace: String::new(), match_: LookupMatch::Labels(labels) })
    }

    /// Whether the host answered every lookup asked so far. When it did not, nothing
    /// else this call returns is performed: a policy may return [`Lookups::finish`]
    /// alone and save the work.
    pub fn answered(&self) -> bool {
        self.unanswered == 0
    }

    /// The `look-up` actions: one per distinct lookup asked, in the order asked.
    pub fn finish(self) -> Vec<Action> {
        self.asked.into_iter().map(Action::LookUp).collect()
    }

    fn ask(&mut self, lookup: Lookup) -> &'a [Object] {
        let answer = self.input.looked_up.iter().find(|a| a.lookup == lookup);
        if !self.asked.contains(&lookup) {
            if answer.is_none() {
                self.unanswered += 1;
            }
            self.asked.push(lookup);
        }
        answer.map_or(&[], |a| a.objects.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{answered, input, object};

    const PARENT: Kind = Kind::new("example.com", "v1", "Thing");
    const CONFIG_MAP: Kind = Kind::new("", "v1", "ConfigMap");

    #[test]
    fn an_unanswered_lookup_reads_as_absent_and_is_asked_once() {
        let input = input(object(PARENT, "t", json!({})));
        let mut lookups = Lookups::new(&input);
        assert!(lookups.named(CONFIG_MAP, "settings").is_none());
        assert!(lookups.named(CONFIG_MAP, "settings").is_none());
        assert!(!lookups.answered());
        let asked = lookups.finish();
        assert_eq!(asked.len(), 1, "{asked:?}");
        let Action::LookUp(l) = &asked[0] else { panic!("{asked:?}") };
        assert_eq!(l.match_, LookupMatch::Name("settings".into()));
        assert_eq!(l.namespace, "");
    }

    #[test]
    fn an_answered_lookup_gives_what_the_host_found_even_nothing() {
        let settings = object(CONFIG_MAP, "settings", json!({"data": {"a": "1"}}));
        let input = answered(input(object(PARENT, "t", json!({}))), CONFIG_MAP, "settings", Some(settings));
        let input = answered(input, CONFIG_MAP, "gone", None);
        let mut lookups = Lookups::new(&input);
        assert_eq!(lookups.named(CONFIG_MAP, "settings").map(|o| o.meta.name.as_str()), Some("settings"));
        assert!(lookups.named(CONFIG_MAP, "gone").is_none());
        assert!(lookups.answered());
        assert_eq!(lookups.finish().len(), 2);
    }
}
