#!/usr/bin/env python3
"""Watch a CloneSet's pods through a rollout and report what a user would check (e2e/in-cluster/run).

    watch_pods.py KUBECTL KUBECONFIG NAMESPACE SELECTOR OUT.json

Runs `kubectl get pods -w -o json --output-watch-events` and, on every event, records per pod its UIDs and IPs,
the highest restart count seen, whether it was ever Ready while its InPlaceUpdateReady condition was False, and
the number of pods not Ready at that moment (the most seen is the rollout's max unavailable). Writes OUT.json
when it receives SIGTERM (or the watch ends): {"pods": {name: {...}}, "max_unavailable": n, "deleted": [...]}.
"""

import json
import signal
import subprocess
import sys


def cond(pod, kind):
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status")
    return None


def main():
    kubectl, kubeconfig, ns, selector, out = sys.argv[1:6]
    proc = subprocess.Popen(
        [kubectl, "--kubeconfig", kubeconfig, "-n", ns, "get", "pods", "-l", selector, "-w", "-o", "json",
         "--output-watch-events"],
        stdout=subprocess.PIPE, text=True)
    pods, state, deleted = {}, {}, []
    summary = {"max_unavailable": 0, "ready_while_not_inplace_ready": []}

    def write(*_):
        proc.terminate()
        summary["pods"] = pods
        summary["deleted"] = deleted
        with open(out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, write)
    dec = json.JSONDecoder()
    buf = ""
    for line in proc.stdout:
        buf += line
        while True:
            buf = buf.lstrip()
            try:
                ev, end = dec.raw_decode(buf)
            except ValueError:
                break
            buf = buf[end:]
            pod = ev.get("object", {})
            name = pod.get("metadata", {}).get("name")
            if not name:
                continue
            if ev.get("type") == "DELETED":
                deleted.append(name)
                state.pop(name, None)
                continue
            p = pods.setdefault(name, {"uids": [], "ips": [], "restarts": 0})
            uid = pod["metadata"].get("uid")
            if uid not in p["uids"]:
                p["uids"].append(uid)
            ip = pod.get("status", {}).get("podIP")
            if ip and ip not in p["ips"]:
                p["ips"].append(ip)
            restarts = sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses") or [])
            p["restarts"] = max(p["restarts"], restarts)
            ready = cond(pod, "Ready") == "True"
            if ready and cond(pod, "InPlaceUpdateReady") == "False":
                summary["ready_while_not_inplace_ready"].append(name)
            state[name] = ready
            summary["max_unavailable"] = max(summary["max_unavailable"], sum(1 for r in state.values() if not r))
    write()


if __name__ == "__main__":
    main()
