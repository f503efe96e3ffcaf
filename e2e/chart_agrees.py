#!/usr/bin/env python3
"""Whether two multi-document YAML files hold the same Kubernetes objects (charts/insitu rendered vs deploy/).

    chart_agrees.py RENDERED.yaml REFERENCE.yaml

Objects are matched by (apiVersion, kind, namespace, name) and compared as parsed data (so comments, key
order, quoting and document order do not matter). Prints each difference with its path; exit 0 iff none.
"""
import sys

import yaml


def objects(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    out = {}
    for d in docs:
        meta = d.get("metadata", {})
        key = (d.get("apiVersion"), d.get("kind"), meta.get("namespace", ""), meta.get("name"))
        if key in out:
            raise SystemExit(f"{path}: {key} appears twice")
        out[key] = d
    return out


def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: only in the reference: {b[k]!r}")
            elif k not in b:
                out.append(f"{path}.{k}: only in the chart: {a[k]!r}")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif isinstance(a, list) and isinstance(b, list):
        extra = [x for x in a if x not in b]
        missing = [y for y in b if y not in a]
        out.append(f"{path}: {len(a)} items in the chart, {len(b)} in the reference; only in the chart: {extra!r}; "
                   f"only in the reference: {missing!r}")
    elif a != b:
        out.append(f"{path}: chart {a!r} != reference {b!r}")


def main():
    chart, ref = objects(sys.argv[1]), objects(sys.argv[2])
    problems = []
    for key in sorted(set(chart) | set(ref), key=str):
        name = "/".join(str(k) for k in key if k)
        if key not in chart:
            problems.append(f"{name}: missing from the chart")
        elif key not in ref:
            problems.append(f"{name}: not in the reference")
        else:
            diff(chart[key], ref[key], name, problems)
    for p in problems:
        print(p)
    print(f"{len(chart)} objects in the chart, {len(ref)} in the reference, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
