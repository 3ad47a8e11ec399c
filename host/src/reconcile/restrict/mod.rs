//! The Pod Security Standards' "restricted" profile, enforced on every pod and pod
//! template the host creates for any parent: a PodSet's pods, a Deployment's template,
//! a Job's, a CronJob's. What a spec leaves unset that the profile requires is set to
//! the restricted value; what a spec explicitly weakens is refused, naming the field and
//! the check, so nobody is surprised by a pod running differently from what they wrote.
//! The spec is edited as JSON so that fields this host does not know survive.
//!
//! The checks are those of `k8s.io/pod-security-admission` at level `restricted`,
//! version `latest` (v1.34: 15 checks, the baseline ones included), with its rules and,
//! in [`Violation::detail`], its words; the unit tests below take its test fixtures case
//! by case. Its policy is read from the module's source (v0.34.13), not linked.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A pod spec that asks for something the restricted profile forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why} (Pod Security \"restricted\", check {check})")]
pub struct Weakening {
    /// A JSON path within the object, e.g. `spec.template.spec.hostNetwork`.
    pub field: String,
    /// The check of `k8s.io/pod-security-admission` it fails, e.g. `hostNamespaces`.
    pub check: &'static str,
    /// What the check says of it, in the API server's words.
    pub why: String,
}

/// What one check finds wrong with a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The check's name in `k8s.io/pod-security-admission`.
    pub check: &'static str,
    /// The first field at fault, from the pod (`spec.volumes[1].nfs`, `metadata.annotations…`).
    pub field: String,
    /// The check's reason, e.g. `host namespaces`.
    pub reason: &'static str,
    /// Its detail, e.g. `hostNetwork=true`.
    pub detail: String,
}

/// A pod spec inside an object: where it is, and where the metadata of the pod it makes
/// is (its parent's `metadata`: a template's, or the Pod's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAt {
    /// JSON pointer tokens of the spec, e.g. `["spec", "template", "spec"]`.
    pub spec: Vec<String>,
    pub metadata: Vec<String>,
}

impl PodAt {
    /// `spec.template.spec`, `spec.templates[2].spec`.
    pub fn dotted(path: &[String]) -> String {
        let mut out = String::new();
        for t in path {
            if t.parse::<usize>().is_ok() {
                out.push_str(&format!("[{t}]"));
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(t);
            }
        }
        out
    }
}

/// How deep an object is searched for pod specs; deeper ones are refused whole.
const MAX_DEPTH: usize = 32;

/// Every pod spec inside `object`, whatever its kind: an object with a `containers` list
/// of objects, which is what a PodSpec is (its only required field) wherever a kind's
/// schema puts one — a Pod's `spec`, a Deployment's template, a CronJob's job template, a
/// CRD's own. A pod spec takes effect only where the kind's schema has one, and there it
/// is in the object; so no list of kinds, and no kind, is passed over.
pub fn pods_in(object: &Value) -> Vec<PodAt> {
    fn walk(node: &Value, path: &mut Vec<String>, out: &mut Vec<PodAt>) {
        if path.len() > MAX_DEPTH {
            return;
        }
        match node {
            Value::Object(map) => {
                let is_pod = map.get("containers").and_then(Value::as_array).is_some_and(|cs| {
                    !cs.is_empty() && cs.iter().all(|c| c.get("name").is_some() || c.get("image").is_some())
                });
                if is_pod && !path.is_empty() {
                    let mut metadata = path[..path.len() - 1].to_vec();
                    metadata.push("metadata".into());
                    out.push(PodAt { spec: path.clone(), metadata });
                    return;
                }
                for (k, v) in map {
                    path.push(k.clone());
                    walk(v, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(i.to_string());
                    walk(v, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(object, &mut Vec::new(), &mut out);
    out
}

/// Whether `object` nests deeper than the search for pod specs goes.
fn too_deep(node: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match node {
        Value::Object(m) => m.values().any(|v| too_deep(v, depth + 1)),
        Value::Array(items) => items.iter().any(|v| too_deep(v, depth + 1)),
        _ => false,
    }
}

fn pointer(path: &[String]) -> String {
    path.iter().map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1"))).collect()
}

/// Restricts every pod spec inside `object`.
pub fn object(object: &mut Value) -> Result<(), Weakening> {
    with_annotations(object, None, Level::Restricted)
}

/// Holds every pod spec inside an object's body (`data`, without its metadata) to
/// `level`, given the object's own annotations, which a Pod's spec reads.
pub fn with_annotations(object: &mut Value, own: Option<&Value>, level: Level) -> Result<(), Weakening> {
    if too_deep(object, 0) {
        let why = format!("nests deeper than {MAX_DEPTH} levels, where the host does not look for pod specs");
        return Err(Weakening { field: "(the object)".into(), check: "podSpec", why });
    }
    for at in pods_in(object) {
        let annotations = object
            .pointer(&format!("{}/annotations", pointer(&at.metadata)))
            .cloned()
            .or_else(|| (at.metadata == ["metadata"]).then(|| own.cloned()).flatten());
        if let Some(spec) = object.pointer_mut(&pointer(&at.spec)) {
            pod(&PodAt::dotted(&at.spec), &PodAt::dotted(&at.metadata), annotations.as_ref(), spec, level)?;
        }
    }
    Ok(())
}

/// Restricts one pod spec, found at `path` (its metadata's annotations, at `metadata`,
/// read for AppArmor): sets what the profile requires and the spec leaves unset, then
/// refuses what it still forbids.
pub fn pod(
    path: &str,
    metadata: &str,
    annotations: Option<&Value>,
    spec: &mut Value,
    level: Level,
) -> Result<(), Weakening> {
    if !spec.is_object() {
        let why = "is not an object".to_string();
        return Err(Weakening { field: path.into(), check: "podSpec", why });
    }
    if level == Level::Restricted {
        defaults(spec);
    }
    match at_level(level, annotations, spec).into_iter().next() {
        None => Ok(()),
        Some(v) => {
            let field = match v.field.strip_prefix("metadata") {
                Some(rest) => format!("{metadata}{rest}"),
                None => format!("{path}{}", v.field.strip_prefix("spec").unwrap_or(&v.field)),
            };
            Err(Weakening { field, check: v.check, why: format!("{}: {}", v.reason, v.detail) })
        }
    }
}

/// A pod template's spec on its own (a PodSet's, before a pod is made from it).
pub fn pod_spec(path: &str, spec: &mut Value, level: Level) -> Result<(), Weakening> {
    pod(path, "metadata", None, spec, level)
}

/// The Pod Security level pods are held to: an administrator's grant may relax a
/// policy's to `Baseline` (`reach.podSecurity`).
pub type Level = crate::crd::PodSecurity;

/// The checks of each level, in the library's order (baseline IDs sorted, then the
/// restricted ones): a violation list is reported in it.
#[cfg(test)]
const RESTRICTED: [&str; 15] = [
    "appArmorProfile",
    "hostNamespaces",
    "hostPorts",
    "hostProbesAndHostLifecycle",
    "privileged",
    "procMount",
    "seLinuxOptions",
    "sysctls",
    "windowsHostProcess",
    "allowPrivilegeEscalation",
    "capabilities_restricted",
    "restrictedVolumes",
    "runAsNonRoot",
    "runAsUser",
    "seccompProfile_restricted",
];
const BASELINE: [&str; 12] = [
    "appArmorProfile",
    "capabilities_baseline",
    "hostNamespaces",
    "hostPathVolumes",
    "hostPorts",
    "hostProbesAndHostLifecycle",
    "privileged",
    "procMount",
    "seLinuxOptions",
    "seccompProfile_baseline",
    "sysctls",
    "windowsHostProcess",
];

/// What `level` forbids in a pod, in the library's order of checks.
pub fn at_level(level: Level, annotations: Option<&Value>, spec: &Value) -> Vec<Violation> {
    match level {
        Level::Restricted => violations(annotations, spec),
        Level::Baseline => {
            let mut out: Vec<Violation> =
                violations(annotations, spec).into_iter().filter(|v| BASELINE.contains(&v.check)).collect();
            out.extend(baseline_only(spec));
            out.sort_by_key(|v| BASELINE.iter().position(|c| *c == v.check));
            out
        }
    }
}

/// The baseline checks that the restricted ones replace: capabilities of the runtime's
/// default set, no hostPath, no explicitly unconfined seccomp.
fn baseline_only(spec: &Value) -> Vec<Violation> {
    const DEFAULT_CAPS: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let cs = containers(spec);
    let mut out = Vec::new();
    let (mut names, mut caps, mut first) = (Vec::new(), BTreeSet::new(), None);
    for c in &cs {
        let added: Vec<&str> = c
            .sc("capabilities")
            .and_then(|k| k.get("add"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| c.as_str().unwrap_or_default())
            .filter(|c| !DEFAULT_CAPS.contains(c))
            .collect();
        if !added.is_empty() {
            names.push(c.name);
            caps.extend(added);
            first.get_or_insert_with(|| format!("{}.securityContext.capabilities.add", c.at));
        }
    }
    if let Some(field) = first {
        let caps: Vec<&str> = caps.into_iter().collect();
        let detail =
            format!("{} must not include {} in securityContext.capabilities.add", named(&names), join_quote(&caps));
        out.push(Violation { check: "capabilities_baseline", field, reason: "non-default capabilities", detail });
    }
    let host_paths: Vec<(usize, &str)> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, v)| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(|(i, v)| (i, v.get("name").and_then(Value::as_str).unwrap_or_default()))
        .collect();
    if let Some((i, _)) = host_paths.first() {
        let names: Vec<&str> = host_paths.iter().map(|(_, n)| *n).collect();
        let detail = format!("{} {}", plural("volume", "volumes", names.len()), join_quote(&names));
        out.push(Violation {
            check: "hostPathVolumes",
            field: format!("spec.volumes[{i}].hostPath"),
            reason: "hostPath volumes",
            detail,
        });
    }
    let valid = |p: &Value| matches!(p.get("type").and_then(Value::as_str), Some("RuntimeDefault" | "Localhost"));
    let pod = spec.pointer("/securityContext/seccompProfile");
    let pod_bad = pod.is_some_and(|p| !valid(p));
    let bad: Vec<&Container> = cs.iter().filter(|c| c.sc("seccompProfile").is_some_and(|p| !valid(p))).collect();
    if pod_bad || !bad.is_empty() {
        let mut types = BTreeSet::new();
        if let Some(p) = pod.filter(|_| pod_bad) {
            types.insert(p.get("type").and_then(Value::as_str).unwrap_or_default());
        }
        types.extend(
            bad.iter()
                .filter_map(|c| c.sc("seccompProfile"))
                .map(|p| p.get("type").and_then(Value::as_str).unwrap_or_default()),
        );
        let types: Vec<&str> = types.into_iter().collect();
        let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
        let field = if pod_bad {
            "spec.securityContext.seccompProfile.type".to_string()
        } else {
            format!("{}.securityContext.seccompProfile.type", bad[0].at)
        };
        let detail = format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters(pod_bad, &names),
            join_quote(&types)
        );
        out.push(Violation { check: "seccompProfile_baseline", field, reason: "seccompProfile", detail });
    }
    out
}

fn is_windows(spec: &Value) -> bool {
    spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
}

/// The restricted values of what a spec leaves unset: on Linux, privilege escalation
/// off, every capability dropped, non-root and the runtime's seccomp profile; on
/// Windows (where the API server refuses those fields), non-root.
fn defaults(spec: &mut Value) {
    let windows = is_windows(spec);
    let Some(spec) = spec.as_object_mut() else { return };
    let psc = object_at(spec, "securityContext");
    if !psc.contains_key("runAsNonRoot") {
        psc.insert("runAsNonRoot".into(), Value::Bool(true));
    }
    if windows {
        return;
    }
    if !psc.contains_key("seccompProfile") {
        psc.insert("seccompProfile".into(), json!({ "type": "RuntimeDefault" }));
    }
    for list in CONTAINER_LISTS {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let sc = object_at(c, "securityContext");
            sc.entry("privileged").or_insert(Value::Bool(false));
            sc.entry("allowPrivilegeEscalation").or_insert(Value::Bool(false));
            let caps = object_at(sc, "capabilities");
            let drop = caps.entry("drop").or_insert_with(|| json!([]));
            if let Some(d) = drop.as_array_mut()
                && !d.iter().any(|c| c.as_str() == Some("ALL"))
            {
                d.push(json!("ALL"));
            }
        }
    }
}

/// The object under `key`, created empty when absent (or not an object).
fn object_at<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// A container, as the checks visit them: init containers, containers, then ephemeral ones.
struct Container<'a> {
    name: &'a str,
    /// `spec.containers[0]`.
    at: String,
    value: &'a Value,
}

impl Container<'_> {
    fn sc(&self, field: &str) -> Option<&Value> {
        self.value.get("securityContext").and_then(|s| s.get(field))
    }
}

fn containers(spec: &Value) -> Vec<Container<'_>> {
    let mut out = Vec::new();
    for list in CONTAINER_LISTS {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            out.push(Container { name, at: format!("spec.{list}[{i}]"), value: c });
        }
    }
    out
}

/// `"a", "b"`: each item in double quotes, unescaped, as the library writes them.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    format!("\"{}\"", items.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("\", \""))
}

fn plural<'a>(singular: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 { singular } else { plural }
}

/// `volume "a" uses restricted volume type "nfs"`, `containers "a", "b" use …`: upstream's
/// wording, singular or plural on each side.
fn uses<S: AsRef<str>, T: AsRef<str>>(who: (&str, &str), names: &[S], what: (&str, &str), values: &[T]) -> String {
    format!(
        "{} {} {} {} {}",
        plural(who.0, who.1, names.len()),
        join_quote(names),
        plural("uses", "use", names.len()),
        plural(what.0, what.1, values.len()),
        join_quote(values)
    )
}

/// `container "a"` or `containers "a", "b"`.
fn named(names: &[&str]) -> String {
    format!("{} {}", plural("container", "containers", names.len()), join_quote(names))
}

/// `pod and containers "a", "b"`, from whether the pod is at fault and which containers are.
fn setters(pod: bool, names: &[&str]) -> String {
    let mut parts = Vec::new();
    if pod {
        parts.push("pod".to_string());
    }
    if !names.is_empty() {
        parts.push(named(names));
    }
    parts.join(" and ")
}

/// Go's `%q` of a plain string: double quotes, escaping `\` and `"` (and control
/// characters) but not `'`.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the restricted profile forbids in a pod (its spec, and its metadata's
/// `annotations`), in the library's order of checks; empty when it is allowed.
pub fn violations(annotations: Option<&Value>, spec: &Value) -> Vec<Violation> {
    let windows = is_windows(spec);
    let cs = containers(spec);
    let psc = spec.get("securityContext");
    let mut out = Vec::new();
    let mut add = |check: &'static str, field: String, reason: &'static str, detail: String| {
        out.push(Violation { check, field, reason, detail });
    };

    // appArmorProfile: a profile set must be RuntimeDefault or Localhost; an annotation
    // runtime/default, localhost/…, or empty.
    {
        let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
        let mut bad_types = BTreeSet::new();
        let mut first = None;
        let pod_bad = match psc.and_then(|s| s.get("appArmorProfile")) {
            Some(p) => {
                let t = p.get("type").and_then(Value::as_str).unwrap_or_default();
                (!allowed(t)).then(|| {
                    bad_types.insert(t.to_string());
                    first = Some("spec.securityContext.appArmorProfile.type".to_string());
                })
            }
            None => None,
        }
        .is_some();
        let mut bad_containers = Vec::new();
        for c in &cs {
            if let Some(p) = c.sc("appArmorProfile") {
                let t = p.get("type").and_then(Value::as_str).unwrap_or_default();
                if !allowed(t) {
                    bad_types.insert(t.to_string());
                    bad_containers.push(c.name);
                    first.get_or_insert_with(|| format!("{}.securityContext.appArmorProfile.type", c.at));
                }
            }
        }
        let mut bad_annotations = Vec::new();
        for (k, v) in annotations.and_then(Value::as_object).into_iter().flatten() {
            if let Some(_container) = k.strip_prefix("container.apparmor.security.beta.kubernetes.io/") {
                let v = v.as_str().unwrap_or_default();
                if !(v.is_empty() || v == "runtime/default" || v.starts_with("localhost/")) {
                    bad_annotations.push(format!("{k}={}", go_quote(v)));
                    first.get_or_insert_with(|| format!("metadata.annotations.{k}"));
                }
            }
        }
        bad_annotations.sort();
        if let Some(field) = first {
            let mut values: Vec<String> = bad_types.into_iter().collect();
            values.extend(bad_annotations.iter().cloned());
            let mut who = Vec::new();
            if pod_bad {
                who.push("pod".to_string());
            }
            if !bad_containers.is_empty() {
                who.push(named(&bad_containers));
            }
            if !bad_annotations.is_empty() {
                who.push(plural("annotation", "annotations", bad_annotations.len()).to_string());
            }
            let reason = if values.len() == 1 { "forbidden AppArmor profile" } else { "forbidden AppArmor profiles" };
            let detail = format!("{} must not set AppArmor profile type to {}", who.join(" and "), join_quote(&values));
            add("appArmorProfile", field, reason, detail);
        }
    }

    // hostNamespaces
    let host: Vec<&str> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|f| spec.get(*f) == Some(&Value::Bool(true)))
        .collect();
    if let Some(first) = host.first() {
        let detail = host.iter().map(|f| format!("{f}=true")).collect::<Vec<_>>().join(", ");
        add("hostNamespaces", format!("spec.{first}"), "host namespaces", detail);
    }

    // hostPorts
    {
        let (mut names, mut ports, mut first) = (Vec::new(), BTreeSet::new(), None);
        for c in &cs {
            let mut bad = false;
            for (j, p) in c.value.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                if let Some(h) = p.get("hostPort").and_then(Value::as_i64).filter(|h| *h != 0) {
                    ports.insert(h.to_string());
                    bad = true;
                    first.get_or_insert_with(|| format!("{}.ports[{j}].hostPort", c.at));
                }
            }
            if bad {
                names.push(c.name);
            }
        }
        if let Some(field) = first {
            let ports: Vec<String> = ports.into_iter().collect();
            let detail = format!(
                "{} {} {} {}",
                named(&names),
                plural("uses", "use", names.len()),
                plural("hostPort", "hostPorts", ports.len()),
                ports.join(", ")
            );
            add("hostPorts", field, "hostPort", detail);
        }
    }

    // hostProbesAndHostLifecycle: probes and lifecycle handlers reach only the pod.
    {
        let (mut names, mut hosts, mut first) = (BTreeSet::new(), BTreeSet::new(), None);
        for c in &cs {
            let handlers = [
                ("livenessProbe", "/livenessProbe"),
                ("readinessProbe", "/readinessProbe"),
                ("startupProbe", "/startupProbe"),
                ("lifecycle.postStart", "/lifecycle/postStart"),
                ("lifecycle.preStop", "/lifecycle/preStop"),
            ];
            for (field, ptr) in handlers {
                for kind in ["httpGet", "tcpSocket"] {
                    let host = c.value.pointer(&format!("{ptr}/{kind}/host")).and_then(Value::as_str);
                    if let Some(h) = host.filter(|h| !h.is_empty()) {
                        names.insert(c.name.to_string());
                        hosts.insert(h.to_string());
                        first.get_or_insert_with(|| format!("{}.{field}.{kind}.host", c.at));
                    }
                }
            }
        }
        if let Some(field) = first {
            let names: Vec<String> = names.into_iter().collect();
            let hosts: Vec<String> = hosts.into_iter().collect();
            let detail = uses(
                ("container", "containers"),
                &names,
                ("probe or lifecycle host", "probe or lifecycle hosts"),
                &hosts,
            );
            add("hostProbesAndHostLifecycle", field, "probe or lifecycle host", detail);
        }
    }

    // privileged
    let bad: Vec<&Container> = cs.iter().filter(|c| c.sc("privileged") == Some(&Value::Bool(true))).collect();
    if let Some(c) = bad.first() {
        let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
        let detail = format!("{} must not set securityContext.privileged=true", named(&names));
        add("privileged", format!("{}.securityContext.privileged", c.at), "privileged", detail);
    }

    // procMount
    {
        let bad: Vec<&Container> =
            cs.iter().filter(|c| c.sc("procMount").and_then(Value::as_str).is_some_and(|m| m != "Default")).collect();
        if let Some(c) = bad.first() {
            let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
            let values: BTreeSet<&str> = bad.iter().filter_map(|c| c.sc("procMount").and_then(Value::as_str)).collect();
            let values: Vec<&str> = values.into_iter().collect();
            let detail = format!("{} must not set securityContext.procMount to {}", named(&names), join_quote(&values));
            add("procMount", format!("{}.securityContext.procMount", c.at), "procMount", detail);
        }
    }

    // seLinuxOptions: a type of the container runtime's, no user, no role.
    {
        const TYPES: [&str; 5] = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];
        let (mut types, mut user, mut role) = (BTreeSet::new(), false, false);
        let mut first = None;
        let mut judge = |opts: Option<&Value>, at: &str| -> bool {
            let Some(o) = opts else { return false };
            let mut bad = false;
            let t = o.get("type").and_then(Value::as_str).unwrap_or_default();
            if !TYPES.contains(&t) {
                types.insert(t.to_string());
                first.get_or_insert_with(|| format!("{at}.seLinuxOptions.type"));
                bad = true;
            }
            for (field, seen) in [("user", &mut user), ("role", &mut role)] {
                if o.get(field).and_then(Value::as_str).is_some_and(|v| !v.is_empty()) {
                    *seen = true;
                    first.get_or_insert_with(|| format!("{at}.seLinuxOptions.{field}"));
                    bad = true;
                }
            }
            bad
        };
        let pod_bad = judge(psc.and_then(|s| s.get("seLinuxOptions")), "spec.securityContext");
        let names: Vec<&str> = cs
            .iter()
            .filter(|c| judge(c.sc("seLinuxOptions"), &format!("{}.securityContext", c.at)))
            .map(|c| c.name)
            .collect();
        if let Some(field) = first {
            let mut bad = Vec::new();
            let types: Vec<String> = types.into_iter().collect();
            if !types.is_empty() {
                bad.push(format!("{} {}", plural("type", "types", types.len()), join_quote(&types)));
            }
            if user {
                bad.push("user may not be set".to_string());
            }
            if role {
                bad.push("role may not be set".to_string());
            }
            let detail = format!(
                "{} set forbidden securityContext.seLinuxOptions: {}",
                setters(pod_bad, &names),
                bad.join("; ")
            );
            add("seLinuxOptions", field, "seLinuxOptions", detail);
        }
    }

    // sysctls: only the safe ones, namespaced to the pod.
    {
        const SAFE: [&str; 12] = [
            "kernel.shm_rmid_forced",
            "net.ipv4.ip_local_port_range",
            "net.ipv4.tcp_syncookies",
            "net.ipv4.ping_group_range",
            "net.ipv4.ip_unprivileged_port_start",
            "net.ipv4.ip_local_reserved_ports",
            "net.ipv4.tcp_keepalive_time",
            "net.ipv4.tcp_fin_timeout",
            "net.ipv4.tcp_keepalive_intvl",
            "net.ipv4.tcp_keepalive_probes",
            "net.ipv4.tcp_rmem",
            "net.ipv4.tcp_wmem",
        ];
        let sysctls = psc.and_then(|s| s.get("sysctls")).and_then(Value::as_array);
        let bad: Vec<(usize, &str)> = sysctls
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, s)| (i, s.get("name").and_then(Value::as_str).unwrap_or_default()))
            .filter(|(_, n)| !SAFE.contains(n))
            .collect();
        if let Some((i, _)) = bad.first() {
            let detail = bad.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ");
            add("sysctls", format!("spec.securityContext.sysctls[{i}].name"), "forbidden sysctls", detail);
        }
    }

    // windowsHostProcess
    {
        let hp = |v: Option<&Value>| v.and_then(|w| w.get("hostProcess")) == Some(&Value::Bool(true));
        let pod_bad = hp(psc.and_then(|s| s.get("windowsOptions")));
        let bad: Vec<&Container> = cs.iter().filter(|c| hp(c.sc("windowsOptions"))).collect();
        if pod_bad || !bad.is_empty() {
            let field = if pod_bad {
                "spec.securityContext.windowsOptions.hostProcess".to_string()
            } else {
                format!("{}.securityContext.windowsOptions.hostProcess", bad[0].at)
            };
            let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
            let detail =
                format!("{} must not set securityContext.windowsOptions.hostProcess=true", setters(pod_bad, &names));
            add("windowsHostProcess", field, "hostProcess", detail);
        }
    }

    // allowPrivilegeEscalation: set to false on every container (not on Windows).
    if !windows {
        let bad: Vec<&Container> =
            cs.iter().filter(|c| c.sc("allowPrivilegeEscalation") != Some(&Value::Bool(false))).collect();
        if let Some(c) = bad.first() {
            let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
            let detail = format!("{} must set securityContext.allowPrivilegeEscalation=false", named(&names));
            add(
                "allowPrivilegeEscalation",
                format!("{}.securityContext.allowPrivilegeEscalation", c.at),
                "allowPrivilegeEscalation != false",
                detail,
            );
        }
    }

    // capabilities_restricted: drop ALL; add nothing but NET_BIND_SERVICE (not on Windows).
    if !windows {
        let (mut no_drop, mut adding, mut caps, mut first) = (Vec::new(), Vec::new(), BTreeSet::new(), None);
        for c in &cs {
            let capabilities = c.sc("capabilities");
            let drops_all = capabilities
                .and_then(|k| k.get("drop"))
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|c| c.as_str() == Some("ALL")));
            if !drops_all {
                no_drop.push(c.name);
                first.get_or_insert_with(|| format!("{}.securityContext.capabilities.drop", c.at));
            }
            let added: Vec<&str> = capabilities
                .and_then(|k| k.get("add"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| c.as_str().unwrap_or_default())
                .filter(|c| *c != "NET_BIND_SERVICE")
                .collect();
            if !added.is_empty() {
                adding.push(c.name);
                caps.extend(added);
                first.get_or_insert_with(|| format!("{}.securityContext.capabilities.add", c.at));
            }
        }
        if let Some(field) = first {
            let mut parts = Vec::new();
            if !no_drop.is_empty() {
                parts.push(format!("{} must set securityContext.capabilities.drop=[\"ALL\"]", named(&no_drop)));
            }
            if !adding.is_empty() {
                let caps: Vec<&str> = caps.into_iter().collect();
                parts.push(format!(
                    "{} must not include {} in securityContext.capabilities.add",
                    named(&adding),
                    join_quote(&caps)
                ));
            }
            add("capabilities_restricted", field, "unrestricted capabilities", parts.join("; "));
        }
    }

    // restrictedVolumes: only the volume types that cannot reach the node.
    {
        const ALLOWED: [&str; 9] = [
            "configMap",
            "csi",
            "downwardAPI",
            "emptyDir",
            "ephemeral",
            "image",
            "persistentVolumeClaim",
            "projected",
            "secret",
        ];
        const KNOWN: [&str; 21] = [
            "hostPath",
            "gcePersistentDisk",
            "awsElasticBlockStore",
            "gitRepo",
            "nfs",
            "iscsi",
            "glusterfs",
            "rbd",
            "flexVolume",
            "cinder",
            "cephfs",
            "flocker",
            "fc",
            "azureFile",
            "vsphereVolume",
            "quobyte",
            "azureDisk",
            "photonPersistentDisk",
            "portworxVolume",
            "scaleIO",
            "storageos",
        ];
        let (mut names, mut types, mut first) = (Vec::new(), BTreeSet::new(), None);
        for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(fields) = v.as_object() else { continue };
            // A volume with no source is an emptyDir: the API server defaults it so.
            let sources: Vec<&String> = fields.keys().filter(|k| *k != "name").collect();
            if sources.is_empty() || ALLOWED.iter().any(|a| fields.get(*a).is_some_and(|s| !s.is_null())) {
                continue;
            }
            let t = KNOWN.iter().find(|k| fields.get(**k).is_some_and(|s| !s.is_null())).copied().unwrap_or("unknown");
            names.push(v.get("name").and_then(Value::as_str).unwrap_or_default());
            types.insert(t);
            first.get_or_insert_with(|| format!("spec.volumes[{i}].{}", if t == "unknown" { sources[0] } else { t }));
        }
        if let Some(field) = first {
            let types: Vec<&str> = types.into_iter().collect();
            let detail =
                uses(("volume", "volumes"), &names, ("restricted volume type", "restricted volume types"), &types);
            add("restrictedVolumes", field, "restricted volume types", detail);
        }
    }

    // runAsNonRoot: the pod, or every container, must say true; none may say false.
    {
        let pod = psc.and_then(|s| s.get("runAsNonRoot")).and_then(Value::as_bool);
        let explicit: Vec<&Container> =
            cs.iter().filter(|c| c.sc("runAsNonRoot") == Some(&Value::Bool(false))).collect();
        let implicit: Vec<&Container> =
            cs.iter().filter(|c| c.sc("runAsNonRoot").is_none() && pod != Some(true)).collect();
        let reason = "runAsNonRoot != true";
        if pod == Some(false) || !explicit.is_empty() {
            let field = if pod == Some(false) {
                "spec.securityContext.runAsNonRoot".to_string()
            } else {
                format!("{}.securityContext.runAsNonRoot", explicit[0].at)
            };
            let names: Vec<&str> = explicit.iter().map(|c| c.name).collect();
            let detail =
                format!("{} must not set securityContext.runAsNonRoot=false", setters(pod == Some(false), &names));
            add("runAsNonRoot", field, reason, detail);
        } else if let Some(c) = implicit.first() {
            let names: Vec<&str> = implicit.iter().map(|c| c.name).collect();
            let detail = format!("pod or {} must set securityContext.runAsNonRoot=true", named(&names));
            add("runAsNonRoot", format!("{}.securityContext.runAsNonRoot", c.at), reason, detail);
        }
    }

    // runAsUser: never 0, at the pod or on a container.
    {
        let root = |v: Option<&Value>| v.and_then(Value::as_i64) == Some(0);
        let pod_bad = root(psc.and_then(|s| s.get("runAsUser")));
        let bad: Vec<&Container> = cs.iter().filter(|c| root(c.sc("runAsUser"))).collect();
        if pod_bad || !bad.is_empty() {
            let field = if pod_bad {
                "spec.securityContext.runAsUser".to_string()
            } else {
                format!("{}.securityContext.runAsUser", bad[0].at)
            };
            let names: Vec<&str> = bad.iter().map(|c| c.name).collect();
            add("runAsUser", field, "runAsUser=0", format!("{} must not set runAsUser=0", setters(pod_bad, &names)));
        }
    }

    // seccompProfile_restricted: RuntimeDefault or Localhost, at the pod or on every
    // container (not on Windows).
    if !windows {
        let valid = |t: Option<&str>| matches!(t, Some("RuntimeDefault" | "Localhost"));
        let pod = psc.and_then(|s| s.get("seccompProfile"));
        let pod_type = pod.map(|p| p.get("type").and_then(Value::as_str));
        let pod_bad = pod_type.is_some_and(|t| !valid(t));
        let pod_set = pod_type.is_some_and(valid);
        let mut types = BTreeSet::new();
        if pod_bad {
            types.insert(pod_type.flatten().unwrap_or_default());
        }
        let explicit: Vec<&Container> = cs
            .iter()
            .filter(|c| c.sc("seccompProfile").is_some_and(|p| !valid(p.get("type").and_then(Value::as_str))))
            .collect();
        types.extend(
            explicit.iter().map(|c| {
                c.sc("seccompProfile").and_then(|p| p.get("type")).and_then(Value::as_str).unwrap_or_default()
            }),
        );
        let implicit: Vec<&Container> = cs.iter().filter(|c| c.sc("seccompProfile").is_none() && !pod_set).collect();
        if pod_bad || !explicit.is_empty() {
            let field = if pod_bad {
                "spec.securityContext.seccompProfile.type".to_string()
            } else {
                format!("{}.securityContext.seccompProfile.type", explicit[0].at)
            };
            let names: Vec<&str> = explicit.iter().map(|c| c.name).collect();
            let types: Vec<&str> = types.into_iter().collect();
            let detail = format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters(pod_bad, &names),
                join_quote(&types)
            );
            add("seccompProfile_restricted", field, "seccompProfile", detail);
        } else if let Some(c) = implicit.first() {
            let names: Vec<&str> = implicit.iter().map(|c| c.name).collect();
            let detail = format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                named(&names)
            );
            add(
                "seccompProfile_restricted",
                format!("{}.securityContext.seccompProfile", c.at),
                "seccompProfile",
                detail,
            );
        }
    }
    out
}

#[cfg(test)]
mod fixtures;
