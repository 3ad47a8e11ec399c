#!/usr/bin/env bash
# Builds container images from what is on this machine, without a Docker engine, as
# reproducible OCI archives (the same inputs give the same digest), and imports them into
# a containerd or pushes them to a registry.
#
#   hack/images.sh [--import SOCKET | --push] [IMAGE...]
#
# IMAGE: pause, busybox, memcached, iperf3 (the embedded node's images: `cluster.sh up`
# imports them), podset-host (the operator with its default policies: `make image`).
# Archives go to target/images/NAME.oci.tar.
# --push copies each to $REGISTRY/NAME:TAG with skopeo, with the credentials of
# $REGISTRY_AUTH (a Docker config.json) and the CA $CA_CERT (both optional): what the
# embedded cluster's env file sets. It prints each pushed reference, pinned by digest
# (REGISTRY/NAME:TAG@sha256:...), on standard output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

SOCKET=""
PUSH=""
case "${1:-}" in
  --import)
    SOCKET=${2:?--import needs the containerd socket}
    shift 2
    ;;
  --push)
    PUSH=1
    shift
    [ -n "${REGISTRY:-}" ] || die "--push needs REGISTRY (host:port), e.g. from the embedded cluster's env file"
    ;;
esac
IMAGES=("$@")
[ ${#IMAGES[@]} -gt 0 ] || IMAGES=(pause busybox memcached iperf3)

OUT="$ROOT/target/images"
WORK="$OUT/rootfs"
mkdir -p "$OUT"

# The versions the images are tagged with are the packages' own.
BUSYBOX_TAG=1.35
MEMCACHED_TAG=1.6.18
IPERF3_TAG=3.12
PAUSE_TAG=3.4
OPERATOR_TAG=0.1.0

fresh() { rm -rf "${WORK:?}/$1" && mkdir -p "$WORK/$1" && echo "$WORK/$1"; }

# copy_binary ROOTFS FILE [DEST]: FILE (at DEST, default its own path) and every shared
# library it loads, at their own paths.
copy_binary() {
  local rootfs=$1 file=$2 dest=${3:-$2} lib
  install -D -m 0755 "$file" "$rootfs$dest"
  for lib in $(ldd "$file" | grep -o '/[^ ]*'); do
    # The dynamic loader among them must be executable.
    install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
}

# users ROOTFS: root, nobody and an unprivileged user, for processes that look themselves up.
users() {
  mkdir -p "$1/etc" "$1/tmp" && chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/:/bin/false\nnobody:x:65534:65534:nobody:/:/bin/false\nnonroot:x:65532:65532:nonroot:/:/bin/false\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$1/etc/group"
}

# push NAME REF: the archive of NAME to REGISTRY as REF's repository and tag.
push() {
  local name=$1 ref=$2 repo tmp args=()
  apt_install skopeo
  repo="$REGISTRY/${ref##*/}"
  tmp=$(mktemp -d)
  [ -z "${REGISTRY_AUTH:-}" ] || args+=(--dest-authfile "$REGISTRY_AUTH")
  # skopeo reads a directory of *.crt for the registry's CA.
  [ -z "${CA_CERT:-}" ] || { cp "$CA_CERT" "$tmp/ca.crt" && args+=(--dest-cert-dir "$tmp"); }
  # --insecure-policy: the trust policy governs which sources may be copied; the source is
  # the archive just built here.
  skopeo --insecure-policy copy -q "${args[@]}" --digestfile "$tmp/digest" \
    "oci-archive:$OUT/$name.oci.tar" "docker://$repo" >&2 || { rm -rf "$tmp"; die "pushing $name to $repo failed"; }
  echo "$repo@$(cat "$tmp/digest")"
  rm -rf "$tmp"
}

pack() { # NAME REF OCI-ARGS...; sets PACKED_REF
  local name=$1 ref=$2
  shift 2
  PACKED_REF=$ref
  python3 hack/images/oci.py --rootfs "$WORK/$name" --ref "$ref" --out "$OUT/$name.oci.tar" "$@" >/dev/null
  log "$ref: $OUT/$name.oci.tar ($(stat -c %s "$OUT/$name.oci.tar") bytes)"
}

# debian_binary_image NAME TAG: Debian's package NAME's /usr/bin/NAME with its
# libraries, run as nobody.
debian_binary_image() {
  local name=$1 tag=$2 rootfs
  apt_install "$name"
  rootfs=$(fresh "$name")
  users "$rootfs"
  copy_binary "$rootfs" "/usr/bin/$name"
  pack "$name" "docker.io/library/$name:$tag" --entrypoint "[\"$name\"]" --user 65534
}

build() {
  local rootfs
  case "$1" in
    pause)
      command -v gcc >/dev/null || apt_install gcc libc6-dev
      rootfs=$(fresh pause)
      gcc -static -Os -o "$rootfs/pause" hack/images/pause.c || die "building the pause program failed"
      pack pause "docker.io/library/pause:$PAUSE_TAG" --entrypoint '["/pause"]'
      ;;
    busybox)
      apt_install busybox-static
      rootfs=$(fresh busybox)
      users "$rootfs"
      install -D -m 0755 /bin/busybox "$rootfs/bin/busybox"
      for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
      done
      pack busybox "docker.io/library/busybox:$BUSYBOX_TAG" --cmd '["sh"]'
      ;;
    memcached) debian_binary_image memcached "$MEMCACHED_TAG" ;;
    iperf3) debian_binary_image iperf3 "$IPERF3_TAG" ;;
    podset-host)
      # IMAGE_PROFILE=debug packs the debug build (what `make test` has built anyway:
      # build_binaries keeps its features, where a plain `cargo build -p podset-host`
      # would rebuild the operator and every dependency whose features the tests widen,
      # measured at ~450 s cold inside the deploy test).
      local profile=${IMAGE_PROFILE:-release}
      log "building the operator ($profile) and its policies"
      if [ "$profile" = release ]; then
        cargo build -q --release -p podset-host --bin podset-host || die "building podset-host failed"
      else
        build_binaries || die "building podset-host failed"
      fi
      PODSET_HOST_BIN="$ROOT/target/$profile/podset-host" hack/policy.sh >/dev/null
      rootfs=$(fresh podset-host)
      users "$rootfs"
      copy_binary "$rootfs" "$ROOT/target/$profile/podset-host" /usr/bin/podset-host
      install -D -m 0644 -t "$rootfs/policies" target/policy/*.wasm
      # Registries' certificates are checked against the system's roots (Debian's bundle),
      # besides the CAs given with --registry-ca or a policy's registryCA.
      apt_install ca-certificates
      install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
      pack podset-host "docker.io/library/podset-host:$OPERATOR_TAG" --entrypoint '["/usr/bin/podset-host"]' --user 65532
      ;;
    *) die "unknown image $1 (pause, busybox, memcached, iperf3, podset-host)" ;;
  esac
}

for image in "${IMAGES[@]}"; do
  build "$image" >&2
  if [ -n "$SOCKET" ]; then
    ctr --address "$SOCKET" --namespace k8s.io images import "$OUT/$image.oci.tar" >/dev/null \
      || die "importing $image into the containerd at $SOCKET failed"
  fi
  [ -z "$PUSH" ] || push "$image" "$PACKED_REF"
done
