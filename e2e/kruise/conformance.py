#!/usr/bin/env python3
"""Kruise conformance runner: selects the CloneSet specs of Kruise's own e2e suite, runs each in its own process
(several at once, each with a hard timeout), and compares the outcomes with e2e/kruise/expected.tsv.

    conformance.py list   --bin B [--filter RE]                       # the selection, one spec a line
    conformance.py run    --bin B --work DIR --kubeconfig K [--filter RE] [--jobs N] [--timeout S] [--update]

Called by e2e/kruise/run, which sets up the cluster; see e2e/README.md ("Kruise conformance").

The selection (80 specs at Kruise 07169cf), by the file and text of each spec's outermost container:
  v1alpha1  Describe "CloneSet"           in test/e2e/apps/v1alpha1/cloneset.go
  v1beta1   Describe "CloneSet"           in test/e2e/apps/v1beta1/cloneset.go
  priority  Describe "ContainerPriority"  in test/e2e/apps/v1alpha1/containerlaunchpriority.go, "... created by CloneSet"
  vpa       Describe "InplaceVPA"         in test/e2e/apps/v1alpha1/inplace_vpa.go, Contexts "CloneSet ..."

A spec is named by its group and its full Ginkgo text (containers + It, space-joined); the two CloneSet suites have
identical texts, so each run focuses on the anchored full text (Ginkgo v2 matches `-ginkgo.focus` against "suite
description + space + text") and on the group's file (`-ginkgo.focus-file`).

expected.tsv: `group<TAB>spec<TAB>pass`, `group<TAB>spec<TAB>fail<TAB>not-yet: <what insitu lacks>` or
`... fail<TAB>outside: <why no CloneSet controller passes it here>`, or `... flaky<TAB><why>` (either outcome
accepted). Lines starting with `#` are comments. The run fails on any difference.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

SUITE = "Kruise e2e suite"
GROUPS = [
    # (group, label in the summary, file of the outermost container, its text, predicate on the rest of the text)
    ("v1alpha1", "v1alpha1 CloneSet", "apps/v1alpha1/cloneset.go", "CloneSet", lambda texts: True),
    ("v1beta1", "v1beta1 CloneSet", "apps/v1beta1/cloneset.go", "CloneSet", lambda texts: True),
    (
        "priority",
        "container priority",
        "apps/v1alpha1/containerlaunchpriority.go",
        "ContainerPriority",
        lambda texts: texts[-1].endswith("created by CloneSet"),
    ),
    (
        "vpa",
        "in-place VPA",
        "apps/v1alpha1/inplace_vpa.go",
        "InplaceVPA",
        lambda texts: len(texts) > 2 and texts[1].startswith("CloneSet"),
    ),
]
OUTCOMES = ("pass", "fail", "flaky")


def die(msg):
    print(f"kruise conformance: {msg}", file=sys.stderr)
    sys.exit(2)


def slug(group, text):
    return f"{group}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


# --- listing ------------------------------------------------------------------------------------------------------
def spec_reports(report_file):
    with open(report_file) as f:
        suites = json.load(f)
    for suite in suites:
        for r in suite.get("SpecReports") or []:
            if r.get("LeafNodeType") == "It":
                yield r


def list_specs(binary, work):
    """Dry-runs the whole suite (no cluster needed) and returns [(group, text, file)] of the selection."""
    os.makedirs(work, exist_ok=True)
    report = os.path.join(work, "dry-run.json")
    out = subprocess.run(
        [binary, "-ginkgo.dry-run", "-ginkgo.no-color", f"-ginkgo.json-report={report}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBECONFIG": os.environ.get("KUBECONFIG", "/dev/null")},
    )
    if not os.path.exists(report):
        die(f"the dry run of {binary} wrote no report (exit {out.returncode}):\n{out.stdout[-3000:]}")
    specs = []
    for r in spec_reports(report):
        texts = list(r.get("ContainerHierarchyTexts") or []) + [r.get("LeafNodeText", "")]
        locs = r.get("ContainerHierarchyLocations") or [r.get("LeafNodeLocation", {})]
        outer = locs[0].get("FileName", "")
        for group, _label, file, top, pred in GROUPS:
            if outer.endswith(file) and texts[0] == top and pred(texts):
                specs.append((group, " ".join(t for t in texts if t), file))
                break
    seen = set()
    for g, t, _ in specs:
        if (g, t) in seen:
            die(f"two specs named [{g}] {t!r}: cannot focus one of them")
        seen.add((g, t))
    return specs


# --- expected.tsv -------------------------------------------------------------------------------------------------
def read_expected(path):
    """{(group, text): (outcome, reason)} and the file's comment header, in order."""
    exp, header = {}, []
    if not os.path.exists(path):
        return exp, header
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if line.startswith("#"):
                if not exp:
                    header.append(line)
                continue
            cols = line.split("\t")
            if len(cols) < 3 or cols[2] not in OUTCOMES:
                die(f"{path}:{n}: want group<TAB>spec<TAB>pass|fail|flaky[<TAB>reason], got {line!r}")
            reason = cols[3] if len(cols) > 3 else ""
            if cols[2] == "fail" and not re.match(r"^(not-yet|outside): \S", reason):
                die(f"{path}:{n}: a fail needs a reason `not-yet: <feature>` or `outside: <why>`")
            if cols[2] == "flaky" and not reason:
                die(f"{path}:{n}: a flaky spec needs a reason")
            exp[(cols[0], cols[1])] = (cols[2], reason)
    return exp, header


def write_expected(path, header, specs, results, old):
    """Rewrites expected.tsv from the observed results, keeping reasons (and entries not run this time)."""
    lines = header or ["# Kruise conformance: expected outcome of each selected spec (see e2e/README.md)."]
    for group, text, _ in specs:
        key = (group, text)
        if key in results:
            outcome, why = results[key]["outcome"], results[key]["reason"]
            prev = old.get(key)
            if prev and prev[0] == "flaky":
                lines.append(f"{group}\t{text}\tflaky\t{prev[1]}")
            elif outcome == "pass":
                lines.append(f"{group}\t{text}\tpass")
            elif prev and prev[0] == "fail":
                lines.append(f"{group}\t{text}\tfail\t{prev[1]}")
            else:
                lines.append(f"{group}\t{text}\tfail\tnot-yet: FIXME (observed: {why})")
        elif key in old:
            o, r = old[key]
            lines.append("\t".join([group, text, o] + ([r] if r else [])))
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


# --- running one spec ---------------------------------------------------------------------------------------------
def focus_regex(text):
    # Go's RE2 accepts a backslash before any punctuation, which is all re.escape adds.
    return "^" + re.escape(f"{SUITE} {text}") + "$"


def first_line(s, limit=300):
    s = " ".join((s or "").strip().split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def run_spec(binary, kubeconfig, work, group, text, file, timeout):
    """Runs one spec in its own process group; returns {outcome, reason, seconds, log, report}."""
    base = os.path.join(work, slug(group, text))
    log, report = base + ".log", base + ".json"
    for p in (log, report):
        if os.path.exists(p):
            os.remove(p)
    cmd = [
        binary,
        f"-ginkgo.focus={focus_regex(text)}",
        f"-ginkgo.focus-file={re.escape(file)}",
        f"-ginkgo.json-report={report}",
        # Ginkgo's own timeout interrupts the spec and still runs its cleanup (namespace deletion); the hard kill
        # below is for a process that does not stop even then.
        f"-ginkgo.timeout={timeout}s",
        "-ginkgo.grace-period=20s",
        "-ginkgo.no-color",
        "-ginkgo.v",
        "-test.timeout=0",
    ]
    t0 = time.monotonic()
    killed = False
    with open(log, "w") as out:
        out.write(f"# {' '.join(cmd)}\n")
        out.flush()
        p = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work,
            env={**os.environ, "KUBECONFIG": kubeconfig},
            start_new_session=True,
        )
        try:
            p.wait(timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            killed = True
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    secs = time.monotonic() - t0
    res = {"seconds": secs, "log": log, "report": report, "exit": p.returncode}
    if killed:
        return {**res, "outcome": "fail", "reason": f"killed: still running {timeout + 60}s after start"}
    if not os.path.exists(report):
        return {**res, "outcome": "fail", "reason": f"no JSON report (exit {p.returncode}); see {log}"}
    ran = [r for r in spec_reports(report) if r.get("State") != "skipped"]
    if len(ran) != 1:
        return {**res, "outcome": "fail", "reason": f"the focus selected {len(ran)} specs, not 1 (see {log})"}
    r = ran[0]
    state = r.get("State")
    if state == "passed":
        return {**res, "outcome": "pass", "reason": ""}
    failure = r.get("Failure") or {}
    loc = failure.get("Location") or {}
    where = f"{os.path.basename(loc.get('FileName', '?'))}:{loc.get('LineNumber', '?')}"
    msg = first_line(failure.get("Message"))
    if state in ("interrupted", "timedout"):
        return {**res, "outcome": "fail", "reason": f"timeout: {state} after {timeout}s at {where}: {msg}"}
    return {**res, "outcome": "fail", "reason": f"{state} at {where}: {msg}"}


# --- the run ------------------------------------------------------------------------------------------------------
def load_durations(path):
    d = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) == 3:
                    try:
                        d[(cols[0], cols[1])] = float(cols[2])
                    except ValueError:
                        pass
    return d


def save_durations(path, durations):
    with open(path + ".tmp", "w") as f:
        for (g, t), s in sorted(durations.items()):
            f.write(f"{g}\t{t}\t{s:.0f}\n")
    os.replace(path + ".tmp", path)


def cmd_run(a):
    if a.update and os.environ.get("CI", "") in ("1", "true", "TRUE", "yes"):
        die("--update rewrites expected.tsv: never under CI")
    specs = list_specs(a.bin, a.work)
    if not specs:
        die("the dry run listed no CloneSet spec")
    all_keys = {(g, t) for g, t, _ in specs}
    if a.filter:
        flt = re.compile(a.filter)
        chosen = [s for s in specs if flt.search(f"[{s[0]}] {s[1]}")]
        if not chosen:
            die(f"no selected spec matches {a.filter!r} (try: e2e/kruise/run --list)")
    else:
        chosen = specs
    expected, header = read_expected(a.expected)
    # `outside` specs fail for any controller on this setup (the reason in expected.tsv was verified); a CI run
    # may leave them out and says how many it left.
    not_run = []
    if a.skip_outside:
        if a.update:
            die("--skip-outside with --update would drop lines from expected.tsv")
        is_outside = lambda s: expected.get((s[0], s[1]), ("", ""))[1].startswith("outside:")
        not_run = [s for s in chosen if is_outside(s)]
        chosen = [s for s in chosen if not is_outside(s)]

    # Longest first (durations of earlier runs), so the slowest specs do not start last.
    dpath = a.durations or os.path.join(a.work, "durations.tsv")
    durations = load_durations(dpath)
    order = sorted(chosen, key=lambda s: -durations.get((s[0], s[1]), a.timeout))
    print(
        f"kruise conformance: {len(chosen)} of {len(specs)} selected specs, {a.jobs} at a time, "
        f"{a.timeout}s each at most",
        flush=True,
    )

    results = {}
    lock = threading.Lock()
    mismatches = []
    retry = []

    # Starts at least `stagger` seconds apart: 8 specs creating their namespaces and CloneSets in the same second
    # is a burst Kruise's own (serial) CI never makes, and several specs give the controller only 3 s to report.
    starts = {"last": 0.0}
    start_lock = threading.Lock()

    def one(spec):
        group, text, file = spec
        with start_lock:
            wait = starts["last"] + a.stagger - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            starts["last"] = time.monotonic()
        res = run_spec(a.bin, a.kubeconfig, a.work, group, text, file, a.timeout)
        key = (group, text)
        exp = expected.get(key)
        with lock:
            results[key] = res
            durations[key] = res["seconds"]
            tag = res["outcome"].upper()
            line = f"{tag} [{group}] {text} ({res['seconds']:.0f}s)"
            if exp is None:
                mismatches.append((key, f"not in {os.path.basename(a.expected)}; observed {res['outcome']}"))
                line += f"  !! not in expected.tsv: {res['reason'] or 'passed'}"
            elif exp[0] == "flaky":
                line += f"  (flaky: {exp[1]})"
            elif exp[0] == "pass" and res["outcome"] == "fail" and a.retries > 0:
                # Run again after the pool, outside the start burst (ginkgo's --flake-attempts); reported below.
                retry.append(spec)
                line += f"  (failed once, will retry: {res['reason']})"
            elif exp[0] != res["outcome"]:
                if res["outcome"] == "pass":
                    why = f"expected to fail ({exp[1]}) but passed: update expected.tsv"
                else:
                    why = f"expected to pass, failed: {res['reason']}"
                mismatches.append((key, why))
                line += f"  !! {why}"
            elif res["outcome"] == "fail":
                line += f"  (expected: {exp[1]}; observed: {res['reason']})"
            print(line, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        for f in concurrent.futures.as_completed([ex.submit(one, s) for s in order]):
            f.result()
    # A spec expected to pass that failed gets `retries` more runs, one at a time: a pass then counts, and is
    # printed and counted as "passed on retry" so a flaky spec stays visible.
    retried = []
    for group, text, file in retry:
        key = (group, text)
        first = results[key]["reason"]
        for attempt in range(a.retries):
            res = run_spec(a.bin, a.kubeconfig, a.work, group, text, file, a.timeout)
            results[key] = res
            print(f"{res['outcome'].upper()} on retry {attempt + 1} [{group}] {text} ({res['seconds']:.0f}s)", flush=True)
            if res["outcome"] == "pass":
                retried.append(key)
                break
        else:
            mismatches.append((key, f"expected to pass, failed {1 + a.retries} times: {first}; then {res['reason']}"))
    save_durations(dpath, durations)

    if not a.filter:
        for key in sorted(set(expected) - all_keys):
            mismatches.append((key, "listed in expected.tsv but not in the suite's selection"))

    # Logs and reports of passing specs are not kept.
    for key, res in results.items():
        if res["outcome"] == "pass" and not a.keep:
            for p in (res["log"], res["report"]):
                if os.path.exists(p):
                    os.remove(p)

    if a.update:
        write_expected(a.expected, header, specs, results, expected)
        print(f"kruise conformance: wrote {a.expected}", flush=True)

    passed = sum(1 for r in results.values() if r["outcome"] == "pass")
    failed = len(results) - passed
    exp_fail = sum(1 for k in results if expected.get(k, ("pass",))[0] == "fail")
    flaky = sum(1 for k in results if expected.get(k, ("pass",))[0] == "flaky")
    print()
    for group, label, *_ in GROUPS:
        keys = [k for k in results if k[0] == group]
        if keys:
            p = sum(1 for k in keys if results[k]["outcome"] == "pass")
            print(f"  {label}: {p}/{len(keys)} passed")
    for key, why in mismatches:
        print(f"MISMATCH [{key[0]}] {key[1]}: {why}")
    also = f", {flaky} flaky" if flaky else ""
    if retried:
        also += f", {len(retried)} passed on retry"
        for key in retried:
            print(f"RETRIED [{key[0]}] {key[1]}: failed in the parallel run, passed alone")
    if not_run:
        also += f"; {len(not_run)} `outside` specs not run (--skip-outside)"
    print(f"kruise conformance: {passed} passed, {failed} failed ({exp_fail} expected{also})", flush=True)
    # For the caller's `N passed, M failed` line: specs as expected vs differences.
    with open(os.path.join(a.work, "summary"), "w") as f:
        f.write(f"{len(results) - len([m for m in mismatches if m[0] in results])} {len(mismatches)}\n")
    return 0 if not mismatches else 1


def cmd_list(a):
    specs = list_specs(a.bin, a.work)
    flt = re.compile(a.filter) if a.filter else None
    expected, _ = read_expected(a.expected)
    for g, t, _ in specs:
        if flt is None or flt.search(f"[{g}] {t}"):
            e = expected.get((g, t))
            print(f"[{g}] {t}\t{' '.join(e) if e else 'NOT IN expected.tsv'}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["list", "run"])
    ap.add_argument("--bin", required=True, help="Kruise's e2e test binary (go test -c ./test/e2e)")
    ap.add_argument("--work", required=True, help="directory for reports and logs")
    ap.add_argument("--kubeconfig", help="admin kubeconfig of the cluster (run)")
    ap.add_argument("--expected", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected.tsv"))
    ap.add_argument("--filter", help="only specs whose `[group] text` matches this regex")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per spec")
    ap.add_argument("--update", action="store_true", help="rewrite expected.tsv from this run (keeps reasons)")
    ap.add_argument("--keep", action="store_true", help="keep logs of passing specs too")
    ap.add_argument("--skip-outside", action="store_true", help="leave out the specs expected.tsv marks `fail outside:`")
    ap.add_argument("--stagger", type=float, default=2.0, help="seconds between two spec starts")
    ap.add_argument("--durations", help="TSV of each spec's last duration (read to run the longest first, updated)")
    ap.add_argument("--retries", type=int, default=1, help="extra runs, one at a time, of a spec expected to pass that failed (a pass then counts as passed on retry)")
    a = ap.parse_args()
    if a.command == "run" and not a.kubeconfig:
        die("run needs --kubeconfig")
    sys.exit(cmd_run(a) if a.command == "run" else cmd_list(a))


if __name__ == "__main__":
    main()
