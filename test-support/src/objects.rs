//! Objects as the API server hands them out, built without a cluster: for the host's
//! unit tests and its in-process tests alike (their types are kube's, so both can use
//! them). A PodSet `web` in namespace `ns` and the pods it controls.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

pub fn podsets() -> ApiResource {
    ApiResource::erase::<podset_host::crd::PodSet>(&())
}

pub fn pods() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&())
}

pub fn deployments() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&())
}

pub fn configmaps() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}

/// guest-tenant's cluster-scoped `Tenant` (`tenancy.example.com/v1alpha1`).
pub fn tenants() -> ApiResource {
    ApiResource {
        group: "tenancy.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "tenancy.example.com/v1alpha1".into(),
        kind: "Tenant".into(),
        plural: "tenants".into(),
    }
}

/// guest-cronjob's `CronJob` (`batch.tutorial.kubebuilder.io/v1`), the kubebuilder tutorial's.
pub fn cronjobs() -> ApiResource {
    ApiResource {
        group: "batch.tutorial.kubebuilder.io".into(),
        version: "v1".into(),
        api_version: "batch.tutorial.kubebuilder.io/v1".into(),
        kind: "CronJob".into(),
        plural: "cronjobs".into(),
    }
}

/// The PodSet `web` in namespace `ns`: generation 2, resourceVersion 7.
pub fn podset(replicas: i32) -> DynamicObject {
    let mut p = DynamicObject::new("web", &podsets()).within("ns");
    p.metadata.uid = Some("uid-web".into());
    p.metadata.generation = Some(2);
    p.metadata.resource_version = Some("7".into());
    p.data = json!({ "spec": { "replicas": replicas } });
    p
}

/// A pod `name` that `web` controls, in `phase`.
pub fn pod(name: &str, phase: &str) -> DynamicObject {
    let mut p = DynamicObject::new(name, &pods()).within("ns");
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "app.example.com/v1alpha1".into(),
        kind: "PodSet".into(),
        name: "web".into(),
        uid: "uid-web".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    p.data = json!({ "spec": { "containers": [] }, "status": { "phase": phase } });
    p
}

/// A ConfigMap `name` as a policy's action carries it, with `extra` metadata.
pub fn configmap(name: &str, extra: Value) -> Value {
    let mut v = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "a": "b" } });
    if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}
