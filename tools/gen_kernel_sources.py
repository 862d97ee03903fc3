#!/usr/bin/env python3
"""Writes the one-instantiation kernel sources from the kernel lists (X-macros).

Each family's list header names its kernels once; every kernel is instantiated for each dtype
of the family in a small .cu file of its own (Bazel compiles them in parallel and caches each).
This script writes those files from the lists; --check instead compares them with the tree and
names every file that is missing, stale, or not in a list (//tests/tools:kernel_sources_test).

    python3 tools/gen_kernel_sources.py            # write kernels/**/<family>_<dtype>_<name>.cu
    python3 tools/gen_kernel_sources.py --check    # exit 1 when the tree differs
"""
import argparse
import glob
import os
import re
import sys

# (list header, dtype list macro, kernel list macro, the list entry's arguments,
#  source path, the kernel header, the instantiation line)
FAMILIES = [
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_MMA_KERNELS", ("ID", "NAME", "DP"),
     "kernels/flash/sdpa_mma_{dt}_{NAME}.cu", "kernels/flash/sdpa_mma.cuh",
     "OPSI_SDPA_MMA_INSTANTIATE({T}, {DP})",
     "The sm_80-class attention forward (sdpa_mma.cuh), {dt}, head dims up to {DP}."),
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_SM90_KERNELS",
     ("ID", "NAME", "SHAPE", "DP", "CL"),
     "kernels/flash/sdpa_sm90_{dt}_{NAME}.cu", "kernels/flash/sdpa_sm90.cuh",
     "OPSI_SDPA_SM90_INSTANTIATE({T}, {SHAPE}, {CL})",
     "The Hopper attention forward (sdpa_sm90.cuh), {dt}, the shape {SHAPE} (head dims up to {DP}), "
     "clusters of {CL}."),
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_SPLIT_KERNELS", ("ID", "NAME", "DP", "BM"),
     "kernels/flash/sdpa_split_{dt}_{NAME}.cu", "kernels/flash/sdpa_split.cuh",
     "OPSI_SDPA_SPLIT_INSTANTIATE({T}, {DP}, {BM})",
     "The split-KV attention (sdpa_split.cuh), {dt}, head dims up to {DP}, {BM} packed query rows a block."),
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_BWD_MMA_KERNELS", ("ID", "NAME", "DP"),
     "kernels/flash/sdpa_bwd_mma_{dt}_{NAME}.cu", "kernels/flash/sdpa_bwd_mma.cuh",
     "OPSI_SDPA_BWD_MMA_INSTANTIATE({T}, {DP})",
     "The sm_80-class attention backward (sdpa_bwd_mma.cuh), {dt}, head dims up to {DP}."),
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_BWD_SM90_KERNELS", ("ID", "NAME", "DP"),
     "kernels/flash/sdpa_bwd_sm90_{dt}_{NAME}.cu", "kernels/flash/sdpa_bwd_sm90.cuh",
     "OPSI_SDPA_BWD_SM90_INSTANTIATE({T}, {DP})",
     "The Hopper attention backward (sdpa_bwd_sm90.cuh), {dt}, head dims up to {DP}."),
    ("kernels/flash/sdpa_kernels.h", "OPSI_SDPA_DTYPES", "OPSI_SDPA_BWD_SM90_DET_KERNELS", ("ID", "NAME", "DP"),
     "kernels/flash/sdpa_bwd_sm90_det_{dt}_{NAME}.cu", "kernels/flash/sdpa_bwd_sm90.cuh",
     "OPSI_SDPA_BWD_SM90_DET_INSTANTIATE({T}, {DP})",
     "The Hopper attention backward (sdpa_bwd_sm90.cuh), dQ in a fixed order, {dt}, head dims up to {DP}."),
    ("kernels/gemm/gemm_kernels.h", "OPSI_GEMM_SM90_DTYPES", "OPSI_GEMM_SM90_KERNELS", ("ID", "NAME", "BN"),
     "kernels/gemm/gemm_sm90_{dt}_{BN}_{B}.cu", "kernels/gemm/gemm_sm90.cuh",
     "OPSI_GEMM_SM90_INSTANTIATE({T}, {BN}, {B_MN}, false)",
     "The Hopper GEMM (gemm_sm90.cuh), {dt}, tiles of 128 x {BN}, B {B_TEXT}."),
    ("kernels/gemm/gemm_kernels.h", "OPSI_GEMM_SM90_DTYPES", "OPSI_GEMM_SM90_KERNELS", ("ID", "NAME", "BN"),
     "kernels/gemm/gemm_sm90_{dt}_{BN}_{B}_plain.cu", "kernels/gemm/gemm_sm90.cuh",
     "OPSI_GEMM_SM90_INSTANTIATE({T}, {BN}, {B_MN}, true)",
     "The Hopper GEMM (gemm_sm90.cuh), {dt}, tiles of 128 x {BN}, B {B_TEXT}, for calls without an epilogue."),
    ("kernels/gemm/gemm_kernels.h", "OPSI_GEMM_SM90_DTYPES", "OPSI_GEMM_SM90_KMAJOR_KERNELS", ("ID", "NAME", "BN"),
     "kernels/gemm/gemm_sm90_{dt}_{BN}_bk.cu", "kernels/gemm/gemm_sm90.cuh",
     "OPSI_GEMM_SM90_INSTANTIATE({T}, {BN}, false, false)",
     "The Hopper GEMM (gemm_sm90.cuh), {dt}, tiles of 128 x {BN}, B K-major."),
    ("kernels/gemm/gemm_kernels.h", "OPSI_GEMM_SM90_DTYPES", "OPSI_GEMM_SM90_KMAJOR_KERNELS", ("ID", "NAME", "BN"),
     "kernels/gemm/gemm_sm90_{dt}_{BN}_bk_plain.cu", "kernels/gemm/gemm_sm90.cuh",
     "OPSI_GEMM_SM90_INSTANTIATE({T}, {BN}, false, true)",
     "The Hopper GEMM (gemm_sm90.cuh), {dt}, tiles of 128 x {BN}, B K-major, for calls without an epilogue."),
]
# families whose kernels are also built per B layout: (list macro, entry fields)
LAYOUTS = {"OPSI_GEMM_SM90_KERNELS": ("OPSI_GEMM_SM90_B_LAYOUTS", ("B", "B_MN"))}
B_TEXT = {"false": "K-major", "true": "N-major"}
HEADER = "/* {doc} Written by tools/gen_kernel_sources.py from {lists}. */\n"


def entries(text, macro):
    """The X(...) entries of `#define macro(X) ...` (continuation lines joined)."""
    m = re.search(r"#define\s+" + macro + r"\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        sys.exit("gen_kernel_sources: %s not found" % macro)
    return [[a.strip() for a in e.split(",")] for e in re.findall(r"X\(([^)]*)\)", m.group(1))]


def sources(root):
    out = {}
    for lists, dtypes, kernels, fields, path, header, line, doc in FAMILIES:
        text = open(os.path.join(root, lists)).read()
        for dt, t in entries(text, dtypes):
            for e in entries(text, kernels):
                layouts = [{}]
                if kernels in LAYOUTS:
                    macro, lfields = LAYOUTS[kernels]
                    layouts = [dict(zip(lfields, le)) for le in entries(text, macro)]
                for lay in layouts:
                    f = dict(zip(fields, e), dt=dt, T=t, **lay)
                    if "B_MN" in f:
                        f["B_TEXT"] = B_TEXT[f["B_MN"]]
                    body = HEADER.format(doc=doc.format(**f), lists=lists)
                    body += '#include "%s"\n\n%s\n' % (header, line.format(**f))
                    out[path.format(**f)] = body
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the tree instead of writing")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    a = ap.parse_args()
    want = sources(a.root)
    if not a.check:
        for path, body in want.items():
            with open(os.path.join(a.root, path), "w") as f:
                f.write(body)
        print("wrote %d kernel sources" % len(want))
        return 0
    bad = 0
    for path, body in sorted(want.items()):
        full = os.path.join(a.root, path)
        if not os.path.exists(full):
            print("missing: %s" % path)
            bad += 1
        elif open(full).read() != body:
            print("stale: %s (run tools/gen_kernel_sources.py)" % path)
            bad += 1
    for pattern in sorted({os.path.dirname(p[4]) + "/" + os.path.basename(p[4]).split("{")[0] + "*.cu"
                           for p in FAMILIES}):
        for full in glob.glob(os.path.join(a.root, pattern)):
            rel = os.path.relpath(full, a.root)
            if rel not in want:
                print("not in a kernel list: %s" % rel)
                bad += 1
    print("%d kernel sources, %d differ" % (len(want), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
