#!/usr/bin/env bash
# A throwaway Kubernetes cluster on loopback, without Docker:
# etcd + kube-apiserver + kube-controller-manager (garbage collector, namespace, deployment,
# replicaset, job and node lifecycle controllers) + kube-scheduler, one real node (containerd,
# a CNI bridge, kubelet; hack/node.sh), the node simulator (podset-node-sim) for scale,
# and an image registry (Debian's docker-registry: TLS from the cluster CA, basic auth)
# that the node pulls from and policies are published to.
#
# Which node a pod lands on: the simulated node is tainted podset.dev/simulated=true:NoSchedule
# and labelled podset.dev/simulated=true; the scheduler places a pod there only when it
# tolerates the taint and selects the label. Every other pod runs for real.
#
#   hack/cluster.sh up       start it (a no-op if it is already up and healthy)
#   hack/cluster.sh status   what runs, what crashed (with log tails); non-zero unless fully up
#   hack/cluster.sh down     stop exactly the processes it started and remove the state dir
#   hack/cluster.sh restart COMPONENT [TERM|KILL] [--flag=value ...]
#                  (the flags replace or add to the component's; the benchmarks set the
#                  controller manager's client rate this way)
#                            stop a component with the signal and start it again with the same
#                            command line (recorded at `up` in $CLUSTER_DIR/args/COMPONENT, one
#                            argument per line: tests also start variants from it)
#
# Everything (ports, pids, certs, data, logs) lives in the state dir
#   CLUSTER_DIR   (default $ROOT/.cluster; `make test` uses $ROOT/.cluster-test)
# so several clusters can run side by side. Other knobs:
#   SIM_NODE=0                     do not start the node simulator
#   REAL_NODE=0                    do not start the real node (containerd, kubelet)
#   CLUSTER_APISERVER_PORT, CLUSTER_ETCD_PORT, CLUSTER_ETCD_PEER_PORT, CLUSTER_REGISTRY_PORT
#                                  fixed ports instead of
#                                  free ones (not APISERVER_PORT etc.: those are what env exports,
#                                  and a shell that sourced one cluster's env must not steer another)
#   READY_TIMEOUT=60               seconds to wait for the apiserver's /readyz
# After `up`, $CLUSTER_DIR/env holds KUBECONFIG, APISERVER_URL, APISERVER_PORT, ETCD_PORT, ...
# and the apiserver's audit log (writes to pods and podsets) is $CLUSTER_DIR/logs/audit.log.
# The registry: REGISTRY (127.0.0.1:PORT), REGISTRY_USER, REGISTRY_PASSWORD, REGISTRY_AUTH (a
# Docker config.json with those credentials: skopeo --authfile, podset-host
# --registry-config, a kubernetes.io/dockerconfigjson Secret) and CA_CERT.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

CLUSTER_DIR="${CLUSTER_DIR:-$ROOT/.cluster}"
case "$CLUSTER_DIR" in /*) ;; *) CLUSTER_DIR="$PWD/$CLUSTER_DIR" ;; esac
CLUSTER_DIR="${CLUSTER_DIR%/}"
# Marks a directory as ours: `down` refuses to delete a directory without it.
MARKER="$CLUSTER_DIR/.podset-cluster"
# The cluster's own kubectl (linked at `up`) comes first.
[ ! -d "$CLUSTER_DIR/bin" ] || PATH="$CLUSTER_DIR/bin:$PATH"
PID_DIR="$CLUSTER_DIR/pids"
LOG_DIR="$CLUSTER_DIR/logs"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
SIM_NODE_NAME="${SIM_NODE_NAME:-sim-node}"
# shellcheck source=hack/node.sh
. "$(dirname "$0")/node.sh"
ALL_COMPONENTS=(etcd registry kube-apiserver kube-controller-manager kube-scheduler containerd kubelet node-sim) # start order; stopped in reverse

# The components this state dir runs: recorded at `up` (SIM_NODE=0 leaves out the simulator).
components() {
  if [ -f "$CLUSTER_DIR/components" ]; then cat "$CLUSTER_DIR/components"; else printf '%s\n' "${ALL_COMPONENTS[@]}"; fi
}

# pid_of NAME: the recorded pid, or nothing.
pid_of() {
  local f="$PID_DIR/$1.pid"
  [ -f "$f" ] && tr -dc 0-9 <"$f"
  return 0
}

# alive PID: the process exists, is not a zombie, and is one of ours. Every process we start
# names the state dir on its command line, so a recycled pid is never mistaken for ours.
alive() {
  local pid=$1 state
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 1
  [ "$state" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$CLUSTER_DIR/"
}

load_env() {
  [ -f "$CLUSTER_DIR/env" ] || return 1
  # shellcheck disable=SC1091
  . "$CLUSTER_DIR/env"
}

readyz() { # prints the apiserver's answer; succeeds only on "ok"
  local out
  out=$(curl -sk --max-time 3 -H "Authorization: Bearer $APISERVER_TOKEN" "$APISERVER_URL/readyz" 2>&1) || {
    echo "unreachable (${out:-no answer})"
    return 1
  }
  echo "$out"
  [ "$out" = ok ]
}

all_alive() {
  local c
  for c in $(components); do alive "$(pid_of "$c")" || return 1; done
}

# healthy [GRACE]: every component alive and /readyz ok. With every process alive, a failing
# /readyz gets GRACE seconds to recover (a loaded machine, an etcd hiccup) before we give up.
healthy() {
  local deadline=$((SECONDS + ${1:-0}))
  load_env && all_alive || return 1
  until readyz >/dev/null; do
    ((SECONDS < deadline)) && all_alive || return 1
    sleep 0.5
  done
}

# stop NAME [SIGNAL]: SIGNAL (default TERM), up to 10 s grace, then KILL. Only the recorded
# pid, and only if it is ours.
stop() {
  local name=$1 signal=${2:-TERM} pid i
  pid=$(pid_of "$name")
  # Identity is checked once, while the process is whole: a dying process's cmdline
  # empties before it has let go of its ports.
  if alive "$pid"; then
    kill -"$signal" "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do running "$pid" || break; sleep 0.1; done
    if running "$pid"; then
      log "$name (pid $pid) ignored SIG$signal for 10 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do running "$pid" || break; sleep 0.1; done
    fi
  fi
  rm -f "$PID_DIR/$name.pid"
}

# running PID: some thread of the process is alive. The leader of a multithreaded process
# (etcd, the API server) turns zombie before its other threads have exited, and they hold
# the listening sockets until the last one has.
running() {
  local status state
  for status in /proc/"$1"/task/*/status; do
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "$status" 2>/dev/null) || continue
    [ -n "$state" ] && [ "$state" != Z ] && return 0
  done
  return 1
}

stop_all() {
  local i
  for ((i = ${#ALL_COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${ALL_COMPONENTS[i]}"; done
}

tail_log() { # NAME [LINES]
  local f="$LOG_DIR/$1.log"
  if [ -s "$f" ]; then
    echo "---- last ${2:-20} lines of $f ----" >&2
    tail -n "${2:-20}" "$f" | sed 's/^/    /' >&2
  else
    echo "---- $f is empty or missing ----" >&2
  fi
}

# start NAME CMD...: in the background, in its own session (so the caller's Ctrl-C or exit
# does not reach it), logging to logs/NAME.log. setsid execs in place (we are not a process
# group leader), so $! is the component's own pid. The command line is recorded in
# args/NAME (one argument per line) for `restart`, and for tests that start a variant.
start() {
  local name=$1
  shift
  mkdir -p "$CLUSTER_DIR/args"
  printf '%s\n' "$@" >"$CLUSTER_DIR/args/$name"
  setsid nohup "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
  local pid=$! i
  echo "$pid" >"$PID_DIR/$name.pid"
  # Until the exec, the child is a copy of this script: `alive` (which looks for the state
  # dir on the command line) would call it dead. Wait for the exec, or for an early exit.
  for ((i = 0; i < 50; i++)); do
    alive "$pid" || ! running "$pid" && break
    sleep 0.05
  done
}

# wait_for NAME SECONDS CHECK...: poll CHECK until it succeeds; fail early if NAME died.
wait_for() {
  local name=$1 secs=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    # Asked twice before it is called dead: once, node-sim read as dead right after its
    # start and was running a second later; a process between its execs (setsid, nohup,
    # env, the binary) can read for an instant as having no command line.
    if ! alive "$(pid_of "$name")" && ! { sleep 0.2 && alive "$(pid_of "$name")"; }; then
      tail_log "$name" 30
      die "$name exited during startup (full log: $LOG_DIR/$name.log)"
    fi
    if ((SECONDS >= deadline)); then
      tail_log "$name" 30
      die "$name not ready after ${secs}s (full log: $LOG_DIR/$name.log)"
    fi
    sleep 0.2
  done
}

port_in_use() {
  ss -Hltn "( sport = :$1 )" 2>/dev/null | grep -q .
}

# Four distinct free loopback ports, held open together while the kernel picks them.
free_ports() {
  if command -v /usr/bin/python3 >/dev/null || command -v python3 >/dev/null; then
    "$(command -v /usr/bin/python3 || command -v python3)" -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'
  else
    local ports=() p
    while [ ${#ports[@]} -lt 4 ]; do
      p=$((20000 + RANDOM % 30000))
      port_in_use "$p" || [[ " ${ports[*]} " == *" $p "* ]] || ports+=("$p")
    done
    echo "${ports[*]}"
  fi
}

write_kubeconfig() { # FILE USER TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: podset
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$CLUSTER_DIR/certs/ca.crt")
users:
- name: $2
  user:
    token: $3
contexts:
- name: podset
  context:
    cluster: podset
    user: $2
current-context: podset
EOF
  chmod 600 "$1"
}

node_ready() {
  curl -sk --max-time 3 -H "Authorization: Bearer $APISERVER_TOKEN" \
    "$APISERVER_URL/api/v1/nodes/$SIM_NODE_NAME" | grep -q '"type": "Ready"'
}

# sign_cert NAME SUBJECT SANS EKU: NAME.key and NAME.crt under certs/, signed by the cluster CA.
sign_cert() {
  local name=$1 subj=$2 sans=$3 eku=$4 c="$CLUSTER_DIR/certs"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$c/$name.key" -subj "$subj" -out "$c/$name.csr" 2>/dev/null \
    || die "openssl req for $name failed"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$c/$name.ext"
  openssl x509 -req -in "$c/$name.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial -days 365 \
    -extfile "$c/$name.ext" -out "$c/$name.crt" 2>/dev/null || die "signing $name's certificate failed"
}

# The cluster's CA, and the API server's serving certificate signed by it: clients verify
# the server (no insecure-skip-tls-verify), and the API server and kubelet each other.
make_certs() {
  local c="$CLUSTER_DIR/certs"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$c/ca.key" -subj "/CN=podset-cluster-ca" -days 365 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$c/ca.crt" 2>/dev/null || die "creating the cluster CA failed"
  sign_cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:$NODE_IP,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" serverAuth
  # The API server's client identity towards kubelets (logs, exec, port-forward).
  sign_cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" "" clientAuth
}

crds_established() {
  local names n
  names=$(KUBECONFIG="$CLUSTER_DIR/kubeconfig" kubectl get -f "$ROOT/manifests/crd/" -o name 2>/dev/null) || return 1
  [ -n "$names" ] || return 1
  for n in $names; do
    [ "$(KUBECONFIG="$CLUSTER_DIR/kubeconfig" kubectl get "$n" \
        -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] || return 1
  done
}

etcd_healthy() { curl -s --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

# The registry answers /v2/ over TLS with the cluster CA, and asks for credentials.
registry_ready() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$CLUSTER_DIR/certs/ca.crt" \
    "https://$REGISTRY/v2/")" = 401 ]
}

# registry_config: the registry's files under registry/: a serving certificate from the
# cluster CA, an htpasswd file with one user (a fresh random password), the config, and a
# Docker config.json holding the credentials for clients. Sets REGISTRY_USER and
# REGISTRY_PASSWORD.
registry_config() {
  local d="$CLUSTER_DIR/registry"
  mkdir -p "$d/data"
  sign_cert registry "/CN=podset-registry" "IP:127.0.0.1,DNS:localhost" serverAuth
  REGISTRY_USER=podset
  REGISTRY_PASSWORD=$(openssl rand -hex 16)
  htpasswd -Bbn "$REGISTRY_USER" "$REGISTRY_PASSWORD" >"$d/htpasswd" 2>/dev/null || die "htpasswd failed"
  cat >"$d/config.yml" <<EOF
version: 0.1
log:
  level: info
  fields: { service: registry }
storage:
  filesystem: { rootdirectory: $d/data }
  delete: { enabled: true }
http:
  addr: $REGISTRY
  secret: $(openssl rand -hex 16)
  tls:
    certificate: $CLUSTER_DIR/certs/registry.crt
    key: $CLUSTER_DIR/certs/registry.key
  headers:
    X-Content-Type-Options: [nosniff]
auth:
  htpasswd:
    realm: podset-registry
    # A file. Debian's default config names the directory /etc/docker/registry, and
    # every login then fails with HTTP 400.
    path: $d/htpasswd
EOF
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$REGISTRY" \
    "$(printf '%s:%s' "$REGISTRY_USER" "$REGISTRY_PASSWORD" | base64 -w0)" >"$d/auth.json"
  chmod 600 "$d/htpasswd" "$d/auth.json"
}

on_failed_up() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    log "up failed; stopping what was started (logs in $LOG_DIR)"
    node_down
    stop_all
  fi
}

# Up already (returns 0), or a state dir to start afresh in (returns 1): a broken
# cluster's leftovers are stopped and cleared, its logs kept; a directory that is not
# a cluster's is refused.
up_already() {
  if [ -f "$MARKER" ]; then
    if healthy 15; then
      log "already up: $APISERVER_URL (KUBECONFIG=$CLUSTER_DIR/kubeconfig)"
      return 0
    fi
    local c pid problems=()
    for c in $(components); do
      pid=$(pid_of "$c")
      if [ -z "$pid" ]; then
        problems+=("$c has no pid file")
      elif ! alive "$pid"; then problems+=("stale pid file for $c (pid $pid is gone)"); fi
    done
    [ ${#problems[@]} -gt 0 ] || problems+=("all processes alive but the apiserver is not ready")
    log "cluster in $CLUSTER_DIR is not healthy: $(IFS=';'; echo "${problems[*]}")"
    log "stopping what is left and starting fresh (previous logs kept as logs/*.log.prev)"
    stop_all
    find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
    for f in "$LOG_DIR"/*.log; do [ -e "$f" ] && mv -f "$f" "$f.prev"; done
  elif [ -d "$CLUSTER_DIR" ] && [ -n "$(ls -A "$CLUSTER_DIR")" ]; then
    die "$CLUSTER_DIR exists and is not a cluster state dir (no $(basename "$MARKER")); refusing to use it"
  fi

  return 1
}

# ETCD, KUBE_APISERVER, … KUBECTL: the binaries hack/k8s-binaries.sh provides.
find_binaries() {
  local line
  while IFS= read -r line; do
    case "$line" in
      ETCD=*) ETCD=${line#*=} ;;
      KUBE_APISERVER=*) KUBE_APISERVER=${line#*=} ;;
      KUBE_CONTROLLER_MANAGER=*) KUBE_CONTROLLER_MANAGER=${line#*=} ;;
      KUBE_SCHEDULER=*) KUBE_SCHEDULER=${line#*=} ;;
      KUBELET=*) KUBELET=${line#*=} ;;
      KUBECTL=*) KUBECTL=${line#*=} ;;
    esac
  done < <("$ROOT/hack/k8s-binaries.sh" || echo FAILED)
  if [ -z "${ETCD:-}" ] || [ -z "${KUBE_APISERVER:-}" ] || [ -z "${KUBE_CONTROLLER_MANAGER:-}" ] \
    || [ -z "${KUBE_SCHEDULER:-}" ] || [ -z "${KUBELET:-}" ] || [ -z "${KUBECTL:-}" ]; then
    die "hack/k8s-binaries.sh did not provide etcd and the Kubernetes binaries"
  fi
}

# SIM_BIN: the node simulator, built (SIM_NODE=0: none).
build_node_sim() {
  SIM_BIN=""
  if [ "${SIM_NODE:-1}" != 0 ]; then
    command -v cargo >/dev/null || die "cargo not found (needed to build the node simulator; SIM_NODE=0 skips it)"
    log "building the node simulator (cargo may first wait for another build's lock)"
    (cd "$ROOT" && build_binaries) || die "building podset-node-sim failed"
    local target="${CARGO_TARGET_DIR:-$ROOT/target}"
    case "$target" in /*) ;; *) target="$ROOT/$target" ;; esac
    SIM_BIN="$target/debug/podset-node-sim"
    [ -x "$SIM_BIN" ] || die "built podset-node-sim but $SIM_BIN is missing"
  fi

}

# ETCD_PORT, ETCD_PEER_PORT, APISERVER_PORT, REGISTRY_PORT: given ones must be free,
# the others the kernel picks.
pick_ports() {
  # Ports: explicit ones must be free; otherwise let the kernel pick.
  local picked p var
  read -r -a picked <<<"$(free_ports)"
  ETCD_PORT=${CLUSTER_ETCD_PORT:-${picked[0]}}
  ETCD_PEER_PORT=${CLUSTER_ETCD_PEER_PORT:-${picked[1]}}
  APISERVER_PORT=${CLUSTER_APISERVER_PORT:-${picked[2]}}
  REGISTRY_PORT=${CLUSTER_REGISTRY_PORT:-${picked[3]}}
  for var in ETCD_PORT ETCD_PEER_PORT APISERVER_PORT REGISTRY_PORT; do
    p=${!var}
    if ! [[ "$p" =~ ^[0-9]+$ ]] || ((p < 1 || p > 65535)); then die "$var=$p is not a port number"; fi
    if port_in_use "$p"; then
      die "port $p (for $var) is already in use on this machine: $(ss -Hltnp "( sport = :$p )" | tr -s ' ' | head -1)"
    fi
  done

}

# The state dir, the cluster's kubectl on PATH, the components this cluster runs.
prepare_state_dir() {
  mkdir -p "$CLUSTER_DIR" "$PID_DIR" "$LOG_DIR" "$CLUSTER_DIR/etcd" "$CLUSTER_DIR/certs" "$CLUSTER_DIR/bin"
  chmod 700 "$CLUSTER_DIR"
  touch "$MARKER"
  # The client of the cluster's own version, for the scripts, the tests and the docs
  # (PATH="$CLUSTER_DIR/bin:$PATH").
  ln -sfn "$KUBECTL" "$CLUSTER_DIR/bin/kubectl"
  PATH="$CLUSTER_DIR/bin:$PATH"

  local c
  for c in "${ALL_COMPONENTS[@]}"; do
    case "$c" in
      node-sim) [ "${SIM_NODE:-1}" = 0 ] || echo "$c" ;;
      containerd | kubelet) [ "${REAL_NODE:-1}" = 0 ] || echo "$c" ;;
      *) echo "$c" ;;
    esac
  done >"$CLUSTER_DIR/components"

}

# Certificates, the registry's config and one bearer token per client; API_ADDR and
# APISERVER_URL.
make_credentials() {
  # Credentials: a service-account signing keypair and one bearer token per client, so the
  # audit log tells the operator's writes (admin) from the simulator's and the controllers'.
  openssl genrsa -out "$CLUSTER_DIR/certs/sa.key" 2048 2>/dev/null || die "openssl genrsa failed"
  openssl rsa -in "$CLUSTER_DIR/certs/sa.key" -pubout -out "$CLUSTER_DIR/certs/sa.pub" 2>/dev/null || die "openssl rsa failed"
  make_certs
  REGISTRY="127.0.0.1:$REGISTRY_PORT"
  registry_config
  APISERVER_TOKEN=$(openssl rand -hex 24)
  sim_token=$(openssl rand -hex 24)
  kcm_token=$(openssl rand -hex 24)
  scheduler_token=$(openssl rand -hex 24)
  kubelet_token=$(openssl rand -hex 24)
  {
    echo "$APISERVER_TOKEN,admin,admin,system:masters"
    echo "$sim_token,podset-node-sim,podset-node-sim,system:masters"
    echo "$kcm_token,system:kube-controller-manager,system:kube-controller-manager,system:masters"
    echo "$scheduler_token,system:kube-scheduler,system:kube-scheduler"
    # No Node authorizer runs here: the kubelet gets system:masters (on this machine only).
    echo "$kubelet_token,system:node:$NODE_NAME,system:node:$NODE_NAME,\"system:nodes,system:masters\""
  } >"$CLUSTER_DIR/tokens.csv"
  chmod 600 "$CLUSTER_DIR/tokens.csv"
  # With a real node, the API server listens on the node's bridge address instead of
  # loopback: pods (the operator deployed as pods) reach it there, through the
  # `kubernetes` Service (node_service_route), and nothing outside this machine can.
  API_ADDR=127.0.0.1
  if [ "${REAL_NODE:-1}" != 0 ]; then
    node_bridge
    API_ADDR=$NODE_IP
  fi
  APISERVER_URL="https://$API_ADDR:$APISERVER_PORT"

}

write_audit_policy() {
  cat >"$CLUSTER_DIR/audit-policy.yaml" <<'EOF'
# Metadata-level records of writes to the workloads the tests count: pods, PodSets,
# Deployments, ReplicaSets, Memcacheds (incl. subresources such as pods/status,
# pods/binding, podsets/status, replicasets/status: the benchmark's peers pay for
# the same records); everything else unlogged.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: ""
    resources: [pods, pods/*]
  - group: app.example.com
    resources: [podsets, podsets/*, netperfs, netperfs/*]
  - group: apps
    resources: [deployments, replicasets, replicasets/*]
  - group: cache.example.com
    resources: [memcacheds, memcacheds/*]
- level: None
EOF

}

# A kubeconfig per client, and the env file the scripts and tests source.
write_client_config() {
  write_kubeconfig "$CLUSTER_DIR/kubeconfig" admin "$APISERVER_TOKEN"
  write_kubeconfig "$CLUSTER_DIR/sim.kubeconfig" podset-node-sim "$sim_token"
  write_kubeconfig "$CLUSTER_DIR/kcm.kubeconfig" system:kube-controller-manager "$kcm_token"
  write_kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" system:kube-scheduler "$scheduler_token"
  write_kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" "system:node:$NODE_NAME" "$kubelet_token"
  cat >"$CLUSTER_DIR/env" <<EOF
CLUSTER_DIR=$CLUSTER_DIR
KUBECONFIG=$CLUSTER_DIR/kubeconfig
APISERVER_URL=$APISERVER_URL
APISERVER_PORT=$APISERVER_PORT
APISERVER_TOKEN=$APISERVER_TOKEN
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
AUDIT_LOG=$LOG_DIR/audit.log
SIM_NODE_NAME=$SIM_NODE_NAME
NODE_NAME=$NODE_NAME
CONTAINERD_SOCK=$CONTAINERD_SOCK
CA_CERT=$CLUSTER_DIR/certs/ca.crt
REGISTRY=$REGISTRY
REGISTRY_PORT=$REGISTRY_PORT
REGISTRY_USER=$REGISTRY_USER
REGISTRY_PASSWORD=$REGISTRY_PASSWORD
REGISTRY_AUTH=$CLUSTER_DIR/registry/auth.json
EOF

}

start_etcd_and_registry() {
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  start etcd "$ETCD" --name=default --data-dir="$CLUSTER_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="default=http://127.0.0.1:$ETCD_PEER_PORT" --logger=zap --log-outputs=stderr
  wait_for etcd 20 etcd_healthy

  log "starting the registry on https://$REGISTRY (user $REGISTRY_USER)"
  # distribution reads REGISTRY_* variables as overrides of its config: the env file's own
  # (REGISTRY_AUTH would replace the auth section) must not reach it from a shell that sourced it.
  start registry env -u REGISTRY -u REGISTRY_PORT -u REGISTRY_USER -u REGISTRY_PASSWORD -u REGISTRY_AUTH \
    docker-registry serve "$CLUSTER_DIR/registry/config.yml"
  wait_for registry 20 registry_ready

}

start_apiserver() {
  log "starting kube-apiserver on $APISERVER_URL"
  # The audit log is not rotated (the API server's logger cannot turn rotation off; a
  # million MiB is never reached): readers keep a byte offset into the one file, which the
  # default rotation at 100 MB would leave past the new file's end: the bench's audit rows
  # at 20 000 objects all read 0 ms on 2026-11-30 19:52. Rotated files were kept before, so
  # the disk holds the same; the log goes with the cluster's directory.
  start kube-apiserver "$KUBE_APISERVER" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address="$API_ADDR" --advertise-address="$API_ADDR" \
    --secure-port="$APISERVER_PORT" --cert-dir="$CLUSTER_DIR/certs" \
    --tls-cert-file="$CLUSTER_DIR/certs/apiserver.crt" --tls-private-key-file="$CLUSTER_DIR/certs/apiserver.key" \
    --client-ca-file="$CLUSTER_DIR/certs/ca.crt" --kubelet-certificate-authority="$CLUSTER_DIR/certs/ca.crt" \
    --kubelet-client-certificate="$CLUSTER_DIR/certs/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$CLUSTER_DIR/certs/apiserver-kubelet-client.key" --kubelet-preferred-address-types=InternalIP \
    --service-cluster-ip-range=10.0.0.0/24 --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$CLUSTER_DIR/certs/sa.pub" --service-account-signing-key-file="$CLUSTER_DIR/certs/sa.key" \
    --token-auth-file="$CLUSTER_DIR/tokens.csv" --authorization-mode=RBAC --allow-privileged=true \
    --audit-policy-file="$CLUSTER_DIR/audit-policy.yaml" --audit-log-path="$LOG_DIR/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=1000000
  wait_for kube-apiserver "$READY_TIMEOUT" readyz

}

install_crds() {
  # The project's CRDs go in before the garbage collector starts: it discovers
  # resource types every 30 s, so a PodSet type installed later would leave deleted
  # PodSets' pods alive for up to a minute.
  if [ -d "$ROOT/manifests/crd" ] && [ "${CLUSTER_CRDS:-1}" != 0 ]; then
    log "installing the CRDs of manifests/crd/"
    KUBECONFIG="$CLUSTER_DIR/kubeconfig" kubectl apply --server-side --force-conflicts -f "$ROOT/manifests/crd/" >/dev/null \
      || die "installing manifests/crd/ failed"
    # Polled rather than `kubectl wait`, which fails outright while a new CRD has no
    # conditions yet.
    local crd_deadline=$((SECONDS + 30))
    until crds_established; do
      ((SECONDS < crd_deadline)) || die "the CRDs of manifests/crd/ were not Established after 30s"
      sleep 0.2
    done
  fi

}

start_controllers() {
  # deployment + replicaset: the Memcached policy owns a Deployment, and the real
  # ReplicaSet controller is the peer the benchmarks measure against. job: the CronJob
  # policy's Jobs run their pods. node-lifecycle:
  # takes the not-ready taint off a node once it is Ready. root-ca-certificate-publisher:
  # the kube-root-ca.crt ConfigMap in every namespace, which a pod's service account
  # volume reads the CA from. serviceaccount: each namespace's `default` ServiceAccount,
  # without which the ServiceAccount admission plugin refuses the namespace's pods.
  local controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller
  controllers+=,job-controller,node-lifecycle-controller,root-ca-certificate-publisher-controller,serviceaccount-controller
  log "starting kube-controller-manager (${controllers//-controller/})"
  start kube-controller-manager "$KUBE_CONTROLLER_MANAGER" --kubeconfig="$CLUSTER_DIR/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --controllers="$controllers" \
    --root-ca-file="$CLUSTER_DIR/certs/ca.crt" --leader-elect=false --use-service-account-credentials=false

  # The default client rate (50 QPS) would make the scheduler what a benchmark of
  # thousands of simulated pods measures.
  log "starting kube-scheduler"
  start kube-scheduler "$KUBE_SCHEDULER" --kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --kube-api-qps=1000 --kube-api-burst=1000

}

# The real node (REAL_NODE=0: none) and the simulated one, then a last look at the
# components that have no health endpoint.
start_nodes() {
  [ "${REAL_NODE:-1}" = 0 ] || node_up "$KUBELET" "$APISERVER_PORT"

  if [ -n "$SIM_BIN" ]; then
    # Without a real node the simulated one is the only node: untainted, it takes every
    # pod (the samples' pods read Running under `make run` without root), not only those
    # that tolerate it.
    local tainted=true
    [ "${REAL_NODE:-1}" != 0 ] || tainted=false
    log "starting the node simulator (node $SIM_NODE_NAME, tainted=$tainted)"
    start node-sim env KUBECONFIG="$CLUSTER_DIR/sim.kubeconfig" RUST_LOG="${SIM_LOG:-info}" \
      "$SIM_BIN" --kubeconfig="$CLUSTER_DIR/sim.kubeconfig" --node-name="$SIM_NODE_NAME" --tainted="$tainted"
    wait_for node-sim 30 node_ready
  fi
  # The controller-manager and scheduler have no health endpoint here (ports 0): at
  # least make sure they survived their start-up (flag parsing, first API calls).
  for c in kube-controller-manager kube-scheduler; do
    alive "$(pid_of "$c")" || {
      tail_log "$c" 30
      die "$c exited during startup"
    }
  done
}

cmd_up() {
  up_already && return 0
  local t0=$SECONDS
  command -v setsid >/dev/null || die "setsid (util-linux) is required"
  apt_install "${CLUSTER_PACKAGES[@]}"
  find_binaries
  [ "${REAL_NODE:-1}" = 0 ] || node_check
  build_node_sim
  pick_ports
  prepare_state_dir
  # From here on, a failure stops whatever was started: no orphans, logs stay for inspection.
  trap on_failed_up EXIT
  make_credentials
  write_audit_policy
  write_client_config
  start_etcd_and_registry
  start_apiserver
  install_crds
  start_controllers
  start_nodes
  trap - EXIT
  log "up in $((SECONDS - t0))s: $APISERVER_URL"
  log "  export KUBECONFIG=$CLUSTER_DIR/kubeconfig   (or: set -a; . $CLUSTER_DIR/env; set +a)"
}

cmd_down() {
  if [ ! -e "$CLUSTER_DIR" ]; then
    log "nothing to stop ($CLUSTER_DIR does not exist)"
    return 0
  fi
  [ -f "$MARKER" ] || die "$CLUSTER_DIR is not a cluster state dir (no $(basename "$MARKER")); not touching it"
  load_env || true
  node_down
  stop_all
  local left
  left=$(node_leftovers)
  # Not removing the state dir keeps what a leftover mount or process refers to.
  [ -z "$left" ] || die "down left these behind (remove them by hand, then run down again):
$left"
  rm -rf "$CLUSTER_DIR"
  log "stopped; removed $CLUSTER_DIR"
}

# restart NAME [TERM|KILL]: stops a component with the signal and starts it again with the
# command line it was started with (args/NAME). For fault tests: an API server or etcd
# restarted under a running operator.
cmd_restart() {
  local name=${1:-} signal=${2:-TERM} args=() flag kept
  [ -f "$MARKER" ] || die "no cluster in $CLUSTER_DIR"
  [ -n "$name" ] && [ -f "$CLUSTER_DIR/args/$name" ] || die "usage: $0 restart COMPONENT [TERM|KILL] [--flag=value ...]; components: $(components | tr '\n' ' ')"
  case "$signal" in TERM | KILL) ;; *) die "signal must be TERM or KILL, not $signal" ;; esac
  mapfile -t args <"$CLUSTER_DIR/args/$name"
  for flag in "${@:3}"; do
    [[ $flag == --*=* ]] || die "restart flags are --name=value, not $flag"
    kept=()
    for a in "${args[@]}"; do [[ $a == "${flag%%=*}="* ]] || kept+=("$a"); done
    args=("${kept[@]}" "$flag")
  done
  stop "$name" "$signal"
  wait_ports_free "${args[@]}"
  start "$name" "${args[@]}"
  load_env
  case "$name" in
    etcd) wait_for etcd 20 etcd_healthy ;;
    registry) wait_for registry 20 registry_ready ;;
    kube-apiserver) wait_for kube-apiserver "$READY_TIMEOUT" readyz ;;
    *) sleep 1; alive "$(pid_of "$name")" || { tail_log "$name" 30; die "$name exited after the restart"; } ;;
  esac
  log "$name restarted (SIG$signal)"
}

# wait_ports_free ARGS...: up to 10 s until no port the command line listens on (a
# --listen-*-urls=...:PORT or --*port=PORT flag) is listened on any more. Only its own:
# the API server's --etcd-servers names etcd's port, which stays in use.
wait_ports_free() {
  local ports port i
  # A command line without port flags (the registry's port is in its config) has none to wait for.
  ports=$(printf '%s\n' "$@" | grep -E '^--(listen-[a-z-]*urls|[a-z-]*port)=' | grep -oE '[0-9]+$' | sort -u || true)
  for port in $ports; do
    for ((i = 0; i < 100; i++)); do port_in_use "$port" || break; sleep 0.1; done
    port_in_use "$port" && log "port $port is still in use; starting anyway"
  done
  return 0
}

cmd_status() {
  if [ ! -f "$MARKER" ]; then
    echo "no cluster in $CLUSTER_DIR (start one with: hack/cluster.sh up)"
    return 1
  fi
  local c pid ok=0
  for c in $(components); do
    pid=$(pid_of "$c")
    if [ -z "$pid" ]; then
      printf '%-24s not running (no pid file)\n' "$c"
      ok=1
    elif alive "$pid"; then
      printf '%-24s running (pid %s)\n' "$c" "$pid"
    else
      printf '%-24s CRASHED (pid %s is gone)\n' "$c" "$pid"
      tail_log "$c" 20 2>&1
      ok=1
    fi
  done
  if load_env; then
    local r n
    for n in $NODE_NAME $SIM_NODE_NAME; do
      if node_is_ready "$n"; then printf '%-24s Ready\n' "node $n"; else printf '%-24s not Ready\n' "node $n"; fi
    done
    if r=$(readyz); then
      printf '%-24s ok (%s, KUBECONFIG=%s)\n' "apiserver readyz" "$APISERVER_URL" "$KUBECONFIG"
    else
      printf '%-24s NOT ready: %s\n' "apiserver readyz" "$(echo "$r" | tail -5)"
      ok=1
    fi
  else
    echo "no $CLUSTER_DIR/env (start did not get far)"
    ok=1
  fi
  return $ok
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  restart) cmd_restart "${@:2}" ;;
  *)
    echo "usage: $0 up|down|status|restart COMPONENT [TERM|KILL] [--flag=value ...]   (state dir: CLUSTER_DIR=${CLUSTER_DIR})" >&2
    exit 2
    ;;
esac
