//! The ConfigMaps a node's kubelet sees and the env references that need them (`CreateContainerConfigError`).

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Container;

/// The ConfigMaps the node's kubelet sees (its ConfigMap manager), for container env `configMapKeyRef` /
/// `envFrom.configMapRef`: `(namespace, name)` → keys.
#[derive(Clone, Debug, Default)]
pub struct ConfigMaps {
    pub(super) maps: HashMap<(String, String), BTreeSet<String>>,
}

impl ConfigMaps {
    /// Records a ConfigMap's keys (an add or an update).
    pub fn set(&mut self, namespace: &str, name: &str, keys: BTreeSet<String>) {
        self.maps.insert((namespace.to_string(), name.to_string()), keys);
    }

    /// Forgets a deleted ConfigMap.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        self.maps.remove(&(namespace.to_string(), name.to_string()));
    }

    /// kubelet `makeEnvironmentVariables`: the error it reports (as `CreateContainerConfigError`) for the
    /// first reference that does not resolve.
    pub(super) fn check(&self, namespace: &str, refs: &[CmRef]) -> Result<(), String> {
        for r in refs {
            let Some(keys) = self.maps.get(&(namespace.to_string(), r.name.clone())) else {
                return Err(format!("configmap \"{}\" not found", r.name));
            };
            if let Some(k) = &r.key
                && !keys.contains(k)
            {
                return Err(format!(
                    "couldn't find key {k} in ConfigMap {namespace}/{}",
                    r.name
                ));
            }
        }
        Ok(())
    }
}

/// A required ConfigMap reference of a container's env (`key: None` for `envFrom`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CmRef {
    pub(super) name: String,
    pub(super) key: Option<String>,
}

pub(super) fn cm_refs(c: &Container) -> Vec<CmRef> {
    let mut out = Vec::new();
    for e in c.env.iter().flatten() {
        if let Some(r) = e.value_from.as_ref().and_then(|v| v.config_map_key_ref.as_ref())
            && r.optional != Some(true)
        {
            out.push(CmRef {
                name: r.name.clone(),
                key: Some(r.key.clone()),
            });
        }
    }
    for f in c.env_from.iter().flatten() {
        if let Some(r) = &f.config_map_ref
            && r.optional != Some(true)
        {
            out.push(CmRef {
                name: r.name.clone(),
                key: None,
            });
        }
    }
    out
}
