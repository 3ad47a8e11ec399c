//! The custom resources, as Rust types: the single source of the CRD YAML
//! (`podset-host crd`, `make manifests`; a test fails when manifests/crd/podset-host.yaml drifts).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use kube::core::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod rollout;

pub use rollout::{GateStatus, Rollout, RolloutAbort, RolloutGates, RolloutPhase, RolloutStatus, RolloutStep};

/// The operator's own API group: ReconcilePolicy, and the labels, annotations and
/// finalizers the host writes. The project's domain (the node simulator's `podset.dev/…`
/// labels use it too), not a sample's.
pub const GROUP: &str = "podset.dev";

/// The PodSet sample's group, kept from the operator-sdk tutorial the project began from
/// (as Memcached keeps `cache.example.com`).
pub const PODSET_GROUP: &str = "app.example.com";

/// A set of identical pods kept at `spec.replicas` by a reconcile policy.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "app.example.com",
    version = "v1alpha1",
    kind = "PodSet",
    namespaced,
    shortname = "ps",
    status = "PodSetStatus",
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","description":"Pods requested"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas","description":"Active pods that are ready"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".status.policyDigest","description":"Digest of the policy that decided last"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodSetSpec {
    /// Number of pods to keep active (Pending or Running, not terminating).
    #[schemars(range(min = 1, max = 10))]
    pub replicas: i32,

    /// Template of the pods. Without one, pods run busybox `sleep 3600`. Pods get the
    /// PodSet's selector label, an owner reference, and the restricted security
    /// context: what the template leaves unset is set restricted; host namespaces,
    /// hostPath volumes, host ports and privileged containers are refused.
    // Absent rather than null (never serialized as null): schema of the inner type, so
    // the published OpenAPI keeps its type and `kubectl explain` can describe it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PodTemplateSpec")]
    pub template: Option<PodTemplateSpec>,

    /// The ReconcilePolicy (same namespace) that decides for this PodSet. Without it,
    /// the operator's default policy decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PolicyRef")]
    pub policy_ref: Option<PolicyRef>,
}

/// Names a ReconcilePolicy in the PodSet's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PolicyRef {
    /// Name of the ReconcilePolicy.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Observed state, written by the operator.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Defaulted so that a PodSet just created reads as not yet observed: GitOps tools
// (kstatus) read an object without `observedGeneration` as already current.
#[schemars(extend("default" = {"observedGeneration": 0}))]
pub struct PodSetStatus {
    /// Names of the active pods, sorted.
    #[serde(default)]
    pub pod_names: Vec<String>,

    /// Active pods whose Ready condition is True.
    #[serde(default)]
    pub available_replicas: i32,

    /// The `metadata.generation` the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub observed_generation: Option<i64>,

    /// `Available` (from the policy) and `PolicyFailed` (from the operator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Written by the operator: the digest of the policy that decided last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
}

/// A reconcile policy module published in the cluster: the Wasm component is the
/// `binaryData` entry of a ConfigMap or an OCI artifact in a registry, pinned by its
/// digest. It decides the objects of the kind it declares, in its namespace, that name
/// it (`spec.policyRef.name`) or that its `spec.selector` matches.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "podset.dev",
    version = "v1alpha1",
    kind = "ReconcilePolicy",
    namespaced,
    shortname = "rpol",
    status = "ReconcilePolicyStatus",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".status.kind","description":"The kind it reconciles"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode","description":"Enforce (decides and acts) or Shadow (decides beside the live policy, never acts)"}"#,
    printcolumn = r#"{"name":"Revision","type":"integer","jsonPath":".status.revision","description":"The revision serving (status.revisions)"}"#,
    printcolumn = r#"{"name":"Rollout","type":"string","jsonPath":".status.rollout.phase","description":"The rollout of spec.sha256's module: Progressing, Paused, Completed or Aborted"}"#,
    printcolumn = r#"{"name":"Step","type":"string","jsonPath":".status.rollout.progress","description":"The rollout's step and its progress"}"#,
    printcolumn = r#"{"name":"Agreed","type":"integer","jsonPath":".status.shadow.agreed","description":"Shadow decisions that agreed with the live policy's"}"#,
    printcolumn = r#"{"name":"Differed","type":"integer","jsonPath":".status.shadow.differed","description":"Shadow decisions that differed from the live policy's"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.loadedDigest","description":"Digest of the module loaded"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "oldSelf.mode != 'Enforce' || self.mode == 'Enforce'",
    "message": "spec.mode cannot change from Enforce to Shadow: that would switch a live policy off. Create a new ReconcilePolicy in Shadow mode instead"
}, {
    "rule": "has(self.configMapRef) != has(self.image)",
    "message": "give exactly one of spec.configMapRef and spec.image"
}, {
    "rule": "has(self.image) || (!has(self.imagePullSecrets) && !has(self.registryCA))",
    "message": "spec.imagePullSecrets and spec.registryCA apply to spec.image only"
}, {
    "rule": "!has(self.rollout) || self.mode == 'Enforce'",
    "message": "spec.rollout is for an Enforce policy: a Shadow policy never serves, so it has nothing to roll out"
}]))]
pub struct ReconcilePolicySpec {
    /// Where the module is: a key of a ConfigMap's `binaryData` in this namespace
    /// (modules up to ~1 MiB, the size of a ConfigMap). Exactly one of configMapRef and
    /// image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ConfigMapKeyRef")]
    pub config_map_ref: Option<ConfigMapKeyRef>,
    /// Where the module is: an OCI artifact, `REGISTRY/REPOSITORY:TAG` or
    /// `REGISTRY/REPOSITORY@sha256:…` (`podset-host policy push` publishes one). A tag
    /// is resolved once, and the digest it resolved to is shown in `status.image`; a
    /// tag moved later is reported there and never loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 1, max = 512))]
    pub image: Option<String>,
    /// `kubernetes.io/dockerconfigjson` Secrets in this namespace with the registry's
    /// credentials; read at every pull, so a rotated Secret is picked up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The key of a Secret in this namespace holding the PEM CA certificate of the
    /// registry, trusted besides the system's and the operator's `--registry-ca`.
    #[serde(default, rename = "registryCA", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "SecretKeyRef")]
    pub registry_ca: Option<SecretKeyRef>,
    /// The module's digest, `sha256:<64 hex>`: the sha256 of its bytes (what
    /// `policy push` prints). A module with another digest is refused, so what runs
    /// is exactly what was reviewed.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub sha256: String,
    /// Objects of the policy's kind in this namespace whose labels match are decided
    /// by this policy instead of the default one: a canary. An empty selector matches
    /// every object; without one, only objects that name this policy are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "LabelSelector")]
    pub selector: Option<LabelSelector>,
    /// `Enforce`: the policy decides and its actions are performed. `Shadow`: it
    /// decides beside the live policy, on the same input, for every object of its kind
    /// in this namespace that `selector` matches (all of them without a selector); its
    /// actions are compared with the live policy's and never performed, and
    /// `status.shadow` reports how they compare. A Shadow policy may be promoted to
    /// Enforce; an Enforce policy cannot become a Shadow.
    #[serde(default)]
    pub mode: PolicyMode,
    /// Where the policy's children may go beyond this namespace. Honoured only in the
    /// namespace the operator's `--reach-namespace` names (one only its administrator
    /// writes); a ReconcilePolicy elsewhere that sets it is refused (`ReachNotAllowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Reach")]
    pub reach: Option<Reach>,
    /// A service account of this namespace the policy acts as: the host writes its
    /// children impersonating it, so the policy may do what that account may and no
    /// more (what the operator may besides is not lent). Checked when the policy loads
    /// (`ServiceAccountForbidden`) and by the API server at every write. Without it,
    /// the operator's `--default-service-account` if given, else the operator itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub service_account_name: Option<String>,
    /// How a new module takes over from the one serving: steps of shadow and of growing
    /// shares of the parents, each gated, with an automatic abort. Without it, a new
    /// module replaces the serving one at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Rollout")]
    pub rollout: Option<Rollout>,
}

/// Whether a ReconcilePolicy acts or only watches.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PolicyMode {
    #[default]
    Enforce,
    Shadow,
}

/// Names a Secret in the policy's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct LocalObjectReference {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A key of a Secret in the policy's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the PEM certificate.
    #[serde(default = "default_ca_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_ca_key() -> String {
    "ca.crt".into()
}

/// A key of a ConfigMap in the policy's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The `binaryData` key holding the module.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// What an administrator lets one policy write beyond its parent's namespace. Without
/// it (the default) a policy writes children in its parent's namespace only. Given by
/// the operator's administrator (`podset-host run --reach FILE`, or `spec.reach` of a
/// ReconcilePolicy in the namespace `run --reach-namespace` names), never by whoever may
/// create a ReconcilePolicy elsewhere: see docs/reference/enforced.md.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reach {
    /// Cluster-scoped kinds the policy may create, own and delete. A namespaced parent's
    /// cluster-scoped children carry the host's mark instead of an owner reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_kinds: Vec<GroupKind>,
    /// Namespaces (beyond a namespaced parent's own) where namespaced children may be
    /// written.
    #[serde(default)]
    pub namespaces: NamespaceReach,
    /// The Pod Security profile the host holds the policy's pods and pod templates to:
    /// `Restricted` (the default) or `Baseline`, which allows running as root, any
    /// volume type but hostPath, capabilities of the runtime's default set, and no
    /// seccomp profile, and sets nothing the spec leaves unset.
    #[serde(default, skip_serializing_if = "PodSecurity::is_restricted")]
    pub pod_security: PodSecurity,
}

/// A Pod Security Standards level the host enforces on pods.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodSecurity {
    #[default]
    Restricted,
    Baseline,
}

impl PodSecurity {
    pub fn is_restricted(&self) -> bool {
        *self == PodSecurity::Restricted
    }
}

impl Reach {
    /// Whether it grants any namespace beyond the parent's.
    pub fn grants_namespaces(&self) -> bool {
        let n = &self.namespaces;
        !n.names.is_empty() || n.owned || n.selector.is_some()
    }
}

/// A kind, whatever its version: `group` is "" for the core group.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
pub struct GroupKind {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
}

/// Namespaces a policy may write in: those named, those whose labels match the
/// selector, and those the parent owns.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceReach {
    /// These namespaces, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The namespaces whose labels match (an empty selector matches every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "LabelSelector")]
    pub selector: Option<LabelSelector>,
    /// The namespaces that are the parent's own children: a `v1 Namespace` it controls
    /// (observed, or created earlier in the same decision). A Tenant's policy gets this,
    /// so that it writes into the namespace it made and nowhere else.
    #[serde(default)]
    pub owned: bool,
}

/// A `--reach` file: the policy it is for (by the name its module declares; file
/// policies only) and what that policy may reach.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReachGrant {
    pub policy: String,
    pub reach: Reach,
}

/// Written by the operator.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilePolicyStatus {
    /// Digest of the module serving now: the last one that loaded, even when a newer
    /// one was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub loaded_digest: Option<String>,
    /// The kind the serving module reconciles, e.g. `cache.example.com/v1alpha1 Memcached`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub kind: Option<String>,
    /// The `metadata.generation` last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub observed_generation: Option<i64>,
    /// `Ready` (a module is serving) and `Failed` (the current spec could not be loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Where the module of `spec.image` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ImageStatus")]
    pub image: Option<ImageStatus>,
    /// How a Shadow policy's decisions compared with the live ones, since its module
    /// loaded (or a rollout's, in its shadow step). Written every few seconds while it
    /// decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ShadowStatus")]
    pub shadow: Option<ShadowStatus>,
    /// The revision serving: its number in `revisions`. During a rollout, the one the
    /// parents the new module does not decide for yet are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub revision: Option<i64>,
    /// The modules that served this policy, oldest first, the last few
    /// (`run --revision-history`): each can be brought back (`policy rollback`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<Revision>,
    /// The rollout of `spec.sha256`'s module, when `spec.rollout` planned one; it stays
    /// once the rollout ended, saying how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "RolloutStatus")]
    pub rollout: Option<RolloutStatus>,
}

/// A module that served a ReconcilePolicy.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// Its number, from 1, in the order the modules first served.
    pub revision: i64,
    /// The module's digest (`spec.sha256`).
    pub digest: String,
    /// Where it came from: a ConfigMap key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ConfigMapKeyRef")]
    pub config_map_ref: Option<ConfigMapKeyRef>,
    /// Where it came from: `spec.image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub image: Option<String>,
    /// The trusted key that verified its signature, when signatures are required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub signed_by: Option<String>,
    /// When it last began to serve (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub started: Option<String>,
    /// When it last stopped serving (RFC 3339); unset while it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub stopped: Option<String>,
    /// Why it stopped: `Replaced` (another revision took over), `RolledBack` (an older one
    /// was brought back), `RolloutAborted` or `Superseded` (a newer module's rollout
    /// began before this one's ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub stop_reason: Option<String>,
    /// It served every parent the policy selects (it swapped in at once, or its rollout
    /// completed): bringing it back is a rollback, which swaps in at once.
    #[serde(default)]
    pub complete: bool,
}

/// What `spec.image` resolved to.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// `spec.image` as it was resolved.
    #[serde(default)]
    pub reference: String,
    /// The manifest digest the reference resolved to (once per spec.image), which the
    /// module was pulled by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub resolved_digest: Option<String>,
    /// The digest the tag points to now, when it moved away from resolvedDigest:
    /// reported, never loaded (change spec.image or spec.sha256 to take it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub tag_digest: Option<String>,
    /// The trusted key that verified the module's signature, when signatures are required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub signed_by: Option<String>,
    /// Why the registry was not used the last time it was asked: it could not be
    /// reached, and the module from the operator's cache serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub unreachable: Option<String>,
}

/// The tally of a Shadow policy's decisions.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowStatus {
    /// The module the counts are for: they start again when another one loads.
    #[serde(default)]
    pub digest: String,
    /// Decisions compared: agreed + differed + failed.
    #[serde(default)]
    pub decisions: i64,
    /// The shadow decided the same actions as the live policy.
    #[serde(default)]
    pub agreed: i64,
    /// The shadow decided other actions.
    #[serde(default)]
    pub differed: i64,
    /// The shadow could not decide (trap, deadline, memory) or decided what the checks refuse.
    #[serde(default)]
    pub failed: i64,
    /// Not decided: the shadow queue was full.
    #[serde(default)]
    pub dropped: i64,
    /// Objects on which the shadow differed after agreeing (or at its first decision).
    #[serde(default)]
    pub first_divergences: i64,
    /// Differences on objects where the shadow had already differed at its previous
    /// decision. Once it differs, a shadow decides on the world the live policy built,
    /// and a stateful policy keeps differing: replay recorded inputs to see why.
    #[serde(default)]
    pub persistent_divergences: i64,
    /// The last few differences, newest last.
    // Written even when empty: the status is written as a merge patch, which keeps a
    // list it does not name (another module's differences would stay).
    #[serde(default)]
    pub last_differences: Vec<ShadowDifference>,
    /// The last few failures, newest last: why the shadow could not decide, or what
    /// the checks or the kinds' schemas refused of its decision.
    #[serde(default)]
    pub last_failures: Vec<ShadowFailure>,
}

/// One decision the shadow could not make, or made and had refused.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowFailure {
    /// The object decided about: `Kind namespace/name`.
    pub object: String,
    /// When (RFC 3339).
    pub time: String,
    /// Why: the reason (`PolicyTrapped`, `DeadlineExceeded`, a check's or a schema's
    /// rule) and its message.
    pub reason: String,
}

/// One decision on which the shadow differed.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowDifference {
    /// The object decided about: `Kind namespace/name`.
    pub object: String,
    /// When the decision was made (RFC 3339).
    pub time: String,
    /// The live actions (`-`) against the shadow's (`+`), as a unified diff of their
    /// normal forms.
    pub diff: String,
}

/// The PodSet CRD, its schema refusing what the restricted security profile forbids:
/// host namespaces, privileged containers and privilege escalation (an `enum` of
/// `false`), hostPath volumes and host ports (CEL rules). The API server then refuses
/// such a PodSet with a message naming the field. The operator checks the same again
/// when it builds the pods (`reconcile::restrict`), for parents of any kind and for a
/// CRD older than this one.
pub fn podset_crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(PodSet::crd()).unwrap_or_default();
    forbid_true(&mut crd);
    if let Some(pod) = crd.pointer_mut(POD_SPEC) {
        forbid_host_access(pod);
    }
    serde_json::from_value(crd).unwrap_or_else(|_| PodSet::crd())
}

/// The template's pod spec inside the CRD.
const POD_SPEC: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/template/properties/spec";

/// CEL rules on each volume and each container port, so that each is evaluated once
/// per item (a rule over whole lists would be estimated by the API server at the
/// product of their unbounded lengths, and refused as too costly).
fn forbid_host_access(pod: &mut serde_json::Value) {
    let rule = |rule: &str, message: &str| serde_json::json!([{ "rule": rule, "message": message }]);
    if let Some(volume) = pod.pointer_mut("/properties/volumes/items") {
        volume["x-kubernetes-validations"] = rule(
            "!has(self.hostPath)",
            "hostPath volumes mount the node's filesystem, which the restricted security profile of PodSet pods forbids",
        );
    }
    for list in ["containers", "initContainers"] {
        if let Some(port) = pod.pointer_mut(&format!("/properties/{list}/items/properties/ports/items")) {
            port["x-kubernetes-validations"] = rule(
                "!has(self.hostPort) || self.hostPort == 0",
                "host ports bind the node's network, which the restricted security profile of PodSet pods forbids",
            );
        }
    }
}

const MUST_BE_FALSE: &[&str] = &["hostNetwork", "hostPID", "hostIPC", "privileged", "allowPrivilegeEscalation"];

fn forbid_true(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get_mut("properties") {
                for field in MUST_BE_FALSE {
                    if let Some(p) = props.get_mut(*field).and_then(serde_json::Value::as_object_mut)
                        && p.get("type").and_then(serde_json::Value::as_str) == Some("boolean")
                    {
                        p.insert("enum".into(), serde_json::json!([false]));
                        let d =
                            p.get("description").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
                        p.insert(
                            "description".into(),
                            format!("{d} Must be false: PodSet pods run under the restricted security profile.")
                                .trim()
                                .into(),
                        );
                    }
                }
            }
            map.values_mut().for_each(forbid_true);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(forbid_true),
        _ => {}
    }
}

/// Every CRD this operator serves, as one multi-document YAML.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in [podset_crd(), ReconcilePolicy::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_crd_yaml_matches_the_rust_types() {
        let committed = include_str!("../../../manifests/crd/podset-host.yaml");
        let generated = crds_yaml().expect("CRDs serialize");
        assert!(
            committed == generated,
            "manifests/crd/podset-host.yaml is out of date with host/src/crd.rs: run `make manifests` and commit the result"
        );
    }

    #[test]
    fn replicas_schema_is_bounded_like_the_seeds() {
        let crd = serde_json::to_value(podset_crd()).expect("CRD serializes");
        let replicas =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
        assert_eq!(replicas["minimum"].as_f64(), Some(1.0));
        assert_eq!(replicas["maximum"].as_f64(), Some(10.0));
        assert!(crd["spec"]["versions"][0]["subresources"]["status"].is_object());
        let pod = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]
            ["properties"]["spec"]["properties"];
        assert_eq!(pod["hostNetwork"]["enum"], serde_json::json!([false]));
        let container = &pod["containers"]["items"]["properties"]["securityContext"]["properties"];
        assert_eq!(container["privileged"]["enum"], serde_json::json!([false]));
    }

    #[test]
    fn host_paths_and_host_ports_have_cel_rules() {
        let crd = serde_json::to_value(podset_crd()).expect("CRD serializes");
        let pod = crd.pointer(POD_SPEC).expect("the template's pod spec");
        let rule = |at: &str| pod.pointer(at).map(|items| items["x-kubernetes-validations"][0]["rule"].clone());
        assert_eq!(rule("/properties/volumes/items"), Some(serde_json::json!("!has(self.hostPath)")));
        for list in ["containers", "initContainers"] {
            let port = rule(&format!("/properties/{list}/items/properties/ports/items"));
            assert_eq!(port, Some(serde_json::json!("!has(self.hostPort) || self.hostPort == 0")), "{list}");
        }
    }
}
