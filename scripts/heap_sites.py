#!/usr/bin/env python3
"""Where a live heap is, from heaptrack's flame-graph stacks of leaked bytes (`heaptrack_print
--flamegraph-cost-type leaked -F FILE`): bytes by the innermost frame of this project's or kube's code, and by
the innermost frame of any crate, largest first.

    heap_sites.py STACKS [TOP]
"""

import re
import sys
from collections import Counter

OURS = re.compile(r"^(insitu\w*|kube_runtime|kube_client|kube_core)::")


def crate_fn(frame):
    # `<T as Trait>::f` and generics shortened to the path head.
    f = re.sub(r"<[^<>]*>", "", frame)
    return f.strip()


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ours, total = Counter(), 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            try:
                n = int(n)
            except ValueError:
                continue
            total += n
            frames = stack.split(";")
            site = next((crate_fn(fr) for fr in reversed(frames) if OURS.match(crate_fn(fr))), None)
            ours[site or "(no insitu/kube frame: runtime, TLS, std)"] += n
    print(f"live heap: {total / 2**20:.1f} MiB")
    for site, n in ours.most_common(top):
        print(f"  {n / 2**20:7.1f} MiB  {100 * n / max(total, 1):4.1f}%  {site}")


if __name__ == "__main__":
    main()
