#!/usr/bin/env python3
"""Issue 26's GEMM grid: M 16 to 512 over the Llama-3 projections (weights K-major, a @ w.T),
the dispatcher's choice beside torch.matmul on the same inputs, timed as bench/sweep.py times
(back-to-back calls after a GPU sleep, median of 5, inputs rotated past twice the L2).

    python3 bench/gemm_grid.py [--json FILE]            # the 42 shapes, then the geomean
    python3 bench/gemm_grid.py --pinned [--ms 256,512]  # also every eligible Hopper row, pinned
    python3 bench/gemm_grid.py --shapes 6144x1024,6144x8192  # other N x K pairs (with --ms)
    python3 bench/gemm_grid.py --one KERNEL M N K        # 8 launches of one pinned kernel (for ncu)
    python3 bench/gemm_grid.py --reestimate JSON [--sm 90]  # this build's choices, the run's times
    python3 bench/gemm_grid.py --cold | --apart | --chain   # calls alone, or after a GEMM (sweep.isolate)
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sweep  # noqa: E402  (bench/sweep.py, or the bundle's copy beside this file)

SHAPES = [(4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 8192), (8192, 28672)]
MS = [16, 32, 64, 128, 256, 512]


def case(m, n, k):
    return {"op": "gemm", "family": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "id": f"m{m} n{n} k{k}"}


def one(torch, opslib, name, m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    h = opslib.Handle("cuda:0")
    h.pin_kernel(name)
    for _ in range(8):
        opslib.gemm(a, w.T, out=d, handle=h)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", nargs=4, metavar=("KERNEL", "M", "N", "K"))
    ap.add_argument("--pinned", action="store_true", help="time every eligible cuda_gemm_sm90 row too")
    ap.add_argument("--ms", default=",".join(map(str, MS)), help="the M values (default: all)")
    ap.add_argument("--shapes", default=None, help="N x K pairs instead of the Llama projections: 6144x4096,...")
    ap.add_argument("--reestimate", metavar="JSON", help="a --pinned run's shapes: this build's choices (no GPU)")
    ap.add_argument("--sm", type=int, default=90, help="--reestimate: the described device's SM")
    sweep.isolation_args(ap)
    args = ap.parse_args()
    if args.reestimate:
        return sweep.grid_reestimate(args.reestimate, lambda r: case(r["m"], r["n"], r["k"]), "cuda_gemm_sm90_", args.sm)
    found = sweep.torch_and_opslib("gemm_grid.py", "torch.matmul is the comparison")
    if found is None:
        return 0
    torch, opslib = found
    if args.one:
        one(torch, opslib, args.one[0], *(int(x) for x in args.one[1:]))
        return 0
    l2, timer, gen, out = sweep.grid_session(torch, opslib)
    pre_ops, pre_torch = sweep.isolate(torch, opslib, args, timer, out)
    ratios = []
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    for n, k in shapes:
        for m in (int(x) for x in args.ms.split(",")):
            c = case(m, n, k)
            sets = sweep.input_sets(torch, c, gen, l2)
            h = opslib.Handle("cuda:0")
            choice, eligible = sweep.explained(opslib, c, sets[0], h)
            ref = torch.matmul(sets[0]["a"], sets[0]["b"])
            sweep.opslib_call(opslib, c, sets[0], handle=h)
            torch.cuda.synchronize()
            err = sweep.rel_err(sets[0]["d"], ref)
            t_torch = sweep.chained(timer, lambda t: torch.matmul(t["a"], t["b"]), sets, pre_torch)
            t_ops = sweep.chained(timer, lambda t: sweep.opslib_call(opslib, c, t, handle=h), sets, pre_ops)
            ratios.append(t_torch / t_ops)
            row = {"m": m, "n": n, "k": k, "choice": choice, "us": t_ops, "torch_us": t_torch, "rel_err": err}
            print(f"m{m:<4} n{n:<6} k{k:<6} {choice:<32} {t_ops:7.1f} us  matmul {t_torch:7.1f}  "
                  f"{t_torch / t_ops:.2f}x  err {err:.1e}", flush=True)
            if args.pinned:
                row["pinned"], row["pinned_err"] = {}, {}
                for name in sorted(x for x in eligible if x.startswith("cuda_gemm_sm90")):
                    kr = sweep.pinned_run(torch, opslib, c, sets, timer, name, ref)
                    if "us" in kr:
                        row["pinned"][name] = kr["us"]
                    row["pinned_err"][name] = kr.get("rel_err", kr.get("error"))
                if row["pinned"]:
                    print(sweep.pinned_line(row["pinned"], "cuda_gemm_sm90_", t_torch), flush=True)
            out["rows"].append(row)
            del sets
            torch.cuda.empty_cache()
    g = sweep.geomean(ratios)
    out["geomean"], out["min"] = g, min(ratios)
    print(f"{len(ratios)} shapes: geomean {g:.3f}x, min {min(ratios):.2f}x, below 0.9: {sum(r < 0.9 for r in ratios)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    bad = []
    for r in out["rows"]:  # the choice, then each pinned row (a refusal's entry is its message)
        for name, e in [(r["choice"], r["rel_err"])] + list(r.get("pinned_err", {}).items()):
            if not (isinstance(e, float) and e <= 2e-2):
                bad.append(dict(r, choice=name, rel_err=e))
    for r in bad:
        print(f"DIFFERS from torch.matmul: m{r['m']} n{r['n']} k{r['k']}: {r['choice']} rel err {r['rel_err']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
