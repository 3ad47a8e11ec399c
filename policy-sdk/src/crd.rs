//! What a parent kind's CRD needs for the operator to report progress the way GitOps
//! tools read it (kstatus, `sigs.k8s.io/cli-utils`): a `status.observedGeneration`
//! the operator writes, defaulted to 0 so that an object just created, before any
//! status is written, reads as not yet observed (InProgress) rather than current.
//! Native builds only, for the `*-crdgen` generators.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, JSONSchemaProps,
};

/// The status field the operator writes: the generation the status describes.
pub const OBSERVED_GENERATION: &str = "observedGeneration";

/// `crd` with `status.observedGeneration` in every version's schema (kept when the
/// status type declares it) and `status` defaulted to `{observedGeneration: 0}`.
/// Versions without a status schema are left alone.
pub fn observed(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let status = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("status"));
        let Some(status) = status else { continue };
        status.properties.get_or_insert_with(Default::default).entry(OBSERVED_GENERATION.into()).or_insert_with(|| {
            JSONSchemaProps {
                description: Some("Written by the operator: the `metadata.generation` this status describes.".into()),
                type_: Some("integer".into()),
                format: Some("int64".into()),
                ..Default::default()
            }
        });
        status.default = Some(JSON(serde_json::json!({ OBSERVED_GENERATION: 0 })));
    }
    crd
}
