#!/usr/bin/env bash
# Start/stop a throwaway Kubernetes control plane (etcd + kube-apiserver) for
# the e2e suite, envtest-style: everything on 127.0.0.1, free ports picked at
# run time, fresh PKI per workdir, RBAC on, admin client in system:masters.
#
#   e2e/control-plane.sh start <workdir>   # prints server version; kubeconfig: <workdir>/kubeconfig
#   e2e/control-plane.sh stop  <workdir>   # kills both; safe to call twice
#
# Binaries come from $E2E_BIN_DIR (default <repo>/e2e/bin, see build-tools.sh).
# Workdir layout:
#   kubeconfig            admin kubeconfig (certs embedded)
#   pki/                  ca.{crt,key}, apiserver.{crt,key}, admin.{crt,key}, sa.{key,pub}
#   etcd-data/            etcd data dir (--unsafe-no-fsync)
#   etcd.pid apiserver.pid, etcd.log apiserver.log, env (ports, for scripts)
#   controller-manager.{pid,log}   only with CONTROLLER_MANAGER=1
#   scheduler.{pid,log}            only with SCHEDULER=1
# Env knobs: START_TIMEOUT (seconds, default 60), APISERVER_EXTRA_ARGS and ETCD_EXTRA_ARGS (word-split),
#   CONTROLLER_MANAGER=1 also starts kube-controller-manager (namespace deletion, the `default` ServiceAccount,
#   garbage collection, pvc-protection, ...: what a real cluster runs besides the apiserver),
#   SCHEDULER=1 also starts kube-scheduler (for pods of Deployments on a real node: e2e/in-cluster/run),
#   NODE_AUTHZ=1 authorizes kubelets as a real cluster does (--authorization-mode=Node,RBAC and the
#   NodeRestriction admission plugin) and gives the apiserver a kubelet client certificate (pki/kubelet-client.*,
#   system:masters): for a real node (e2e/real-node.sh).
#   APISERVER_FOR_PODS=<ip> makes the apiserver reachable from pods, as in a cluster (e2e/in-cluster/run): it
#   listens on all addresses and advertises <ip> (the pod bridge's gateway), so its endpoint reconciler points the
#   `kubernetes` Service (10.0.0.1:443) there; its certificate names 10.0.0.1, <ip> and kubernetes.default.svc;
#   the ServiceAccount admission plugin is on (pods get their projected token and kube-root-ca.crt mounted).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${E2E_BIN_DIR:-$E2E_DIR/bin}"
START_TIMEOUT="${START_TIMEOUT:-60}"

die() { echo "control-plane.sh: $*" >&2; exit 1; }
log() { echo "control-plane.sh: $*" >&2; }

usage() {
  echo "usage: $0 start|stop <workdir>" >&2
  exit 2
}

# free_port (lib.sh) is racy by nature; start retries once with new ports if a component fails to come up.
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"

# Is pid alive and (still) running the expected binary?
pid_alive() {
  local pid="$1" name="$2"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name"* ]]
}

# kill_pidfile <pidfile> <comm-name>: SIGTERM, wait up to 15s, then SIGKILL.
kill_pidfile() {
  local f="$1" name="$2" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if pid_alive "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      pid_alive "$pid" "$name" || break
      sleep 0.1
    done
    if pid_alive "$pid" "$name"; then
      log "$name ($pid) did not exit on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do pid_alive "$pid" "$name" || break; sleep 0.1; done
    fi
  fi
  rm -f "$f"
}

cmd_stop() {
  local wd="$1"
  [[ -d "$wd" ]] || return 0
  # Clients first, apiserver before etcd, so none spams errors about a vanished server.
  kill_pidfile "$wd/scheduler.pid" kube-scheduler
  kill_pidfile "$wd/controller-manager.pid" kube-controller
  kill_pidfile "$wd/apiserver.pid" kube-apiserver
  kill_pidfile "$wd/etcd.pid" etcd
  log "stopped ($wd)"
}

gen_pki() {
  local p="$1"
  mkdir -p "$p"
  (
    cd "$p"
    umask 077
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
    openssl req -x509 "${ec[@]}" -days 7 -subj /CN=insitu-e2e-ca \
      -keyout ca.key -out ca.crt 2>/dev/null
    local sans="IP:127.0.0.1,DNS:localhost"
    if [[ -n "${APISERVER_FOR_PODS:-}" ]]; then
      sans+=",IP:10.0.0.1,IP:$APISERVER_FOR_PODS,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    fi
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' "$sans" >apiserver.ext
    openssl req "${ec[@]}" -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' >client.ext
    openssl req "${ec[@]}" -subj '/O=system:masters/CN=admin' -keyout admin.key -out admin.csr 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
      -extfile client.ext -out admin.crt 2>/dev/null
    openssl req "${ec[@]}" -subj '/O=system:masters/CN=kube-apiserver-kubelet-client' \
      -keyout kubelet-client.key -out kubelet-client.csr 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
      -extfile client.ext -out kubelet-client.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext ca.srl
  ) || die "PKI generation with openssl failed"
}

write_kubeconfig() {
  local wd="$1" port="$2"
  b64() { base64 -w0 <"$1"; }
  cat >"$wd/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: insitu-e2e
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(b64 "$wd/pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(b64 "$wd/pki/admin.crt")
    client-key-data: $(b64 "$wd/pki/admin.key")
contexts:
- name: insitu-e2e
  context:
    cluster: insitu-e2e
    user: admin
    namespace: default
current-context: insitu-e2e
EOF
  chmod 600 "$wd/kubeconfig"
}

# wait_until <seconds> <pidfile> <name> <cmd...>: poll cmd until it succeeds;
# fail early if the process died.
wait_until() {
  local secs="$1" pidf="$2" name="$3" i
  shift 3
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    pid_alive "$(cat "$pidf" 2>/dev/null)" "$name" || return 2
    sleep 0.2
  done
  return 1
}

start_once() {
  local wd="$1" etcd_port peer_port api_port rc
  etcd_port="$(free_port)"
  peer_port="$(free_port)"
  api_port="$(free_port)"
  while [[ "$peer_port" == "$etcd_port" ]]; do peer_port="$(free_port)"; done
  while [[ "$api_port" == "$etcd_port" || "$api_port" == "$peer_port" ]]; do api_port="$(free_port)"; done

  local authz=(--authorization-mode=RBAC)
  if [[ "${NODE_AUTHZ:-0}" == 1 ]]; then
    authz=(--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
      --kubelet-client-certificate="$wd/pki/kubelet-client.crt" --kubelet-client-key="$wd/pki/kubelet-client.key")
  fi
  # Where the apiserver listens and what the `kubernetes` Service points at (see APISERVER_FOR_PODS above).
  local net=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --disable-admission-plugins=ServiceAccount
    --endpoint-reconciler-type=none)
  if [[ -n "${APISERVER_FOR_PODS:-}" ]]; then
    net=(--bind-address=0.0.0.0 --advertise-address="$APISERVER_FOR_PODS" --endpoint-reconciler-type=lease)
  fi
  rm -rf "$wd/etcd-data"
  # shellcheck disable=SC2086 # ETCD_EXTRA_ARGS is intentionally word-split
  # setsid: own session/process group, so the caller's Ctrl-C or job control
  # does not hit them; stop is explicit via the pid files.
  setsid "$BIN_DIR/etcd" \
    --name=default \
    --data-dir="$wd/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="default=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync=true \
    --log-level=warn \
    ${ETCD_EXTRA_ARGS:-} \
    </dev/null >"$wd/etcd.log" 2>&1 &
  echo $! >"$wd/etcd.pid"

  rc=0
  wait_until "$START_TIMEOUT" "$wd/etcd.pid" etcd \
    sh -c "curl -fsS http://127.0.0.1:$etcd_port/health | grep '\"health\":\"true\"' >/dev/null" || rc=$?
  if ((rc != 0)); then
    log "etcd did not become healthy (rc=$rc); last log lines:"
    tail -n 20 "$wd/etcd.log" >&2 || true
    return 1
  fi

  # shellcheck disable=SC2086 # APISERVER_EXTRA_ARGS is intentionally word-split
  setsid "$BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --cert-dir="$wd/pki" \
    --tls-cert-file="$wd/pki/apiserver.crt" \
    --tls-private-key-file="$wd/pki/apiserver.key" \
    --client-ca-file="$wd/pki/ca.crt" \
    --secure-port="$api_port" \
    "${net[@]}" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --allow-privileged=true \
    "${authz[@]}" \
    --service-account-issuer="https://127.0.0.1:$api_port/" \
    --service-account-key-file="$wd/pki/sa.pub" \
    --service-account-signing-key-file="$wd/pki/sa.key" \
    ${APISERVER_EXTRA_ARGS:-} \
    </dev/null >"$wd/apiserver.log" 2>&1 &
  echo $! >"$wd/apiserver.pid"

  rc=0
  wait_until "$START_TIMEOUT" "$wd/apiserver.pid" kube-apiserver \
    curl -fsS --cacert "$wd/pki/ca.crt" \
    --cert "$wd/pki/admin.crt" --key "$wd/pki/admin.key" \
    "https://127.0.0.1:$api_port/readyz" || rc=$?
  if ((rc != 0)); then
    log "kube-apiserver did not become ready (rc=$rc); last log lines:"
    tail -n 30 "$wd/apiserver.log" >&2 || true
    return 1
  fi

  write_kubeconfig "$wd" "$api_port"
  # As envtest does: wait for the bootstrap "default" namespace.
  wait_until 20 "$wd/apiserver.pid" kube-apiserver \
    "$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig" get namespace default \
    || { log "namespace 'default' did not appear"; return 1; }

  if [[ "${CONTROLLER_MANAGER:-0}" == 1 ]]; then
    start_controller_manager "$wd" || return 1
  fi
  if [[ "${SCHEDULER:-0}" == 1 ]]; then
    start_scheduler "$wd" || return 1
  fi

  cat >"$wd/env" <<EOF
ETCD_ENDPOINT=http://127.0.0.1:$etcd_port
APISERVER_URL=https://127.0.0.1:$api_port
KUBECONFIG=$wd/kubeconfig
EOF
}

# kube-controller-manager as the admin, all default controllers except the PV binder (`insitu nodes --volumes`
# binds claims itself, without PV objects, which the binder would fight), service-account tokens signed with the
# apiserver's key, CSR signing with the cluster CA, no leader election, serving on loopback only.
start_controller_manager() {
  local wd="$1" port rc=0
  port="$(free_port)"
  setsid "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$wd/kubeconfig" \
    --controllers='*,-persistentvolume-binder-controller' \
    --use-service-account-credentials=false \
    --service-account-private-key-file="$wd/pki/sa.key" \
    --root-ca-file="$wd/pki/ca.crt" \
    --cluster-signing-cert-file="$wd/pki/ca.crt" \
    --cluster-signing-key-file="$wd/pki/ca.key" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="$port" \
    --cert-dir="$wd/pki/kcm" \
    </dev/null >"$wd/controller-manager.log" 2>&1 &
  echo $! >"$wd/controller-manager.pid"
  wait_until "$START_TIMEOUT" "$wd/controller-manager.pid" kube-controller \
    curl -fsSk "https://127.0.0.1:$port/healthz" || rc=$?
  if ((rc != 0)); then
    log "kube-controller-manager did not become healthy (rc=$rc); last log lines:"
    tail -n 30 "$wd/controller-manager.log" >&2 || true
    return 1
  fi
  # The serviceaccount controller creates `default` in every namespace; pods and Kruise's framework wait for it.
  wait_until 30 "$wd/controller-manager.pid" kube-controller \
    "$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig" get serviceaccount default -n default \
    || { log "kube-controller-manager created no 'default' ServiceAccount"; return 1; }
}

# kube-scheduler as the admin, default profile, no leader election, serving on loopback only.
start_scheduler() {
  local wd="$1" port rc=0
  port="$(free_port)"
  setsid "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$wd/kubeconfig" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="$port" \
    </dev/null >"$wd/scheduler.log" 2>&1 &
  echo $! >"$wd/scheduler.pid"
  wait_until "$START_TIMEOUT" "$wd/scheduler.pid" kube-scheduler \
    curl -fsSk "https://127.0.0.1:$port/healthz" || rc=$?
  if ((rc != 0)); then
    log "kube-scheduler did not become healthy (rc=$rc); last log lines:"
    tail -n 30 "$wd/scheduler.log" >&2 || true
    return 1
  fi
}

cmd_start() {
  local wd="$1" b attempt
  local bins=(etcd kube-apiserver kubectl)
  [[ "${CONTROLLER_MANAGER:-0}" == 1 ]] && bins+=(kube-controller-manager)
  [[ "${SCHEDULER:-0}" == 1 ]] && bins+=(kube-scheduler)
  for b in "${bins[@]}"; do
    [[ -x "$BIN_DIR/$b" ]] || die "missing $BIN_DIR/$b; run e2e/build-tools.sh first"
  done
  for b in openssl curl python3 setsid base64; do
    command -v "$b" >/dev/null 2>&1 || die "required command '$b' not found"
  done
  mkdir -p "$wd"
  wd="$(cd "$wd" && pwd)"
  if pid_alive "$(cat "$wd/etcd.pid" 2>/dev/null)" etcd ||
    pid_alive "$(cat "$wd/apiserver.pid" 2>/dev/null)" kube-apiserver ||
    pid_alive "$(cat "$wd/controller-manager.pid" 2>/dev/null)" kube-controller ||
    pid_alive "$(cat "$wd/scheduler.pid" 2>/dev/null)" kube-scheduler; then
    die "a control plane is already running in $wd (run: $0 stop $wd)"
  fi
  rm -f "$wd/kubeconfig" "$wd/env"
  gen_pki "$wd/pki"

  for attempt in 1 2; do
    if start_once "$wd"; then
      log "ready: kubeconfig at $wd/kubeconfig"
      "$BIN_DIR/kubectl" --kubeconfig "$wd/kubeconfig" version 2>&1 || true
      return 0
    fi
    cmd_stop "$wd"
    ((attempt == 1)) && log "start failed; retrying once with new ports"
  done
  die "could not start the control plane (logs in $wd)"
}

[[ $# -eq 2 ]] || usage
case "$1" in
  start) cmd_start "$2" ;;
  stop) cmd_stop "$2" ;;
  *) usage ;;
esac
