#!/usr/bin/env python3
"""What a call pays to fetch its code again: its GPU time after a kernel of 200 KB of code less its
time after one of 3 KB running the same FMAs (bench/code_refetch.cu, a module of their own),
ours and PyTorch's alike. In a model step every kernel follows other kernels (a projection, a
norm, an activation), whose code has taken the SMs' instruction caches; back-to-back calls of
one kernel (the grids) find their code cached. Kernel times from CUPTI (torch.profiler): a
call's kernels summed (memsets too), the median over 30 calls, each after its evicting kernel.

    python3 bench/code_refetch.py [--json FILE] [--groups target,short] [--ms 16,128,512]
                                  [--rows 1,16,128,4096] [--bwd]

The cubin is built with nvcc (PATH, else /usr/local/cuda/bin) for the device's SM.
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import attn_grid  # noqa: E402
import gemm_grid  # noqa: E402
import grid_cmp  # noqa: E402
import sweep  # noqa: E402

CALLS = 30
GEMMS = [(4096, 4096), (6144, 4096), (1024, 1024)]  # (N, K), weights K-major; M from --ms
ROW_OPS, ROW_COLS = ("rmsnorm", "softmax"), 4096  # rows from --rows
BWD_MAX_S = 512  # --bwd: the sweep's causal backward calls of at most this many tokens a sequence


class Evictors:
    """code_small and code_big, launched on torch's current stream through the driver API."""

    def __init__(self, torch):
        major, minor = torch.cuda.get_device_capability()
        arch = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        self.dir = tempfile.mkdtemp(prefix="code_refetch")
        cubin = os.path.join(self.dir, "code_refetch.cubin")
        subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", os.path.join(HERE, "code_refetch.cu"), "-o", cubin],
                       check=True)
        torch.zeros(1, device="cuda")  # the context the module goes into
        self.torch, self.cu = torch, ctypes.CDLL("libcuda.so.1")
        mod = ctypes.c_void_p()
        self._check(self.cu.cuModuleLoad(ctypes.byref(mod), cubin.encode()), "cuModuleLoad")
        self.fn = {}
        for name in ("code_small", "code_big"):
            f = ctypes.c_void_p()
            self._check(self.cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()), "cuModuleGetFunction")
            self.fn[name] = f
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.buf = torch.empty(self.sms * 256, device="cuda")

    @staticmethod
    def _check(r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUresult {r}")

    def launch(self, name):
        out, n = ctypes.c_void_p(self.buf.data_ptr()), ctypes.c_int(400 if name == "code_small" else 1)
        args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
                                     ctypes.cast(ctypes.byref(n), ctypes.c_void_p))
        stream = ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        self._check(self.cu.cuLaunchKernel(self.fn[name], self.sms, 1, 1, 256, 1, 1, 0, stream, args, None),
                    "cuLaunchKernel")


def after(torch, ev, name, fn, sets, own=False):
    """fn's kernel time a call (us, its kernels summed; median of CALLS), each call after `name`;
    own: `name`'s own time instead."""
    from torch.profiler import ProfilerActivity, profile

    def loop(n):
        torch.cuda._sleep(int(2e7))  # the host queues every call before the GPU starts them
        for i in range(n):
            ev.launch(name)
            fn(sets[i % len(sets)])
        torch.cuda.synchronize()

    loop(3)
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        loop(CALLS)
    path = os.path.join(ev.dir, "trace.json")
    p.export_chrome_trace(path)
    work = sorted((e for e in json.load(open(path))["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset")),
                  key=lambda e: e["ts"])
    if own:
        return statistics.median(e["dur"] for e in work if e["name"] == name)
    calls = []
    for e in work:  # a call: the kernels and memsets between one evicting kernel and the next
        if e["name"] == name:
            calls.append(0.0)
        elif calls:
            calls[-1] += e["dur"]
    return statistics.median(calls)


def measure(torch, ev, fn, sets):
    small, big = after(torch, ev, "code_small", fn, sets), after(torch, ev, "code_big", fn, sets)
    return {"after_small_us": small, "after_big_us": big, "refetch_us": big - small}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--groups", default="target,short",
                    help="attn_grid.py's groups (comma-separated; none: no attention)")
    ap.add_argument("--ms", default="16,128,512", help="the GEMMs' M values (none: no GEMM)")
    ap.add_argument("--rows", default="none", help=f"rows of {' and '.join(ROW_OPS)} over {ROW_COLS} columns")
    ap.add_argument("--bwd", action="store_true",
                    help=f"the sweep's causal attention backward calls of S <= {BWD_MAX_S} too")
    args = ap.parse_args()
    found = sweep.torch_and_opslib("code_refetch.py", "its kernels are the comparison")
    if found is None:
        return 0
    torch, opslib = found
    ev = Evictors(torch)
    l2, _, gen, out = sweep.grid_session(torch, opslib)
    h = opslib.Handle("cuda:0")
    out["evictors_us"] = {n: after(torch, ev, n, lambda t: None, [None], own=True)
                          for n in ("code_small", "code_big")}
    print("the evicting kernels' own times: " + ", ".join(f"{n} {t:.1f} us" for n, t in out["evictors_us"].items()))
    print(f"{'call':<40} {'':<10} {'after 3 KB':>12} {'after 200 KB':>12}  refetch")

    def report(label, who, r):
        print(f"{label:<40} {who:<10} {r['after_small_us']:12.1f} {r['after_big_us']:12.1f}  {r['refetch_us']:+6.1f} us "
              f"({r['after_big_us'] / r['after_small_us']:.3f}x)", flush=True)

    cases = []
    groups = set(args.groups.split(","))
    for b, s, hq, hkv, d, causal, group in attn_grid.GRID:
        if group in groups:
            c = attn_grid.case(b, s, hq, hkv, d, causal)
            cases.append(({"b": b, "s": s, "hq": hq, "hkv": hkv, "d": d, "causal": causal}, c,
                          {n: f for n, f in sweep.torch_calls(torch, c).items() if n != "efficient"}))
    for n, k in GEMMS:
        for m in ([] if args.ms == "none" else [int(x) for x in args.ms.split(",")]):
            cases.append(({"m": m, "n": n, "k": k}, gemm_grid.case(m, n, k),
                          {"matmul": lambda t: torch.matmul(t["a"], t["b"])}))
    row_counts = [] if args.rows == "none" else [int(x) for x in args.rows.split(",")]
    for op in ROW_OPS:
        for rows in row_counts:
            c = {"op": op, "family": "rows", "dtype": "bf16", "rows": rows, "cols": ROW_COLS}
            cases.append(({"op": op, "rows": rows, "cols": ROW_COLS}, c, sweep.torch_calls(torch, c)))
    for c in sweep.sdpa_bwd_grid(False) if args.bwd else []:
        if not c["causal"] or c["sq"] > BWD_MAX_S:
            continue
        cases.append(({"op": "sdpa_bwd", "b": c["b"], "s": c["sq"], "hq": c["hq"], "hkv": c["hkv"], "d": c["d"],
                       "causal": c["causal"]}, c, sweep.torch_calls(torch, c)))
    for shape, c, theirs in cases:
        sets = sweep.input_sets(torch, c, gen, l2)
        for t in sets:  # the backward's o and lse, outside the timing
            sweep.prepare(opslib, c, t)
        label = grid_cmp.label(shape)  # the grids' names of shapes
        row = dict(shape, call=label,
                   ops=measure(torch, ev, lambda t: sweep.opslib_call(opslib, c, t, handle=h), sets))
        report(label, "opslib", row["ops"])
        for name, fn in theirs.items():
            try:  # on every set: PyTorch's backward runs its forward once a set, outside the timing
                for t in sets:
                    fn(t)
            except RuntimeError:  # a backend that does not take the shape
                continue
            row[name] = measure(torch, ev, fn, sets)
            report("", name, row[name])
        out["rows"].append(row)
        del sets
        torch.cuda.empty_cache()
    ours = [r["ops"]["refetch_us"] for r in out["rows"]]
    print(f"opslib's refetch over {len(ours)} calls: median {statistics.median(ours):+.1f} us, max {max(ours):+.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
