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
# The same file applied again: a custom resource's three-way merge patch replaces lists whole, and the live
# containers carry the defaulting webhook's defaults, so kubectl re-sends them ("configured") and nothing changes.
expect "apply the same file again: configured" "nginx-demo configured" k apply -f "$DEMO"
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

# The tutorial's own commands, as written, through a kubeconfig whose context namespace is $NS (the tutorial runs
# in `default`): `kubectl` below is the tutorial's kubectl. Its `cloneset` resolves to v1beta1, kubectl's preferred
# version, where the tutorial's v1alpha1-shaped patches are moved under rollingUpdate by the defaulting webhook.
cp "$KUBECONFIG" "$WORK/seed-kubeconfig"
"$KUBECTL" --kubeconfig "$WORK/seed-kubeconfig" config set-context --current --namespace="$NS" >/dev/null
kubectl() { KUBECONFIG="$WORK/seed-kubeconfig" "$KUBECTL" "$@"; }
BETA=clonesets.v1beta1.apps.kruise.io
beta_field() { k get "$BETA" "$1" -o "jsonpath=$2"; }

# The monitor script's commands (inside its `watch -n 1`), once each.
expect "monitor: kubectl get cloneset nginx-demo -o wide" "^nginx-demo +3 +3 +3 " kubectl get cloneset nginx-demo -o wide
expect "monitor: the Pod list's custom columns" "^NAME +STATUS +IP +READY +AGE +IMAGE" \
  kubectl get pods -l app=nginx-demo -o custom-columns=NAME:.metadata.name,STATUS:.status.phase,IP:.status.podIP,READY:.status.conditions[?\(@.type==\"Ready\"\)].status,AGE:.metadata.creationTimestamp,IMAGE:.spec.containers[0].image
expect "monitor: the restart counts' custom columns" "^nginx-demo-[a-z0-9]+ +0$" \
  kubectl get pods -l app=nginx-demo -o custom-columns=NAME:.metadata.name,RESTARTS:.status.containerStatuses[0].restartCount

# 方式 1 and 方式 2 as written: JSON merge patches that replace the whole containers list. Valid requests that
# would recreate the pods (not in place), or leave the container without an image: answered with a warning that
# names the field and gives the JSON patch that works (server dry run: nothing changes).
expect "方式 1 (merge patch of the image) warns: pods recreated, and the JSON patch that works" \
  'Warning: spec.template.spec.containers\[0\] \("nginx"\): this update removes .*env.*kubectl patch cloneset nginx-demo --type=json -p=.*/spec/template/spec/containers/0/image.*nginx:1.20.0' \
  kubectl patch cloneset nginx-demo --type='merge' --dry-run=server -p='{
  "spec": {
    "template": {
      "spec": {
        "containers": [{
          "name": "nginx",
          "image": "nginx:1.20.0"
        }]
      }
    }
  }
}'
run kubectl patch cloneset nginx-demo --type='merge' --dry-run=server -p='{
  "spec": {
    "template": {
      "spec": {
        "containers": [{
          "name": "nginx",
          "env": [{
            "name": "VERSION",
            "value": "v2.0"
          }]
        }]
      }
    }
  }
}'
if grep -q 'containers\[0\].image: Required value' <<<"$OUT" && grep -q '/env/0/value' <<<"$OUT"; then
  ok "方式 2 (merge patch of the env) is refused naming the image, with the env JSON patch"
else bad "方式 2 (merge patch of the env) is refused naming the image, with the env JSON patch"; fi

# The in-place update, with the tutorial's before/after check (name, UID, IP) and an events watch beside it.
kubectl get pods -l app=nginx-demo -o custom-columns=NAME:.metadata.name,UID:.metadata.uid,IP:.status.podIP >"$WORK/before-upgrade.txt"
(timeout 90 "$KUBECTL" --kubeconfig "$WORK/seed-kubeconfig" get events --watch --field-selector involvedObject.kind=Pod >"$WORK/events.txt" 2>&1 &)
expect "JSON-patch the image to 1.20.0" "patched" \
  kubectl patch cloneset nginx-demo --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.20.0"}]'
wait_for "all 3 pods on 1.20.0 and Ready" 300 "3/3" bash -c "
  img=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].image}{\"\\n\"}{end}' | grep -c 'nginx:1.20.0')
  rdy=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c True)
  echo \"\$img/\$rdy\""
expect "kubectl wait --for=condition=Ready (the test script's)" "condition met" \
  kubectl wait --for=condition=Ready pods -l app=nginx-demo --timeout=300s
kubectl get pods -l app=nginx-demo -o custom-columns=NAME:.metadata.name,UID:.metadata.uid,IP:.status.podIP >"$WORK/after-upgrade.txt"
expect_eq "diff before-upgrade.txt after-upgrade.txt: no difference (name, UID, IP)" "" \
  diff "$WORK/before-upgrade.txt" "$WORK/after-upgrade.txt"
expect "the image check's jsonpath: nginx:1.20.0 on every pod" $'^nginx-demo-[a-z0-9]+\tnginx:1.20.0$' \
  kubectl get pods -l app=nginx-demo -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.spec.containers[0].image}{"\n"}{end}'
expect_eq "the restart check's jsonpath: each container restarted once" $'1\n1\n1' bash -c \
  "KUBECONFIG='$WORK/seed-kubeconfig' '$KUBECTL' get pods -l app=nginx-demo -o jsonpath='{range .items[*]}{.metadata.name}{\"\t\"}{.status.containerStatuses[0].restartCount}{\"\n\"}{end}' | cut -f2"
expect "monitor: the in-place annotation's jsonpath shows Kruise's state" '^nginx-demo-[a-z0-9]+: \{"revision":"nginx-demo-[a-z0-9]+".*"lastContainerStatuses"' \
  kubectl get pods -l app=nginx-demo -o jsonpath="{range .items[*]}{.metadata.name}{\": \"}{.metadata.annotations.apps\.kruise\.io/inplace-update-state}{\"\\n\"}{end}"
expect "the events watch saw a container restarted in place" "Killing +pod/nginx-demo-[a-z0-9]+ +Container nginx definition changed, will be restarted" cat "$WORK/events.txt"
expect "kubectl describe cloneset shows the in-place updates" "SuccessfulUpdatePodInPlace" kubectl describe cloneset nginx-demo
# Logs come from the kubelet: simulated nodes on the real control plane serve none (KUBECTL_SEED_LOGS=0 there).
[[ "${KUBECTL_SEED_LOGS:-1}" == 1 ]] && expect "kubectl logs of a pod" "simulated container nginx started \(image .*nginx:1.20.0\)" bash -c "'$KUBECTL' -n '$NS' logs \$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o name | head -1) --tail=5"

# Troubleshooting's grace-period patch, as written (v1alpha1's inPlaceUpdateStrategy, sent to v1beta1).
expect "the grace-period patch lands in rollingUpdate.inPlaceUpdateStrategy" "patched" \
  kubectl patch cloneset nginx-demo --type='merge' -p='{"spec":{"updateStrategy":{"inPlaceUpdateStrategy":{"gracePeriodSeconds":3}}}}'
expect_eq "… stored under rollingUpdate, not in the old spelling" "3/" \
  beta_field nginx-demo '{.spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.gracePeriodSeconds}/{.spec.updateStrategy.inPlaceUpdateStrategy}'
expect "… and back to the tutorial's 10" "patched" kubectl patch cloneset nginx-demo --type='merge' -p='{
  "spec": {
    "updateStrategy": {
      "inPlaceUpdateStrategy": {
        "gracePeriodSeconds": 10
      }
    }
  }
}'

# Pause and resume, as written: paused holds an image change for 15 s; resume finishes it.
expect "pause (the tutorial's patch)" "cloneset.apps.kruise.io/nginx-demo patched$" \
  kubectl patch cloneset nginx-demo --type='merge' -p='{"spec":{"updateStrategy":{"paused":true}}}'
expect_eq "… stored as rollingUpdate.paused (v1beta1) and updateStrategy.paused (v1alpha1)" "true//true" \
  bash -c "echo \$('$KUBECTL' -n '$NS' get $BETA nginx-demo -o 'jsonpath={.spec.updateStrategy.rollingUpdate.paused}/{.spec.updateStrategy.paused}')/\$('$KUBECTL' -n '$NS' get $CS nginx-demo -o 'jsonpath={.spec.updateStrategy.paused}')"
expect "change the image while paused" "patched" \
  kubectl patch cloneset nginx-demo --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.21.0"}]'
held=1
for _ in $(seq 15); do
  sleep 1
  run bash -c "'$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}' | grep -c 'nginx:1.21.0'; '$KUBECTL' -n '$NS' get $BETA nginx-demo -o 'jsonpath={.status.updatedReplicas}'"
  [[ "$OUT" == $'0\n0' ]] || { held=0; break; }
done
if ((held)); then ok "paused: no pod updated for 15 s after the image change"; else bad "paused: no pod updated for 15 s after the image change (images on 1.21.0 / updatedReplicas: $OUT)"; fi
expect "resume (the tutorial's patch)" "cloneset.apps.kruise.io/nginx-demo patched$" \
  kubectl patch cloneset nginx-demo --type='merge' -p='{"spec":{"updateStrategy":{"paused":false}}}'
wait_for "resumed: all 3 pods on 1.21.0, Ready" 300 "3/3" bash -c "
  img=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].image}{\"\\n\"}{end}' | grep -c 'nginx:1.21.0')
  rdy=\$('$KUBECTL' -n '$NS' get pods -l app=nginx-demo -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c True)
  echo \"\$img/\$rdy\""

# Both spellings at once, with different values: refused, naming both.
expect "both spellings with different values are refused naming both fields" \
  'spec.updateStrategy.partition: Invalid value: 2: conflicts with spec.updateStrategy.rollingUpdate.partition \(1\)' \
  kubectl patch cloneset nginx-demo --type='merge' -p='{"spec":{"updateStrategy":{"partition":2,"rollingUpdate":{"partition":1}}}}'

# The canary section. Its YAML, as written, has no selector and no template labels: refused naming them.
cat >"$WORK/canary-as-written.yaml" <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: nginx-canary
spec:
  replicas: 10
  updateStrategy:
    type: InPlaceIfPossible
    partition: 8  # 只更新 2 个 Pod（10 - 8 = 2）
    maxUnavailable: 1
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1.21.0  # 新版本
YAML
expect "the canary YAML as written is refused naming spec.selector" "spec.selector: Required value" \
  kubectl apply -f "$WORK/canary-as-written.yaml"
# With a selector and labels, first at the old image (partition 0), then the tutorial's steps 1-4.
sed -e 's/^spec:$/spec:\n  selector:\n    matchLabels:\n      app: nginx-canary/' \
  -e 's/^  template:$/  template:\n    metadata:\n      labels:\n        app: nginx-canary/' "$WORK/canary-as-written.yaml" >"$WORK/canary.yaml"
sed -e 's/nginx:1.21.0/nginx:1.19.0/' -e 's/partition: 8.*/partition: 0/' "$WORK/canary.yaml" >"$WORK/canary-v1.yaml"
expect "create nginx-canary (10 pods, nginx:1.19.0)" "cloneset.apps.kruise.io/nginx-canary created" kubectl apply -f "$WORK/canary-v1.yaml"
canary_ready() { k get pods -l app=nginx-canary -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True; }
wait_for "10 canary pods Ready" 300 "10" canary_ready
expect "canary step 1 (the tutorial's patch)" "patched" \
  kubectl patch cloneset nginx-canary --type='merge' -p='{"spec":{"updateStrategy":{"partition":8}}}'
expect_eq "… partition 8 stored (v1beta1 rollingUpdate.partition)" "8" beta_field nginx-canary '{.spec.updateStrategy.rollingUpdate.partition}'
expect "apply the canary YAML (nginx:1.21.0, partition 8)" "configured" kubectl apply -f "$WORK/canary.yaml"
updated_ready() { echo "$(k get "$BETA" nginx-canary -o 'jsonpath={.status.updatedReplicas}/{.status.updatedReadyReplicas}')/$(k get pods -l app=nginx-canary -o 'jsonpath={range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | grep -c 'nginx:1.21.0')"; }
wait_for "step 2: exactly 2 pods updated (10 - 8)" 300 "2/2/2" updated_ready
sleep 5
expect_eq "… and still exactly 2 five seconds later" "2/2/2" updated_ready
expect "canary step 3 (the tutorial's patch)" "patched" \
  kubectl patch cloneset nginx-canary --type='merge' -p='{"spec":{"updateStrategy":{"partition":3}}}'
wait_for "… 7 pods updated (10 - 3)" 300 "7/7/7" updated_ready
expect "canary step 4 (the tutorial's patch)" "patched" \
  kubectl patch cloneset nginx-canary --type='merge' -p='{"spec":{"updateStrategy":{"partition":0}}}'
wait_for "… all 10 updated" 300 "10/10/10" updated_ready
expect "delete nginx-canary" "deleted" kubectl delete cloneset nginx-canary

# The batch section's YAML, as written (a fragment: no selector, no template): refused naming the fields; completed,
# it is accepted with maxUnavailable 20% and maxSurge 0 (server dry run).
cat >"$WORK/batch.yaml" <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: nginx-batch
spec:
  replicas: 20
  updateStrategy:
    type: InPlaceIfPossible
    maxUnavailable: 20%  # 最多同时更新 4 个 Pod（20 * 20% = 4）
    maxSurge: 0          # 不允许超出副本数
    paused: false        # 是否暂停更新
YAML
expect "the batch YAML as written is refused naming spec.selector" "spec.selector: Required value" \
  kubectl apply --dry-run=server -f "$WORK/batch.yaml"
cat >>"$WORK/batch.yaml" <<'YAML'
  selector:
    matchLabels:
      app: nginx-batch
  template:
    metadata:
      labels:
        app: nginx-batch
    spec:
      containers:
      - name: nginx
        image: nginx:1.19.0
YAML
expect "… completed, accepted (server dry run)" "cloneset.apps.kruise.io/nginx-batch created \(server dry run\)" \
  kubectl apply --dry-run=server -f "$WORK/batch.yaml"

# The tutorial's alert rules name metrics the controller exports (examples/seed-alerts.yaml; where the caller
# gives the controller's /metrics): the in-place duration histogram has observations after the rollouts above.
if [[ -n "${KUBECTL_SEED_METRICS:-}" ]]; then
  expect "the alert rules' metrics: kruise_inplace_update_duration_seconds_bucket observed" \
    '^kruise_inplace_update_duration_seconds_bucket\{.*name="nginx-demo".*\} [1-9]' curl -sf "$KUBECTL_SEED_METRICS"
  # A counter family has no series until its first increment (as Kruise's Go CounterVec): with no failed in-place
  # update the failure-rate rule selects nothing and does not fire.
  expect_eq "the alert rules' metrics: no in-place update failed (kruise_inplace_update_failed_total absent or 0)" "" \
    bash -c "curl -sf '$KUBECTL_SEED_METRICS' | grep -E '^kruise_inplace_update_failed_total\\{' | grep -v ' 0$'"
fi

expect "delete the CloneSet" "deleted" k delete "$CS" nginx-demo
"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
echo "$pass passed, $fail failed"
((fail == 0))
