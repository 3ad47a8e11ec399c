//! The Memcached resource (operator-sdk's sample), untyped: its Rust types live in the
//! policy crate, built for wasm32.

use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

/// The Memcacheds of namespace `ns`.
pub fn memcacheds(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"));
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A Memcached `name` of `size` pods, as a user writes it.
pub fn memcached(name: &str, size: i32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": { "name": name },
        "spec": { "size": size }
    }))
    .expect("a Memcached")
}
