//! deploy/agent/ as shipped (the chart renders the same objects: `e2e/run` compares them): the agent is not
//! privileged, mounts the runtime's socket and nothing else of the host, its probes reach the endpoints its
//! `--metrics-addr` serves, and its ServiceAccount is the one the admission policies match
//! (docs/install.md, "What the node agent may do").

use serde_json::Value;

fn objects(file: &str) -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/agent/");
    let text = std::fs::read_to_string(format!("{path}{file}")).expect("read deploy/agent");
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).expect("YAML"))
        .collect()
}

fn kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

#[test]
fn the_daemonset_is_unprivileged_and_mounts_only_the_runtime_socket() {
    let objs = objects("agent.yaml");
    let ds = kind(&objs, "DaemonSet");
    assert_eq!(ds.len(), 1);
    let spec = &ds[0]["spec"]["template"]["spec"];
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(spec[key].is_null() || spec[key] == false, "{key}: {}", spec[key]);
    }
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    assert_eq!(volumes[0]["hostPath"]["path"], "/run/containerd/containerd.sock");
    assert_eq!(volumes[0]["hostPath"]["type"], "Socket");
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(sc["capabilities"]["add"].is_null());

    // The probes on the port `--metrics-addr` listens on.
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"--metrics-addr=0.0.0.0:10221"), "{args:?}");
    assert_eq!(c["ports"][0]["name"], "metrics");
    assert_eq!(c["ports"][0]["containerPort"], 10221);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "metrics");
}

#[test]
fn the_policies_match_the_agents_service_account_and_deny() {
    let agent = objects("agent.yaml");
    let sa = kind(&agent, "ServiceAccount");
    let user = format!(
        "system:serviceaccount:{}:{}",
        sa[0]["metadata"]["namespace"].as_str().expect("namespace"),
        sa[0]["metadata"]["name"].as_str().expect("name")
    );
    let admission = objects("admission.yaml");
    let policies = kind(&admission, "ValidatingAdmissionPolicy");
    let bindings = kind(&admission, "ValidatingAdmissionPolicyBinding");
    assert_eq!(policies.len(), 2);
    for p in &policies {
        let name = &p["metadata"]["name"];
        assert_eq!(p["spec"]["failurePolicy"], "Fail", "{name}");
        let cond = p["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .expect("matchCondition");
        assert!(cond.contains(&format!("'{user}'")), "{name}: {cond}");
        let binding = bindings
            .iter()
            .find(|b| b["spec"]["policyName"] == *name)
            .unwrap_or_else(|| panic!("no binding for {name}"));
        assert_eq!(binding["spec"]["validationActions"], serde_json::json!(["Deny"]));
        // Every refusal is a 403 with a message.
        for v in p["spec"]["validations"].as_array().expect("validations") {
            assert_eq!(v["reason"], "Forbidden", "{name}: {v}");
            assert!(
                !v["messageExpression"].is_null() || !v["message"].is_null(),
                "{name}: {v}"
            );
        }
    }
    let kustomization = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/agent/kustomization.yaml"
    ))
    .expect("kustomization");
    assert!(kustomization.contains("- admission.yaml"), "{kustomization}");
}
