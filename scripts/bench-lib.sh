# Shell helpers of the benchmarks on a real control plane (scripts/bench-controller-rss, scripts/bench-vs-kruise);
# sourced, not run. One control plane per script run: e2e/control-plane.sh on free ports, etcd + kube-apiserver
# built by e2e/build-tools.sh, an audit log of every write (for writes per pod by client), simulated kubelets from
# `insitu nodes`, and `insitu run` (release build) as the controller.
#
# Expects ROOT (the checkout). Sets BIN (insitu), BIN_DIR, KUBECTL, WORK, ADMIN, AUDIT.

# shellcheck source=e2e/lib.sh
source "$ROOT/e2e/lib.sh"

say() { echo "${BENCH_NAME:-bench}: $*" >&2; }
die() { say "$*"; exit 1; }

# The release binary (built when missing or older than the sources: the figures are of this checkout's code);
# INSITU_BIN=path uses that binary instead (e.g. a saved one, for a before/after).
bench_build_insitu() {
  local target
  if [[ -n "${INSITU_BIN:-}" ]]; then
    BIN="$INSITU_BIN"
    [[ -x "$BIN" ]] || die "INSITU_BIN=$BIN is not an executable"
    return 0
  fi
  target="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  BIN="$target/release/insitu"
  if [[ ! -x "$BIN" ]] || [[ -n "$(find "$ROOT/crates" "$ROOT/Cargo.lock" -newer "$BIN" -type f -print -quit)" ]]; then
    say "building insitu (cargo build --release -p insitu; a cold build takes ~20 min on 2 loaded cores)"
    (cd "$ROOT" && cargo build --locked --release -q -p insitu) || die "cargo build --release failed"
  fi
}

bench_build_tools() {
  local out
  out="$("$ROOT/e2e/build-tools.sh")" || die "e2e/build-tools.sh failed (Go >= 1.26 needed)"
  BIN_DIR="$(printf '%s\n' "$out" | tail -n1)"
  export E2E_BIN_DIR="$BIN_DIR"
  KUBECTL="$BIN_DIR/kubectl"
}

K() { "$KUBECTL" --kubeconfig "$ADMIN" "$@"; }

# Every write (any client) at Metadata level: verb, resource, subresource, code, user agent, timestamps.
bench_start_control_plane() {
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/insitu-bench-XXXXXX")"
  AUDIT="$WORK/audit.log"
  cat >"$WORK/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
EOF
  # etcd keeps every version until the apiserver's 5-minute compaction: 10k pods rolled a few times outgrow the
  # default 2 GiB quota (NOSPACE), so the quota is raised for the benchmark.
  APISERVER_EXTRA_ARGS="--audit-policy-file=$WORK/audit-policy.yaml --audit-log-path=$AUDIT --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=0" \
    ETCD_EXTRA_ARGS="--quota-backend-bytes=8589934592" \
    "$ROOT/e2e/control-plane.sh" start "$WORK" >"$WORK/control-plane.out" 2>&1 ||
    { cat "$WORK/control-plane.out" >&2; die "the control plane did not start (logs in $WORK)"; }
  ADMIN="$WORK/kubeconfig"
  SERVER_VERSION="$(K version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])' || echo unknown)"
  say "control plane up: kube-apiserver $SERVER_VERSION, $("$BIN_DIR/etcd" --version 2>/dev/null | sed -n 1p) ($WORK)"
}

bench_stop() {
  local f
  for f in "$WORK"/*.pid; do
    [[ -f "$f" ]] || continue
    case "$(basename "$f")" in
      etcd.pid | apiserver.pid | controller-manager.pid) ;;
      *) kill_any "$f" ;;
    esac
  done
  "$ROOT/e2e/control-plane.sh" stop "$WORK" >/dev/null 2>&1 || true
}

# kill_any <pidfile>: SIGTERM (SIGKILL after 10 s) the process this script started; removes the file.
kill_any() {
  local f="$1" pid i
  pid="$(cat "$f" 2>/dev/null)"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# bench_start_nodes COUNT [args...]: simulated kubelets and scheduler (`insitu nodes`), waits until all are Ready.
bench_start_nodes() {
  local count="$1"
  shift
  RUST_LOG=warn "$BIN" nodes --kubeconfig "$ADMIN" --count "$count" --no-events "$@" >"$WORK/nodes.log" 2>&1 &
  echo $! >"$WORK/nodes.pid"
  nodes_ready() {
    [[ "$(K get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge "$count" ]]
  }
  retry 120 nodes_ready || die "$count nodes did not become Ready (see $WORK/nodes.log)"
}

# bench_install_insitu_crd: the CloneSet CRD of `insitu crd`, converting through `insitu run`'s webhook on a free port.
bench_install_insitu_crd() {
  WEBHOOK_PORT="$(free_port)"
  K create namespace insitu-system >/dev/null 2>&1 || true
  "$BIN" crd --webhook-url "https://127.0.0.1:$WEBHOOK_PORT/convert" | K apply --server-side --force-conflicts -f - >/dev/null ||
    die "the insitu CRD was not accepted"
  crd_established() {
    [[ "$(K get crd clonesets.apps.kruise.io -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]]
  }
  retry 60 crd_established || die "the CloneSet CRD did not become Established"
}

# bench_start_insitu <log-name>: `insitu run` as the admin (no leader election), waits for /readyz. Sets CTL_PID.
# CONTROLLER_ARGS: more flags (word-split), e.g. `--initial-list list`; CONTROLLER_WRAPPER: a command to run it
# under (heaptrack).
bench_start_insitu() {
  local name="${1:-insitu}" port
  port="$(free_port)"
  # shellcheck disable=SC2086 # CONTROLLER_WRAPPER and CONTROLLER_ARGS are word-split on purpose
  RUST_LOG="${RUST_LOG_CONTROLLER:-info}" ${CONTROLLER_WRAPPER:-} "$BIN" run --kubeconfig "$ADMIN" \
    --metrics-addr "127.0.0.1:$port" --webhook-addr "127.0.0.1:$WEBHOOK_PORT" \
    --webhook-url "https://127.0.0.1:$WEBHOOK_PORT/convert" ${CONTROLLER_ARGS:-} >"$WORK/$name.log" 2>&1 &
  CTL_PID=$!
  echo "$CTL_PID" >"$WORK/$name.pid"
  CTL_METRICS="http://127.0.0.1:$port/metrics"
  ready() { curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null; }
  retry 120 ready || die "insitu run did not become ready (see $WORK/$name.log)"
  # Under heaptrack the controller is a child of the wrapper: measure the controller itself.
  if [[ -n "${CONTROLLER_WRAPPER:-}" ]]; then
    local child
    child="$(pgrep -P "$CTL_PID" -x insitu || true)"
    [[ -n "$child" ]] && CTL_PID="$child"
  fi
}

# Resident memory (VmRSS / VmHWM, MiB) and CPU seconds (user + system) of a pid.
mib() { awk -v k="$2:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
cpu_seconds() {
  python3 -c "import os,sys; f=open('/proc/$1/stat').read().rsplit(')',1)[1].split(); print(f'{(int(f[11])+int(f[12]))/os.sysconf(\"SC_CLK_TCK\"):.1f}')"
}
now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.1f}')"; }

# wait_cloneset NAME FIELD N [TIMEOUT_S]: until status.FIELD == N and observedGeneration == generation.
wait_cloneset() {
  local name="$1" field="$2" want="$3" secs="${4:-1800}" got="" i
  for ((i = 0; i < secs * 2; i++)); do
    got="$(K get clonesets.v1alpha1.apps.kruise.io "$name" -o jsonpath="{.status.observedGeneration}/{.metadata.generation} {.status.$field}" 2>/dev/null || true)"
    if [[ "$got" =~ ^([0-9]+)/([0-9]+)\ ([0-9]+)$ ]] && [[ "${BASH_REMATCH[1]}" == "${BASH_REMATCH[2]}" ]] &&
      ((BASH_REMATCH[3] == want)); then
      return 0
    fi
    sleep 0.5
  done
  say "timed out waiting for cloneset $name status.$field = $want (last: $got)"
  return 1
}

# The CloneSet of the benchmarks: one container, in place, everything at once (maxUnavailable 100%).
cloneset_yaml() {
  local name="$1" replicas="$2" image="$3"
  cat <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: $name
  namespace: default
spec:
  replicas: $replicas
  selector:
    matchLabels: {app: $name}
  template:
    metadata:
      labels: {app: $name}
    spec:
      containers:
      - name: main
        image: $image
  scaleStrategy:
    maxUnavailable: 100%
  updateStrategy:
    type: InPlaceIfPossible
    maxUnavailable: 100%
EOF
}

set_image() {
  K patch clonesets.v1alpha1.apps.kruise.io "$1" --type merge \
    -p "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"$2\"}]}}}}" >/dev/null
}

# audit_writes FROM TO AGENT_RE PODS: the writes of clients whose user agent matches AGENT_RE received in
# [FROM, TO] (epoch seconds), by verb and resource, per pod, and the 409s; JSON on stdout.
audit_writes() {
  python3 "$ROOT/scripts/bench_audit.py" "$AUDIT" "$1" "$2" "$3" "$4"
}
