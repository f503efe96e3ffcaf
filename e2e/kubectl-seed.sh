#!/usr/bin/env bash
# The seed tutorial's kubectl steps, with assertions, against whatever cluster KUBECONFIG names: the real
# control plane of ./e2e/run, or `insitu up` (crates/insitu/tests/kubectl_seed.rs). The same steps and the same
# assertions run on both, so a difference between the two is a simulator bug.
#
#   e2e/kubectl-seed.sh KUBECTL KUBECONFIG NAMESPACE
#
# Needs the CloneSet CRD, a CloneSet controller and nodes running. The namespace is created (and deleted at
# the end). Prints one line per check; the last line is `N passed, M failed`; exits 0 only when M = 0.
set -uo pipefail

KUBECTL="$1"
export KUBECONFIG="$2"
NS="$3"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEMO="$ROOT/examples/cloneset-demo.yaml"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

pass=0
fail=0
OUT=""
RC=0
k() { "$KUBECTL" -n "$NS" "$@"; }
run() { OUT="$("$@" 2>&1)"; RC=$?; }
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL $1"
  printf '%s\n' "$OUT" | head -20 | sed 's/^/       /'
}
# expect NAME REGEX CMD...: CMD's output (stdout+stderr) matches REGEX (grep -E).
expect() {
  local name="$1" re="$2"
  shift 2
  run "$@"
  if grep -Eq -- "$re" <<<"$OUT"; then ok "$name"; else bad "$name (wanted /$re/, exit $RC)"; fi
}
# expect_eq NAME WANT CMD...: CMD's output is exactly WANT.
expect_eq() {
  local name="$1" want="$2"
  shift 2
  run "$@"
  if [[ "$OUT" == "$want" ]]; then ok "$name"; else bad "$name (wanted '$want', exit $RC)"; fi
}
# wait_for NAME SECONDS WANT CMD...: polls CMD until its output is WANT.
wait_for() {
  local name="$1" secs="$2" want="$3"
  shift 3
  local end=$((SECONDS + secs))
  while ((SECONDS < end)); do
    run "$@"
    [[ "$OUT" == "$want" ]] && { ok "$name"; return; }
    sleep 1
  done
  bad "$name (wanted '$want' within ${secs}s)"
}
# The seed's YAML and patches are v1alpha1 (kubectl's preferred version of the CRD is v1beta1, where
# `partition` lives under `rollingUpdate`): address that version explicitly.
CS=clonesets.v1alpha1.apps.kruise.io
field() { k get "$CS" nginx-demo -o "jsonpath=$1"; }
pods_field() { k get pods -l app=nginx-demo -o "jsonpath={range .items[*]}$1{\"\\n\"}{end}"; }
ready_count() { k get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True; }

# kubectl's typed create commands send protobuf bodies (kubectl >= 1.32).
expect "kubectl create namespace" "namespace/$NS created" "$KUBECTL" create namespace "$NS"
expect "kubectl create configmap" "configmap/seed-cfg created" k create configmap seed-cfg --from-literal=a=1
expect_eq "… its data stored" "1" k get configmap seed-cfg -o 'jsonpath={.data.a}'
expect "kubectl create secret generic" "secret/seed-secret created" \
  k create secret generic seed-secret --from-literal=a=b --from-literal=c=d
expect_eq "… base64 data and the Opaque type" "Yg==/ZA==/Opaque" \
  k get secret seed-secret -o 'jsonpath={.data.a}/{.data.c}/{.type}'
expect "… listed with its type and item count" "^seed-secret +Opaque +2 " k get secrets seed-secret
expect "kubectl run" "pod/seed-run created" k run seed-run --image=nginx:1.19.0 --restart=Never
expect_eq "… the pod as kubectl built it, defaulted" "nginx:1.19.0/Never/IfNotPresent" \
  k get pod seed-run -o 'jsonpath={.spec.containers[0].image}/{.spec.restartPolicy}/{.spec.containers[0].imagePullPolicy}'
# An unknown field of a built-in kind under --validate=warn: warned about with its path, and not stored (the
# apiserver's decoder into the Go type drops it).
cat >"$WORK/warn-pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: seed-warn
spec:
  nodeSelecter:
    a: b
  containers:
  - name: c
    image: nginx:1.19.0
YAML
expect "a Warn-mode unknown pod field warns with the field named" 'Warning: unknown field "spec.nodeSelecter"' \
  k create --validate=warn -f "$WORK/warn-pod.yaml"
expect_eq "… and is not stored" "0" bash -c "'$KUBECTL' -n '$NS' get pod seed-warn -o json | grep -c nodeSelecter"
expect "delete that pod" "deleted" k delete pod seed-warn --wait=false
expect "delete the pod" "deleted" k delete pod seed-run --wait=false

# The seed's CloneSet, unchanged (examples/cloneset-demo.yaml).
expect "apply the seed's CloneSet" "cloneset.apps.kruise.io/nginx-demo created" k apply -f "$DEMO"
wait_for "3 pods Ready" 180 "3" ready_count
expect "get cloneset -o wide shows images" "nginx-demo +3 +3 +3 .*nginx:1.19.0" k get "$CS" nginx-demo -o wide
expect "the seed's custom columns" "^nginx-demo-[a-z0-9]+ +Running +[0-9.]+ +True +.* nginx:1.19.0" \
  k get pods -l app=nginx-demo -o 'custom-columns=NAME:.metadata.name,STATUS:.status.phase,IP:.status.podIP,READY:.status.conditions[?(@.type=="Ready")].status,AGE:.metadata.creationTimestamp,IMAGE:.spec.containers[0].image'
run pods_field '{.metadata.uid}'
UIDS="$(sort <<<"$OUT")"
GEN="$(field '{.metadata.generation}')"

# kubectl diff: shows the change, changes nothing.
sed 's/nginx:1.19.0/nginx:1.20.0/' "$DEMO" >"$WORK/v2.yaml"
expect "kubectl diff shows the new image" "^\+ +image: nginx:1.20.0" k diff -f "$WORK/v2.yaml"
expect_eq "kubectl diff exits 1 (differences)" "1" bash -c "'$KUBECTL' -n '$NS' diff -f '$WORK/v2.yaml' >/dev/null 2>&1; echo \$?"
expect_eq "… and changed nothing (generation)" "$GEN" field '{.metadata.generation}'
expect "scale --dry-run=server" "scaled \(server dry run\)" k scale "$CS" nginx-demo --replicas=5 --dry-run=server
expect "patch --dry-run=server" "patched" \
  k patch "$CS" nginx-demo --type=merge --dry-run=server -p '{"spec":{"updateStrategy":{"partition":2}}}'
expect_eq "… and changed nothing (replicas, partition, generation)" "3/0/$GEN" \
  field '{.spec.replicas}/{.spec.updateStrategy.partition}/{.metadata.generation}'

# Typos and invalid values name the field.
sed -e 's/name: nginx-demo$/name: nginx-typo/' -e 's/^\(  *\)maxUnavailable:/\1partiton: 1\n\1maxUnavailable:/' "$DEMO" >"$WORK/typo.yaml"
expect "a typo is refused with the field named" 'unknown field "spec.updateStrategy.partiton"' k create -f "$WORK/typo.yaml"
expect_eq "… and nothing was created" "" bash -c "'$KUBECTL' -n '$NS' get clonesets.v1alpha1.apps.kruise.io nginx-typo -o name 2>/dev/null"
expect "a merge-patch typo warns with the field named" 'Warning: unknown field "spec.updateStrategy.partiton"' \
  k patch "$CS" nginx-demo --type=merge -p '{"spec":{"updateStrategy":{"partiton":3}}}'
expect "an invalid patch names the field" 'spec.replicas: Invalid value: -1' \
  k patch "$CS" nginx-demo --type=merge -p '{"spec":{"replicas":-1}}'
expect "an invalid scale names the field" 'Invalid value: -2' k patch "$CS" nginx-demo --subresource=scale --type=merge -p '{"spec":{"replicas":-2}}'

# kubectl explain reads the CloneSet's OpenAPI v3 schema.
expect "kubectl explain cloneset.spec.updateStrategy" "FIELD: +updateStrategy" \
  k explain cloneset.spec.updateStrategy --api-version=apps.kruise.io/v1alpha1
expect "… lists partition" "^  partition" k explain cloneset.spec.updateStrategy --api-version=apps.kruise.io/v1alpha1
expect "kubectl explain pod.spec.containers (a built-in kind)" "FIELD: +containers" k explain pod.spec.containers
expect "… lists image" "^  image" k explain pod.spec.containers

# The in-place update (README: a JSON patch of the image, so the template keeps its other fields).
expect "JSON-patch the image to 1.20.0" "patched" \
  k patch "$CS" nginx-demo --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.20.0"}]'
wait_for "all 3 pods on 1.20.0 and Ready" 300 "3/3" bash -c "
  img=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].image}{\"\\n\"}{end}' | grep -c 'nginx:1.20.0')
  rdy=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c True)
  echo \"\$img/\$rdy\""
run pods_field '{.metadata.uid}'
if [[ "$(sort <<<"$OUT")" == "$UIDS" ]]; then ok "in place: same pod UIDs"; else bad "in place: same pod UIDs"; fi
expect_eq "each container restarted once" $'1\n1\n1' pods_field '{.status.containerStatuses[0].restartCount}'
# Logs come from the kubelet: simulated nodes on the real control plane serve none (KUBECTL_SEED_LOGS=0 there).
[[ "${KUBECTL_SEED_LOGS:-1}" == 1 ]] && expect "kubectl logs of a pod" "simulated container nginx started \(image .*nginx:1.20.0\)" bash -c "'$KUBECTL' -n '$NS' logs \$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o name | head -1) --tail=5"

# Pause and resume (the seed's patches).
expect "pause" "patched" k patch "$CS" nginx-demo --type=merge -p '{"spec":{"updateStrategy":{"paused":true}}}'
expect_eq "paused" "true" field '{.spec.updateStrategy.paused}'
expect "resume" "patched" k patch "$CS" nginx-demo --type=merge -p '{"spec":{"updateStrategy":{"paused":false}}}'

expect "delete the CloneSet" "deleted" k delete "$CS" nginx-demo
"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
echo "$pass passed, $fail failed"
((fail == 0))
