//! `PodMutation`: the change a plan makes to a freshly read pod (labels, annotations, images, finalizers, resources).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use serde::Serialize;

/// A change to apply to a freshly read pod. Applying it twice is harmless (idempotent).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMutation {
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// Annotations to set (`Some`) or remove (`None`).
    pub annotations: BTreeMap<String, Option<String>>,
    /// container name → new image.
    pub container_images: BTreeMap<String, String>,
    /// Finalizers to add (`true`) or remove (`false`): template finalizer changes applied in place.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub finalizers: BTreeMap<String, bool>,
    /// container name → cpu/memory to resize to. The executor sends them through `pods/resize` (servers
    /// ≥ 1.32, Kruise `ShouldUpdateResourceByResize`) before the pod write, or in the pod write before 1.32.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: BTreeMap<String, ResourceRequirements>,
}

impl PodMutation {
    /// Applies the mutation to a pod in memory.
    pub fn apply(&self, pod: &mut Pod) {
        let meta = &mut pod.metadata;
        for (k, v) in &self.labels {
            let labels = meta.labels.get_or_insert_with(Default::default);
            match v {
                Some(v) => labels.insert(k.clone(), v.clone()),
                None => labels.remove(k),
            };
        }
        for (k, v) in &self.annotations {
            let ann = meta.annotations.get_or_insert_with(Default::default);
            match v {
                Some(v) => ann.insert(k.clone(), v.clone()),
                None => ann.remove(k),
            };
        }
        for (f, add) in &self.finalizers {
            let fins = meta.finalizers.get_or_insert_with(Default::default);
            let present = fins.iter().any(|x| x == f);
            if *add && !present {
                fins.push(f.clone());
            } else if !*add && present {
                fins.retain(|x| x != f);
            }
        }
        if let Some(spec) = pod.spec.as_mut() {
            for c in &mut spec.containers {
                if let Some(img) = self.container_images.get(&c.name) {
                    c.image = Some(img.clone());
                }
            }
        }
        crate::inplaceupdate::vertical::apply(pod, &self.container_resources);
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.annotations.is_empty()
            && self.container_images.is_empty()
            && self.finalizers.is_empty()
            && self.container_resources.is_empty()
    }
}
