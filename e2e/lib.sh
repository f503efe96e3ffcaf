# Shell helpers shared by the e2e tiers (e2e/run, e2e/kruise/run); sourced, not run.

# The insitu binary the tiers build carries the node agent (`insitu agent`, feature `agent`; its CRI bindings need
# protoc). scripts/test exports the same value for its `cargo test --workspace`, so no tier rebuilds in another
# feature set.
INSITU_FEATURES="${INSITU_FEATURES-insitu/agent}"

# free_port: print one free TCP port on 127.0.0.1 (bind to :0, read, close). Racy by nature.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# retry <seconds> <cmd...>: run cmd every 0.5 s until it succeeds; 1 if it never did.
retry() {
  local secs="$1" i
  shift
  for ((i = 0; i < secs * 2; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}

# kill_pid <pidfile>: SIGTERM the insitu process named in it, SIGKILL after 10 s; removes the file.
kill_pid() {
  local f="$1" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == insitu* ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# sa_kubeconfig <kubectl> <admin-kubeconfig> <out>: mint a 4 h token for the `insitu` ServiceAccount of
# deploy/rbac.yaml (namespace insitu-system) and write a kubeconfig using it (server and CA from the admin one).
sa_kubeconfig() {
  local kubectl="$1" admin="$2" out="$3" token server ca
  token="$("$kubectl" --kubeconfig "$admin" create token insitu -n insitu-system --duration=4h)" || return 1
  server="$("$kubectl" --kubeconfig "$admin" config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$("$kubectl" --kubeconfig "$admin" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  (
    umask 077
    cat >"$out" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: insitu-e2e
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: insitu
  user:
    token: $token
contexts:
- name: insitu
  context:
    cluster: insitu-e2e
    user: insitu
    namespace: insitu-system
current-context: insitu
KUBECONFIG
  )
}
