#!/usr/bin/env python3
"""Issue 26's attention grid: causal and short-sequence attention (bf16, [B, S, H, D]), the
dispatcher's choice beside PyTorch's flash and cuDNN backends on the same inputs, with the
long rows of bench/RESULTS.md as the regression check; timed as bench/sweep.py times
(back-to-back calls after a GPU sleep, median of 5, inputs rotated past twice the L2).

    python3 bench/attn_grid.py [--json FILE]                 # the grid, then the geomeans
    python3 bench/attn_grid.py --pinned [--groups target]    # also every eligible Hopper row, pinned
    python3 bench/attn_grid.py --one KERNEL B S HQ HKV D C   # 8 launches of one pinned kernel (ncu)
    python3 bench/attn_grid.py --one torch:cudnn B S ...      # 8 of PyTorch's cudnn (flash, efficient) backend
    python3 bench/attn_grid.py --reestimate JSON [--sm 90]   # this build's choices, the run's times
    python3 bench/attn_grid.py --cold | --apart | --chain   # calls alone, or after a GEMM (sweep.isolate)
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sweep  # noqa: E402  (bench/sweep.py, or the bundle's copy beside this file)

# (batch, seqlen, heads q, heads kv, head dim, causal, group): "target" rows are issue 26's,
# "short" more short-sequence shapes, "long" the regression rows (RESULTS.md's headline)
GRID = [
    (32, 512, 16, 16, 128, True, "target"), (16, 256, 32, 32, 128, True, "target"),
    (8, 1024, 16, 16, 64, True, "target"), (1, 128, 32, 8, 128, True, "target"),
    (1, 512, 32, 8, 128, True, "target"),
    (32, 512, 16, 16, 128, False, "short"), (64, 128, 32, 8, 128, True, "short"),
    (64, 128, 32, 8, 128, False, "short"), (16, 256, 32, 8, 128, True, "short"),
    (16, 256, 32, 8, 64, True, "short"), (32, 512, 12, 12, 64, True, "short"),
    (8, 1024, 32, 8, 128, True, "short"), (4, 2048, 32, 8, 128, True, "short"),
    (1, 2048, 32, 8, 128, True, "short"), (16, 256, 8, 8, 256, True, "short"),
    (1, 16384, 16, 16, 128, True, "long"), (4, 4096, 16, 16, 128, True, "long"),
    (1, 16384, 16, 16, 128, False, "long"), (1, 16384, 32, 32, 64, False, "long"),
    (1, 8192, 32, 8, 64, True, "long"), (16, 1024, 16, 16, 128, False, "long"),
]


def case(b, s, hq, hkv, d, causal):
    return sweep._sdpa(b, s, s, hq, hkv, d, causal)


def one(torch, opslib, name, b, s, hq, hkv, d, causal):
    q = torch.randn(b, s, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
    if name.startswith("torch:"):  # PyTorch's backend of that name, called as the grid times it
        fn = sweep.torch_calls(torch, case(b, s, hq, hkv, d, bool(causal)))[name[6:]]
        for _ in range(8):
            fn({"q": q, "k": k, "v": v})
        torch.cuda.synchronize()
        return
    o = torch.empty_like(q)
    h = opslib.Handle("cuda:0")
    h.pin_kernel(name)
    for _ in range(8):
        opslib.sdpa(q, k, v, causal=causal, out=o, handle=h)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", nargs=7, metavar=("KERNEL", "B", "S", "HQ", "HKV", "D", "CAUSAL"))
    ap.add_argument("--pinned", action="store_true", help="time every eligible cuda_sdpa_sm90 row too")
    ap.add_argument("--groups", default="target,short,long", help="the grid's groups to run (comma-separated)")
    ap.add_argument("--reestimate", metavar="JSON", help="a --pinned run's shapes: this build's choices (no GPU)")
    ap.add_argument("--sm", type=int, default=90, help="--reestimate: the described device's SM")
    sweep.isolation_args(ap)
    args = ap.parse_args()
    if args.reestimate:
        return sweep.grid_reestimate(args.reestimate,
                                     lambda r: case(r["b"], r["s"], r["hq"], r["hkv"], r["d"], r["causal"]),
                                     "cuda_sdpa_sm90_", args.sm)
    groups = set(args.groups.split(","))
    found = sweep.torch_and_opslib("attn_grid.py", "its flash and cuDNN backends are the comparison")
    if found is None:
        return 0
    torch, opslib = found
    if args.one:
        one(torch, opslib, args.one[0], *(int(x) for x in args.one[1:]))
        return 0
    l2, timer, gen, out = sweep.grid_session(torch, opslib)
    pre_ops, pre_torch = sweep.isolate(torch, opslib, args, timer, out)
    ratios = {}
    bad = []
    for b, s, hq, hkv, d, causal, group in GRID:
        if group not in groups:
            continue
        c = case(b, s, hq, hkv, d, causal)
        sets = sweep.input_sets(torch, c, gen, l2)
        h = opslib.Handle("cuda:0")
        choice, kernels = sweep.explained(opslib, c, sets[0], h)
        sweep.opslib_call(opslib, c, sets[0], handle=h)
        torch.cuda.synchronize()
        chain = {"ops": {}}
        t_ops = sweep.chained(timer, lambda t: sweep.opslib_call(opslib, c, t, handle=h), sets, pre_ops,
                              chain["ops"])
        best, best_name, errs = None, None, {}
        for name, fn in sweep.torch_calls(torch, c).items():
            if name == "efficient":
                continue
            try:
                ref = fn(sets[0])
                chain[name] = {}
                t = sweep.chained(timer, fn, sets, pre_torch, chain[name])
            except RuntimeError as e:  # a backend that does not take the shape
                errs[name] = str(e).split("\n")[0][:80]
                continue
            if best is None or t < best:
                best, best_name, ref_best = t, name, ref
        err = sweep.rel_err(sweep.opslib_output(c, sets[0]), ref_best) if best is not None else float("nan")
        _, flops = sweep.work(c)
        ratio = best / t_ops if best else float("nan")
        ratios.setdefault(group, []).append(ratio)
        row = {"b": b, "s": s, "hq": hq, "hkv": hkv, "d": d, "causal": causal, "group": group, "choice": choice,
               "plan": kernels.get(choice, {}).get("plan"), "us": t_ops, "tflops": flops / t_ops / 1e6,
               "torch_us": best, "torch_backend": best_name, "torch_errors": errs, "rel_err": err}
        if pre_ops is not None:
            row["chain"] = chain
        out["rows"].append(row)
        if not err <= 2e-2:
            bad.append(row)
        print(f"{group:<6} b{b:<3} s{s:<6} h{hq}:{hkv:<3} d{d:<4} {'causal' if causal else '      '} "
              f"{choice:<26} {t_ops:8.1f} us {flops / t_ops / 1e6:6.1f} TF/s  {best_name} {best:8.1f}  "
              f"{ratio:.2f}x  err {err:.1e}", flush=True)
        if pre_ops is not None and best is not None:
            o, p = chain["ops"], chain[best_name]
            print(f"       chain: GEMM + this call {o['pair_us']:.1f} us (GEMM {o['pre_us']:.1f}); torch.matmul + "
                  f"{best_name} {p['pair_us']:.1f} us (matmul {p['pre_us']:.1f}); {p['pair_us'] / o['pair_us']:.2f}x",
                  flush=True)
        if args.pinned:
            row["pinned"], row["pinned_err"] = {}, {}
            for name in sorted(x for x in kernels if x.startswith("cuda_sdpa_sm90")):
                k = sweep.pinned_run(torch, opslib, c, sets, timer, name, ref_best if best is not None else None)
                if "us" in k:
                    row["pinned"][name] = k["us"]
                row["pinned_err"][name] = k.get("rel_err", k.get("error", float("nan")))
                if not k.get("rel_err", float("nan")) <= 2e-2:
                    bad.append(dict(row, choice=name, rel_err=row["pinned_err"][name]))
            if row["pinned"]:
                print(sweep.pinned_line(row["pinned"], "cuda_sdpa_sm90_", best), flush=True)
        del sets
        torch.cuda.empty_cache()
    for group, r in ratios.items():
        g = sweep.geomean(r)
        out[f"geomean_{group}"], out[f"min_{group}"] = g, min(r)
        print(f"{group}: {len(r)} shapes, geomean {g:.3f}x of PyTorch's best, min {min(r):.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    for r in bad:
        print(f"DIFFERS from PyTorch: b{r['b']} s{r['s']} h{r['hq']}:{r['hkv']} d{r['d']}: {r['choice']} "
              f"rel err {r['rel_err']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
