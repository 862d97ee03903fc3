#!/usr/bin/env python3
"""What ptxas made of a kernel, read from `cuobjdump -sass` text: a line a function with its
instruction count, the wgmma (HGMMA) shapes, the warpgroup fences and waits, R2UR (a vector
register moved to the uniform datapath: many where ptxas cannot prove a value warp-uniform),
BRA.DIV (a shuffle or vote whose warp may be diverged), BSSY (convergence regions) and the
uniform-datapath share; then, with --loops, each loop of at least --min instructions (a
backward branch) with its instruction count and most frequent opcodes. ptxas's -v says none of
this: two builds with the same registers and no spill can differ here by 3x (bench/RESULTS.md,
session 67).

    cuobjdump -sass x.cubin | python3 tools/sass_stats.py [--loops] [--min N]
    python3 tools/sass_stats.py [--loops] a.sass b.sass     # one block a file
"""

import argparse
import collections
import re
import sys

FUNC_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
INST_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
TARGET_RE = re.compile(r"\bBRA(?:\.\w+)*\s+(?:`\(\.L_x_\d+\)|(0x[0-9a-f]+))")


def opcode(text):
    """The instruction's opcode without its guard predicate (@P0, @!UP1) and modifiers."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def functions(lines):
    """[(name, [(address, text)])] in the order of the listing."""
    out, name, insts = [], None, []
    for line in lines:
        m = FUNC_RE.match(line)
        if m:
            if name is not None:
                out.append((name, insts))
            name, insts = m.group(1), []
            continue
        m = INST_RE.match(line)
        if m and name is not None:
            insts.append((int(m.group(1), 16), m.group(2)))
    if name is not None:
        out.append((name, insts))
    return out


def stats(insts):
    ops = collections.Counter(opcode(t).split(".")[0] for _, t in insts)
    full = collections.Counter(opcode(t) for _, t in insts)
    hgmma = collections.Counter(o for o in full.elements() if o.startswith("HGMMA"))
    uniform = sum(n for o, n in ops.items() if o.startswith("U") and o not in ("UTMALDG", "UTMASTG", "UBLKCP"))
    return {
        "instructions": len(insts),
        "hgmma": dict(sorted(hgmma.items())),
        "warpgroup": sum(n for o, n in full.items() if o.startswith("WARPGROUP")),
        "r2ur": ops["R2UR"],
        "bra_div": sum(n for o, n in full.items() if o.startswith("BRA.DIV")),
        "bssy": ops["BSSY"],
        "uniform_share": uniform / len(insts) if insts else 0.0,
    }


def loops(insts, min_len):
    """Conditional backward branches spanning at least min_len instructions (a loop's back edge;
    the unconditional ones are the out-of-line retry stubs of waits, jumping back into the body):
    (start, end, instructions, histogram)."""
    out = []
    for a, t in insts:
        m = TARGET_RE.search(t)
        if not m or not m.group(1) or not t.startswith("@"):
            continue
        target = int(m.group(1), 16)
        if target >= a:
            continue
        body = [x for x in insts if target <= x[0] <= a]
        if len(body) >= min_len:
            hist = collections.Counter(opcode(x[1]).split(".")[0] for x in body)
            out.append((target, a, len(body), hist))
    return out


def report(title, lines, show_loops, min_len, out):
    if title:
        print(f"== {title}", file=out)
    for name, insts in functions(lines):
        s = stats(insts)
        hg = ", ".join(f"{n} {o}" for o, n in s["hgmma"].items()) or "none"
        print(f"{name}: {s['instructions']} instructions; HGMMA {hg}; WARPGROUP {s['warpgroup']}; "
              f"R2UR {s['r2ur']}; BRA.DIV {s['bra_div']}; BSSY {s['bssy']}; "
              f"uniform datapath {100 * s['uniform_share']:.1f}%", file=out)
        if show_loops:
            for start, end, n, hist in loops(insts, min_len):
                top = " ".join(f"{o} {c}" for o, c in hist.most_common(12))
                print(f"  loop 0x{start:x}-0x{end:x}: {n} instructions: {top}", file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="cuobjdump -sass listings (default: stdin)")
    ap.add_argument("--loops", action="store_true", help="also each loop of at least --min instructions")
    ap.add_argument("--min", type=int, default=200, help="the shortest loop --loops prints (instructions)")
    args = ap.parse_args(argv)
    if not args.files:
        report(None, sys.stdin, args.loops, args.min, sys.stdout)
        return 0
    for f in args.files:
        with open(f, errors="replace") as fh:
            report(f, fh, args.loops, args.min, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
