#!/usr/bin/env python3
"""Fits the cost model's coefficients to a workload sweep and writes them as a calibration
table (capabilities/calibration_<tag>.c): the refit is this one command.

    python3 tools/calibrate.py SWEEP.json [SWEEP.json ...] --tag h100 --out capabilities/calibration_h100.c

Several sweeps of one device are fitted together (a shape measured in several counts once
a sweep); `--latest PREFIX` keeps, for the kernels whose names start with PREFIX, only the
samples of the last sweep (in argument order) that timed them: a kernel changed since the
earlier sweeps. The shape features are the terms explain printed when the sweep ran; a sweep made
before a change to the model's terms is brought up to date first with
`bench/sweep.py --reestimate OLD.json --json NEW.json`.

For every kernel the sweep timed (pinned), on every shape it was eligible for, the sweep
kept the measured time and explain's cost terms: the op's minimal bytes and flops, the
padding, the blocks and waves of its tiling. The model (dispatch/cost.c, calibrated form)

    us = launch_us + waves x wave_us + max(bytes / gbps, flops x padding x quantization / tflops)

is fitted per kernel by minimizing the squared log error over those shapes (Nelder-Mead on
the logs of the coefficients, started from fixed points and from the best points of a coarse
grid; plain Python, no dependency). Kernels without tiling run one
wave: their fixed cost is launch_us alone and their math rate stays the row's (tflops 0).
Kernels measured on fewer than MIN_SHAPES shapes are left to the row's efficiency; kernels
a sweep timed that this build's catalog (capabilities/kernel_ids.h) no longer has (rows
measured and dropped) are left out.

`--by-plan PREFIX=WORDS` fits, for the kernels whose names start with PREFIX, the samples whose
launch plan (explain's words, kept by the sweep) contains WORDS apart from the others: a row
that runs two launch variants (the GEMM rows' one warpgroup a tile above M 64, the two 64-row
consumers below) gets an entry for each, and the estimate takes the one its plan names.
"""
import argparse
import heapq
import itertools
import json
import math
import os
import re
import shlex
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

MIN_SHAPES = 2
# A fitted bandwidth is held to this multiple of the sweep's copy bandwidth: the op's minimal
# bytes stream at most a few times faster than DRAM (L2 reuse), and a kernel whose samples
# never bind on memory (a wide kernel timed only on padded, math-bound shapes) would
# otherwise fit an unbounded rate and look free on shapes with no math.
GBPS_CAP_X_COPY = 3.0
# A tiled kernel's wave costs at least this (a block's start, first load and store): a kernel
# timed only on one-wave shapes would otherwise fit 0 and look free on many-wave ones.
WAVE_FLOOR_US = 1.0
# The coarse grid whose best GRID_STARTS points start searches beside the two fixed starts.
GRID_LAUNCH_US = (0.3, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
GRID_WAVE_US = (1.0, 2.0, 4.0, 7.0, 10.0, 14.0, 20.0)
GRID_GBPS = (300.0, 600.0, 1200.0, 2000.0, 3000.0, 4500.0, 7000.0, 10000.0)
GRID_TFLOPS = (20.0, 60.0, 150.0, 300.0, 450.0, 650.0, 900.0, 1300.0)
GRID_STARTS = 2


def samples_of(result):
    out = {}
    for row in result["rows"]:
        for name, k in row["kernels"].items():
            if "us" in k and "waves" in k and k["us"] > 0:
                out.setdefault(name, []).append(k)
    return out


def model(p, k, tiled):
    launch, wave, gbps, tflops = p
    mem = k["mb"] * 1e6 / (gbps * 1e3)
    math_us = k["gflop"] * 1e9 * k["pad"] * k["wave_factor"] / (tflops * 1e6) if tiled else 0.0
    return launch + (k["waves"] * wave if tiled else 0.0) + max(mem, math_us)


def nelder_mead(f, x0, step=0.7, iters=4000):
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < 1e-12:
            break
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [c[j] + (c[j] - pts[-1][j]) for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c[j] + 2.0 * (c[j] - pts[-1][j]) for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [[pts[0][j] + 0.5 * (p[j] - pts[0][j]) for j in range(n)] for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = min(range(n + 1), key=lambda i: vals[i])
    return pts[best], vals[best]


def fit(samples, gbps_cap):
    """(launch_us, wave_us, gbps (at most gbps_cap), tflops or 0, rms log error) of one kernel."""
    tiled = any(k["blocks"] > 1 for k in samples)

    def expand(lp):
        e = [math.exp(a) for a in lp]
        e = e if tiled else [e[0], 0.0, e[1], 1.0]
        e[2] = min(e[2], gbps_cap)
        if tiled:
            e[1] = max(e[1], WAVE_FLOOR_US)
        return e

    def loss(lp):
        p = expand(lp)
        return sum(math.log(model(p, k, tiled) / k["us"]) ** 2 for k in samples)

    starts = ([[math.log(3.0), math.log(2.0), math.log(2500.0), math.log(600.0)],
               [math.log(6.0), math.log(6.0), math.log(1000.0), math.log(200.0)]] if tiled else
              [[math.log(3.0), math.log(2500.0)], [math.log(8.0), math.log(800.0)]])
    # The loss has local minima (a slow fixed cost traded for a slow bandwidth): the best points
    # of a coarse grid over every coefficient start searches too.
    axes = [GRID_LAUNCH_US, GRID_WAVE_US, GRID_GBPS, GRID_TFLOPS] if tiled else [GRID_LAUNCH_US, GRID_GBPS]
    grid = ([math.log(a) for a in point] for point in itertools.product(*axes))
    starts += heapq.nsmallest(GRID_STARTS, grid, key=loss)
    best = None
    for x in starts:
        for _ in range(3):  # restarts from the last optimum
            x, val = nelder_mead(loss, x)
        if best is None or val < best[1]:
            best = (x, val)
    p = expand(best[0])
    return p[0], p[1], p[2], p[3] if tiled else 0.0, math.sqrt(best[1] / len(samples))


def render(result, fits, tag, source_path, argv):
    name = f"{tag}-{result['date'][:10]}"
    lines = [
        "/* Generated by tools/calibrate.py; do not edit. Refit with:",
        f" *   {' '.join(argv)}",
        f" * from {source_path}: {result['device']}, {result['date']}, commit {result.get('commit', '?')},",
        f" * copy bandwidth {result.get('copy_tbps', 0):.3f} TB/s in the same run. */",
        '#include "capabilities/calibration.h"',
        '#include "capabilities/kernel_ids.h"',
        "",
        "static const opsi_calibration k_entries[] = {",
        "    /* kernel, launch_us, wave_us, gbps, tflops (0: the row's), shapes, rms log error[, plan words] */",
    ]
    for (kname, words), (launch, wave, gbps, tflops, rms, n) in sorted(fits.items()):
        plan = f', "{words}"' if words else ", NULL"
        lines.append(f'    {{OPSI_KERNEL_{kname.upper()}, "{kname}", {launch:.3f}, {wave:.3f}, {gbps:.1f}, {tflops:.1f}, '
                     f"{n}, {rms:.3f}{plan}}},")
    lines += [
        "};",
        "",
        f"const opsi_calibration_set opsi_calibration_{tag} = {{",
        f'    .name = "{name}",',
        f"    .sm_min = {result.get('sm_min', 90)}, .sm_max = {result.get('sm_max', 90)},",
        f'    .device = "{result["device"]}",',
        f'    .source = "{source_path} ({result["date"]}, commit {result.get("commit", "?")}), '
        f'fitted by tools/calibrate.py",',
        "    .entries = k_entries,",
        "    .count = (int32_t)(sizeof k_entries / sizeof k_entries[0]),",
        "};",
        "",
    ]
    return "\n".join(lines)


def prefix_words(arg):
    """--by-plan's PREFIX=WORDS as (PREFIX, WORDS), both non-empty."""
    prefix, eq, words = arg.partition("=")
    if not eq or not prefix or not words:
        raise argparse.ArgumentTypeError(f"expected PREFIX=WORDS (a kernel name prefix, the plan's words), got {arg!r}")
    return prefix, words


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", nargs="+", help="JSON files written by bench/sweep.py (one device)")
    ap.add_argument("--tag", default="h100", help="the set's C name and explain's tag (with the date)")
    ap.add_argument("--out", default=None, help="the C file (default: standard output)")
    ap.add_argument("--by-plan", action="append", default=[], metavar="PREFIX=WORDS", type=prefix_words,
                    help="kernels named PREFIX...: samples whose plan contains WORDS fitted apart, as an "
                         "entry of that plan")
    ap.add_argument("--latest", action="append", default=[], metavar="PREFIX",
                    help="kernels named PREFIX...: only the samples of the last sweep that timed them "
                         "(a kernel changed since the earlier sweeps)")
    args = ap.parse_args()
    results = []
    for path in args.sweep:
        with open(path) as f:
            results.append(json.load(f))
    result = dict(results[-1], rows=[r for res in results for r in res["rows"]])
    result["date"] = max(res["date"] for res in results)
    result["commit"] = ", ".join(sorted({res.get("commit", "?") for res in results}))
    fits = {}
    gbps_cap = GBPS_CAP_X_COPY * 1e3 * max([res.get("copy_tbps") or 0.0 for res in results] + [1.0])
    merged = samples_of(result)
    for prefix in args.latest:
        for res in results:
            for kname, samples in samples_of(res).items():
                if kname.startswith(prefix):
                    merged[kname] = samples
    keyed = {}  # (kernel, plan words; "" for its calls of any other plan) -> samples
    for kname, samples in merged.items():
        words = next((w for prefix, w in args.by_plan if kname.startswith(prefix)), "")
        for key, part in (((kname, ""), [k for k in samples if not words or words not in (k.get("plan") or "")]),
                          ((kname, words), [k for k in samples if words and words in (k.get("plan") or "")])):
            if part:
                keyed[key] = part
    with open(os.path.join(ROOT, "capabilities", "kernel_ids.h")) as f:
        catalog = {m.lower() for m in re.findall(r"OPSI_KERNEL_(\w+) =", f.read())}
    for (kname, words), samples in sorted(keyed.items()):
        label = kname + (f" [{words}]" if words else "")
        if kname not in catalog:
            print(f"calibrate: {label}: not in this build's catalog (kernel_ids.h): left out", file=sys.stderr)
            continue
        if len(samples) < MIN_SHAPES:
            print(f"calibrate: {label}: {len(samples)} shape(s), fewer than {MIN_SHAPES}: left to its row",
                  file=sys.stderr)
            continue
        launch, wave, gbps, tflops, rms = fit(samples, gbps_cap)
        fits[(kname, words)] = (launch, wave, gbps, tflops, rms, len(samples))
        print(f"calibrate: {label:<28} {len(samples):3d} shapes  launch {launch:6.2f} us  wave {wave:6.2f} us  "
              f"{gbps / 1e3:6.3f} TB/s  {tflops:7.1f} TF/s  rms log error {rms:.3f}", file=sys.stderr)
    sources = " + ".join(os.path.relpath(p) for p in args.sweep)
    argv = ["python3", "tools/calibrate.py"] + [os.path.relpath(p) for p in args.sweep] + \
        (["--tag", args.tag] if args.tag != "h100" else []) + [f"--latest {p}" for p in args.latest] + \
        [f"--by-plan {shlex.quote('='.join(a))}" for a in args.by_plan] + \
        ["--out", f"capabilities/calibration_{args.tag}.c"]
    text = render(result, fits, args.tag, sources, argv)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
