//! The objects every cache holds (parents, children, related objects): typed
//! metadata, and every other top-level field (`spec`, `status`, `data`, …) kept as the
//! JSON text it arrived in.
//!
//! A `DynamicObject` holds its body as a `serde_json::Value`, a tree of `BTreeMap`
//! nodes several times the size of the JSON text: heaptrack of the operator at 1 000
//! PodSets × 5 pods put 63 MB of its 129 MB heap peak in those nodes. A reconcile reads
//! a few fields (a pod's phase and conditions, a parent's spec and status) and hands
//! the rest to the policy as JSON text anyway, so the text is what is kept, and fields
//! are parsed when read.
//!
//! `metadata.managedFields` is skipped while reading, never built: no reconcile reads
//! it, and it is the largest part of most metadata. Built and dropped afterwards, it was
//! 113 558 `BTreeMap` inserts and 6.3 MB of the heap's peak while a restarted operator
//! listed 1 000 PodSets × 5 pods (heaptrack), and the holes it left kept the RSS up.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::core::DynamicResourceScope;
use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// A Kubernetes object of any kind, its body as JSON text.
#[derive(Clone, Debug)]
pub struct Object {
    pub types: Option<TypeMeta>,
    pub metadata: ObjectMeta,
    /// Every top-level field but `apiVersion`, `kind` and `metadata`, in the order
    /// received.
    fields: Vec<(Box<str>, Box<RawValue>)>,
}

impl Object {
    /// The JSON text of the top-level field `name`.
    pub fn field(&self, name: &str) -> Option<&RawValue> {
        self.fields.iter().find(|(k, _)| k.as_ref() == name).map(|(_, v)| v.as_ref())
    }

    /// The top-level field `name` parsed as `T`; `None` when absent or null.
    pub fn parse<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, serde_json::Error> {
        match self.field(name) {
            Some(raw) if raw.get() != "null" => serde_json::from_str(raw.get()).map(Some),
            _ => Ok(None),
        }
    }

    /// The body (every field but the type and metadata) as one JSON object's text.
    pub fn body(&self) -> String {
        let len: usize = self.fields.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum();
        let mut out = String::with_capacity(len + 2);
        out.push('{');
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            // Field names arrive unescaped from the parser: escape them again.
            out.push_str(&Value::from(k.as_ref()).to_string());
            out.push(':');
            out.push_str(v.get());
        }
        out.push('}');
        out
    }
}

impl From<DynamicObject> for Object {
    fn from(o: DynamicObject) -> Self {
        let fields = match o.data {
            Value::Object(map) => map
                .into_iter()
                .filter_map(|(k, v)| Some((k.into_boxed_str(), serde_json::value::to_raw_value(&v).ok()?)))
                .collect(),
            _ => Vec::new(),
        };
        Object { types: o.types, metadata: o.metadata, fields }
    }
}

/// The kind is shared: it is the `dyntype` of every `ObjectRef` (a parent's key in the
/// store, the work queue and its timers, the status writes, kube-runtime's predicate
/// cache), which held five strings of its own in each of those maps.
impl Resource for Object {
    type DynamicType = Arc<ApiResource>;
    type Scope = DynamicResourceScope;

    fn group(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Reads the object straight from the API server's JSON: the metadata into its type,
/// each other field as its text, with no tree built in between.
impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;

        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = Object;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
                let (mut api_version, mut kind, mut metadata) = (None, None, None);
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => api_version = Some(map.next_value::<String>()?),
                        "kind" => kind = Some(map.next_value::<String>()?),
                        "metadata" => metadata = Some(map.next_value_seed(WithoutManagedFields)?),
                        _ => fields.push((key.into_boxed_str(), map.next_value::<Box<RawValue>>()?)),
                    }
                }
                // Most objects have two or three fields: no spare capacity kept per object.
                fields.shrink_to_fit();
                let types = match (api_version, kind) {
                    (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
                    _ => None,
                };
                Ok(Object { types, metadata: metadata.unwrap_or_default(), fields })
            }
        }

        d.deserialize_map(ObjectVisitor)
    }
}

/// Reads `ObjectMeta` while skipping `managedFields` (see the module docs): the typed
/// metadata's own deserializer reads the server's map through [`Skipping`].
struct WithoutManagedFields;

impl<'de> DeserializeSeed<'de> for WithoutManagedFields {
    type Value = ObjectMeta;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ObjectMeta, D::Error> {
        struct MetaVisitor;

        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = ObjectMeta;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object's metadata")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectMeta, A::Error> {
                let mut meta = ObjectMeta::deserialize(MapAccessDeserializer::new(Skipping(map)))?;
                // serde grows a list to four elements at its first push: a pod's one owner
                // reference kept room for three more. The live heap at 1000 PodSets × 5
                // converged went from 28.5 to 27.0 MB (heaptrack, 2026-11-30).
                if let Some(refs) = meta.owner_references.as_mut() {
                    refs.shrink_to_fit();
                }
                if let Some(finalizers) = meta.finalizers.as_mut() {
                    finalizers.shrink_to_fit();
                }
                Ok(meta)
            }
        }

        d.deserialize_map(MetaVisitor)
    }
}

/// A map without its `managedFields` entry: the value is read past, not built.
struct Skipping<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Skipping<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.0.next_key::<Cow<'de, str>>()? {
            if key == "managedFields" {
                self.0.next_value::<IgnoredAny>()?;
                continue;
            }
            return seed.deserialize(StrDeserializer::<A::Error>::new(&key)).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","labels":{"x":"y"}},
        "spec":{"nodeName":"n1","containers":[{"name":"c","image":"busybox"}]},"status":{"phase":"Running"},"we\"ird":null}"#;

    #[test]
    fn metadata_is_typed_and_the_body_is_kept_as_it_came() {
        let o: Object = serde_json::from_str(POD).expect("object");
        assert_eq!(o.types.as_ref().map(|t| t.kind.as_str()), Some("Pod"));
        assert_eq!(o.metadata.labels.as_ref().and_then(|l| l.get("x")).map(String::as_str), Some("y"));
        assert_eq!(o.field("status").map(RawValue::get), Some(r#"{"phase":"Running"}"#));
        assert_eq!(
            o.parse::<Value>("spec").expect("spec"),
            Some(json!({"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}))
        );
        assert_eq!(o.parse::<Value>("we\"ird").expect("null"), None, "null reads as absent");
        assert_eq!(o.parse::<Value>("data").expect("absent"), None);
        let body: Value = serde_json::from_str(&o.body()).expect("the body is one JSON object");
        let whole: Value = serde_json::from_str(POD).expect("pod");
        let expected = json!({ "spec": whole["spec"], "status": whole["status"], "we\"ird": null });
        assert_eq!(body, expected);
    }

    #[test]
    fn a_dynamic_object_converts_to_the_same() {
        let d: DynamicObject = serde_json::from_str(POD).expect("dynamic");
        let from_dynamic = Object::from(d);
        let parsed: Object = serde_json::from_str(POD).expect("object");
        let body = |o: &Object| serde_json::from_str::<Value>(&o.body()).expect("body");
        assert_eq!(body(&from_dynamic), body(&parsed));
        assert_eq!(from_dynamic.metadata, parsed.metadata);
    }

    #[test]
    fn a_watch_event_and_a_list_read_into_objects() {
        let event: kube::core::WatchEvent<Object> =
            serde_json::from_str(&format!(r#"{{"type":"ADDED","object":{POD}}}"#)).expect("watch event");
        let kube::core::WatchEvent::Added(o) = event else { panic!("not an ADDED event") };
        assert_eq!(o.metadata.name.as_deref(), Some("a"));
        let list: kube::core::ObjectList<Object> = serde_json::from_str(&format!(
            r#"{{"apiVersion":"v1","kind":"PodList","metadata":{{"resourceVersion":"5"}},"items":[{POD},{POD}]}}"#
        ))
        .expect("list");
        assert_eq!(list.items.len(), 2);
        assert!(list.items[1].field("spec").is_some());
    }

    #[test]
    fn managed_fields_are_skipped_and_the_rest_of_the_metadata_is_read() {
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"kubelet",
            "operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}}}],"namespace":"ns",
            "uid":"u1","resourceVersion":"9","labels":{"x":"y"},"ownerReferences":[{"apiVersion":"v1","kind":"K",
            "name":"p","uid":"u0","controller":true}]},"status":{"phase":"Running"}}"#;
        let o: Object = serde_json::from_str(pod).expect("object");
        let whole: DynamicObject = serde_json::from_str(pod).expect("dynamic");
        assert!(whole.metadata.managed_fields.is_some(), "the test's pod has managed fields");
        assert_eq!(o.metadata.managed_fields, None);
        assert_eq!(o.metadata, ObjectMeta { managed_fields: None, ..whole.metadata });
        assert_eq!(o.field("status").map(RawValue::get), Some(r#"{"phase":"Running"}"#));
        let refs = o.metadata.owner_references.as_ref().expect("the owner reference");
        assert_eq!(refs.capacity(), refs.len(), "a cached object keeps no room for more owners");
        let broken = r#"{"metadata":{"managedFields":[{"fieldsV1":{"f:a":}}],"name":"a"}}"#;
        assert!(serde_json::from_str::<Object>(broken).is_err(), "a malformed skipped value is still an error");
    }
}
