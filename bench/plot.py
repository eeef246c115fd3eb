#!/usr/bin/env python3
"""Draw time against sequence length, one line per backend, from portssm_bench JSON files.

    python3 bench/plot.py run-cuda.json run-sim.json -o bench.png
    python3 bench/plot.py bench.json --text          # the same series as text, no matplotlib

One panel per (op, dtype, shape without L); only cases with an L and status OK are drawn, and
only panels with at least two lengths.  Reference times (ref_us) from ANCHORS.md are drawn as
crosses.  matplotlib is optional: without it the script prints the series and says so.
"""
import argparse
import json
import re
import sys
from collections import defaultdict


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for r in doc.get("results", []):
            dims = r.get("dims", {})
            if r.get("status") != "OK" or "L" not in dims or r.get("median_us") is None:
                continue
            rest = re.sub(r"\s*L\d+", "", r["shape"]).strip()
            series = f'{r["backend"]} ({r["device"]})'
            if doc.get("quick"):
                series += " quick"
            rows.append({
                "panel": (r["op"], r["dtype"], rest),
                "series": series,
                "L": dims["L"],
                "us": r["median_us"],
                "ref": r.get("ref_us"),
            })
    return rows


def group(rows):
    panels = defaultdict(lambda: defaultdict(list))
    refs = defaultdict(dict)
    for r in rows:
        panels[r["panel"]][r["series"]].append((r["L"], r["us"]))
        if r["ref"]:
            refs[r["panel"]][r["L"]] = r["ref"]
    keep = {}
    for p, series in panels.items():
        lengths = {L for pts in series.values() for L, _ in pts}
        if len(lengths) >= 2:
            keep[p] = {s: sorted(pts) for s, pts in series.items()}
    return keep, refs


def print_text(panels, refs, out=sys.stdout):
    for (op, dtype, rest), series in sorted(panels.items()):
        print(f"\n{op} {dtype} {rest}", file=out)
        for s, pts in sorted(series.items()):
            cells = ", ".join(f"L{L}: {us:.1f} us" for L, us in pts)
            print(f"  {s}: {cells}", file=out)
        if refs.get((op, dtype, rest)):
            cells = ", ".join(f"L{L}: {us:.1f} us" for L, us in sorted(refs[(op, dtype, rest)].items()))
            print(f"  reference: {cells}", file=out)


def plot(panels, refs, out_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, ((op, dtype, rest), series) in zip(axes.flat, sorted(panels.items())):
        for s, pts in sorted(series.items()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
        ref = refs.get((op, dtype, rest))
        if ref:
            ax.plot(list(ref), list(ref.values()), "kx", markersize=8, label="reference (ANCHORS.md)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("L")
        ax.set_ylabel("median us")
        ax.set_title(f"{op} {dtype} {rest}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    print(f"plot.py: wrote {out_path} ({n} panel{'s' if n != 1 else ''})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="portssm_bench --json files")
    ap.add_argument("-o", "--out", default="bench.png", help="image to write (default bench.png)")
    ap.add_argument("--text", action="store_true", help="print the series instead of drawing")
    a = ap.parse_args(argv)
    try:
        panels, refs = group(load(a.json))
    except (OSError, ValueError, KeyError) as e:
        print(f"plot.py: cannot read the results: {e}", file=sys.stderr)
        return 1
    if not panels:
        print("plot.py: no op has timed results at two or more lengths "
              "(run portssm_bench --sweep)", file=sys.stderr)
        return 1
    if a.text:
        print_text(panels, refs)
        return 0
    try:
        plot(panels, refs, a.out)
    except ImportError:
        print("plot.py: matplotlib is not installed; the series as text instead:", file=sys.stderr)
        print_text(panels, refs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
