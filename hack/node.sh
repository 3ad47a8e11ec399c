# The embedded cluster's real node: containerd, a CNI bridge, kubelet. Sourced by
# hack/cluster.sh, which provides CLUSTER_DIR, start/stop/alive/wait_for, log/die.
# shellcheck shell=bash
#
# Everything lives under $CLUSTER_DIR/node and is named after the state dir, so two
# clusters (make run, make test) can each have a node: a bridge psbr-ID, pods in
# 10.244.N.0/24, cgroups under /podset-ID, the kubelet on a port of its own.
# `node_down` removes exactly that: pods and their network namespaces, shims,
# mounts, the bridge, the cgroups, the pod log directories, and the sysctls the
# kubelet changed come back to what they were.

NODE_DIR="$CLUSTER_DIR/node"
NODE_NAME="${NODE_NAME:-podset-node}"
CONTAINERD_SOCK="$NODE_DIR/containerd.sock"
# A short, stable id of this cluster: the bridge name (at most 15 characters), the
# cgroup root and the pod subnet derive from it.
NODE_ID=$(printf '%s' "$CLUSTER_DIR" | sha256sum | cut -c1-6)
NODE_BRIDGE="psbr-$NODE_ID"
NODE_CGROUP="podset-$NODE_ID"
NODE_NET="10.244.$((16#${NODE_ID:0:2} % 250 + 1))"
NODE_SUBNET="$NODE_NET.0/24"
# The bridge's address is the node's: the kubelet refuses a loopback node IP, and the
# API server reaches the kubelet there (logs, exec), as pods reach each other.
NODE_IP="$NODE_NET.1"
# What the kubelet changes on the host, restored at node_down.
NODE_SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward)

ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# node_check: what this machine must offer; dies saying exactly what is missing.
node_check() {
  [ "$(id -u)" = 0 ] || die "the real node needs root (containerd, runc, network namespaces); run as root"
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || die "no cgroup filesystem at /sys/fs/cgroup: the real node cannot run containers here"
  grep -qw overlay /proc/filesystems || die "the kernel offers no overlay filesystem: containerd's overlayfs snapshotter cannot run here"
  apt_install "${NODE_PACKAGES[@]}"
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || die "the CNI bridge and host-local plugins are missing from /usr/lib/cni"
}

# node_certs: the kubelet's serving certificate (signed by the cluster CA, for
# the node IP and name), which the API server verifies.
node_certs() {
  local c="$CLUSTER_DIR/certs"
  sign_cert kubelet "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME" serverAuth
  [ -s "$c/kubelet.crt" ] || die "signing the kubelet's certificate failed"
}

node_configs() {
  local port=$1
  mkdir -p "$NODE_DIR"/{containerd/root,containerd/state,cni/net.d,cni/ipam,kubelet/pki,volume-plugins}
  cat >"$NODE_DIR/containerd.toml" <<EOF
# containerd for the embedded node: its own root, state and socket.
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/pause:3.4"
  # Writing -998 to oom_score_adj needs CAP_SYS_RESOURCE, which these machines lack.
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  # Per-registry settings (hosts.toml), as containerd 1.5+ reads them: the embedded
  # registry's CA. Credentials come from the pods' imagePullSecrets, through the kubelet.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$NODE_DIR/certs.d"
EOF
  mkdir -p "$NODE_DIR/certs.d/$REGISTRY"
  cat >"$NODE_DIR/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "https://$REGISTRY"

[host."https://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  ca = "$CLUSTER_DIR/certs/ca.crt"
EOF
  # A bridge on this machine only: no masquerading, no port mapping. The default route
  # through the bridge is what takes pods to the kubernetes Service (node_service_route).
  cat >"$NODE_DIR/cni/net.d/10-podset.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "podset-$NODE_ID",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$NODE_SUBNET" }]],
        "dataDir": "$NODE_DIR/cni/ipam"
      }
    }
  ]
}
EOF
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# On the node's bridge only; the API server authenticates with its client certificate.
address: $NODE_IP
port: $port
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$CLUSTER_DIR/certs/ca.crt"}
authorization: {mode: AlwaysAllow}
tlsCertFile: "$CLUSTER_DIR/certs/kubelet.crt"
tlsPrivateKeyFile: "$CLUSTER_DIR/certs/kubelet.key"
# No systemd here; cgroups v1 through cgroupfs, under a root of this cluster's own.
cgroupDriver: cgroupfs
cgroupRoot: /$NODE_CGROUP
failSwapOn: false
protectKernelDefaults: false
# Keeps the kubelet out of the host's iptables.
makeIPTablesUtilChains: false
volumePluginDir: "$NODE_DIR/volume-plugins"
# Pod logs in the node's own directory: a kubelet removes what it finds in its log
# directory for pods it does not know, so two clusters side by side (make run beside
# make test) sharing /var/log/pods deleted each other's logs, and kubectl logs failed.
podLogsDir: "$NODE_DIR/pod-logs"
# Images are imported, never pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
# A pod's ConfigMap volumes are refreshed at its periodic sync: every 10 s rather than
# every minute, so a policy ConfigMap change reaches the deployed operator promptly.
syncFrequency: 10s
containerRuntimeEndpoint: "unix://$CONTAINERD_SOCK"
# Writing a negative oom_score_adj needs CAP_SYS_RESOURCE, which these machines lack.
oomScoreAdj: 0
# These machines mount cgroup v1. Kubernetes 1.34's kubelet still runs there (with a
# warning); from 1.35 it refuses unless this is false, and 1.34 is why we pin it.
failCgroupV1: false
EOF
}

# node_bridge: the pod bridge, made before the API server starts (it listens on the
# bridge's address) and before the first pod, so the node has its IP. The CNI bridge
# plugin adopts it (same name, gateway address already set).
node_bridge() {
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || ip link add "$NODE_BRIDGE" type bridge \
    || die "cannot create the bridge $NODE_BRIDGE: the real node needs CAP_NET_ADMIN"
  ip addr replace "$NODE_IP/24" dev "$NODE_BRIDGE" || die "cannot address the bridge $NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up || die "cannot bring the bridge $NODE_BRIDGE up"
}

# node_cgroups: the kubelet's cgroup root, made in every v1 hierarchy (the kubelet
# refuses a root that does not exist, and creates only what lies below it).
node_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/; do
    case "$h" in */unified/) continue ;; esac
    mkdir -p "$h$NODE_CGROUP" || die "cannot create the cgroup $h$NODE_CGROUP: the real node needs a writable cgroup filesystem"
    # A new cpuset starts empty unless its parent clones; it must hold the parent's CPUs and memory nodes.
    if [ -f "$h$NODE_CGROUP/cpuset.cpus" ] && [ -z "$(cat "$h$NODE_CGROUP/cpuset.cpus")" ]; then
      cat "${h}cpuset.cpus" >"$h$NODE_CGROUP/cpuset.cpus"
      cat "${h}cpuset.mems" >"$h$NODE_CGROUP/cpuset.mems"
    fi
  done
}

node_record_host() {
  local k
  for k in "${NODE_SYSCTLS[@]}"; do printf '%s=%s\n' "$k" "$(sysctl -n "$k")"; done >"$NODE_DIR/sysctls"
}

# node_service_route APISERVER_PORT: the `kubernetes` Service (10.0.0.1:443) leads
# from pods to the API server, as kube-proxy would make it: one DNAT rule for traffic
# entering from this node's bridge only, tagged with the node's id so node_down (and
# node_leftovers) find it.
node_service_route() {
  # A run of this checkout that never reached node_down (killed, or the machine went
  # away) leaves its rule, to that run's API server port; being first, it took the
  # traffic and the deployed operator could not reach the API server.
  node_drop_rules
  local rule=(PREROUTING -i "$NODE_BRIDGE" -d 10.0.0.1/32 -p tcp --dport 443
    -m comment --comment "podset-$NODE_ID kubernetes service" -j DNAT --to-destination "$NODE_IP:$1")
  iptables -w -t nat -C "${rule[@]}" 2>/dev/null || iptables -w -t nat -A "${rule[@]}" \
    || die "cannot add the kubernetes Service's DNAT rule: the real node needs iptables' nat table"
}

# node_drop_rules: removes this node's iptables rules (tagged with its id).
node_drop_rules() {
  local rule
  while rule=$(iptables-save -t nat 2>/dev/null | grep -m1 -- "--comment \"podset-$NODE_ID "); do
    # shellcheck disable=SC2086 # the saved rule's words are iptables arguments
    eval "iptables -w -t nat ${rule/-A /-D }" || break
  done
}

# node_up KUBELET_BINARY APISERVER_PORT: containerd, the images, the kubelet; waits for
# the Node to be Ready.
node_up() {
  local kubelet=$1 port
  port=$(free_ports | cut -d' ' -f1)
  node_certs
  node_configs "$port"
  node_cgroups
  node_service_route "$2"
  node_record_host
  log "starting containerd ($CONTAINERD_SOCK)"
  start containerd containerd --config "$NODE_DIR/containerd.toml"
  wait_for containerd 30 ctr_ version
  log "building and importing the node's images (pause, busybox, memcached, iperf3)"
  "$ROOT/hack/images.sh" --import "$CONTAINERD_SOCK" pause busybox memcached iperf3 \
    || die "the node's images could not be built or imported"
  log "starting kubelet (node $NODE_NAME at $NODE_IP:$port, pods in $NODE_SUBNET on $NODE_BRIDGE)"
  start kubelet "$kubelet" --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$CLUSTER_DIR/kubelet.kubeconfig" \
    --root-dir="$NODE_DIR/kubelet" --cert-dir="$NODE_DIR/kubelet/pki" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --node-labels=podset.dev/real=true --v=1
  wait_for kubelet 90 node_is_ready "$NODE_NAME"
}

node_is_ready() {
  KUBECONFIG="$CLUSTER_DIR/kubeconfig" kubectl get node "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}

# node_down: removes everything the node made (see the header). Safe to run twice.
node_down() {
  [ -d "$NODE_DIR" ] || return 0
  # Pods first, through the kubelet while it runs: it tears down their networks (CNI).
  if alive "$(pid_of kubelet)" && load_env && readyz >/dev/null 2>&1; then
    KUBECONFIG="$CLUSTER_DIR/kubeconfig" kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" \
      --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < 100; i++)); do
      [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop kubelet
  # Whatever is left, through containerd: each task killed, its network namespace removed.
  if alive "$(pid_of containerd)"; then
    local id netns
    for id in $(ctr_ containers ls -q 2>/dev/null); do
      netns=$(ctr_ containers info "$id" 2>/dev/null | python3 -c '
import json, sys
spec = json.load(sys.stdin).get("Spec", {})
print(next((n.get("path", "") for n in spec.get("linux", {}).get("namespaces", []) if n.get("type") == "network"), ""))' 2>/dev/null || true)
      ctr_ tasks kill -s KILL "$id" >/dev/null 2>&1 || true
      ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
      ctr_ containers delete "$id" >/dev/null 2>&1 || true
      case "$netns" in /var/run/netns/* | /run/netns/*) ip netns delete "${netns##*/}" 2>/dev/null || true ;; esac
    done
  fi
  stop containerd
  # Shims outlive containerd by design; ours name our socket.
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null || true
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$NODE_DIR" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  ip link delete "$NODE_BRIDGE" 2>/dev/null || true
  node_drop_rules
  # cgroups: deepest first, in every hierarchy.
  local h
  for h in /sys/fs/cgroup/*/"$NODE_CGROUP" /sys/fs/cgroup/"$NODE_CGROUP"; do
    [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  # The symlinks the kubelet made to its pod logs (which go with the node's directory).
  find /var/log/containers -lname "$NODE_DIR/pod-logs/*" -delete 2>/dev/null || true
  # The sysctls, unless another cluster's kubelet still runs (it expects its values).
  if [ -f "$NODE_DIR/sysctls" ] && ! pgrep -f "kubelet --config=.*/node/kubelet.yaml" >/dev/null; then
    local kv
    while IFS= read -r kv; do sysctl -qw "$kv" >/dev/null 2>&1 || true; done <"$NODE_DIR/sysctls"
  fi
}

# node_leftovers: what of this node is still on the machine (empty when clean).
node_leftovers() {
  pgrep -af "$NODE_DIR" | sed 's/^/process: /' || true
  pgrep -af "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" | sed 's/^/shim: /' || true
  findmnt -rn -o TARGET | grep -F "$NODE_DIR" | sed 's/^/mount: /' || true
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && echo "network device: $NODE_BRIDGE"
  iptables-save -t nat 2>/dev/null | grep -- "podset-$NODE_ID " | sed 's/^/iptables rule: /'
  true
  local h
  for h in /sys/fs/cgroup/*/"$NODE_CGROUP"; do [ -d "$h" ] && echo "cgroup: $h"; done
  return 0
}
