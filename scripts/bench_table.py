#!/usr/bin/env python3
"""The side-by-side table of scripts/bench-vs-kruise, from its results file (label, size, key, value per line).

    bench_table.py RESULTS_TSV [KRUISE_HIGH_QPS]
"""

import json
import sys


def load(path):
    res = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, size, key, value = line.rstrip("\n").split("\t", 3)
            res.setdefault(int(size), {}).setdefault(label, {})[key] = value
    return res


def writes(w):
    """`3.00 (update pods/status 2.00, update pods 1.00)` from an audit_writes JSON."""
    if not w:
        return ""
    w = json.loads(w)
    pods = w["total"] / w["per_pod"] if w["per_pod"] else 0
    parts = [f"{k} {v / pods:.2f}" for k, v in w["by"].items() if pods and v / pods >= 0.005]
    return f"{w['per_pod']:.2f} ({', '.join(parts)})"


def conflicts(w, size):
    if not w:
        return ""
    n = json.loads(w)["conflicts"]
    return f"{n} ({n / size:.2f}/pod)"


def main():
    res = load(sys.argv[1])
    high = sys.argv[2] if len(sys.argv) > 2 else ""
    names = {"insitu": "insitu", "kruise": "Kruise (defaults: 30 QPS, burst 50)"}
    if high:
        names[f"kruise-qps{high}"] = f"Kruise (QPS {high}, burst {2 * int(high)})"
    for size, by in sorted(res.items()):
        cols = [label for label in names if label in by]
        ceiling = json.loads(by["ceiling"]["json"]) if "ceiling" in by else None
        head = [names[c] for c in cols] + (["apiserver ceiling"] if ceiling else [])
        print(f"\n{size} pods\n")
        print("| | " + " | ".join(head) + " |")
        print("|---" * (len(head) + 1) + "|")

        def row(title, f, ceil=""):
            cells = [f(by[c]) for c in cols] + ([ceil] if ceiling else [])
            print(f"| {title} | " + " | ".join(cells) + " |")

        def rate(key):
            return lambda r: f"{size / float(r[key]):.1f}" if key in r else ""

        row("scale-up 0 → N, wall s", lambda r: r.get("scale_s", ""))
        row("scale-up pods/s", rate("scale_s"))
        row("scale-up writes per pod", lambda r: writes(r.get("scale_writes")))
        row(
            "in-place rollout, wall s",
            lambda r: r.get("rollout_s", ""),
            f"{ceiling['seconds']:.1f}" if ceiling else "",
        )
        row("rollout pods/s", rate("rollout_s"), f"{ceiling['pods_per_s']:.1f}" if ceiling else "")
        row(
            "rollout writes per pod",
            lambda r: writes(r.get("rollout_writes")),
            f"{ceiling['writes'] / ceiling['pods']:.2f} (3 PUTs, {ceiling['concurrency']} pods in flight)"
            if ceiling
            else "",
        )
        row(
            "rollout 409 Conflicts",
            lambda r: conflicts(r.get("rollout_writes"), size),
            str(ceiling["conflicts"]) if ceiling else "",
        )
        row("controller VmRSS after the rollout, MiB (peak)", lambda r: f"{r.get('rss', '')} ({r.get('hwm', '')})")
        row("controller CPU s, scale-up + rollout", lambda r: r.get("cpu", ""))
        if "insitu" in by and "rollout_s" in by["insitu"]:
            ins = size / float(by["insitu"]["rollout_s"])
            notes = []
            for c in cols[1:]:
                if "rollout_s" in by[c]:
                    k = size / float(by[c]["rollout_s"])
                    notes.append(f"{ins / k:.1f}x {names[c]}")
            if ceiling:
                notes.append(f"{100 * ins / ceiling['pods_per_s']:.0f}% of the apiserver ceiling")
            print(f"\ninsitu's rollout: {'; '.join(notes)}")


if __name__ == "__main__":
    main()
