#!/usr/bin/env python3
"""The GPU kernels one call launches, and the time of each, for portssm's drop-in and the
reference beside it (torch.profiler's CUDA activity, i.e. CUPTI: kernels launched by libportssm
through the driver are seen like torch's own).  For deciding where a gap between the two sides
lies: e.g. which of the SSD's chunked passes the reference does faster.

    python3 bench/kernel_times.py --bench-json bench_graph.json --filter "ssd_chunk_scan_fwd+bwd" \\
                                  [--calls 5] [--top 40]

The rows (shapes, options, inputs) are those of bench/side_by_side.py, whose case builders this
uses; each side is warmed up (the reference compiles and autotunes there), then --calls calls are
profiled and every kernel's mean time per call is printed, largest first, with the sum.
"""

import argparse
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side as sbs  # noqa: E402  (the case builders and the two sides' openers)


def kernel_table(case, fns, t, calls):
    """{kernel name: (launches per call, µs per call)} over `calls` profiled calls."""
    for _ in range(3):
        sbs.run_once(case, fns, t)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            sbs.run_once(case, fns, t)
        torch.cuda.synchronize()
    table = {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        n, us = table.get(ev.name, (0, 0.0))
        table[ev.name] = (n + 1, us + ev.time_range.elapsed_us())
    return {k: (n / calls, us / calls) for k, (n, us) in table.items()}


def show(title, table, top):
    total = sum(us for _, us in table.values())
    print("\n### %s: %.1f µs of kernels per call\n" % (title, total))
    print("| kernel | launches / call | µs / call | share |")
    print("|---|---:|---:|---:|")
    for name, (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
        print("| %s | %g | %.1f | %.0f%% |" % (name[:90], n, us, 100 * us / total if total else 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-json", required=True, help="portssm_bench --json output (the rows)")
    ap.add_argument("--filter", required=True, help='rows whose "op dtype shape" has this')
    ap.add_argument("--options", default=None, help="and whose options string is exactly this")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    with open(args.bench_json) as f:
        rows = [r for r in json.load(f)["results"] if args.filter in sbs.row_key(r)
                and (args.options is None or r.get("options") == args.options)]
    ref, _versions, why = sbs.open_references()
    pssm, pssm_why = sbs.open_portssm()
    for row in rows:
        problem = sbs.mapping_problem(row)
        print("\n## %s [%s]%s" % (sbs.row_key(row), row.get("options", ""),
                                  " (%s)" % problem if problem else ""))
        if problem:
            continue
        case = sbs.build_case(row)
        t = sbs.make_set(case, torch.Generator(device=sbs.DEVICE))
        for title, fns, missing in (("portssm", pssm, pssm_why), ("reference", ref, why)):
            if fns is None:
                print("\n%s: not importable (%s)" % (title, missing))
                continue
            show(title, kernel_table(case, fns, t, args.calls), args.top)


if __name__ == "__main__":
    main()
