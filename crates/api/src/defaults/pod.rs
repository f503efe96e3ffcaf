//! Kruise's pod template defaults (`apis/apps/defaults/pod.go` `SetDefaultPodSpec`), on the template's JSON.
//!
//! Kruise's mutating webhook runs these on a CloneSet's template so the stored template, the revision hash
//! computed from it and the pods created from it are those of Kubernetes' scheme defaults, with one deliberate
//! difference: a container (not an init container) without `imagePullPolicy` gets `Always` whatever its tag,
//! "for in-place update" (a new tag of a cached image must still be pulled). Kruise calls the Kubernetes
//! `SetDefaults_*` functions one by one; the list here is the one it calls, no more: e.g. no
//! `enableServiceLinks` (that is `SetDefaults_Pod`, which only runs on pods) and no requests copied from limits.
//! Only absent (or null) fields are filled, so applying the defaults twice changes nothing.
//!
//! Not reproduced: the `DefaultHostNetworkHostPortsInPodTemplates` gate (off by default in Kruise: hostPorts of
//! a hostNetwork template are left alone), `ImageVolume` pull policies (a Kubernetes alpha gate, off in the
//! Kubernetes Kruise builds against), and the rounding of resource quantities to milli-units (a value finer
//! than `1m` is kept as written).

use serde_json::{Map, Value, json};

/// `SetDefaults_Container`'s pull policy: `Always` for a `:latest` or untagged image, else `IfNotPresent`
/// (a digest without a tag counts as tagged: Kubernetes' `parsers.ParseImageName` gives it no `latest` tag).
pub fn tag_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

fn set(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

fn obj<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn each_obj<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().filter_map(Value::as_object_mut))
}

/// `SetDefaults_PodSpec` plus the per-field defaults Kruise's `SetDefaultPodSpec` calls.
pub fn pod_spec(spec: &mut Map<String, Value>) {
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "securityContext", json!({}));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "schedulerName", json!("default-scheduler"));
    volumes(spec);
    for c in each_obj(spec, "initContainers") {
        container(c, Kind::Init);
    }
    for c in each_obj(spec, "containers") {
        container(c, Kind::Regular);
    }
    for c in each_obj(spec, "ephemeralContainers") {
        container(c, Kind::Ephemeral);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Regular,
    Init,
    Ephemeral,
}

fn container(c: &mut Map<String, Value>, kind: Kind) {
    // Kruise: "For in-place update, we set default imagePullPolicy to Always" (regular containers only).
    if kind == Kind::Regular {
        set(c, "imagePullPolicy", json!("Always"));
    }
    // `SetDefaults_Container`: not called for ephemeral containers by Kruise.
    if kind != Kind::Ephemeral {
        let image = c
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        set(c, "imagePullPolicy", json!(tag_pull_policy(&image)));
        set(c, "terminationMessagePath", json!("/dev/termination-log"));
        set(c, "terminationMessagePolicy", json!("File"));
    }
    for p in each_obj(c, "ports") {
        set(p, "protocol", json!("TCP"));
    }
    for e in each_obj(c, "env") {
        if let Some(f) = obj(e, "valueFrom").and_then(|v| obj(v, "fieldRef")) {
            set(f, "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = obj(c, probe) {
            set(p, "timeoutSeconds", json!(1));
            set(p, "periodSeconds", json!(10));
            set(p, "successThreshold", json!(1));
            set(p, "failureThreshold", json!(3));
            if let Some(h) = obj(p, "httpGet") {
                http_get(h);
            }
        }
    }
    if let Some(lc) = obj(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = obj(lc, hook).and_then(|h| obj(h, "httpGet")) {
                http_get(h);
            }
        }
    }
}

/// `SetDefaults_HTTPGetAction`.
fn http_get(h: &mut Map<String, Value>) {
    set(h, "path", json!("/"));
    set(h, "scheme", json!("HTTP"));
}

/// The volume source keys of `core/v1.VolumeSource` (a volume naming none of them becomes an `emptyDir`).
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// Kruise `SetDefaultPodVolumes`: `SetDefaults_Volume` and the per-source defaults (modes 0644, hostPath type
/// `""`, fieldRef `v1`, token expiry one hour).
fn volumes(spec: &mut Map<String, Value>) {
    for v in each_obj(spec, "volumes") {
        if !VOLUME_SOURCES
            .iter()
            .any(|k| v.get(*k).is_some_and(|s| !s.is_null()))
        {
            v.insert("emptyDir".into(), json!({}));
        }
        if let Some(h) = obj(v, "hostPath") {
            set(h, "type", json!(""));
        }
        for src in ["secret", "configMap", "downwardAPI", "projected"] {
            if let Some(s) = obj(v, src) {
                set(s, "defaultMode", json!(420));
            }
        }
        if let Some(d) = obj(v, "downwardAPI") {
            field_refs(d);
        }
        if let Some(p) = obj(v, "projected") {
            for s in each_obj(p, "sources") {
                if let Some(d) = obj(s, "downwardAPI") {
                    field_refs(d);
                }
                if let Some(t) = obj(s, "serviceAccountToken") {
                    set(t, "expirationSeconds", json!(3600));
                }
            }
        }
    }
}

fn field_refs(downward: &mut Map<String, Value>) {
    for item in each_obj(downward, "items") {
        if let Some(f) = obj(item, "fieldRef") {
            set(f, "apiVersion", json!("v1"));
        }
    }
}
