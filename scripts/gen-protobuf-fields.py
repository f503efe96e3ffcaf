#!/usr/bin/env python3
"""Generates crates/sim/src/apiserver/protobuf/gen_*.rs: one `msg!` table per k8s-pb message the embedded apiserver
decodes, joining k8s-pb's prost fields (Rust names, tags) with the Go API types' facts by tag number (JSON name,
pointer or not, omitempty, inline). Only facts are taken from the Go sources (names, tags, pointer-ness).

usage: gen-protobuf-fields.py K8S_PB_SRC KUBERNETES_API_CHECKOUT APIMACHINERY_CHECKOUT OUT_DIR
(e.g. ~/.cargo/registry/src/*/k8s-pb-0.9.0/src, checkouts of k8s.io/api and k8s.io/apimachinery,
crates/sim/src/apiserver/protobuf), then `cargo fmt --all`
"""
import os
import re
import sys

PB, API, MACH, OUT = sys.argv[1:5]

# package key -> (k8s-pb module file, Go types file, Rust path alias)
PACKAGES = {
    "core": ("api/core/v1/mod.rs", f"{API}/core/v1/types.go", "core"),
    "apps": ("api/apps/v1/mod.rs", f"{API}/apps/v1/types.go", "apps"),
    "coordination": ("api/coordination/v1/mod.rs", f"{API}/coordination/v1/types.go", "coordination"),
    "events": ("api/events/v1/mod.rs", f"{API}/events/v1/types.go", "events"),
    "meta": ("apimachinery/pkg/apis/meta/v1/mod.rs", f"{MACH}/pkg/apis/meta/v1/types.go", "meta"),
}
# Written by hand in json.rs (their JSON forms are not their messages' fields).
SPECIAL = {("meta", "Time"), ("meta", "MicroTime"), ("meta", "Duration"), ("meta", "FieldsV1"),
           ("resource", "Quantity"), ("intstr", "IntOrString"), ("runtime", "RawExtension")}
ROOTS = [("core", "Pod"), ("core", "Namespace"), ("core", "ConfigMap"), ("core", "Secret"), ("core", "Node"), ("core", "Event"),
         ("core", "PersistentVolumeClaim"), ("apps", "ControllerRevision"), ("coordination", "Lease"),
         ("events", "Event"), ("meta", "DeleteOptions")]


def pkg_of(path, here):
    for key, marker in [("meta", "meta::v1::"), ("resource", "api::resource::"), ("intstr", "intstr::"),
                        ("runtime", "runtime::"), ("core", "core::v1::"), ("apps", "apps::v1::")]:
        if marker in path:
            return key
    return here


def parse_rust(pkg, rel):
    text = open(os.path.join(PB, rel)).read()
    structs = {}
    for m in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
        fields = []
        body = re.sub(r"^\s*///.*$", "", m.group(2), flags=re.M)
        for f in re.finditer(r"#\[prost\(([^)]*)\)\]\s*pub (r#\w+|\w+):\s*(.*?),\s*(?=#\[prost|\Z)", body, re.S):
            attr, ident, ty = f.group(1), f.group(2), " ".join(f.group(3).split())
            tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
            refs = []
            if "message" in attr:
                paths = [t for t in re.findall(r"(?:\w+::)*[A-Z]\w*", ty)
                         if t.split("::")[-1] not in ("Option", "Vec", "String", "BTreeMap")]
                if not paths:
                    print("unparsed", pkg, ident, ty, file=sys.stderr); continue
                target = paths[-1]
                refs.append((pkg_of(target, pkg), target.split("::")[-1]))
            fields.append((ident, tag, refs))
        structs[m.group(1)] = fields
    return structs


def parse_go(path):
    text = open(path).read()
    out = {}
    for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", text, re.S | re.M):
        facts = {}
        for line in m.group(2).splitlines():
            g = re.match(r"^\t(\w+)?\s*(\S+)?\s*`(.*)`", line)
            if not g or "protobuf:" not in g.group(3):
                continue
            tags = g.group(3)
            proto = re.search(r'protobuf:"([^"]*)"', tags).group(1).split(",")
            js = re.search(r'json:"([^"]*)"', tags)
            js = js.group(1).split(",") if js else [""]
            gotype = g.group(2) if g.group(2) else g.group(1)
            embedded = g.group(2) is None or js[0] == ""
            facts[int(proto[1])] = {
                "json": js[0],
                "omitempty": "omitempty" in js[1:],
                "inline": embedded or "inline" in js[1:],
                "pointer": (gotype or "").startswith("*"),
            }
        out[m.group(1)] = facts
    return out


def camel(ident):
    parts = ident.removeprefix("r#").split("_")
    return parts[0] + "".join(p.title() for p in parts[1:])


def domain(pkg, name):
    """The generated file a message goes to (core/v1 is split along the domain to keep files small)."""
    if pkg != "core":
        return pkg
    if (("Volume" in name and not name.startswith(("VolumeMount", "VolumeDevice", "VolumeResource")))
            or "Projection" in name or name in ("KeyToPath", "DownwardAPIVolumeFile", "PersistentVolumeClaimTemplate")):
        return "core_volume"
    if name.startswith("Node") and not name.startswith(("NodeSelector", "NodeAffinity")) or name in (
            "ContainerImage", "AttachedVolume", "DaemonEndpoint", "ConfigMapNodeConfigSource", "Taint"):
        return "core_node"
    if (name.startswith(("Container", "EphemeralContainer", "Probe", "Lifecycle", "Env", "Resource", "VolumeMount",
                         "VolumeDevice")) or name.endswith(("Action", "KeySelector", "FieldSelector", "Profile"))
            or name in ("SecurityContext", "Capabilities", "HttpHeader", "ConfigMapEnvSource", "SecretEnvSource",
                        "SeLinuxOptions", "WindowsSecurityContextOptions", "LinuxContainerUser")):
        return "core_container"
    return "core_pod"


def main():
    rust = {k: parse_rust(k, v[0]) for k, v in PACKAGES.items()}
    go = {k: parse_go(v[1]) for k, v in PACKAGES.items()}
    seen, order, todo = set(), [], list(ROOTS)
    while todo:
        key = todo.pop(0)
        if key in seen or key in SPECIAL:
            continue
        seen.add(key)
        order.append(key)
        for _, _, refs in rust[key[0]][key[1]]:
            todo.extend(refs)
    tables = {}
    warnings = []
    for pkg, name in order:
        # k8s-pb spells initialisms as words (HttpGetAction for HTTPGetAction).
        gofacts = next((v for k, v in go[pkg].items() if k.lower() == name.lower()), {})
        if not gofacts:
            warnings.append(f"{pkg}.{name}: no Go type")
        rows = []
        for ident, tag, _ in rust[pkg][name]:
            fact = gofacts.get(tag)
            if fact is None:
                warnings.append(f"{pkg}.{name}.{ident} (tag {tag}): no Go field, JSON name guessed")
                fact = {"json": camel(ident), "omitempty": True, "inline": False, "pointer": False}
            flags = []
            if fact["inline"]:
                flags.append("inline")
            elif fact["pointer"] or not fact["omitempty"]:
                flags.append("keep")
            rows.append((ident, fact["json"], flags))
        tables.setdefault(domain(pkg, name), []).append((pkg, name, rows))
    for w in warnings:
        print("warning:", w, file=sys.stderr)
    for file, msgs in tables.items():
        pkg = msgs[0][0]
        lines = [f"//! Generated by scripts/gen-protobuf-fields.py: the JSON names and zero-value rules of the "
                 f"`{file}` messages", "//! (from the Go API types' `json`/`protobuf` tags, joined on the tag number).", "",
                 f"use super::json::{{{PACKAGES[pkg][2]}, msg}};", ""]
        for _, name, rows in msgs:
            lines.append(f"msg!({PACKAGES[pkg][2]}::{name} {{")
            for ident, js, flags in rows:
                lines.append(f"    {ident}: \"{js}\"{''.join(' ' + f for f in flags)},")
            lines.append("});")
        path = os.path.join(OUT, f"gen_{file}.rs")
        open(path, "w").write("\n".join(lines) + "\n")
        print(path, len(lines), "lines,", len(msgs), "messages")


main()
