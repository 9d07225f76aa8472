#!/usr/bin/env python3
"""compare.py - the checks of scripts/gpu-check.sh, against the programs' own truth.

  compare.py cuda TRUTH.json DUMP.jsonl LABEL   gpucheck's counts and GPU times vs `stepprof dump --json`
  compare.py torch TRUTH.json ANALYZE.json LABEL   torch_loop.py's iterations and files vs `stepprof analyze --json`
  compare.py door BARE.log PRELOAD.log EXPORTS LABEL   real_spy.so's logs of the real runtime's requests
      without and with the preload (EXPORTS: `nm -D --defined-only libstepprof.so`): a name the
      driver hands out that stepprof exports must reach the runtime as stepprof's wrapper of that
      name; any other answer must be the driver's own

Each prints "CHECK <label> <what>: <figures> ok|FAIL" lines and one
"FIGURES <label> {json}" line (what the summary collects), and exits 1 when a
check failed, 2 when an input is unreadable. Tolerances: kernel GPU time within
5% (or 10 us) of the program's events (the first iteration is warm-up: lazy
module loading, the first timing events; its error is reported, not checked), pinned copy GPU time within 10% (or 25 us:
the program's first event may be reached before the copy is submitted).
"""
import json
import os
import statistics
import sys

failed = False
# Absolute slack in ms, when larger than the relative tolerance: GPUCHECK_SLACK_MS
# (the dry run sets 1.0: the simulated GPU's host threads on a loaded machine).
SLACK_MS = float(os.environ.get("GPUCHECK_SLACK_MS", "0") or 0)


def check(label, what, ok, figures):
    global failed
    print("CHECK %s %s: %s %s" % (label, what, figures, "ok" if ok else "FAIL"))
    failed |= not ok


def load_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def truth_of(path):
    for r in reversed(load_lines(path)):
        if "iters" in r:
            return r
    raise ValueError("no ground-truth JSON line in %s" % path)


def close(a, b, rel, abs_ms=0.010):
    return abs(a - b) <= max(rel * b, abs_ms, SLACK_MS)


def cuda(truth_path, dump_path, label):
    t = truth_of(truth_path)
    recs = sorted(load_lines(dump_path), key=lambda r: r.get("begin_ns", 0))
    n = t["iters"]

    def count(kind, **kv):
        return sum(1 for r in recs if r.get("kind") == kind and all(r.get(k) == v for k, v in kv.items()))

    want = [("copy h2d pinned", count("copy", direction="h2d", host_memory="pinned"), t["copies_h2d_pinned"]),
            ("copy h2d pageable", count("copy", direction="h2d", host_memory="pageable"), t["copies_h2d_pageable"]),
            ("copy d2h pinned", count("copy", direction="d2h", host_memory="pinned"), t["copies_d2h_pinned"]),
            ("copy d2h pageable", count("copy", direction="d2h", host_memory="pageable"), t["copies_d2h_pageable"]),
            ("copies in all", count("copy"), t["copies_h2d_pinned"] + t["copies_h2d_pageable"] +
             t["copies_d2h_pinned"] + t["copies_d2h_pageable"]),
            ("memset", count("memset"), t["memsets"]), ("launch", count("launch"), t["launches"]),
            ("sync", count("sync"), t["syncs"]), ("alloc", count("alloc"), t["allocs"]),
            ("free", count("free"), t["frees"]), ("host_alloc", count("host_alloc"), t["host_allocs"]),
            ("host_free", count("host_free"), t["host_frees"]), ("alloc_failed", count("alloc_failed"), 0)]
    for what, got, exp in want:
        check(label, "count " + what, got == exp, "recorded %d, program %d" % (got, exp))
    apis = {}
    for r in recs:
        if r.get("kind") in ("copy", "memset", "launch", "sync", "alloc", "free", "host_alloc", "host_free"):
            apis[r["api"]] = apis.get(r["api"], 0) + 1
    print("APIS %s %s" % (label, json.dumps(apis, sort_keys=True)))

    def gpu_ms(r):
        if r.get("gpu_begin_ns") and r.get("gpu_end_ns"):
            return (r["gpu_end_ns"] - r["gpu_begin_ns"]) / 1e6
        return None

    launches = [gpu_ms(r) for r in recs if r.get("kind") == "launch"]
    pinned = [gpu_ms(r) for r in recs if r.get("kind") == "copy" and r.get("direction") == "h2d" and
              r.get("host_memory") == "pinned"]
    fig = {"iters": n, "kernel_ms_program": statistics.median(t["kernel_ms"][1:] or t["kernel_ms"]),
           "copy_ms_program": statistics.median(t["copy_h2d_pinned_ms"][1:] or t["copy_h2d_pinned_ms"])}
    timed_k = [x for x in launches if x is not None]
    check(label, "every launch has a GPU time", len(timed_k) == len(launches) == n,
          "%d of %d timed" % (len(timed_k), len(launches)))
    if len(launches) == n and len(timed_k) == n:
        rel = [abs(launches[i] - t["kernel_ms"][i]) / max(t["kernel_ms"][i], 1e-9) for i in range(n)]
        bad = [i for i in range(1, n) if not close(launches[i], t["kernel_ms"][i], 0.05)]
        worst = max(rel[1:] or rel)
        fig["kernel_first_rel_err"] = rel[0]
        fig["kernel_ms_stepprof"] = statistics.median(launches[1:] or launches)
        fig["kernel_worst_rel_err"] = worst
        check(label, "kernel GPU time vs the program's events (5%)", not bad,
              "median %.4f ms vs %.4f ms, worst %.1f%% after the first, %d outside" %
              (fig["kernel_ms_stepprof"], fig["kernel_ms_program"], 100 * worst, len(bad)))
    timed_c = [x for x in pinned if x is not None]
    if len(pinned) == n and len(timed_c) == n:
        rel = [abs(pinned[i] - t["copy_h2d_pinned_ms"][i]) / max(t["copy_h2d_pinned_ms"][i], 1e-9) for i in range(n)]
        bad = [i for i in range(1, n) if not close(pinned[i], t["copy_h2d_pinned_ms"][i], 0.10, 0.025)]
        worst = max(rel[1:] or rel)
        fig["copy_first_rel_err"] = rel[0]
        fig["copy_ms_stepprof"] = statistics.median(pinned[1:] or pinned)
        fig["copy_worst_rel_err"] = worst
        fig["copy_gbps"] = t["bytes"] / (fig["copy_ms_stepprof"] / 1e3) / 1e9
        check(label, "pinned H2D GPU time vs the program's events (10%)", not bad,
              "median %.4f ms vs %.4f ms, worst %.1f%% after the first, %d outside" %
              (fig["copy_ms_stepprof"], fig["copy_ms_program"], 100 * worst, len(bad)))
    else:
        check(label, "every pinned H2D copy has a GPU time", False, "%d of %d timed" % (len(timed_c), len(pinned)))
    print("FIGURES %s %s" % (label, json.dumps(fig, sort_keys=True)))


def torch(truth_path, analyze_path, label):
    t = truth_of(truth_path)
    with open(analyze_path) as f:
        a = json.load(f)
    its = a.get("iterations", [])
    s = a.get("summary", {})
    files = sum(i.get("files_opened", 0) for i in its)
    fig = {"iteration_source": a.get("iteration_source"), "iterations": len(its), "iters_program": t["iters"],
           "files_opened": files, "files_program": t["files"],
           "wall_ms_median": s.get("wall_ns_median", 0) / 1e6, "step_ms_program": t["step_ms_median"],
           "breakdown_fraction": s.get("breakdown_fraction"), "bottleneck": s.get("bottleneck"),
           "pageable_copies": sum(i.get("pageable_copies", 0) for i in its),
           "h2d_bytes": sum(i.get("h2d_bytes", 0) for i in its),
           "findings": ["%s:%s" % (x.get("kind"), x.get("severity")) for x in a.get("findings", [])],
           "processes": len(a.get("processes", [])),
           "lost": sum(p.get("lost", 0) for p in a.get("processes", []))}
    check(label, "iterations found", len(its) >= t["iters"] - 1 and len(its) <= t["iters"] + 1,
          "%d (%s) vs %d run" % (len(its), fig["iteration_source"], t["iters"]))
    # Workers read ahead (prefetch) and the first batch may be read before the
    # first mark: at least 90% of the files the loop consumed fall in iterations.
    check(label, "files opened in iterations", files >= 0.9 * t["files"],
          "%d vs %d the loop consumed" % (files, t["files"]))
    check(label, "no lost records", fig["lost"] == 0, "%d lost" % fig["lost"])
    if t.get("device") == "cuda" and not t.get("pin"):
        check(label, "pageable copies seen", fig["pageable_copies"] >= t["iters"],
              "%d pageable copies" % fig["pageable_copies"])
    print("FIGURES %s %s" % (label, json.dumps(fig, sort_keys=True)))


def door(bare_path, pre_path, nm_path, label):
    def answers(path):
        out = []
        with open(path) as f:
            for line in f:
                req, _, ans = line.rstrip("\n").partition(" -> ")
                lib, _, sym = ans.partition(" ")
                out.append((req, lib, sym))
        return out

    with open(nm_path) as f:
        exports = {ln.split()[-1].split("@")[0] for ln in f if ln.strip()}
    bare, pre = answers(bare_path), answers(pre_path)
    check(label, "same requests with and without the preload", [r for r, _, _ in bare] == [r for r, _, _ in pre],
          "%d and %d requests" % (len(bare), len(pre)))
    hooked = missed = wrong = unnamed = 0
    for (req, lb, sb), (_, lp, sp) in zip(bare[1:], pre[1:]):
        if lb == "-":
            continue
        if sb == "?":  # the driver's function has no exported name: only "not ours" can be checked
            unnamed += 1
            wrong += lp == "libstepprof.so"
        elif sb in exports:
            hooked += 1
            if lp != "libstepprof.so":
                missed += 1
                print("MISSED %s %s: driver %s, runtime got %s %s" % (label, req, sb, lp, sp))
            elif sp != sb:
                wrong += 1
                print("WRONG %s %s: driver %s, runtime got stepprof's %s" % (label, req, sb, sp))
        elif (lp, sp) != (lb, sb):
            wrong += 1
            print("WRONG %s %s: unhooked %s %s, runtime got %s %s" % (label, req, lb, sb, lp, sp))
    check(label, "every request answered with the right wrapper or the driver's own",
          missed == 0 and wrong == 0 and hooked > 0,
          "%d requests, %d hooked, %d missed, %d wrong, %d without an exported name" %
          (len(bare) - 1, hooked, missed, wrong, unnamed))
    print("FIGURES %s %s" % (label, json.dumps({"requests": len(bare) - 1, "hooked": hooked, "missed": missed,
                                                 "wrong": wrong, "unnamed": unnamed})))


def main():
    if sys.argv[1:2] == ["door"] and len(sys.argv) == 6:
        try:
            door(*sys.argv[2:6])
        except OSError as e:
            print("compare.py: %s: %s" % (sys.argv[5], e), file=sys.stderr)
            return 2
        return 1 if failed else 0
    if len(sys.argv) != 5 or sys.argv[1] not in ("cuda", "torch"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        (cuda if sys.argv[1] == "cuda" else torch)(sys.argv[2], sys.argv[3], sys.argv[4])
    except (OSError, ValueError, KeyError) as e:
        print("compare.py: %s: %s" % (sys.argv[4], e), file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
