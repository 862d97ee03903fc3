#!/usr/bin/env python3
"""Two builds measured in one call, shape by shape: the grid scripts' JSON runs (bench/attn_grid.py,
bench/gemm_grid.py) read back, each build's time a shape the mean of its runs, NEW's over BASE's a
shape and their geomean, and PyTorch's time over each build's by group.

    python3 bench/grid_cmp.py DIR NEW BASE                  # DIR holds {attn,gemm}_grid_<build>_<i>.json
                                                            # (tools/ab_run.sh's names)
    python3 bench/grid_cmp.py --results FILE CALL NEW BASE  # one call of a bench/results file
                                                            # ({"builds": {CALL: {"runs": {"<build>_<i>": run}}}})
    --kind attn|gemm   which grid, where DIR holds both
    --markdown         the shapes as RESULTS.md table rows
    --below X          the exit status's bound (default 0.995)

Exit status: 0 where NEW's time over BASE's (geomean over the shapes) is below X, 1 where not,
2 where the runs are missing or do not hold the same shapes in the same order.
"""

import argparse
import glob
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep  # noqa: E402  (bench/sweep.py, or the bundle's copy beside this file)

# the fields that name a shape (attention, GEMM), in the order a label prints them
SHAPE_KEYS = ("b", "s", "hq", "hkv", "d", "causal", "m", "n", "k")


def shape_of(row):
    return tuple((k, row[k]) for k in ("group",) + SHAPE_KEYS if k in row)


def label(row):
    if "m" in row:
        return f"m{row['m']} n{row['n']} k{row['k']}"
    if "rows" in row:  # bench/code_refetch.py's row ops
        return f"{row['op']} {row['rows']}x{row['cols']}"
    heads = f"H{row['hq']}" if row["hq"] == row["hkv"] else f"GQA {row['hq']}:{row['hkv']}"
    bwd = "bwd " if row.get("op") == "sdpa_bwd" else ""
    return f"{bwd}B{row['b']} S{row['s']} {heads} d{row['d']}" + (" causal" if row["causal"] else "")


def runs_in_dir(path, build, kind):
    """The runs of `build` in `path`, in run order (ab_run.sh numbers a build's runs)."""
    kinds = [kind] if kind else ["attn", "gemm"]
    found = {}
    for k in kinds:
        for f in glob.glob(os.path.join(path, f"{k}_grid_{glob.escape(build)}_*.json")):
            m = re.fullmatch(rf"{k}_grid_{re.escape(build)}_(\d+)\.json", os.path.basename(f))
            if m:
                found.setdefault(k, []).append((int(m.group(1)), f))
    if len(found) > 1:
        raise ValueError(f"{path} holds attention and GEMM runs of {build}: name one with --kind")
    if not found:
        raise ValueError(f"no runs of {build} in {path}")
    runs = []
    for _, f in sorted(next(iter(found.values()))):
        with open(f) as fh:
            runs.append(json.load(fh))
    return runs


def runs_in_results(path, call, build):
    with open(path) as fh:
        builds = json.load(fh)["builds"]
    if call not in builds:
        raise ValueError(f"{path} has no call {call!r} (calls: {', '.join(builds)})")
    runs = builds[call]["runs"]
    names = sorted((int(k.rsplit("_", 1)[1]), k) for k in runs if k.rsplit("_", 1)[0] == build)
    if not names:
        raise ValueError(f"call {call!r} has no runs of {build}")
    return [runs[k] for _, k in names]


def mean_times(runs):
    """Each shape's mean time over the runs (us), its PyTorch time (mean), and the rows of the first."""
    first = runs[0]["rows"]
    for r in runs[1:]:
        if [shape_of(x) for x in r["rows"]] != [shape_of(x) for x in first]:
            raise ValueError("the runs of one build hold different shapes")
    us = [sum(r["rows"][i]["us"] for r in runs) / len(runs) for i in range(len(first))]
    torch_us = [sum(r["rows"][i].get("torch_us") or math.nan for r in runs) / len(runs) for i in range(len(first))]
    return us, torch_us, first


def compare(new_runs, base_runs, new, base, markdown, out):
    """Prints the comparison; returns NEW's geomean time over BASE's."""
    a, ta, rows = mean_times(new_runs)
    b, tb, rows_b = mean_times(base_runs)
    if [shape_of(x) for x in rows] != [shape_of(x) for x in rows_b]:
        raise ValueError(f"{new} and {base} ran different shapes")
    ratios = [x / y for x, y in zip(a, b)]
    torch_us = [(x + y) / 2 for x, y in zip(ta, tb)]  # PyTorch's time a shape, both builds' runs
    if markdown:
        print(f"| shape | {base} us | {new} us | {new} / {base} | PyTorch us | {base}'s ratio | {new}'s ratio |",
              file=out)
        print("|---|---|---|---|---|---|---|", file=out)
    for i, row in enumerate(rows):
        t = torch_us[i]
        name = (row.get("group", "") + " " + label(row)).strip()
        if markdown:
            print(f"| {name} | {b[i]:.1f} | {a[i]:.1f} | {ratios[i]:.3f} | {t:.1f} | {t / b[i]:.2f}x | "
                  f"{t / a[i]:.2f}x |", file=out)
        else:
            print(f"{name:42s} {base} {b[i]:9.1f}  {new} {a[i]:9.1f}  {new}/{base} {ratios[i]:.3f}", file=out)
    g = sweep.geomean(ratios)
    worst = max(range(len(rows)), key=lambda i: ratios[i])
    best = min(range(len(rows)), key=lambda i: ratios[i])
    print(f"GPU time {new} / {base}: geomean {g:.4f} over {len(rows)} shapes; "
          f"{sum(r > 1.01 for r in ratios)} over 1.01, {sum(r < 0.99 for r in ratios)} under 0.99; "
          f"worst {label(rows[worst])} {ratios[worst]:.3f}, best {label(rows[best])} {ratios[best]:.3f}", file=out)
    groups = sorted({r.get("group", "all") for r in rows})
    for grp in groups:
        idx = [i for i, r in enumerate(rows) if r.get("group", "all") == grp]
        pa = sweep.geomean([torch_us[i] / a[i] for i in idx])
        pb = sweep.geomean([torch_us[i] / b[i] for i in idx])
        print(f"PyTorch's time over ours, {grp} ({len(idx)} shapes): {base} {pb:.3f}x, {new} {pa:.3f}x", file=out)
    return g


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("where", nargs="+", help="DIR NEW BASE, or with --results: CALL NEW BASE")
    ap.add_argument("--results", metavar="FILE", help="a bench/results file of several calls")
    ap.add_argument("--kind", choices=("attn", "gemm"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--below", type=float, default=0.995)
    args = ap.parse_args(argv)
    if len(args.where) != 3:
        ap.error("expected DIR NEW BASE (or CALL NEW BASE with --results)")
    src, new, base = args.where
    try:
        if args.results:
            new_runs, base_runs = runs_in_results(args.results, src, new), runs_in_results(args.results, src, base)
        else:
            new_runs, base_runs = runs_in_dir(src, new, args.kind), runs_in_dir(src, base, args.kind)
        g = compare(new_runs, base_runs, new, base, args.markdown, sys.stdout)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"grid_cmp.py: {e}", file=sys.stderr)
        return 2
    return 0 if g < args.below else 1


if __name__ == "__main__":
    sys.exit(main())
