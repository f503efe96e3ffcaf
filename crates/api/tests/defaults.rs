//! Kruise's CloneSet defaults (`insitu_api::defaults`): the seed's YAML, both versions, updates, the JSON patch.

use insitu_api::defaults;
use serde_json::{Value, json};

/// The seed's CloneSet (`examples/cloneset-demo.yaml`), as JSON.
fn seed() -> Value {
    let yaml = include_str!("../../../examples/cloneset-demo.yaml");
    serde_saphyr::from_str(yaml).expect("examples/cloneset-demo.yaml parses")
}

#[test]
fn seed_template_gets_kruises_defaults() {
    let out = defaults::admit(&seed(), None);
    let spec = &out["spec"]["template"]["spec"];
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert!(
        spec.get("enableServiceLinks").is_none(),
        "SetDefaults_Pod is not Kruise's"
    );
    let c = &spec["containers"][0];
    // Kruise: Always for in-place update, although the tag (1.19.0) would give IfNotPresent.
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["ports"][0], json!({"containerPort": 80, "protocol": "TCP"}));
    assert_eq!(
        c["readinessProbe"],
        json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "initialDelaySeconds": 5,
               "periodSeconds": 3, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["livenessProbe"]["periodSeconds"], 5);
    assert_eq!(c["livenessProbe"]["timeoutSeconds"], 1);
    assert_eq!(
        c["lifecycle"]["preStop"],
        json!({"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}})
    );
    let strategy = &out["spec"]["updateStrategy"];
    assert_eq!(
        *strategy,
        json!({"type": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10},
               "maxUnavailable": 1, "partition": 0, "maxSurge": 0})
    );
    assert_eq!(out["spec"]["revisionHistoryLimit"], 10);
    // Idempotent: a second pass (e.g. the UPDATE after a template edit) adds nothing.
    assert_eq!(defaults::admit(&out, None), out);
}

#[test]
fn init_containers_follow_the_tag_rule_and_ephemeral_ones_get_no_container_defaults() {
    let cs = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "spec": {"template": {"spec": {
        "initContainers": [{"name": "a", "image": "busybox:1.36"}, {"name": "b", "image": "busybox"},
                           {"name": "c", "image": "r.example:5000/busybox@sha256:00"}],
        "containers": [{"name": "m", "image": "nginx:latest", "imagePullPolicy": "Never"}],
        "ephemeralContainers": [{"name": "e", "image": "busybox", "ports": [{"containerPort": 1}]}]
    }}}});
    let out = defaults::admit(&cs, None);
    let spec = &out["spec"]["template"]["spec"];
    let policies: Vec<&Value> = (0..3)
        .map(|i| &spec["initContainers"][i]["imagePullPolicy"])
        .collect();
    assert_eq!(
        policies,
        [&json!("IfNotPresent"), &json!("Always"), &json!("IfNotPresent")]
    );
    assert_eq!(
        spec["containers"][0]["imagePullPolicy"], "Never",
        "a set policy is kept"
    );
    let e = &spec["ephemeralContainers"][0];
    assert!(e.get("imagePullPolicy").is_none() && e.get("terminationMessagePath").is_none());
    assert_eq!(e["ports"][0]["protocol"], "TCP");
}

#[test]
fn volumes_and_claim_templates() {
    let cs = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "spec": {
        "template": {"spec": {"containers": [], "volumes": [
            {"name": "bare"}, {"name": "h", "hostPath": {"path": "/x"}}, {"name": "s", "secret": {"secretName": "s"}},
            {"name": "d", "downwardAPI": {"items": [{"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
        ]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    }});
    let out = defaults::admit(&cs, None);
    let v = &out["spec"]["template"]["spec"]["volumes"];
    assert_eq!(v[0], json!({"name": "bare", "emptyDir": {}}));
    assert_eq!(v[1]["hostPath"], json!({"path": "/x", "type": ""}));
    assert_eq!(v[2]["secret"]["defaultMode"], 420);
    assert_eq!(v[3]["downwardAPI"]["defaultMode"], 420);
    assert_eq!(v[3]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(v[4]["projected"]["defaultMode"], 420);
    assert_eq!(
        v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    let vct = &out["spec"]["volumeClaimTemplates"][0];
    assert_eq!(vct["status"], json!({"phase": "Pending"}));
    assert!(
        vct["spec"].get("volumeMode").is_none(),
        "Kruise does not call SetDefaults_PersistentVolumeClaimSpec"
    );
    assert_eq!(
        out["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate", "partition": 0,
               "maxUnavailable": "20%", "maxSurge": 0}})
    );
}

#[test]
fn v1beta1_in_place_gets_an_empty_in_place_strategy() {
    let cs = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "spec": {"updateStrategy": {
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}}});
    let out = defaults::admit(&cs, None);
    let r = &out["spec"]["updateStrategy"]["rollingUpdate"];
    assert_eq!(r["inPlaceUpdateStrategy"], json!({}));
    assert_eq!(r["maxUnavailable"], 1);
    let on_delete = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                           "spec": {"updateStrategy": {"type": "OnDelete"}}});
    let out = defaults::admit(&on_delete, None);
    assert_eq!(out["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
}

#[test]
fn an_update_defaults_the_template_only_when_it_changed() {
    let old = seed();
    let mut same = old.clone();
    same["spec"]["replicas"] = json!(5);
    let out = defaults::admit(&same, Some(&old));
    assert!(out["spec"]["template"]["spec"].get("dnsPolicy").is_none());
    assert_eq!(
        out["spec"]["revisionHistoryLimit"], 10,
        "spec defaults on every write"
    );
    let mut changed = old.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.20.0");
    let out = defaults::admit(&changed, Some(&old));
    assert_eq!(out["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
}

/// Applies add/replace/remove operations (the ones `json_patch` emits) to `v`.
fn apply(v: &mut Value, ops: &[Value]) {
    for op in ops {
        let path = op["path"].as_str().unwrap();
        let (parent, last) = path.rsplit_once('/').unwrap();
        let last = last.replace("~1", "/").replace("~0", "~");
        let target = v.pointer_mut(parent).unwrap();
        match (op["op"].as_str().unwrap(), target) {
            ("remove", Value::Object(m)) => {
                m.remove(&last);
            }
            (_, Value::Object(m)) => {
                m.insert(last, op["value"].clone());
            }
            (_, Value::Array(a)) => a[last.parse::<usize>().unwrap()] = op["value"].clone(),
            other => panic!("unexpected patch target {other:?}"),
        }
    }
}

#[test]
fn json_patch_turns_the_request_into_the_defaulted_object() {
    let before = seed();
    let after = defaults::admit(&before, None);
    let ops = defaults::json_patch(&before, &after);
    assert!(ops.iter().all(|o| o["op"] == "add"), "defaults only add: {ops:?}");
    let mut patched = before.clone();
    apply(&mut patched, &ops);
    assert_eq!(patched, after);
    assert!(defaults::json_patch(&after, &after).is_empty());
    let a = json!({"a/b": 1, "c~": [1, 2], "gone": true});
    let b = json!({"a/b": 2, "c~": [1, 3]});
    assert_eq!(
        defaults::json_patch(&a, &b),
        [
            json!({"op": "remove", "path": "/gone"}),
            json!({"op": "replace", "path": "/a~1b", "value": 2}),
            json!({"op": "replace", "path": "/c~0/1", "value": 3}),
        ]
    );
}

#[test]
fn quantities_come_back_canonical_as_from_kruises_go_marshalled_patch() {
    let mut cs = seed();
    cs["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1000m"}});
    cs["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0.5Gi"}}}}]);
    let old = defaults::admit(&seed(), None);
    // On an UPDATE too (Kruise re-marshals the whole object, whatever changed).
    let out = defaults::admit(&cs, Some(&old));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}})
    );
    assert_eq!(
        out["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
        "512Mi"
    );
}
