#!/usr/bin/env python3
"""Writes per pod from a kube-apiserver audit log (JSON lines, Metadata level), for scripts/bench-*.

    bench_audit.py AUDIT_LOG FROM TO AGENT_RE PODS

Counts the ResponseComplete events received in [FROM, TO] (epoch seconds) from clients whose userAgent matches
AGENT_RE (a Python regex, searched), by `verb resource[/subresource]`, and the 409 Conflict answers among them.
Prints one JSON object: {"total": n, "per_pod": n/PODS, "conflicts": n, "by": {"update pods/status": n, ...},
"agents": [...]}.
"""

import json
import re
import sys
from datetime import datetime


def epoch(ts):
    # RFC 3339 with microseconds and a Z.
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    path, lo, hi, agent_re, pods = sys.argv[1:6]
    lo, hi, pods = float(lo), float(hi), max(int(pods), 1)
    agent = re.compile(agent_re)
    by, agents = {}, set()
    total = conflicts = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("stage") != "ResponseComplete":
                continue
            ua = ev.get("userAgent", "")
            if not agent.search(ua):
                continue
            t = epoch(ev["requestReceivedTimestamp"])
            if t < lo or t > hi:
                continue
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", "?")
            if ref.get("subresource"):
                res += "/" + ref["subresource"]
            key = f"{ev.get('verb')} {res}"
            by[key] = by.get(key, 0) + 1
            total += 1
            agents.add(ua)
            if (ev.get("responseStatus") or {}).get("code") == 409:
                conflicts += 1
    print(
        json.dumps(
            {
                "total": total,
                "per_pod": round(total / pods, 2),
                "conflicts": conflicts,
                "by": dict(sorted(by.items(), key=lambda kv: -kv[1])),
                "agents": sorted(agents),
            }
        )
    )


if __name__ == "__main__":
    main()
