"""Host time per call from PyTorch, back to back: opslib through its C path (opslib._ext)
and through its ctypes path (opslib._ops), with outputs given and allocated, beside
PyTorch's own eager call for the same work.

Each figure is the median over REPS rounds of ITERS calls issued behind a GPU spin, so the
GPU never waits on the host and the host never waits on the GPU: the time is the host's
alone. The rounds of the five columns interleave, so the host's noise (it is shared) falls
on all of them alike; the JSON has each column's best round too. Shapes are decode-sized (the kernels take a few microseconds), where host cost
decides the step time. Prints a table and writes JSON (--json)."""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import opslib
from opslib import _ops

ITERS, REPS = 200, 15


def host_us(fns):
    """{name: (median, best round)} of each fn's host time per call, the rounds interleaved
    (round r of every fn, then round r + 1), so that the host's noise falls on all alike."""
    for fn in fns.values():
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
    rounds = {name: [] for name in fns}
    for _ in range(REPS):
        for name, fn in fns.items():
            torch.cuda._sleep(int(6e7))  # ~30 ms of spin: every call below queues behind it
            t0 = time.perf_counter()
            for _ in range(ITERS):
                fn()
            rounds[name].append((time.perf_counter() - t0) / ITERS * 1e6)
            torch.cuda.synchronize()
    return {name: (statistics.median(r), min(r)) for name, r in rounds.items()}


def cases():
    dev, bf = "cuda", torch.bfloat16
    r = lambda *s, dtype=bf: torch.randn(*s, device=dev, dtype=dtype)  # noqa: E731
    # decode attention: 8 sequences of 1024 keys, 32 query heads over 8 KV heads, d 128
    q, k, v = r(8, 1, 32, 128), r(8, 1024, 8, 128), r(8, 1024, 8, 128)
    o = torch.empty_like(q)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    yield ("sdpa", "decode B8 Hq32/8 kv1k d128",
           {"given": lambda: opslib.sdpa(q, k, v, out=o), "alloc": lambda: opslib.sdpa(q, k, v)},
           {"given": lambda: _ops.sdpa(q, k, v, out=o), "alloc": lambda: _ops.sdpa(q, k, v)},
           lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True))
    a, b = r(16, 4096), r(4096, 4096)
    d = torch.empty(16, 4096, device=dev, dtype=bf)
    yield ("gemm", "M16 N4096 K4096",
           {"given": lambda: opslib.gemm(a, b, out=d), "alloc": lambda: opslib.gemm(a, b)},
           {"given": lambda: _ops.gemm(a, b, out=d), "alloc": lambda: _ops.gemm(a, b)},
           lambda: torch.mm(a, b))
    x, w = r(16, 4096), r(4096)
    y = torch.empty_like(x)
    yield ("rmsnorm", "16x4096",
           {"given": lambda: opslib.rmsnorm(x, w, out=y), "alloc": lambda: opslib.rmsnorm(x, w)},
           {"given": lambda: _ops.rmsnorm(x, w, out=y), "alloc": lambda: _ops.rmsnorm(x, w)},
           lambda: F.rms_norm(x, (4096,), w))
    s = r(512, 1024)
    ys = torch.empty_like(s)
    yield ("softmax", "512x1024",
           {"given": lambda: opslib.softmax(s, out=ys), "alloc": lambda: opslib.softmax(s)},
           {"given": lambda: _ops.softmax(s, out=ys), "alloc": lambda: _ops.softmax(s)},
           lambda: torch.softmax(s, -1))
    yield ("add", "16x4096",
           {"given": lambda: opslib.add(x, y, out=y), "alloc": lambda: opslib.add(x, y)},
           {"given": lambda: _ops.add(x, y, out=y), "alloc": lambda: _ops.add(x, y)},
           lambda: torch.add(x, y))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--only", help="these ops, in this order (comma-separated: sdpa,gemm,rmsnorm,softmax,add); "
                    "default all, sdpa first")
    args = ap.parse_args()
    only = args.only.split(",") if args.only else None
    ext = opslib.extension()
    if not ext["loaded"]:
        raise SystemExit(f"host_cost.py: the C path is not loaded: {ext['reason']}")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, opslib {opslib.version()}, "
          f"{ITERS} calls x {REPS} rounds (median)")
    print(f"{'op':<8} {'shape':<28} {'C given':>8} {'C alloc':>8} {'py given':>9} {'py alloc':>9} {'torch':>7}")
    rows = []
    table = {c[0]: c for c in cases()}
    if only and not set(only) <= set(table):
        raise SystemExit(f"host_cost.py: --only: expected names from {sorted(table)}, got {args.only!r}")
    for op, shape, fast, slow, theirs in (table[n] for n in only) if only else table.values():
        before = opslib.extension()["fast_calls"]
        t = host_us({"c_given": fast["given"], "c_alloc": fast["alloc"], "py_given": slow["given"],
                     "py_alloc": slow["alloc"], "torch": theirs})
        row = {"op": op, "shape": shape, **{f"{k}_us": v[0] for k, v in t.items()},
               "best_round_us": {k: v[1] for k, v in t.items()}}
        # every call of the C columns ran in C (none passed to Python)
        row["c_calls"] = opslib.extension()["fast_calls"] - before
        assert row["c_calls"] == 2 * (20 + ITERS * REPS), row
        rows.append(row)
        print(f"{op:<8} {shape:<28} {row['c_given_us']:8.2f} {row['c_alloc_us']:8.2f} "
              f"{row['py_given_us']:9.2f} {row['py_alloc_us']:9.2f} {row['torch_us']:7.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date": time.strftime("%Y-%m-%d"), "iters": ITERS, "reps": REPS, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
