//! Env-from-metadata and `apps.kruise.io/runtime-containers-meta` (Kruise `pkg/util/containermeta`, `apis/apps/pub`).
//!
//! The controller (completion check) and the node agent (kruise-daemon's role) must compute the same hashes,
//! so both live here. Hashes are byte-for-byte Kruise's: FNV-32a over `hashutil.DeepHashObject` of the JSON
//! bytes, i.e. over go-spew's `%#v` rendering of a `[]uint8` (`([]uint8)[123 34 …]`).

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

/// Pod annotation written by the node agent (kruise-daemon) through `pods/status`.
pub const RUNTIME_CONTAINERS_META_ANNOTATION: &str = "apps.kruise.io/runtime-containers-meta";

/// Env names Kruise leaves out of the env-from-metadata hash (SidecarSet bookkeeping).
const EXCLUDED_ENVS: [&str; 2] = ["SIDECARSET_VERSION", "SIDECARSET_VERSION_ALT"];

/// `RuntimeContainerMetaSet`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeContainerMetaSet {
    pub containers: Vec<RuntimeContainerMeta>,
}

/// `RuntimeContainerMeta` (field order = Go struct order).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerMeta {
    pub name: String,
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub restart_count: i32,
    pub hashes: RuntimeContainerHashes,
}

/// `RuntimeContainerHashes`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerHashes {
    /// kubelet's `HashContainer` of the running container.
    pub plain_hash: u64,
    /// Hash of the env-from-metadata values the running container started with.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extracted_env_from_metadata_hash: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl RuntimeContainerMetaSet {
    /// Parses the annotation of a pod; `Ok(None)` when absent.
    pub fn of(pod: &Pod) -> Result<Option<Self>, String> {
        let Some(v) = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RUNTIME_CONTAINERS_META_ANNOTATION))
        else {
            return Ok(None);
        };
        serde_json::from_str(v)
            .map(Some)
            .map_err(|e| format!("unreadable {RUNTIME_CONTAINERS_META_ANNOTATION}: {e}"))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Which metadata map a downward-API env reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetaKind {
    Labels,
    Annotations,
}

/// k8s `fieldpath.SplitMaybeSubscriptedPath` for `metadata.labels['k']` / `metadata.annotations['k']`.
pub fn split_meta_field_path(path: &str) -> Option<(MetaKind, &str)> {
    let (kind, rest) = if let Some(r) = path.strip_prefix("metadata.labels") {
        (MetaKind::Labels, r)
    } else if let Some(r) = path.strip_prefix("metadata.annotations") {
        (MetaKind::Annotations, r)
    } else {
        return None;
    };
    let key = rest.strip_prefix("['")?.strip_suffix("']")?;
    Some((kind, key))
}

/// The container's env vars that read a pod label/annotation through the downward API (Kruise's filter:
/// no literal value, a `fieldRef`, not a SidecarSet env): `(env name, kind, key)`.
pub fn env_from_metadata(c: &Container) -> impl Iterator<Item = (&str, MetaKind, &str)> {
    c.env.iter().flatten().filter_map(|e| {
        if e.value.as_deref().is_some_and(|v| !v.is_empty()) || EXCLUDED_ENVS.contains(&e.name.as_str()) {
            return None;
        }
        let path = &e.value_from.as_ref()?.field_ref.as_ref()?.field_path;
        let (kind, key) = split_meta_field_path(path)?;
        Some((e.name.as_str(), kind, key))
    })
}

/// Kruise `IsContainerReferenceToMeta`.
pub fn references(c: &Container, kind: MetaKind, key: &str) -> bool {
    env_from_metadata(c).any(|(_, k, name)| k == kind && name == key)
}

/// The env-from-metadata values a container gets from `labels`/`annotations`, sorted by env name
/// (Kruise `GetExpectHash`'s list before hashing).
pub fn env_values(
    c: &Container,
    labels: Option<&std::collections::BTreeMap<String, String>>,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env_from_metadata(c)
        .map(|(name, kind, key)| {
            let map = match kind {
                MetaKind::Labels => labels,
                MetaKind::Annotations => annotations,
            };
            let v = map.and_then(|m| m.get(key)).cloned().unwrap_or_default();
            (name.to_string(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Kruise `hashEnvs` over `[{name, value}]` (value omitted when empty, as Go's `omitempty`).
pub fn hash_envs(envs: &[(String, String)]) -> u64 {
    let mut json = String::from("[");
    if envs.is_empty() {
        // Go marshals a nil slice as `null`.
        json = "null".into();
    } else {
        for (i, (n, v)) in envs.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str("{\"name\":");
            go_string(n, &mut json);
            if !v.is_empty() {
                json.push_str(",\"value\":");
                go_string(v, &mut json);
            }
            json.push('}');
        }
        json.push(']');
    }
    deep_hash_bytes(json.as_bytes())
}

/// Kruise `GetExpectHash`: the hash of the env-from-metadata values the pod's current metadata gives `c`.
pub fn expected_env_hash(c: &Container, pod: &Pod) -> u64 {
    let m = &pod.metadata;
    hash_envs(&env_values(c, m.labels.as_ref(), m.annotations.as_ref()))
}

/// kubelet `HashContainer` (1.31+: the JSON of `{"image","name"}` only).
pub fn plain_hash(name: &str, image: &str) -> u64 {
    let mut json = String::from("{\"image\":");
    go_string(image, &mut json);
    json.push_str(",\"name\":");
    go_string(name, &mut json);
    json.push('}');
    deep_hash_bytes(json.as_bytes())
}

/// FNV-32a of go-spew's `%#v` of a byte slice (`hashutil.DeepHashObject(hash, jsonBytes)`).
fn deep_hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |b: u8| {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    };
    for &b in b"([]uint8)[" {
        feed(b);
    }
    for (i, &b) in bytes.iter().enumerate() {
        if i > 0 {
            feed(b' ');
        }
        for d in b.to_string().bytes() {
            feed(d);
        }
    }
    feed(b']');
    u64::from(h)
}

/// Go `encoding/json` string encoding (HTML-safe: `<`, `>`, `&`, U+2028/9 escaped).
fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", ch as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    fn env_ref(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.into(),
                    api_version: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hashes_match_kruise_go() {
        // Computed with Go: fnv32a over spew.Sprintf("%#v", json.Marshal([]EnvVar{{"TEST_ENV","bar"}})).
        assert_eq!(hash_envs(&[("TEST_ENV".into(), "bar".into())]), 3_944_769_931);
        assert_eq!(
            hash_envs(&[("A".into(), String::new()), ("B".into(), "v<&>".into())]),
            387_859_210
        );
        assert_eq!(hash_envs(&[]), 86_995_377);
        assert_eq!(plain_hash("nginx", "nginx:1.20.0"), 2_035_850_303);
    }

    #[test]
    fn field_paths() {
        assert_eq!(
            split_meta_field_path("metadata.labels['test-env']"),
            Some((MetaKind::Labels, "test-env"))
        );
        assert_eq!(
            split_meta_field_path("metadata.annotations['a/b']"),
            Some((MetaKind::Annotations, "a/b"))
        );
        assert_eq!(split_meta_field_path("metadata.name"), None);
        assert_eq!(split_meta_field_path("metadata.labels"), None);
    }

    #[test]
    fn env_selection_and_values() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                env_ref("B", "metadata.labels['k']"),
                env_ref("A", "metadata.annotations['x']"),
                env_ref("SIDECARSET_VERSION", "metadata.labels['k']"),
                env_ref("N", "metadata.name"),
                EnvVar {
                    name: "P".into(),
                    value: Some("1".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        assert!(references(&c, MetaKind::Labels, "k"));
        assert!(!references(&c, MetaKind::Labels, "x"));
        let labels = [("k".to_string(), "v".to_string())].into_iter().collect();
        let vals = env_values(&c, Some(&labels), None);
        assert_eq!(
            vals,
            vec![
                ("A".to_string(), String::new()),
                ("B".to_string(), "v".to_string())
            ]
        );
        assert_ne!(hash_envs(&vals), hash_envs(&[]));
    }

    #[test]
    fn meta_json_shape() {
        let s = RuntimeContainerMetaSet {
            containers: vec![RuntimeContainerMeta {
                name: "c".into(),
                container_id: "containerd://1".into(),
                restart_count: 1,
                hashes: RuntimeContainerHashes {
                    plain_hash: 7,
                    extracted_env_from_metadata_hash: 0,
                },
            }],
        };
        assert_eq!(
            s.to_json(),
            r#"{"containers":[{"name":"c","containerID":"containerd://1","restartCount":1,"hashes":{"plainHash":7}}]}"#
        );
    }
}
