//! The served resource types: names, scope, subresources, selectable fields and patch support.

use serde_json::Value;

/// Static description of one served resource.
#[derive(Debug)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    /// Plural name, as in the URL.
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources served (`status`, `scale`, `binding`, `resize`).
    pub subresources: &'static [&'static str],
    /// Strategic merge patch accepted (built-in kinds only).
    pub smp: bool,
    /// `metadata.generation` maintained (1 on create, +1 on spec change).
    pub generation: bool,
    /// PUT may create a missing object.
    pub create_on_update: bool,
    /// DELETE answers with the object instead of a `Status`.
    pub return_deleted: bool,
    /// Selectable fields besides `metadata.name` / `metadata.namespace`.
    pub fields: &'static [&'static str],
}

impl ResourceType {
    /// The store key (`<group>/<resource>`).
    pub fn key(&self) -> String {
        if self.is_new_events() {
            // events.k8s.io/v1 is a view of the core/v1 Event storage.
            return "/events".into();
        }
        format!("{}/{}", self.group, self.resource)
    }

    /// core/v1 Secrets.
    pub fn is_secret(&self) -> bool {
        self.group.is_empty() && self.resource == "secrets"
    }

    /// `events.k8s.io/v1` Events (stored as core/v1 Events).
    pub fn is_new_events(&self) -> bool {
        self.group == "events.k8s.io"
    }

    /// `v1` or `<group>/<version>`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `clonesets.apps.kruise.io`: how error messages name the resource.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// `Pod` or `CloneSet.apps.kruise.io`: how validation errors name the kind.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub fn has_sub(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    /// Whether `label` may appear in a field selector.
    pub fn field_supported(&self, label: &str) -> bool {
        label == "metadata.name" || label == "metadata.namespace" || self.fields.contains(&label)
    }

    /// Whether this is the CloneSet custom resource.
    pub fn is_cloneset(&self) -> bool {
        self.group == "apps.kruise.io" && self.resource == "clonesets"
    }

    /// Whether this is Kruise's Advanced StatefulSet custom resource (`statefulsets.apps.kruise.io`).
    pub fn is_advanced_statefulset(&self) -> bool {
        self.group == "apps.kruise.io" && self.resource == "statefulsets"
    }

    /// Whether this is one of the Kruise workloads served from insitu's CRDs (CloneSet, Advanced StatefulSet):
    /// stored in v1beta1, converted with `insitu_api`, pruned and defaulted by the CRD's structural schema,
    /// admitted by Kruise's defaults and validation.
    pub fn is_kruise_workload(&self) -> bool {
        self.is_cloneset() || self.is_advanced_statefulset()
    }

    /// Whether this is Kruise's ImagePullJob custom resource.
    pub fn is_image_pull_job(&self) -> bool {
        self.group == "apps.kruise.io" && self.resource == "imagepulljobs"
    }

    pub fn is_pod(&self) -> bool {
        self.group.is_empty() && self.resource == "pods"
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const NEW_EVENT_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Verbs served on every resource.
pub fn verbs() -> &'static [&'static str] {
    ALL_VERBS
}

/// Every served resource.
/// The CloneSet resource as served in one version (every version is a view of the same storage).
const fn cloneset(version: &'static str) -> ResourceType {
    ResourceType {
        group: "apps.kruise.io",
        version,
        resource: "clonesets",
        singular: "cloneset",
        kind: "CloneSet",
        namespaced: true,
        short_names: &["clone"],
        categories: &["all"],
        subresources: &["status", "scale"],
        smp: false,
        generation: true,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    }
}

/// Kruise's Advanced StatefulSet as `insitu crd` serves it (`insitu_api::statefulset::crd`, Kruise's names): every
/// version a view of the same v1beta1 storage; short names `sts` and `asts`, no categories (Kruise's CRD has
/// none), status and scale subresources.
const fn advanced_statefulset(version: &'static str) -> ResourceType {
    ResourceType {
        group: "apps.kruise.io",
        version,
        resource: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        namespaced: true,
        short_names: &["sts", "asts"],
        categories: &[],
        subresources: &["status", "scale"],
        smp: false,
        generation: true,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    }
}

/// Kruise's ImagePullJob as its CRD serves it (`config/crd/bases/apps.kruise.io_imagepulljobs.yaml`): v1beta1
/// (storage) and v1alpha1, the same schema, no conversion webhook (strategy `None`: only `apiVersion` differs),
/// namespaced, a status subresource, no short names or categories.
const fn image_pull_job(version: &'static str) -> ResourceType {
    ResourceType {
        group: "apps.kruise.io",
        version,
        resource: "imagepulljobs",
        singular: "imagepulljob",
        kind: "ImagePullJob",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &["status"],
        smp: false,
        generation: true,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    }
}

/// `admissionregistration.k8s.io/v1` webhook configurations (`webhookconfigs`): cluster-scoped, in the
/// `api-extensions` category, generation kept (`PrepareForCreate`/`PrepareForUpdate` of their strategies),
/// DELETE answered with a Status (the generic registry's default).
const fn webhook_configuration(
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
) -> ResourceType {
    ResourceType {
        group: "admissionregistration.k8s.io",
        version: "v1",
        resource,
        singular,
        kind,
        namespaced: false,
        short_names: &[],
        categories: &["api-extensions"],
        subresources: &[],
        smp: true,
        generation: true,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    }
}

pub static RESOURCES: &[ResourceType] = &[
    ResourceType {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &["status", "binding", "resize"],
        smp: true,
        generation: true,
        create_on_update: false,
        return_deleted: true,
        fields: POD_FIELDS,
    },
    ResourceType {
        group: "",
        version: "v1",
        resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        subresources: &["status"],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: true,
        fields: &["status.phase"],
    },
    ResourceType {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        subresources: &["status"],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: true,
        fields: &["spec.unschedulable"],
    },
    ResourceType {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: true,
        return_deleted: false,
        fields: EVENT_FIELDS,
    },
    ResourceType {
        group: "",
        version: "v1",
        resource: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        subresources: &["status"],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: true,
        fields: &[],
    },
    ResourceType {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: true,
        return_deleted: false,
        fields: NEW_EVENT_FIELDS,
    },
    ResourceType {
        group: "apps",
        version: "v1",
        resource: "controllerrevisions",
        singular: "controllerrevision",
        kind: "ControllerRevision",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    },
    // CloneSets: v1beta1 first (the preferred and storage version, as in Kruise master), v1alpha1 a converted
    // view of the same storage.
    cloneset("v1beta1"),
    cloneset("v1alpha1"),
    // Advanced StatefulSets, likewise (no controller acts on them yet).
    advanced_statefulset("v1beta1"),
    advanced_statefulset("v1alpha1"),
    // Container launch-priority barriers (`<pod>-barrier`, owned by their pod).
    ResourceType {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    },
    // Secrets (`kubectl create secret`); the sim's components read none.
    ResourceType {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: false,
        fields: &["type"],
    },
    ResourceType {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        smp: true,
        generation: false,
        create_on_update: false,
        return_deleted: false,
        fields: &[],
    },
    ResourceType {
        group: "apiextensions.k8s.io",
        version: "v1",
        resource: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        subresources: &["status"],
        smp: false,
        generation: true,
        create_on_update: false,
        return_deleted: true,
        fields: &[],
    },
    // Kruise's ImagePullJobs (pre-download for in-place updates): created by the CloneSet controller, executed by
    // the simulated nodes (`kubelet::pulljob`).
    image_pull_job("v1beta1"),
    image_pull_job("v1alpha1"),
    webhook_configuration(
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
    ),
    webhook_configuration(
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
    ),
];

/// Looks a resource up by group, version and plural name.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.resource == resource)
}

/// The field-index function for a resource key.
pub fn indexer_for(rt: &ResourceType) -> crate::store::FieldIndexer {
    match (rt.group, rt.resource) {
        ("", "pods") => index_pod,
        ("", "events") => index_event,
        ("events.k8s.io", _) => index_event,
        ("", "nodes") => index_node,
        ("", "namespaces") => index_namespace,
        ("", "secrets") => index_secret,
        _ => index_none,
    }
}

fn text(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn index_none(_: &Value) -> Vec<(&'static str, String)> {
    Vec::new()
}

fn index_pod(v: &Value) -> Vec<(&'static str, String)> {
    let host_network = v
        .pointer("/spec/hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    vec![
        ("spec.nodeName", text(v, "/spec/nodeName")),
        ("spec.restartPolicy", text(v, "/spec/restartPolicy")),
        ("spec.schedulerName", text(v, "/spec/schedulerName")),
        ("spec.serviceAccountName", text(v, "/spec/serviceAccountName")),
        ("spec.hostNetwork", host_network.to_string()),
        ("status.phase", text(v, "/status/phase")),
        ("status.podIP", text(v, "/status/podIP")),
        ("status.nominatedNodeName", text(v, "/status/nominatedNodeName")),
    ]
}

fn index_event(v: &Value) -> Vec<(&'static str, String)> {
    vec![
        ("involvedObject.kind", text(v, "/involvedObject/kind")),
        ("involvedObject.namespace", text(v, "/involvedObject/namespace")),
        ("involvedObject.name", text(v, "/involvedObject/name")),
        ("involvedObject.uid", text(v, "/involvedObject/uid")),
        ("involvedObject.apiVersion", text(v, "/involvedObject/apiVersion")),
        (
            "involvedObject.resourceVersion",
            text(v, "/involvedObject/resourceVersion"),
        ),
        ("involvedObject.fieldPath", text(v, "/involvedObject/fieldPath")),
        ("reason", text(v, "/reason")),
        ("reportingComponent", text(v, "/reportingComponent")),
        ("source", text(v, "/source/component")),
        ("type", text(v, "/type")),
    ]
}

fn index_node(v: &Value) -> Vec<(&'static str, String)> {
    let unsched = v
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    vec![("spec.unschedulable", unsched.to_string())]
}

fn index_namespace(v: &Value) -> Vec<(&'static str, String)> {
    vec![("status.phase", text(v, "/status/phase"))]
}

/// `secret.SelectableFields`: `type` (what `kubectl get secrets --field-selector type=…` uses).
fn index_secret(v: &Value) -> Vec<(&'static str, String)> {
    vec![("type", text(v, "/type"))]
}

#[cfg(test)]
mod tests {
    use super::find;

    /// The handlers look these two up by name on every namespace and CRD request and treat a miss as impossible.
    #[test]
    fn the_handlers_fixed_lookups_are_in_the_table() {
        assert_eq!(find("", "v1", "namespaces").map(|r| r.kind), Some("Namespace"));
        assert_eq!(
            find("apiextensions.k8s.io", "v1", "customresourcedefinitions").map(|r| r.kind),
            Some("CustomResourceDefinition")
        );
    }
}
