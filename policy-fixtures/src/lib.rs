//! Hostile policies for the sandbox and operator tests: each cargo feature builds a
//! component that misbehaves in one way. Built for wasm32 by `hack/policy.sh
//! --fixtures`; never run natively.
//!
//! PodSet-world fixtures: `infinite-loop`, `memory-bomb`, `panic`, `action-flood`,
//! `wrong-contract`, `wasi-import`. Any-kind fixtures: `generic-hostile` (reconciles
//! PodSets, looks up ConfigMaps and, depending on the parent's `fixture.podset.dev/attack`
//! label, tries one thing the host must refuse) and `forbidden-kind` (declares a kind the operator's
//! RBAC does not allow), `missing-kind` (reconciles a kind no CRD serves until a test
//! installs one), `trapping-memcached` (reconciles Memcacheds with the Memcached policy's
//! finalizer, and traps on every decision), `trapping-tenant` (declares what the Tenant
//! policy declares, under its name, and traps on every decision).

#[cfg(not(any(
    feature = "wasi-import",
    feature = "generic-hostile",
    feature = "forbidden-kind",
    feature = "missing-kind",
    feature = "trapping-memcached",
    feature = "trapping-tenant"
)))]
wit_bindgen::generate!({ path: "../wit", world: "podset-policy" });

#[cfg(feature = "wasi-import")]
wit_bindgen::generate!({ path: ["../wit", "wit"], world: "podset:fixtures/wasi-import", generate_all });

#[cfg(any(
    feature = "generic-hostile",
    feature = "forbidden-kind",
    feature = "missing-kind",
    feature = "trapping-memcached",
    feature = "trapping-tenant"
))]
wit_bindgen::generate!({ path: "../wit", world: "reconcile-policy" });

use exports::podset::policy::identity::Guest as Identity;
use podset::policy::types::{Declarations, GroupVersionKind, LookupKind, PolicyInfo};

/// The contract version, read from the WIT package line (a fixture that must be
/// incompatible says so explicitly).
fn contract() -> String {
    if cfg!(feature = "wrong-contract") {
        return "9.0.0".into();
    }
    const WIT: &str = include_str!("../../wit/policy.wit");
    WIT.lines()
        .find_map(|l| l.trim().strip_prefix("package podset:policy@"))
        .map(|v| v.trim_end_matches(';').to_string())
        .unwrap_or_default()
}

fn kind(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind { group: group.into(), version: version.into(), kind: kind.into() }
}

struct Fixture;

impl Identity for Fixture {
    fn info() -> PolicyInfo {
        let parent = if cfg!(feature = "missing-kind") {
            kind("fixtures.podset.dev", "v1", "Ghost")
        } else if cfg!(feature = "trapping-memcached") {
            kind("cache.example.com", "v1alpha1", "Memcached")
        } else if cfg!(feature = "trapping-tenant") {
            kind("tenancy.example.com", "v1alpha1", "Tenant")
        } else {
            kind("app.example.com", "v1alpha1", "PodSet")
        };
        let children = if cfg!(feature = "forbidden-kind") {
            vec![kind("apps", "v1", "StatefulSet")]
        } else if cfg!(any(feature = "generic-hostile", feature = "missing-kind")) {
            vec![kind("apps", "v1", "Deployment"), kind("", "v1", "ConfigMap")]
        } else if cfg!(feature = "trapping-memcached") {
            vec![kind("apps", "v1", "Deployment")]
        } else if cfg!(feature = "trapping-tenant") {
            vec![
                kind("", "v1", "Namespace"),
                kind("", "v1", "ResourceQuota"),
                kind("", "v1", "LimitRange"),
                kind("rbac.authorization.k8s.io", "v1", "RoleBinding"),
                kind("networking.k8s.io", "v1", "NetworkPolicy"),
            ]
        } else {
            vec![kind("", "v1", "Pod")]
        };
        // The Memcached policy's finalizer: a swap to this module leaves it on every
        // Memcached, with a policy that can never say it is done.
        let finalizer = cfg!(feature = "trapping-memcached").then(|| "cache.example.com/finalizer".into());
        // The hostile one looks up ConfigMaps, where it may not and without end.
        let lookups = if cfg!(feature = "generic-hostile") {
            vec![LookupKind { kind: kind("", "v1", "ConfigMap"), patch: false }]
        } else {
            Vec::new()
        };
        PolicyInfo {
            // The Tenant policy's name: the administrator's grant (manifests/reach/tenant.yaml)
            // names it, and a module swapped in for it keeps it.
            name: if cfg!(feature = "trapping-tenant") { "guest-tenant" } else { "hostile-fixture" }.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract: contract(),
            declares: Declarations { parent, children, related: Vec::new(), finalizer, lookups },
        }
    }
}

#[cfg(not(any(
    feature = "generic-hostile",
    feature = "forbidden-kind",
    feature = "missing-kind",
    feature = "trapping-memcached",
    feature = "trapping-tenant"
)))]
mod podset_world {
    use super::exports::podset::policy::podset::{Action, Guest, Input};
    use super::podset::policy::types::PolicyError;

    impl Guest for super::Fixture {
        #[allow(unused_variables, unreachable_code)]
        fn decide(input: Input) -> Result<Vec<Action>, PolicyError> {
            #[cfg(feature = "infinite-loop")]
            {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            #[cfg(feature = "memory-bomb")]
            {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            #[cfg(feature = "panic")]
            {
                // Like the default policy: report the panic message before aborting.
                std::panic::set_hook(Box::new(|info| {
                    super::podset::policy::log::log(super::podset::policy::log::Level::Error, &info.to_string())
                }));
                panic!("replicas {} is out of this policy's range", input.podset.replicas);
            }
            #[cfg(feature = "action-flood")]
            {
                return Ok((0..100_000).map(|i| Action::DeletePod(format!("{}-{i}", input.podset.name))).collect());
            }
            #[cfg(feature = "wasi-import")]
            {
                let n = super::wasi::random::random::get_random_u64();
                return Ok(if n % 2 == 0 { Vec::new() } else { vec![Action::RequeueAfter(1)] });
            }
            Ok(Vec::new())
        }
    }
}

#[cfg(any(feature = "generic-hostile", feature = "forbidden-kind", feature = "missing-kind"))]
mod reconcile_world {
    use super::exports::podset::policy::reconciler::{Action, Guest, Input, Lookup, LookupMatch, ObjectKey};
    use super::podset::policy::types::PolicyError;

    /// The label on a parent saying which attack to try.
    const ATTACK: &str = "fixture.podset.dev/attack";

    impl Guest for super::Fixture {
        fn decide(input: Input) -> Result<Vec<Action>, PolicyError> {
            let attack = input.parent.meta.labels.iter().find(|kv| kv.key == ATTACK).map(|kv| kv.value.as_str());
            let name = &input.parent.meta.name;
            let configmap = |extra: &str| {
                format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-cm"{extra}}},"data":{{"a":"b"}}}}"#
                )
            };
            Ok(match attack {
                // A child in another namespace.
                Some("other-namespace") => vec![Action::Create(configmap(r#","namespace":"kube-system""#))],
                // A kind it never declared.
                Some("undeclared-kind") => vec![Action::Create(format!(
                    r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}-secret"}},"stringData":{{"k":"v"}}}}"#
                ))],
                // A ConfigMap the parent does not control (the test creates it).
                Some("foreign-child") => vec![Action::Delete(ObjectKey {
                    kind: super::kind("", "v1", "ConfigMap"),
                    name: "not-mine".into(),
                })],
                // A Deployment whose pod template runs privileged.
                Some("privileged-template") => vec![Action::Apply(format!(
                    r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},"spec":{{"replicas":1,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox:1.35","securityContext":{{"privileged":true}}}}]}}}}}}}}"#
                ))],
                // Pod templates the restricted profile forbids: the obvious (the host's
                // network, a hostPath, seccomp off, an added capability, root, a privileged
                // init container) and beyond (an unconfined AppArmor profile, an unsafe
                // sysctl, an NFS volume, an SELinux type of the host's, a probe that
                // reaches another host).
                Some(
                    attack @ ("host-network" | "host-path" | "seccomp-unconfined" | "added-capability" | "run-as-root"
                    | "privileged-init" | "apparmor-unconfined" | "unsafe-sysctl" | "nfs-volume" | "selinux-spc-t"
                    | "probe-host"),
                ) => {
                    let (pod, container) = match attack {
                        "host-network" => (r#""hostNetwork":true,"#, ""),
                        "host-path" => (r#""volumes":[{"name":"root","hostPath":{"path":"/"}}],"#, ""),
                        "seccomp-unconfined" => ("", r#","securityContext":{"seccompProfile":{"type":"Unconfined"}}"#),
                        "added-capability" => ("", r#","securityContext":{"capabilities":{"add":["SYS_ADMIN"]}}"#),
                        "run-as-root" => ("", r#","securityContext":{"runAsUser":0}"#),
                        "privileged-init" => (
                            r#""initContainers":[{"name":"init","image":"busybox:1.35","securityContext":{"privileged":true}}],"#,
                            "",
                        ),
                        "apparmor-unconfined" => ("", r#","securityContext":{"appArmorProfile":{"type":"Unconfined"}}"#),
                        "unsafe-sysctl" => (r#""securityContext":{"sysctls":[{"name":"kernel.msgmax","value":"65536"}]},"#, ""),
                        "nfs-volume" => (r#""volumes":[{"name":"share","nfs":{"server":"nfs.invalid","path":"/"}}],"#, ""),
                        "selinux-spc-t" => ("", r#","securityContext":{"seLinuxOptions":{"type":"spc_t"}}"#),
                        _ => ("", r#","livenessProbe":{"httpGet":{"host":"169.254.169.254","port":80}}"#),
                    };
                    vec![Action::Apply(format!(
                        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},"spec":{{"replicas":1,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{{pod}"containers":[{{"name":"c","image":"busybox:1.35"{container}}}]}}}}}}}}"#
                    ))]
                }
                // Owner references are the host's to set.
                Some("owner-references") => vec![Action::Create(configmap(
                    r#","ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"x","controller":true}]"#,
                ))],
                // A ConfigMap of another namespace: a namespaced parent reads its own.
                Some("lookup-elsewhere") => vec![Action::LookUp(Lookup {
                    kind: super::kind("", "v1", "ConfigMap"),
                    namespace: "kube-system".into(),
                    match_: LookupMatch::Name("kube-root-ca.crt".into()),
                })],
                // Each answer asks for one more ConfigMap: the lookups never settle.
                Some("lookups-unstable") => vec![Action::LookUp(Lookup {
                    kind: super::kind("", "v1", "ConfigMap"),
                    namespace: String::new(),
                    match_: LookupMatch::Name(format!("{name}-{}", input.looked_up.len())),
                })],
                // Two children in waves: the second once the first is ready by its rule.
                Some("waves") => vec![
                    Action::Apply(format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-first","annotations":{{"podset.dev/ready-when":"[{{\"field\":\"/data/ready\",\"equals\":\"yes\"}}]"}}}},"data":{{"ready":"yes"}}}}"#
                    )),
                    Action::Apply(format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-second","annotations":{{"podset.dev/wave":"1"}}}},"data":{{"a":"b"}}}}"#
                    )),
                ],
                // Three ConfigMaps in waves 0, 1 and 2: a teardown the fault suite interrupts.
                Some("three-waves") => (0..3)
                    .map(|w| {
                        Action::Apply(format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-w{w}","annotations":{{"podset.dev/wave":"{w}"}}}},"data":{{"a":"b"}}}}"#
                        ))
                    })
                    .collect(),
                // A ConfigMap in the namespace the parent's label `fixture.podset.dev/to`
                // names: refused unless the administrator granted it.
                Some("elsewhere") => {
                    let to = input.parent.meta.labels.iter().find(|kv| kv.key == "fixture.podset.dev/to");
                    let namespace = to.map(|kv| kv.value.as_str()).unwrap_or_default();
                    vec![Action::Apply(configmap(&format!(r#","namespace":"{namespace}""#)))]
                }
                // What a schema refuses, for `policy test --schemas`: a Deployment with
                // a misspelled field (`replicass`)...
                Some("misspelled-field") => vec![Action::Create(format!(
                    r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},"spec":{{"replicass":2,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox:1.35"}}]}}}}}}}}"#
                ))],
                // ...and a PodSet whose template mounts a hostPath, which a CEL rule of
                // the PodSet CRD refuses.
                Some("breaks-cel-rule") => vec![Action::Create(format!(
                    r#"{{"apiVersion":"app.example.com/v1alpha1","kind":"PodSet","metadata":{{"name":"{name}-copy"}},"spec":{{"replicas":1,"template":{{"spec":{{"containers":[{{"name":"c","image":"busybox:1.35"}}],"volumes":[{{"name":"host","hostPath":{{"path":"/etc"}}}}]}}}}}}}}"#
                ))],
                // A harmless child: what the others are refused next to.
                _ => vec![Action::Apply(configmap(""))],
            })
        }
    }
}

// Component export names are not valid native symbols; only wasm32 builds export.
#[cfg(target_arch = "wasm32")]
export!(Fixture);

#[cfg(any(feature = "trapping-memcached", feature = "trapping-tenant"))]
mod trapping {
    use super::exports::podset::policy::reconciler::{Action, Guest, Input};
    use super::podset::policy::types::PolicyError;

    impl Guest for super::Fixture {
        fn decide(_: Input) -> Result<Vec<Action>, PolicyError> {
            core::arch::wasm32::unreachable()
        }
    }
}
