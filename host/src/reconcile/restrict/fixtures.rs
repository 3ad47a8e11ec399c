//! The test fixtures of `k8s.io/pod-security-admission` (v0.34.13, `test/fixtures_*.go`,
//! rendered for `restricted/v1.34`), case by case: each starts from the library's
//! minimal restricted pod and changes what its fixture changes. A pass case has no
//! violation; a fail case has exactly the library's `ForbiddenDetail()`, its checks in
//! its order. Then what the host does with each: a fail case that only leaves something
//! unset passes once the host has set it; every other is refused, naming its field and
//! its check.

use serde_json::{Value, json};

use super::{RESTRICTED, pod, violations};

/// `base.yaml` of the fixtures: the minimal pod the restricted profile allows.
fn base() -> Value {
    let sc = json!({ "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } });
    json!({
        "initContainers": [{ "name": "initcontainer1", "image": "registry.k8s.io/pause", "securityContext": sc }],
        "containers": [{ "name": "container1", "image": "registry.k8s.io/pause", "securityContext": sc }],
        "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
    })
}

/// One change to the base pod: a JSON pointer and its new value (`None`: removed).
type Change = (&'static str, Option<Value>);

fn set(at: &'static str, v: Value) -> Change {
    (at, Some(v))
}

fn unset(at: &'static str) -> Change {
    (at, None)
}

/// A pod's annotations and its spec.
type Pod = (Option<Value>, Value);

/// The base pod with `changes`, and its annotations.
fn case(changes: &[Change], annotations: Option<Value>) -> Pod {
    let mut spec = base();
    for (at, v) in changes {
        let (parent, key) = at.rsplit_once('/').expect("a pointer with a parent");
        let mut node = &mut spec;
        for token in parent.split('/').skip(1) {
            node = match token.parse::<usize>() {
                Ok(i) => &mut node[i],
                Err(_) => {
                    if node.get(token).is_none_or(Value::is_null) {
                        node[token] = json!({});
                    }
                    &mut node[token]
                }
            };
        }
        match v {
            Some(v) => node[key] = v.clone(),
            None => {
                if let Some(m) = node.as_object_mut() {
                    m.remove(key);
                }
            }
        }
    }
    (annotations, spec)
}

/// The library's `ForbiddenDetail()`: `reason (detail)` of each failing check, joined.
fn detail(annotations: Option<&Value>, spec: &Value) -> String {
    violations(annotations, spec).iter().map(|v| format!("{} ({})", v.reason, v.detail)).collect::<Vec<_>>().join(", ")
}

const C: &str = "/containers/0/securityContext";
const I: &str = "/initContainers/0/securityContext";

fn c(field: &str) -> &'static str {
    Box::leak(format!("{C}/{field}").into_boxed_str())
}

fn i(field: &str) -> &'static str {
    Box::leak(format!("{I}/{field}").into_boxed_str())
}

fn apparmor(container: &str, value: &str) -> Value {
    json!({ format!("container.apparmor.security.beta.kubernetes.io/{container}"): value })
}

/// Every fail fixture of restricted/v1.34, with the library's `ForbiddenDetail()`.
fn fail_cases() -> Vec<(&'static str, Pod, &'static str)> {
    let all_caps = json!([
        "SYS_TIME",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "NET_ADMIN",
        "SYSLOG",
        "CHOWN",
        "NET_RAW",
        "DAC_OVERRIDE",
        "FOWNER",
        "DAC_READ_SEARCH",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_BOOT",
        "LEASE",
        "SETFCAP",
        "WAKE_ALARM",
        "BLOCK_SUSPEND"
    ]);
    let baseline_caps = json!([
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
        "SYS_CHROOT"
    ]);
    let volume = |source: Value| {
        let mut v = source;
        v["name"] = json!("volume1");
        set("/volumes", json!([v]))
    };
    let restricted_volumes: [(&str, Value); 20] = [
        ("gcePersistentDisk", json!({ "gcePersistentDisk": { "pdName": "test" } })),
        ("awsElasticBlockStore", json!({ "awsElasticBlockStore": { "volumeID": "test" } })),
        ("gitRepo", json!({ "gitRepo": { "repository": "github.com/kubernetes/kubernetes" } })),
        ("nfs", json!({ "nfs": { "server": "test", "path": "/test" } })),
        (
            "iscsi",
            json!({ "iscsi": { "targetPortal": "test", "iqn": "iqn.2001-04.com.example:storage.kube.sys1.xyz", "lun": 0 } }),
        ),
        ("glusterfs", json!({ "glusterfs": { "path": "test", "endpoints": "test" } })),
        ("rbd", json!({ "rbd": { "monitors": ["test"], "image": "test" } })),
        ("flexVolume", json!({ "flexVolume": { "driver": "test" } })),
        ("cinder", json!({ "cinder": { "volumeID": "test" } })),
        ("cephfs", json!({ "cephfs": { "monitors": ["test"] } })),
        ("flocker", json!({ "flocker": { "datasetName": "test" } })),
        ("fc", json!({ "fc": { "wwids": ["test"] } })),
        ("azureFile", json!({ "azureFile": { "secretName": "test", "shareName": "test" } })),
        ("vsphereVolume", json!({ "vsphereVolume": { "volumePath": "test" } })),
        ("quobyte", json!({ "quobyte": { "registry": "localhost:1234", "volume": "test" } })),
        (
            "azureDisk",
            json!({ "azureDisk": { "diskName": "test", "diskURI": "https://test.blob.core.windows.net/test/test.vhd" } }),
        ),
        ("portworxVolume", json!({ "portworxVolume": { "volumeID": "test", "fsType": "ext4" } })),
        ("scaleIO", json!({ "scaleIO": { "volumeName": "test", "gateway": "localhost", "system": "test" } })),
        ("storageos", json!({ "storageos": { "volumeName": "test" } })),
        ("hostPath", json!({ "hostPath": { "path": "/dev/null" } })),
    ];
    let mut cases = vec![
        (
            "allowprivilegeescalation0",
            case(&[set(c("allowPrivilegeEscalation"), json!(true))], None),
            r#"allowPrivilegeEscalation != false (container "container1" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "allowprivilegeescalation1",
            case(&[set(i("allowPrivilegeEscalation"), json!(true))], None),
            r#"allowPrivilegeEscalation != false (container "initcontainer1" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "allowprivilegeescalation2",
            case(&[unset(c("allowPrivilegeEscalation"))], None),
            r#"allowPrivilegeEscalation != false (container "container1" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "allowprivilegeescalation3",
            case(&[unset(C)], None),
            r#"allowPrivilegeEscalation != false (container "container1" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "container1" must set securityContext.capabilities.drop=["ALL"])"#,
        ),
        (
            "apparmorprofile0",
            case(&[], Some(apparmor("container1", "unconfined"))),
            r#"forbidden AppArmor profile (annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/container1="unconfined"")"#,
        ),
        (
            "apparmorprofile1",
            case(&[], Some(apparmor("initcontainer1", "unconfined"))),
            r#"forbidden AppArmor profile (annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/initcontainer1="unconfined"")"#,
        ),
        (
            "capabilities_baseline0",
            case(&[set(c("capabilities/add"), json!(["NET_RAW"]))], None),
            r#"unrestricted capabilities (container "container1" must not include "NET_RAW" in securityContext.capabilities.add)"#,
        ),
        (
            "capabilities_baseline1",
            case(&[set(i("capabilities/add"), json!(["NET_RAW"]))], None),
            r#"unrestricted capabilities (container "initcontainer1" must not include "NET_RAW" in securityContext.capabilities.add)"#,
        ),
        (
            "capabilities_baseline2",
            case(&[set(c("capabilities/add"), json!(["chown"]))], None),
            r#"unrestricted capabilities (container "container1" must not include "chown" in securityContext.capabilities.add)"#,
        ),
        (
            "capabilities_baseline3",
            case(&[set(c("capabilities/add"), json!(["CAP_CHOWN"]))], None),
            r#"unrestricted capabilities (container "container1" must not include "CAP_CHOWN" in securityContext.capabilities.add)"#,
        ),
        (
            "capabilities_restricted0",
            case(&[set(c("capabilities"), json!({}))], None),
            r#"unrestricted capabilities (container "container1" must set securityContext.capabilities.drop=["ALL"])"#,
        ),
        (
            "capabilities_restricted1",
            case(&[set(i("capabilities"), json!({}))], None),
            r#"unrestricted capabilities (container "initcontainer1" must set securityContext.capabilities.drop=["ALL"])"#,
        ),
        (
            "capabilities_restricted2",
            case(&[set(c("capabilities/drop"), all_caps.clone()), set(i("capabilities/drop"), all_caps)], None),
            r#"unrestricted capabilities (containers "initcontainer1", "container1" must set securityContext.capabilities.drop=["ALL"])"#,
        ),
        (
            "capabilities_restricted3",
            case(&[set(c("capabilities/add"), baseline_caps.clone()), set(i("capabilities/add"), baseline_caps)], None),
            r#"unrestricted capabilities (containers "initcontainer1", "container1" must not include "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT" in securityContext.capabilities.add)"#,
        ),
        ("hostnamespaces0", case(&[set("/hostIPC", json!(true))], None), "host namespaces (hostIPC=true)"),
        ("hostnamespaces1", case(&[set("/hostNetwork", json!(true))], None), "host namespaces (hostNetwork=true)"),
        ("hostnamespaces2", case(&[set("/hostPID", json!(true))], None), "host namespaces (hostPID=true)"),
        (
            "hostpathvolumes0",
            case(
                &[set(
                    "/volumes",
                    json!([{ "name": "volume-emptydir", "emptyDir": {} }, { "name": "volume-hostpath", "hostPath": { "path": "/a" } }]),
                )],
                None,
            ),
            r#"restricted volume types (volume "volume-hostpath" uses restricted volume type "hostPath")"#,
        ),
        (
            "hostpathvolumes1",
            case(
                &[set(
                    "/volumes",
                    json!([{ "name": "volume-hostpath-a", "hostPath": { "path": "/a" } }, { "name": "volume-hostpath-b", "hostPath": { "path": "/b" } }]),
                )],
                None,
            ),
            r#"restricted volume types (volumes "volume-hostpath-a", "volume-hostpath-b" use restricted volume type "hostPath")"#,
        ),
        (
            "hostports0",
            case(&[set("/containers/0/ports", json!([{ "containerPort": 12345, "hostPort": 12345 }]))], None),
            r#"hostPort (container "container1" uses hostPort 12345)"#,
        ),
        (
            "hostports1",
            case(&[set("/initContainers/0/ports", json!([{ "containerPort": 12346, "hostPort": 12346 }]))], None),
            r#"hostPort (container "initcontainer1" uses hostPort 12346)"#,
        ),
        (
            "hostports2",
            case(
                &[
                    set(
                        "/containers/0/ports",
                        json!([{ "containerPort": 12345, "hostPort": 12345 }, { "containerPort": 12347 }]),
                    ),
                    set(
                        "/initContainers/0/ports",
                        json!([{ "containerPort": 12346, "hostPort": 12346 }, { "containerPort": 12348 }]),
                    ),
                ],
                None,
            ),
            r#"hostPort (containers "initcontainer1", "container1" use hostPorts 12345, 12346)"#,
        ),
        (
            "hostprobesandhostlifecycle0",
            case(
                &[set("/containers/0/livenessProbe", json!({ "httpGet": { "host": "bad.host", "port": 8080 } }))],
                None,
            ),
            r#"probe or lifecycle host (container "container1" uses probe or lifecycle host "bad.host")"#,
        ),
        (
            "hostprobesandhostlifecycle1",
            case(
                &[
                    set("/initContainers/0/restartPolicy", json!("Always")),
                    set(
                        "/initContainers/0/readinessProbe",
                        json!({ "tcpSocket": { "host": "8.8.8.8", "port": 8080 } }),
                    ),
                ],
                None,
            ),
            r#"probe or lifecycle host (container "initcontainer1" uses probe or lifecycle host "8.8.8.8")"#,
        ),
        (
            "hostprobesandhostlifecycle2",
            case(
                &[set(
                    "/containers/0/lifecycle",
                    json!({ "postStart": { "httpGet": { "host": "bad.host", "port": 8080 } } }),
                )],
                None,
            ),
            r#"probe or lifecycle host (container "container1" uses probe or lifecycle host "bad.host")"#,
        ),
        (
            "hostprobesandhostlifecycle3",
            case(
                &[set("/containers/0/livenessProbe", json!({ "httpGet": { "host": "127.0.0.1", "port": 8080 } }))],
                None,
            ),
            r#"probe or lifecycle host (container "container1" uses probe or lifecycle host "127.0.0.1")"#,
        ),
        (
            "hostprobesandhostlifecycle4",
            case(&[set("/containers/0/readinessProbe", json!({ "tcpSocket": { "host": "::1", "port": 8080 } }))], None),
            r#"probe or lifecycle host (container "container1" uses probe or lifecycle host "::1")"#,
        ),
        (
            "privileged0",
            case(&[set(c("privileged"), json!(true)), unset(c("allowPrivilegeEscalation"))], None),
            r#"privileged (container "container1" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "container1" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "privileged1",
            case(&[set(i("privileged"), json!(true)), unset(i("allowPrivilegeEscalation"))], None),
            r#"privileged (container "initcontainer1" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "initcontainer1" must set securityContext.allowPrivilegeEscalation=false)"#,
        ),
        (
            "procmount0",
            case(&[set(c("procMount"), json!("Unmasked")), set("/hostUsers", json!(false))], None),
            r#"procMount (container "container1" must not set securityContext.procMount to "Unmasked")"#,
        ),
        (
            "procmount1",
            case(&[set(i("procMount"), json!("Unmasked")), set("/hostUsers", json!(false))], None),
            r#"procMount (container "initcontainer1" must not set securityContext.procMount to "Unmasked")"#,
        ),
        (
            "runasnonroot0",
            case(&[unset("/securityContext/runAsNonRoot")], None),
            r#"runAsNonRoot != true (pod or containers "initcontainer1", "container1" must set securityContext.runAsNonRoot=true)"#,
        ),
        (
            "runasnonroot1",
            case(&[set("/securityContext/runAsNonRoot", json!(false))], None),
            r#"runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"#,
        ),
        (
            "runasnonroot2",
            case(&[set(c("runAsNonRoot"), json!(false))], None),
            r#"runAsNonRoot != true (container "container1" must not set securityContext.runAsNonRoot=false)"#,
        ),
        (
            "runasnonroot3",
            case(&[set(i("runAsNonRoot"), json!(false))], None),
            r#"runAsNonRoot != true (container "initcontainer1" must not set securityContext.runAsNonRoot=false)"#,
        ),
        (
            "runasuser0",
            case(&[set("/securityContext/runAsUser", json!(0))], None),
            "runAsUser=0 (pod must not set runAsUser=0)",
        ),
        (
            "runasuser1",
            case(&[set(c("runAsUser"), json!(0))], None),
            r#"runAsUser=0 (container "container1" must not set runAsUser=0)"#,
        ),
        (
            "runasuser2",
            case(&[set(i("runAsUser"), json!(0))], None),
            r#"runAsUser=0 (container "initcontainer1" must not set runAsUser=0)"#,
        ),
        (
            "seccompprofile_baseline0",
            case(&[set("/securityContext/seccompProfile/type", json!("Unconfined"))], None),
            r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "seccompprofile_baseline1",
            case(&[set(c("seccompProfile"), json!({ "type": "Unconfined" }))], None),
            r#"seccompProfile (container "container1" must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "seccompprofile_baseline2",
            case(&[set(i("seccompProfile"), json!({ "type": "Unconfined" }))], None),
            r#"seccompProfile (container "initcontainer1" must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "seccompprofile_restricted0",
            case(&[unset("/securityContext/seccompProfile")], None),
            r#"seccompProfile (pod or containers "initcontainer1", "container1" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ),
        (
            "seccompprofile_restricted1",
            case(&[set("/securityContext/seccompProfile/type", json!("Unconfined"))], None),
            r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "seccompprofile_restricted2",
            case(
                &[
                    unset("/securityContext/seccompProfile"),
                    set(c("seccompProfile"), json!({ "type": "RuntimeDefault" })),
                ],
                None,
            ),
            r#"seccompProfile (pod or container "initcontainer1" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ),
        (
            "seccompprofile_restricted3",
            case(
                &[
                    unset("/securityContext/seccompProfile"),
                    set(i("seccompProfile"), json!({ "type": "RuntimeDefault" })),
                ],
                None,
            ),
            r#"seccompProfile (pod or container "container1" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ),
        (
            "seccompprofile_restricted4",
            case(
                &[
                    unset("/securityContext/seccompProfile"),
                    set(c("seccompProfile"), json!({ "type": "RuntimeDefault" })),
                    set(i("seccompProfile"), json!({ "type": "Unconfined" })),
                ],
                None,
            ),
            r#"seccompProfile (container "initcontainer1" must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ),
        (
            "selinuxoptions0",
            case(&[set("/securityContext/seLinuxOptions", json!({ "type": "somevalue" }))], None),
            r#"seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "somevalue")"#,
        ),
        (
            "selinuxoptions1",
            case(&[set(c("seLinuxOptions"), json!({ "type": "somevalue" }))], None),
            r#"seLinuxOptions (container "container1" set forbidden securityContext.seLinuxOptions: type "somevalue")"#,
        ),
        (
            "selinuxoptions2",
            case(&[set(i("seLinuxOptions"), json!({ "type": "somevalue" }))], None),
            r#"seLinuxOptions (container "initcontainer1" set forbidden securityContext.seLinuxOptions: type "somevalue")"#,
        ),
        (
            "selinuxoptions3",
            case(&[set("/securityContext/seLinuxOptions", json!({ "user": "somevalue" }))], None),
            r#"seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: user may not be set)"#,
        ),
        (
            "selinuxoptions4",
            case(&[set("/securityContext/seLinuxOptions", json!({ "role": "somevalue" }))], None),
            r#"seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: role may not be set)"#,
        ),
        (
            "sysctls0",
            case(&[set("/securityContext/sysctls", json!([{ "name": "othersysctl", "value": "other" }]))], None),
            "forbidden sysctls (othersysctl)",
        ),
        (
            "windowshostprocess0",
            case(
                &[
                    set("/hostNetwork", json!(true)),
                    set("/securityContext/windowsOptions", json!({ "hostProcess": true })),
                ],
                None,
            ),
            r#"host namespaces (hostNetwork=true), hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)"#,
        ),
        (
            "windowshostprocess1",
            case(
                &[
                    set("/hostNetwork", json!(true)),
                    set(c("windowsOptions"), json!({ "hostProcess": true })),
                    set(i("windowsOptions"), json!({ "hostProcess": true })),
                ],
                None,
            ),
            r#"host namespaces (hostNetwork=true), hostProcess (containers "initcontainer1", "container1" must not set securityContext.windowsOptions.hostProcess=true)"#,
        ),
    ];
    for (n, (t, source)) in restricted_volumes.into_iter().enumerate() {
        let name: &'static str = Box::leak(format!("restrictedvolumes{n}").into_boxed_str());
        let expected: &'static str = Box::leak(
            format!(r#"restricted volume types (volume "volume1" uses restricted volume type "{t}")"#).into_boxed_str(),
        );
        cases.push((name, case(&[volume(source)], None), expected));
    }
    cases
}

/// Every pass fixture of restricted/v1.34 (and the unit tests' allowed cases).
fn pass_cases() -> Vec<(&'static str, Pod)> {
    vec![
        ("base", case(&[], None)),
        // Three fixtures are the base pod itself.
        ("hostprobesandhostlifecycle0", case(&[], None)),
        ("seccompprofile_restricted0", case(&[], None)),
        ("sysctls0", case(&[], None)),
        ("base_linux", case(&[set("/os", json!({ "name": "linux" }))], None)),
        (
            "base_windows",
            (
                None,
                json!({
                    "os": { "name": "windows" },
                    "securityContext": { "runAsNonRoot": true },
                    "initContainers": [{ "name": "initcontainer1", "image": "registry.k8s.io/pause" }],
                    "containers": [{ "name": "container1", "image": "registry.k8s.io/pause" }],
                }),
            ),
        ),
        ("apparmorprofile0", case(&[], Some(apparmor("container1", "localhost/foo")))),
        (
            "apparmor runtime/default and RuntimeDefault fields",
            case(
                &[
                    set("/securityContext/appArmorProfile", json!({ "type": "RuntimeDefault" })),
                    set(c("appArmorProfile"), json!({ "type": "Localhost", "localhostProfile": "p" })),
                ],
                Some(
                    json!({ "container.apparmor.security.beta.kubernetes.io/container1": "runtime/default", "other": "x" }),
                ),
            ),
        ),
        (
            "capabilities_restricted0",
            case(
                &[
                    set(c("capabilities"), json!({ "drop": ["ALL"], "add": ["NET_BIND_SERVICE"] })),
                    set(i("capabilities"), json!({ "drop": ["ALL"], "add": ["NET_BIND_SERVICE"] })),
                ],
                None,
            ),
        ),
        (
            "hostports0",
            case(
                &[
                    set("/containers/0/ports", json!([{ "containerPort": 12345 }])),
                    set("/initContainers/0/ports", json!([{ "containerPort": 12346 }])),
                ],
                None,
            ),
        ),
        (
            "hostprobesandhostlifecycle1",
            case(&[set("/containers/0/livenessProbe", json!({ "httpGet": { "port": 8080 } }))], None),
        ),
        (
            "hostprobesandhostlifecycle2",
            case(&[set("/containers/0/readinessProbe", json!({ "tcpSocket": { "port": 8080 } }))], None),
        ),
        ("privileged0", case(&[set(c("privileged"), json!(false)), set(i("privileged"), json!(false))], None)),
        (
            "procmount0",
            case(
                &[
                    set(c("procMount"), json!("Default")),
                    set(i("procMount"), json!("Default")),
                    set("/hostUsers", json!(false)),
                ],
                None,
            ),
        ),
        (
            "restrictedvolumes0",
            case(
                &[set(
                    "/volumes",
                    json!([
                        { "name": "volume0" },
                        { "name": "volume1", "emptyDir": {} },
                        { "name": "volume2", "secret": { "secretName": "test" } },
                        { "name": "volume3", "persistentVolumeClaim": { "claimName": "test" } },
                        { "name": "volume4", "downwardAPI": { "items": [{ "path": "labels", "fieldRef": { "fieldPath": "metadata.labels" } }] } },
                        { "name": "volume5", "configMap": { "name": "test" } },
                        { "name": "volume6", "projected": { "sources": [] } },
                        { "name": "volume7", "csi": { "driver": "d" } },
                        { "name": "volume8", "ephemeral": { "volumeClaimTemplate": {} } },
                        { "name": "volume9", "image": { "reference": "r" } },
                    ]),
                )],
                None,
            ),
        ),
        ("runasnonroot0", case(&[set("/securityContext/runAsNonRoot", json!(true))], None)),
        (
            "runasnonroot1",
            case(
                &[
                    unset("/securityContext/runAsNonRoot"),
                    set(c("runAsNonRoot"), json!(true)),
                    set(i("runAsNonRoot"), json!(true)),
                ],
                None,
            ),
        ),
        (
            "runasuser0",
            case(
                &[
                    set("/securityContext/runAsUser", json!(1000)),
                    set(c("runAsUser"), json!(1000)),
                    set(i("runAsUser"), json!(1000)),
                ],
                None,
            ),
        ),
        (
            "seccompprofile_restricted1",
            case(
                &[set(
                    "/securityContext/seccompProfile",
                    json!({ "type": "Localhost", "localhostProfile": "testing" }),
                )],
                None,
            ),
        ),
        (
            "seccompprofile_restricted2",
            case(
                &[
                    unset("/securityContext/seccompProfile"),
                    set(c("seccompProfile"), json!({ "type": "RuntimeDefault" })),
                    set(i("seccompProfile"), json!({ "type": "Localhost", "localhostProfile": "testing" })),
                ],
                None,
            ),
        ),
        ("selinuxoptions0", case(&[set(i("seLinuxOptions"), json!({}))], None)),
        (
            "selinuxoptions1",
            case(
                &[
                    set("/securityContext/seLinuxOptions", json!({ "type": "container_t" })),
                    set(c("seLinuxOptions"), json!({ "type": "container_init_t", "level": "somevalue" })),
                    set(i("seLinuxOptions"), json!({ "type": "container_kvm_t" })),
                ],
                None,
            ),
        ),
        (
            "selinux container_engine_t (1.31)",
            case(&[set(c("seLinuxOptions"), json!({ "type": "container_engine_t" }))], None),
        ),
        (
            "sysctls1",
            case(
                &[set(
                    "/securityContext/sysctls",
                    json!([{ "name": "net.ipv4.tcp_rmem", "value": "4096 87380 16777216" }, { "name": "net.ipv4.tcp_wmem", "value": "4096 65536 16777216" }]),
                )],
                None,
            ),
        ),
        (
            "sysctls of earlier versions",
            case(
                &[set(
                    "/securityContext/sysctls",
                    json!([
                        { "name": "kernel.shm_rmid_forced", "value": "0" }, { "name": "net.ipv4.ip_local_port_range", "value": "1024 65535" },
                        { "name": "net.ipv4.tcp_syncookies", "value": "0" }, { "name": "net.ipv4.ping_group_range", "value": "1 0" },
                        { "name": "net.ipv4.ip_unprivileged_port_start", "value": "1024" }, { "name": "net.ipv4.ip_local_reserved_ports", "value": "1024-4999" },
                        { "name": "net.ipv4.tcp_keepalive_time", "value": "7200" }, { "name": "net.ipv4.tcp_fin_timeout", "value": "60" },
                        { "name": "net.ipv4.tcp_keepalive_intvl", "value": "75" }, { "name": "net.ipv4.tcp_keepalive_probes", "value": "9" },
                    ]),
                )],
                None,
            ),
        ),
    ]
}

#[test]
fn every_pass_fixture_is_allowed() {
    for (name, (annotations, spec)) in pass_cases() {
        assert_eq!(detail(annotations.as_ref(), &spec), "", "{name}: {spec}");
    }
}

#[test]
fn every_fail_fixture_fails_with_the_librarys_detail() {
    let cases = fail_cases();
    assert_eq!(cases.len(), 74, "every fail fixture of restricted/v1.34");
    let mut checked = std::collections::BTreeSet::new();
    for (name, (annotations, spec), expected) in cases {
        assert_eq!(detail(annotations.as_ref(), &spec), expected, "{name}");
        let checks: Vec<usize> = violations(annotations.as_ref(), &spec)
            .iter()
            .map(|v| RESTRICTED.iter().position(|c| *c == v.check).expect("a check of the level"))
            .collect();
        assert!(checks.is_sorted(), "{name}: reported in the library's order of checks");
        checked.extend(checks);
    }
    assert_eq!(checked.len(), RESTRICTED.len(), "every check of the level fails some fixture");
}

/// What the host does with each fail fixture: one that only leaves something unset
/// passes once the host has set it (nothing else changes); every other is refused,
/// naming the field at fault and the check.
#[test]
fn the_host_sets_what_is_unset_and_refuses_every_other_fail_fixture() {
    let defaulted = [
        "allowprivilegeescalation2",
        "allowprivilegeescalation3",
        "capabilities_restricted0",
        "capabilities_restricted1",
        "capabilities_restricted2",
        "runasnonroot0",
        "seccompprofile_restricted0",
        "seccompprofile_restricted2",
        "seccompprofile_restricted3",
    ];
    for (name, (annotations, mut spec), _) in fail_cases() {
        let result = pod(
            "spec.template.spec",
            "spec.template.metadata",
            annotations.as_ref(),
            &mut spec,
            super::Level::Restricted,
        );
        if defaulted.contains(&name) {
            assert_eq!(result, Ok(()), "{name}: the host sets it");
            assert_eq!(detail(annotations.as_ref(), &spec), "", "{name}: and the result is allowed: {spec}");
            continue;
        }
        let e = result.expect_err(name);
        let first = violations(annotations.as_ref(), &spec).into_iter().next().expect("a violation");
        assert_eq!(e.check, first.check, "{name}");
        assert!(
            e.field.starts_with("spec.template.spec.") || e.field.starts_with("spec.template.metadata.annotations."),
            "{name}: {e}"
        );
        assert!(e.to_string().contains(&format!("check {}", e.check)), "{name}: {e}");
    }
}

#[test]
fn the_unit_cases_read_as_the_library_says_them() {
    // Several containers at once: names in visiting order, values sorted.
    let spec = json!({ "containers": [
        { "name": "a", "securityContext": { "capabilities": { "add": ["FOO", "BAR"] } } },
        { "name": "b", "securityContext": { "capabilities": { "add": ["BAR", "BAZ"] } } },
        { "name": "c", "securityContext": { "capabilities": { "add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"] } } },
    ]});
    let caps =
        violations(None, &spec).into_iter().find(|v| v.check == "capabilities_restricted").expect("capabilities");
    assert_eq!(
        caps.detail,
        r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#
    );
    let ports = json!({ "containers": [
        { "name": "a", "ports": [{ "hostPort": 0 }] },
        { "name": "b", "ports": [{ "hostPort": 0 }, { "hostPort": 10 }, { "hostPort": 20 }] },
        { "name": "c", "ports": [{ "hostPort": 0 }, { "hostPort": 10 }, { "hostPort": 30 }] },
    ]});
    let v = violations(None, &ports).into_iter().find(|v| v.check == "hostPorts").expect("hostPorts");
    assert_eq!(v.detail, r#"containers "b", "c" use hostPorts 10, 20, 30"#);
    let selinux = json!({
        "securityContext": { "seLinuxOptions": { "type": "foo", "user": "bar", "role": "baz" } },
        "containers": [
            { "name": "a", "securityContext": { "seLinuxOptions": { "type": "container_t" } } },
            { "name": "e", "securityContext": { "seLinuxOptions": { "type": "bar" } } },
            { "name": "f", "securityContext": { "seLinuxOptions": { "user": "bar" } } },
            { "name": "g", "securityContext": { "seLinuxOptions": { "role": "baz" } } },
        ],
    });
    let v = violations(None, &selinux).into_iter().find(|v| v.check == "seLinuxOptions").expect("seLinuxOptions");
    assert_eq!(
        v.detail,
        r#"pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#
    );
    let annotations = json!({
        "container.apparmor.security.beta.kubernetes.io/": "bogus",
        "container.apparmor.security.beta.kubernetes.io/a": "",
        "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
        "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
        "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
        "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/f": "unknown",
    });
    let v = violations(Some(&annotations), &json!({}))
        .into_iter()
        .find(|v| v.check == "appArmorProfile")
        .expect("AppArmor");
    assert_eq!(v.reason, "forbidden AppArmor profiles");
    assert_eq!(
        v.detail,
        r#"annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/="bogus"", "container.apparmor.security.beta.kubernetes.io/e="unconfined"", "container.apparmor.security.beta.kubernetes.io/f="unknown"""#
    );
    // Windows pods: no privilege escalation, capability or seccomp requirement.
    let windows = json!({ "os": { "name": "windows" }, "securityContext": { "runAsNonRoot": true }, "containers": [{ "name": "a" }] });
    assert_eq!(detail(None, &windows), "");
    let probes = json!({ "containers": [
        { "name": "valid", "livenessProbe": { "httpGet": { "port": 80 } } },
        { "name": "invalid1", "livenessProbe": { "httpGet": { "host": "a.com" } } },
        { "name": "invalid2", "lifecycle": { "preStop": { "tcpSocket": { "host": "b.com" } } }, "startupProbe": { "httpGet": { "host": "a.com" } } },
    ]});
    let v = violations(None, &probes).into_iter().find(|v| v.check == "hostProbesAndHostLifecycle").expect("probes");
    assert_eq!(v.detail, r#"containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com""#);
}

#[test]
fn the_four_pods_a_hostile_policy_got_past_the_host_are_refused() {
    // Found by the trust review (issue 44): AppArmor Unconfined, a non-safe sysctl, an
    // NFS volume and SELinux type spc_t, each in a Deployment's template.
    let cases = [
        (
            json!({ "containers": [{ "name": "c", "securityContext": { "appArmorProfile": { "type": "Unconfined" } } }] }),
            "appArmorProfile",
        ),
        (
            json!({ "securityContext": { "sysctls": [{ "name": "kernel.msgmax", "value": "65536" }] }, "containers": [{ "name": "c" }] }),
            "sysctls",
        ),
        (
            json!({ "volumes": [{ "name": "n", "nfs": { "server": "s", "path": "/" } }], "containers": [{ "name": "c" }] }),
            "restrictedVolumes",
        ),
        (
            json!({ "containers": [{ "name": "c", "securityContext": { "seLinuxOptions": { "type": "spc_t" } } }] }),
            "seLinuxOptions",
        ),
    ];
    for (spec, check) in cases {
        let mut d = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "spec": { "template": { "spec": spec } } });
        let e = super::object(&mut d).expect_err(check);
        assert_eq!(e.check, check, "{e}");
        assert!(e.field.starts_with("spec.template.spec."), "{e}");
    }
}

#[test]
fn unset_fields_get_the_restricted_values_and_objects_without_pods_are_left_alone() {
    let mut d = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "spec": { "template": { "spec": { "containers": [{ "name": "m", "image": "memcached:1.6.18" }] } } } });
    super::object(&mut d).expect("restricted");
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], json!(true));
    assert_eq!(spec["securityContext"]["seccompProfile"]["type"], json!("RuntimeDefault"));
    let sc = &spec["containers"][0]["securityContext"];
    assert_eq!((&sc["allowPrivilegeEscalation"], &sc["privileged"]), (&json!(false), &json!(false)));
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let mut cron = json!({ "spec": { "jobTemplate": { "spec": { "template": { "spec": { "hostIPC": true, "containers": [{ "name": "c" }] } } } } } });
    let e = super::object(&mut cron).expect_err("hostIPC");
    assert_eq!(e.field, "spec.jobTemplate.spec.template.spec.hostIPC");
    let mut pod = json!({ "kind": "Pod", "metadata": { "annotations": { "container.apparmor.security.beta.kubernetes.io/c": "unconfined" } }, "spec": { "containers": [{ "name": "c" }] } });
    let e = super::object(&mut pod).expect_err("AppArmor annotation");
    assert_eq!(
        (e.field.as_str(), e.check),
        ("metadata.annotations.container.apparmor.security.beta.kubernetes.io/c", "appArmorProfile")
    );
    let mut cm = json!({ "kind": "ConfigMap", "data": { "a": "b" } });
    let before = cm.clone();
    super::object(&mut cm).expect("nothing to restrict");
    assert_eq!(cm, before);
}

#[test]
fn pod_specs_are_found_wherever_a_kind_puts_them() {
    // A CRD of someone else's that runs pods from a list of templates.
    let mut workflow = json!({ "apiVersion": "example.com/v1", "kind": "Workflow", "spec": { "steps": [
        { "name": "one", "template": { "metadata": { "labels": { "a": "b" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        { "name": "two", "template": { "spec": { "containers": [{ "name": "c", "image": "i", "securityContext": { "privileged": true } }] } } },
    ]}});
    let found: Vec<String> = super::pods_in(&workflow).iter().map(|p| super::PodAt::dotted(&p.spec)).collect();
    assert_eq!(found, ["spec.steps[0].template.spec", "spec.steps[1].template.spec"]);
    let e = super::object(&mut workflow).expect_err("privileged");
    assert_eq!(
        (e.field.as_str(), e.check),
        ("spec.steps[1].template.spec.containers[0].securityContext.privileged", "privileged")
    );
    // A PodTemplate (core/v1) has its template at the top.
    let mut template =
        json!({ "kind": "PodTemplate", "template": { "spec": { "hostPID": true, "containers": [{ "name": "c" }] } } });
    assert_eq!(super::object(&mut template).expect_err("hostPID").field, "template.spec.hostPID");
    // Nesting deeper than the search goes is refused, not passed over.
    let mut deep = json!({ "containers": [{ "name": "c" }] });
    for _ in 0..40 {
        deep = json!({ "x": deep });
    }
    assert_eq!(super::object(&mut deep).expect_err("too deep").check, "podSpec");
}

#[test]
fn an_administrator_may_relax_a_policy_to_baseline() {
    use super::{Level, at_level, with_annotations};
    // Root, extra default capabilities, an NFS volume, no seccomp: baseline allows them and
    // sets nothing.
    let mut d = json!({ "spec": { "template": { "spec": {
        "securityContext": { "runAsUser": 0 },
        "volumes": [{ "name": "n", "nfs": { "server": "s", "path": "/" } }],
        "containers": [{ "name": "c", "securityContext": { "capabilities": { "add": ["CHOWN"] } } }],
    }}}});
    let before = d.clone();
    with_annotations(&mut d, None, Level::Baseline).expect("baseline allows it");
    assert_eq!(d, before, "nothing set at baseline");
    assert!(with_annotations(&mut d.clone(), None, Level::Restricted).is_err(), "restricted does not");
    // What baseline forbids, in its order and words.
    let spec = json!({
        "hostNetwork": true,
        "volumes": [{ "name": "a", "hostPath": { "path": "/" } }, { "name": "b", "hostPath": { "path": "/" } }],
        "securityContext": { "seccompProfile": { "type": "Unconfined" } },
        "containers": [{ "name": "a", "securityContext": { "capabilities": { "add": ["FOO", "BAR"] } } }],
    });
    let found: Vec<String> =
        at_level(Level::Baseline, None, &spec).iter().map(|v| format!("{} ({})", v.reason, v.detail)).collect();
    assert_eq!(
        found,
        [
            r#"non-default capabilities (container "a" must not include "BAR", "FOO" in securityContext.capabilities.add)"#,
            "host namespaces (hostNetwork=true)",
            r#"hostPath volumes (volumes "a", "b")"#,
            r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#,
        ]
    );
}
