#!/usr/bin/env bash
# Start/stop one real Kubernetes node for the e2e suite, next to a control plane from e2e/control-plane.sh:
# containerd (Debian's 1.6, own root/state/socket) + runc + the CNI bridge plugin, a local image registry on
# 127.0.0.1 that docker.io, registry.k8s.io and the e2e image registries resolve to, locally built test images,
# and a kubelet (built from the same k8s.io/kubernetes module as the apiserver) joined with a node identity.
#
#   e2e/real-node.sh start <workdir>   # <workdir> holds a running control plane (kubeconfig, pki/)
#   e2e/real-node.sh stop  <workdir>   # stops everything, restores sysctls, mounts, links, cgroups; idempotent
#   e2e/real-node.sh check             # can this machine run containers? exit 0, or 4 and the reason
#
# Needs root (containers, network namespaces, cgroups) and Debian's packages containerd runc
# containernetworking-plugins busybox-static iptables conntrack (installed with apt-get when missing).
# The control plane must run the Node authorizer and NodeRestriction (control-plane.sh: NODE_AUTHZ=1).
# Binaries kubelet, registry, crane come from $E2E_BIN_DIR (e2e/build-tools.sh --real-node).
#
# Workdir layout (everything under <workdir>/node/):
#   env                 NODE_NAME, REGISTRY, CONTAINERD_SOCK, POD_CIDR, IMAGE_DIGESTS (for scripts)
#   host-state          what the host looked like before (sysctls, dirs, iptables chains): stop restores it
#   images.tsv          <image reference> <registry digest>, one per built image
#   pki/                node.{crt,key} (CN system:node:<name>, O system:nodes), signed by the e2e CA
#   containerd/ kubelet/ registry/ cni/   config, data and logs of each part
# Only one real node per machine: containerd 1.6 hardcodes /run/containerd, the kubelet owns the `kubepods`
# cgroups and host sysctls. A marker /run/insitu-real-node.owner names the workdir that holds the machine.
# Env knobs: NODE_NAME (default insitu-real-0), START_TIMEOUT (seconds, default 60), POD_SUBNET (default
#   10.88.0.0/16), NODE_BRIDGE (default insitu-e2e0), KUBE_PROXY=1 also runs kube-proxy (iptables mode, from
#   $E2E_BIN_DIR) so that Service ClusterIPs work, for pods and for the host (its OUTPUT chain: the apiserver
#   reaching a webhook Service); stop removes its rules (`kube-proxy --cleanup`).
# Exit codes: 0 ok, 4 this machine cannot run containers (the reason is printed), other = failure.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${E2E_BIN_DIR:-$E2E_DIR/bin}"
START_TIMEOUT="${START_TIMEOUT:-60}"
NODE_NAME="${NODE_NAME:-insitu-real-0}"
POD_SUBNET="${POD_SUBNET:-10.88.0.0/16}"
BRIDGE="${NODE_BRIDGE:-insitu-e2e0}"
OWNER=/run/insitu-real-node.owner
PACKAGES=(containerd runc containernetworking-plugins busybox-static iptables conntrack)
CNI_BIN=/usr/lib/cni
# Host sysctls the kubelet (setupKernelTunables) and the bridge plugin (ip_forward) change.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet)
# Host paths some part writes to whatever its configuration says (kubelet: container log symlinks; libcni: its
# result cache; containerd 1.6: fifos, runc state and shim sockets). Removed on stop if they did not exist.
HOST_DIRS=(/var/log/containers /var/lib/cni /run/containerd)
# iptables chains the kubelet creates to watch for rule flushes.
KUBELET_CHAINS=("mangle KUBE-KUBELET-CANARY" "nat KUBE-KUBELET-CANARY" "filter KUBE-KUBELET-CANARY"
  "mangle KUBE-IPTABLES-HINT")

die() { echo "real-node.sh: $*" >&2; exit 1; }
log() { echo "real-node.sh: $*" >&2; }
cannot() { echo "real-node.sh: this machine cannot run containers: $*" >&2; exit 4; }

# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Registries whose images the suite names (real-node-images.py): all resolve to the local registry.
MIRRORED_REGISTRIES=(docker.io registry.k8s.io)
PAUSE_IMAGE=registry.k8s.io/pause:3.10

# build_images <dir> <registry host:port> <crane>: build the OCI layouts and push each to the local registry
# under the path it has on its own registry; prints `<reference> <digest>` per image.
build_images() {
  local dir="$1" reg="$2" crane="$3" ref layout digest path got
  rm -rf "$dir"
  mkdir -p "$dir"
  python3 "$E2E_DIR/real-node-images.py" "$dir" "$(command -v busybox)" >"$dir/list" ||
    die "building the test images failed"
  while read -r ref layout digest; do
    path="${ref#*/}" # docker.io/library/nginx:1.19.0 -> library/nginx:1.19.0
    "$crane" push --insecure "$layout" "$reg/$path" >/dev/null 2>"$dir/push.err" ||
      { cat "$dir/push.err" >&2; die "crane push $reg/$path failed"; }
    got="$("$crane" digest --insecure "$reg/$path")" || die "crane digest $reg/$path failed"
    [[ "$got" == "$digest" ]] || die "$ref: the registry serves $got, the layout has $digest"
    echo "$ref $digest"
  done <"$dir/list"
}

usage() {
  echo "usage: $0 start|stop <workdir> | check" >&2
  exit 2
}

pid_alive() {
  local pid="$1" name="$2"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name"* ]]
}

# kill_pidfile <pidfile> <comm-name> [seconds]: SIGTERM, wait, then SIGKILL.
kill_pidfile() {
  local f="$1" name="$2" secs="${3:-15}" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if pid_alive "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do pid_alive "$pid" "$name" || break; sleep 0.1; done
    if pid_alive "$pid" "$name"; then
      log "$name ($pid) did not exit on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do pid_alive "$pid" "$name" || break; sleep 0.1; done
    fi
  fi
  rm -f "$f"
}

# --- can this machine run containers? -----------------------------------------------------------------------------
check_machine() {
  [[ "$(uname -s)" == Linux ]] || cannot "not Linux ($(uname -s))"
  ((EUID == 0)) || cannot "not root (uid $EUID): containers need root for namespaces, mounts and cgroups"
  grep -qw overlay /proc/filesystems || cannot "the kernel has no overlay filesystem (containerd's overlayfs snapshotter)"
  [[ -e /sys/fs/cgroup/cgroup.controllers || -d /sys/fs/cgroup/memory ]] ||
    cannot "no cgroup v2 root and no cgroup v1 memory controller under /sys/fs/cgroup"
  command -v unshare >/dev/null 2>&1 && unshare --net --mount true 2>/dev/null ||
    cannot "cannot create network/mount namespaces (unshare --net --mount failed)"
}

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null 2>&1 || cannot "packages ${missing[*]} are missing and there is no apt-get"
  log "installing ${missing[*]} (apt-get; services are not started: policy-rc.d)"
  # Debian starts containerd's system service on install; this node runs its own, so forbid service starts.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  local rc=0
  {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  } >&2 || rc=$?
  ((made_policy)) && rm -f "$policy"
  ((rc == 0)) || cannot "apt-get install ${missing[*]} failed (exit $rc)"
}

# --- host state ------------------------------------------------------------------------------------------------------
save_host_state() {
  local f="$1" k c
  [[ -f "$f" ]] && return 0 # a failed start saved it already: keep the original
  {
    for k in "${SYSCTLS[@]}"; do
      [[ -e "/proc/sys/${k//.//}" ]] && echo "sysctl $k $(cat "/proc/sys/${k//.//}")"
    done
    for k in "${HOST_DIRS[@]}"; do [[ -e "$k" ]] && echo "existed $k"; done
    for c in "${KUBELET_CHAINS[@]}"; do
      for cmd in iptables ip6tables; do
        command -v "$cmd" >/dev/null 2>&1 || continue
        # shellcheck disable=SC2086 # "table chain"
        "$cmd" -w -t ${c% *} -S "${c#* }" >/dev/null 2>&1 && echo "chain $cmd $c"
      done
    done
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}

restore_host_state() {
  local f="$1" kind a b c cmd k
  [[ -f "$f" ]] || return 0
  while read -r kind a b; do
    [[ "$kind" == sysctl ]] || continue
    [[ "$(cat "/proc/sys/${a//.//}" 2>/dev/null)" == "$b" ]] && continue
    echo "$b" >"/proc/sys/${a//.//}" 2>/dev/null && log "restored $a = $b" || log "could not restore $a = $b"
  done <"$f"
  for c in "${KUBELET_CHAINS[@]}"; do
    for cmd in iptables ip6tables; do
      command -v "$cmd" >/dev/null 2>&1 || continue
      grep -qx "chain $cmd $c" "$f" && continue
      # shellcheck disable=SC2086
      if "$cmd" -w -t ${c% *} -S "${c#* }" >/dev/null 2>&1; then
        "$cmd" -w -t ${c% *} -F "${c#* }" 2>/dev/null || true
        "$cmd" -w -t ${c% *} -X "${c#* }" 2>/dev/null || log "could not delete $cmd chain $c"
      fi
    done
  done
  for k in "${HOST_DIRS[@]}"; do
    grep -qx "existed $k" "$f" && continue
    [[ -e "$k" ]] || continue
    umount_under "$k"
    rm -rf "$k" 2>/dev/null || log "could not remove $k"
  done
}

# umount_under <dir>: unmount every mount point at or below dir, deepest first (lazy as a last resort).
umount_under() {
  local dir m
  dir="$(realpath -m "$1")"
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done < <(awk -v d="$dir" '{ p = $5; gsub(/\\040/, " ", p); if (p == d || index(p, d "/") == 1) print length(p) "\t" p }' \
    /proc/self/mountinfo | sort -rn | cut -f2-)
}

# Remove the kubelet's `kubepods` cgroup trees (leaves first), killing what still runs in them (our pods).
remove_cgroups() {
  local root d pid
  for root in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [[ -d "$root/kubepods" ]] || continue
    while read -r d; do
      if [[ -f "$d/cgroup.procs" ]]; then
        while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$d/cgroup.procs"
      fi
      rmdir "$d" 2>/dev/null || { sleep 0.2; rmdir "$d" 2>/dev/null; } || log "could not remove cgroup $d"
    done < <(find "$root/kubepods" -depth -type d)
  done
}

# --- PKI: the node's client certificate, signed by the control plane's CA -------------------------------------------
node_pki() {
  local wd="$1" p="$1/node/pki"
  mkdir -p "$p"
  (
    cd "$p"
    umask 077
    printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >client.ext
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/O=system:nodes/CN=system:node:$NODE_NAME" -keyout node.key -out node.csr 2>/dev/null
    openssl x509 -req -in node.csr -CA "$wd/pki/ca.crt" -CAkey "$wd/pki/ca.key" -CAcreateserial \
      -CAserial "$p/ca.srl" -days 7 -extfile client.ext -out node.crt 2>/dev/null
    rm -f node.csr client.ext ca.srl
  ) || die "node certificate generation with openssl failed"
  local server
  server="$(awk '/server:/ {print $2; exit}' "$wd/kubeconfig")"
  cat >"$wd/node/kubelet/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: insitu-e2e
  cluster:
    server: $server
    certificate-authority: $wd/pki/ca.crt
users:
- name: system:node:$NODE_NAME
  user:
    client-certificate: $p/node.crt
    client-key: $p/node.key
contexts:
- name: node
  context: {cluster: insitu-e2e, user: "system:node:$NODE_NAME"}
current-context: node
EOF
}

# --- the registry ------------------------------------------------------------------------------------------------------
start_registry() {
  local wd="$1" d="$1/node/registry" port
  port="$(free_port)"
  mkdir -p "$d/data"
  cat >"$d/config.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $d/data}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$port
EOF
  OTEL_TRACES_EXPORTER=none setsid "$BIN_DIR/registry" serve "$d/config.yml" </dev/null >"$d/registry.log" 2>&1 &
  echo $! >"$d/registry.pid"
  local i
  for ((i = 0; i < START_TIMEOUT * 5; i++)); do
    curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && { REGISTRY="127.0.0.1:$port"; return 0; }
    pid_alive "$(cat "$d/registry.pid")" registry || break
    sleep 0.2
  done
  tail -n 20 "$d/registry.log" >&2
  die "the registry did not start"
}

# --- containerd --------------------------------------------------------------------------------------------------------
write_containerd_config() {
  local wd="$1" c="$1/node/containerd" host
  mkdir -p "$c/root" "$c/state" "$c/certs.d" "$wd/node/cni/net.d" "$wd/node/cni/ipam"
  # Every registry an image of the suite names resolves to the local one, and only there (no fallback).
  for host in "${MIRRORED_REGISTRIES[@]}"; do
    mkdir -p "$c/certs.d/$host"
    cat >"$c/certs.d/$host/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  done
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
# Plugins that would touch host paths (/opt/containerd) or need absent kernels features.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[debug]
  address = "$c/debug.sock"
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # These VMs lack CAP_SYS_RESOURCE: without this every sandbox fails (runc: nsexec cannot set oom_score_adj).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$wd/node/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$c/certs.d"
EOF
  cat >"$wd/node/cni/net.d/10-insitu-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "insitu-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": "$BRIDGE",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "$POD_SUBNET"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "$wd/node/cni/ipam"
    }
  }]
}
EOF
}

start_containerd() {
  local wd="$1" c="$1/node/containerd" i
  setsid containerd --config "$c/config.toml" </dev/null >"$c/containerd.log" 2>&1 &
  echo $! >"$c/containerd.pid"
  for ((i = 0; i < START_TIMEOUT * 5; i++)); do
    ctr --address "$c/containerd.sock" version >/dev/null 2>&1 && return 0
    pid_alive "$(cat "$c/containerd.pid")" containerd || break
    sleep 0.2
  done
  tail -n 30 "$c/containerd.log" >&2
  die "containerd did not start"
}

# --- the kubelet -------------------------------------------------------------------------------------------------------
start_kubelet() {
  local wd="$1" k="$1/node/kubelet" port hport i
  port="$(free_port)"
  hport="$(free_port)"
  mkdir -p "$k/root" "$k/certs" "$k/pod-logs"
  cat >"$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $hport
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $wd/pki/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$wd/node/containerd/containerd.sock
# containerd 1.6 lacks the RuntimeConfig CRI call: the kubelet needs the driver spelled out.
cgroupDriver: cgroupfs
# The VM's init mounts cgroup v1 controllers; a pure v2 host is not possible here.
failCgroupV1: false
failSwapOn: false
podLogsDir: $k/pod-logs
clusterDNS: ["10.0.0.10"]
clusterDomain: cluster.local
maxPods: 110
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 24h
evictionHard: {memory.available: "64Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
evictionPressureTransitionPeriod: 5s
nodeStatusUpdateFrequency: 5s
rotateCertificates: false
serverTLSBootstrap: false
shutdownGracePeriod: 0s
EOF
  setsid "$BIN_DIR/kubelet" \
    --config="$k/config.yaml" \
    --kubeconfig="$k/kubeconfig" \
    --root-dir="$k/root" \
    --cert-dir="$k/certs" \
    --hostname-override="$NODE_NAME" \
    --v="${KUBELET_V:-2}" \
    </dev/null >"$k/kubelet.log" 2>&1 &
  echo $! >"$k/kubelet.pid"
  local kc=("$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig")
  for ((i = 0; i < START_TIMEOUT * 5; i++)); do
    [[ "$("${kc[@]}" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] && return 0
    pid_alive "$(cat "$k/kubelet.pid")" kubelet || break
    sleep 0.2
  done
  grep -E '^E|error' "$k/kubelet.log" | tail -n 30 >&2 || true
  die "the kubelet did not register a Ready node $NODE_NAME (log: $k/kubelet.log)"
}

# No node-lifecycle controller runs (no kube-controller-manager in e2e/run): it is what would lift the
# `node.kubernetes.io/not-ready` taint the apiserver's TaintNodesByCondition admission puts on a new node.
untaint_node() {
  local wd="$1"
  local kc=("$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig")
  if "${kc[@]}" get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready; then
    "${kc[@]}" taint node "$NODE_NAME" node.kubernetes.io/not-ready- >/dev/null
  fi
}

# --- kube-proxy (KUBE_PROXY=1) ------------------------------------------------------------------------------------------
# iptables mode as the admin. conntrack sysctls are left alone (maxPerCore 0, timeouts 0: cmd/kube-proxy/app
# server_linux.go setupConntrack skips zero values) and so is route_localnet (localhostNodePorts off): stop only
# has to remove the rules.
start_kube_proxy() {
  local wd="$1" p="$1/node/kube-proxy" hport mport i
  hport="$(free_port)"
  mport="$(free_port)"
  mkdir -p "$p"
  cat >"$p/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $wd/kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_SUBNET
healthzBindAddress: 127.0.0.1:$hport
metricsBindAddress: 127.0.0.1:$mport
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
  setsid "$BIN_DIR/kube-proxy" --config="$p/config.yaml" --v=2 </dev/null >"$p/kube-proxy.log" 2>&1 &
  echo $! >"$p/kube-proxy.pid"
  # Healthy once it has synced its rules from the Services and EndpointSlices at least once.
  for ((i = 0; i < START_TIMEOUT * 5; i++)); do
    curl -fsS "http://127.0.0.1:$hport/healthz" >/dev/null 2>&1 && return 0
    pid_alive "$(cat "$p/kube-proxy.pid")" kube-proxy || break
    sleep 0.2
  done
  tail -n 30 "$p/kube-proxy.log" >&2
  die "kube-proxy did not become healthy (log: $p/kube-proxy.log)"
}

stop_kube_proxy() {
  local p="$1/node/kube-proxy"
  [[ -d "$p" ]] || return 0
  kill_pidfile "$p/kube-proxy.pid" kube-proxy
  "$BIN_DIR/kube-proxy" --cleanup >"$p/cleanup.log" 2>&1 || log "kube-proxy --cleanup failed (see $p/cleanup.log)"
}

# --- start / stop --------------------------------------------------------------------------------------------------------
cmd_start() {
  local wd="$1" b t=$SECONDS
  check_machine
  [[ -f "$wd/kubeconfig" && -f "$wd/pki/ca.key" ]] || die "$wd has no control plane (kubeconfig, pki/ca.key): run control-plane.sh start first"
  wd="$(cd "$wd" && pwd)"
  local bins=(kubelet registry crane kubectl)
  [[ "${KUBE_PROXY:-0}" == 1 ]] && bins+=(kube-proxy)
  for b in "${bins[@]}"; do
    [[ -x "$BIN_DIR/$b" ]] || die "missing $BIN_DIR/$b; run e2e/build-tools.sh --real-node first"
  done
  install_packages
  for b in containerd ctr runc openssl curl setsid tar; do
    command -v "$b" >/dev/null 2>&1 || die "required command '$b' not found"
  done
  [[ -x "$CNI_BIN/bridge" && -x "$CNI_BIN/host-local" ]] || die "CNI plugins missing in $CNI_BIN"
  # One node per machine (see the header).
  if ! (set -o noclobber; echo "$wd" >"$OWNER") 2>/dev/null; then
    local other
    other="$(cat "$OWNER" 2>/dev/null || true)"
    if [[ "$other" != "$wd" ]] && pid_alive "$(cat "$other/node/containerd/containerd.pid" 2>/dev/null)" containerd; then
      die "another real node runs on this machine (workdir $other); stop it first: $0 stop $other"
    fi
    echo "$wd" >"$OWNER"
  fi
  mkdir -p "$wd/node/kubelet"
  save_host_state "$wd/node/host-state"
  node_pki "$wd"
  start_registry "$wd"
  build_images "$wd/node/images" "$REGISTRY" "$BIN_DIR/crane" >"$wd/node/images.tsv"
  log "$(wc -l <"$wd/node/images.tsv") images built and pushed to $REGISTRY"
  write_containerd_config "$wd"
  start_containerd "$wd"
  start_kubelet "$wd"
  untaint_node "$wd"
  if [[ "${KUBE_PROXY:-0}" == 1 ]]; then start_kube_proxy "$wd"; fi
  cat >"$wd/node/env" <<EOF
NODE_NAME=$NODE_NAME
REGISTRY=$REGISTRY
CONTAINERD_SOCK=$wd/node/containerd/containerd.sock
POD_CIDR=$POD_SUBNET
IMAGES=$wd/node/images.tsv
EOF
  log "node $NODE_NAME Ready in $((SECONDS - t))s (kubelet $("$BIN_DIR/kubelet" --version | awk '{print $2}'), containerd $(containerd --version | awk '{print $3}'))"
}

# Pods first (so the kubelet tears sandboxes down through CNI), then the kubelet, containers containerd still
# runs, containerd and its shims, the registry; then mounts, the bridge, cgroups, sysctls, host dirs.
cmd_stop() {
  local wd="$1" n="$1/node" sock pid i
  [[ -d "$n" ]] || return 0
  wd="$(cd "$wd" && pwd)"
  n="$wd/node"
  sock="$n/containerd/containerd.sock"
  local name
  name="$(sed -n 's/^NODE_NAME=//p' "$n/env" 2>/dev/null)"
  name="${name:-$NODE_NAME}"
  local kc=("$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig" --request-timeout=5s)
  if pid_alive "$(cat "$n/kubelet/kubelet.pid" 2>/dev/null)" kubelet &&
    "${kc[@]}" get node "$name" >/dev/null 2>&1; then
    "${kc[@]}" delete pods -A --field-selector "spec.nodeName=$name" --grace-period=0 --force --wait=false \
      >/dev/null 2>&1 || true
    for ((i = 0; i < 100; i++)); do
      [[ -z "$(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null)" ]] && break
      sleep 0.2
    done
  fi
  kill_pidfile "$n/kubelet/kubelet.pid" kubelet
  stop_kube_proxy "$wd"
  if [[ -S "$sock" ]]; then
    local id
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  kill_pidfile "$n/containerd/containerd.pid" containerd
  # Shims of this containerd outlive it: find them by the socket they were started for.
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  kill_pidfile "$n/registry/registry.pid" registry
  umount_under "$n"
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" 2>/dev/null || log "could not delete link $BRIDGE"
  fi
  remove_cgroups
  # Container log symlinks of this node's pods (the kubelet's fixed /var/log/containers).
  if [[ -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$n/*" -delete 2>/dev/null || true
  fi
  restore_host_state "$n/host-state"
  [[ "$(cat "$OWNER" 2>/dev/null)" == "$wd" ]] && rm -f "$OWNER"
  # Data (snapshots, registry blobs) can be large; the logs stay with the workdir.
  rm -rf "$n/containerd/root" "$n/containerd/state" "$n/kubelet/root" "$n/registry/data" "$n/images" 2>/dev/null ||
    log "could not remove some node data under $n"
  log "stopped ($wd)"
}

case "${1:-}" in
  check) check_machine; echo "real-node.sh: this machine can run containers" ;;
  start) [[ $# -eq 2 ]] || usage; cmd_start "$2" ;;
  stop) [[ $# -eq 2 ]] || usage; cmd_stop "$2" ;;
  *) usage ;;
esac
