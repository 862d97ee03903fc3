#!/usr/bin/env python3
"""The workload sweep: every eligible opslib kernel (pinned), the dispatcher's own choice and
PyTorch's fastest backend, timed on a grid of the shapes real models issue.

    python3 bench/sweep.py [--ops sdpa,decode,sdpa_bwd,gemm,rows,reduce] [--quick] [--shapes REGEX]
                           [--json FILE]
    python3 bench/sweep.py --list                       # the grid (no GPU, no torch)
    python3 bench/sweep.py --summary FILE [--md]        # regret, model error, vs PyTorch
    python3 bench/sweep.py --reestimate FILE [--json OUT] [--md]
                                    # the same, with this build's choices and estimates
                                    # (explain on a described device: no GPU needed)

The grid: LLM prefill and training attention (tokens 128 to 64k, batch 1 to 64, head dims
64 / 96 / 128 / 256, MHA and GQA 4:1 / 8:1, causal or not, varlen batches), decode (Sq 1 to
16 over KV 1k to 128k), the attention backward of training steps (128 to 16k tokens a sequence,
the forward's o and LSE made once outside the timing, PyTorch's backward through autograd), the projections of Llama-3 8B / 70B and Mistral-class models for M
from 1 to 16k (weights K-major, as nn.Linear stores them: a @ w.T), and RMSNorm /
LayerNorm / softmax / row sums from 1 row to 64k rows.

Timing is GPU time: a GPU sleep is queued first, then two events around N back-to-back calls
(N sized to ~2 ms of work), so the host's cost of issuing the calls stays hidden behind the
sleep; the median of 5 such runs over input sets rotated past twice the L2. Before each
contender the GPU idles for `--cooldown` seconds plus as long as the previous contender kept
it busy (an H100 at its 700 W cap drops its clock; see compare.py).

Per shape the JSON keeps: each eligible kernel's measured us, explain's estimate and cost
terms; the dispatcher's choice (timed unpinned) and its estimate; PyTorch's backends.
The summary per op: regret (the choice's time over the fastest eligible kernel's), model
error (estimate over measured), and opslib's choice against PyTorch's best.
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(HERE, "python"), os.path.join(HERE, "..", "python")):  # bundle, checkout
    if os.path.isdir(os.path.join(_p, "opslib")):
        sys.path.insert(0, _p)
        break


# ---- the grid ------------------------------------------------------------------------------

def _sdpa(b, sq, sk, hq, hkv, d, causal, family="sdpa", lens=None, dtype="bf16"):
    c = {"op": "sdpa", "family": family, "dtype": dtype, "b": b, "sq": sq, "sk": sk, "hq": hq, "hkv": hkv,
         "d": d, "causal": causal}
    if lens is not None:
        c["lens"] = lens  # varlen: one length a sequence, q and k alike (b = len(lens), sq = sk = max)
    tag = f"b{b} sq{sq} sk{sk} h{hq}:{hkv} d{d}{' causal' if causal else ''}"
    c["id"] = f"sdpa {tag}" if lens is None else f"sdpa varlen {len(lens)}x<={max(lens)} h{hq}:{hkv} d{d}" + \
        (" causal" if causal else "")
    return c


def sdpa_grid(quick):
    g = []
    # (batch, tokens a sequence): the product spans 128 to 64k tokens a call
    bs = [(1, 128), (1, 512), (1, 2048), (1, 8192), (1, 32768), (2, 16384), (4, 4096), (8, 1024),
          (16, 256), (16, 1024), (32, 512), (64, 128)]
    heads = [(32, 8, 128), (32, 32, 128), (16, 16, 128), (32, 8, 64), (12, 12, 64), (8, 8, 256), (32, 32, 96)]
    if quick:
        bs, heads = bs[:2], heads[:1]
    for b, s in bs:
        for hq, hkv, d in heads:
            if b * s * hq * d > (1 << 27):      # keep a case under ~256 MB a tensor
                continue
            if d in (256, 96) and (b, s) not in ((1, 2048), (4, 4096), (16, 256), (1, 8192)):
                continue
            if (hq, hkv) == (12, 12) and (b, s) not in ((64, 128), (8, 1024), (32, 512), (4, 4096)):
                continue
            for causal in (True, False):
                if not causal and (hq, hkv, d) not in ((32, 8, 128), (16, 16, 128), (12, 12, 64), (8, 8, 256)):
                    continue
                g.append(_sdpa(b, s, s, hq, hkv, d, causal))
    if not quick:
        # varlen batches of mixed lengths (packed, as a serving or packed-training batch)
        for lens, causal in (([1000, 17, 4097, 512, 2048, 300], True), ([128] * 7 + [3000], True),
                             ([8192, 64, 64, 2048], False), ([256 * (i + 1) for i in range(16)], True)):
            g.append(_sdpa(len(lens), max(lens), max(lens), 32, 8, 128, causal, lens=lens))
    return g


def decode_grid(quick):
    g = []
    cfg = [(1, 131072), (8, 32768), (64, 4096), (1, 1024), (1, 4096), (4, 16384), (32, 8192), (16, 2048)]
    if quick:
        cfg = cfg[:2]
    for b, kv in cfg:
        for sq in (1, 4, 16):
            if sq > 1 and b * kv > 8 * 32768:
                continue
            g.append(_sdpa(b, sq, kv, 32, 8, 128, sq > 1, family="decode"))
    if not quick:
        # short calls whose part count a cluster's smaller count replaces on the H100
        for b, kv in ((8, 1024), (16, 1024), (8, 2048)):
            g.append(_sdpa(b, 1, kv, 32, 8, 128, False, family="decode"))
        g.append(_sdpa(16, 1, 8192, 64, 8, 128, False, family="decode"))
        g.append(_sdpa(8, 1, 8192, 32, 8, 64, False, family="decode"))
        g.append(_sdpa(8, 1, 8192, 32, 32, 128, False, family="decode"))
        # head dim 64 (the d64 split kernels' own shapes: one call alone leaves them unfitted)
        for b, kv in ((1, 4096), (64, 4096), (8, 32768), (32, 2048)):
            for sq in (1, 4, 16):
                g.append(_sdpa(b, sq, kv, 32, 8, 64, sq > 1, family="decode"))
    return g


# (name, N, K) of nn.Linear weights [N, K]
PROJECTIONS = [("l3-8b qkv", 6144, 4096), ("l3-8b o", 4096, 4096), ("l3-8b gate_up", 28672, 4096),
               ("l3-8b down", 4096, 14336), ("l3-70b qkv", 10240, 8192), ("l3-70b o", 8192, 8192),
               ("l3-70b up", 28672, 8192), ("l3-70b down", 8192, 28672), ("mistral-7b up", 14336, 4096)]


def gemm_grid(quick):
    g = []
    ms = [1, 16, 32, 64, 128, 256, 512, 2048, 8192, 16384]
    projs = PROJECTIONS
    if quick:
        ms, projs = [16, 2048], projs[:2]
    for name, n, k in projs:
        for m in ms:
            if m * n * k > 16384 * 28672 * 4096 * 1.01:   # <= ~4 TFLOP a call
                continue
            if m in (32, 256) and name in ("l3-8b gate_up", "l3-70b qkv"):  # the rest: issue 26's grid
                continue
            g.append({"op": "gemm", "family": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "proj": name,
                      "id": f"gemm {name} m{m} n{n} k{k}"})
    return g


def rows_grid(quick):
    g = []
    shapes = [(1, 4096), (16, 4096), (128, 4096), (1024, 4096), (4096, 4096), (16384, 4096), (65536, 4096),
              (8192, 8192), (32768, 1024), (2048, 16384), (512, 32000)]
    if quick:
        shapes = shapes[:3]
    for rows, cols in shapes:
        for op in ("rmsnorm", "layernorm", "softmax"):
            if op == "softmax" and cols == 4096 and rows in (16, 1024):
                continue
            if op == "layernorm" and rows in (16, 1024, 65536):
                continue
            g.append({"op": op, "family": "rows", "dtype": "bf16", "rows": rows, "cols": cols,
                      "id": f"{op} {rows}x{cols}"})
    return g


def reduce_grid(quick):
    g = []
    shapes = [(1, 4096), (128, 4096), (4096, 4096), (65536, 1024), (16384, 4096)]
    if quick:
        shapes = shapes[:2]
    for rows, cols in shapes:
        g.append({"op": "reduce", "family": "reduce", "dtype": "bf16", "rows": rows, "cols": cols, "axis": 1,
                  "id": f"sum last {rows}x{cols}"})
    for rows, cols in ((16384, 4096), (4096, 1024)):
        g.append({"op": "reduce", "family": "reduce", "dtype": "bf16", "rows": rows, "cols": cols, "axis": 0,
                  "id": f"sum axis0 {rows}x{cols}"})
    return g


def heldout_grid(quick):
    """Shapes the 2026-11-24 calibration was not fitted to: the summary reports them apart."""
    if quick:
        return []
    g = [_sdpa(2, 4096, 4096, 32, 8, 128, True), _sdpa(2, 4096, 4096, 32, 8, 128, False),
         _sdpa(4, 2048, 2048, 16, 16, 128, True), _sdpa(1, 16384, 16384, 32, 8, 64, True),
         _sdpa(2, 1, 65536, 32, 8, 128, False, family="decode"),
         _sdpa(128, 1, 1024, 32, 8, 128, False, family="decode"),
         _sdpa(4, 8, 8192, 32, 8, 128, True, family="decode")]
    for name, n, k in (PROJECTIONS[0], PROJECTIONS[5], PROJECTIONS[2]):
        for m in (96, 1024, 4096):
            g.append({"op": "gemm", "family": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "proj": name,
                      "id": f"gemm {name} m{m} n{n} k{k}"})
    for rows, cols in ((4096, 1024), (8192, 768), (2048, 2048)):
        for op in ("rmsnorm", "layernorm", "softmax"):
            g.append({"op": op, "family": "rows", "dtype": "bf16", "rows": rows, "cols": cols,
                      "id": f"{op} {rows}x{cols}"})
    for c in g:
        c["heldout"] = True
    return g


def sdpa_bwd_grid(quick):
    """Training steps' attention backward: short and long sequences, MHA and GQA, d 64 / 128 / 256."""
    cfg = [(2, 128, 8, 2, 64, False), (1, 512, 16, 16, 64, False), (4, 512, 16, 16, 64, True),
           (8, 1024, 16, 16, 64, True), (1, 8192, 32, 8, 64, True), (1, 512, 32, 8, 128, True),
           (16, 256, 32, 32, 128, True), (32, 512, 16, 16, 128, True), (16, 1024, 16, 16, 128, False),
           (4, 4096, 16, 16, 128, False), (4, 4096, 16, 16, 128, True), (2, 2048, 32, 8, 128, True),
           (1, 16384, 16, 16, 128, True), (64, 128, 12, 12, 64, False),
           (1, 128, 8, 8, 256, False), (4, 512, 8, 8, 256, True), (2, 1024, 16, 4, 256, True),
           (8, 1024, 8, 8, 256, False), (1, 4096, 8, 8, 256, True), (2, 4096, 8, 8, 256, False)]
    if quick:
        cfg = cfg[:3]
    g = []
    for b, s, hq, hkv, d, causal in cfg:
        c = _sdpa(b, s, s, hq, hkv, d, causal, family="sdpa_bwd")
        c["op"] = "sdpa_bwd"
        c["id"] = c["id"].replace("sdpa ", "sdpa_bwd ", 1)
        g.append(c)
    return g


GRIDS = {"sdpa": sdpa_grid, "decode": decode_grid, "sdpa_bwd": sdpa_bwd_grid, "gemm": gemm_grid,
         "rows": rows_grid, "reduce": reduce_grid, "heldout": heldout_grid}


def grid(ops, quick, shapes=None):
    """The shapes of ops (those whose id matches the regular expression `shapes`, if given)."""
    return [c for op in ops for c in GRIDS[op](quick) if shapes is None or re.search(shapes, c["id"])]


# ---- work: the minimal bytes and flops of a case -------------------------------------------

def visible_pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    if sk >= sq:  # bottom-right: query i sees keys 0 .. i + sk - sq
        return sq * (sk - sq + 1) + sq * (sq - 1) / 2
    return sk * (sk + 1) / 2


def work(c):
    e = 2  # bf16
    if c["op"] == "sdpa":
        lens = c.get("lens") or [c["sq"]] * c["b"]
        kv = c.get("lens") or [c["sk"]] * c["b"]
        pairs = sum(visible_pairs(q, k, c["causal"]) for q, k in zip(lens, kv))
        flops = 4.0 * c["hq"] * c["d"] * pairs
        nbytes = e * (2 * sum(lens) * c["hq"] * c["d"] + 2 * sum(kv) * c["hkv"] * c["d"])
        return nbytes, flops
    if c["op"] == "sdpa_bwd":  # FLOPs as 2.5 x the forward's; q, o, dout, dq and k, v, dk, dv
        pairs = c["b"] * visible_pairs(c["sq"], c["sk"], c["causal"])
        return e * 4 * c["d"] * (c["b"] * c["sq"] * c["hq"] + c["b"] * c["sk"] * c["hkv"]), 10.0 * c["hq"] * c["d"] * pairs
    if c["op"] == "gemm":
        m, n, k = c["m"], c["n"], c["k"]
        return e * (m * k + n * k + m * n), 2.0 * m * n * k
    n = c["rows"] * c["cols"]
    if c["op"] == "reduce":
        return e * n + 4 * (c["rows"] if c["axis"] == 1 else c["cols"]), float(n)
    return 2 * e * n + e * c["cols"], 8.0 * n


# ---- operands: torch tensors on the GPU host, TensorSpecs for explain anywhere ---------------

def operands(c, alloc):
    """The case's operands, from alloc(shape, dtype, strides=None, fill='randn'|'empty'|values)."""
    t = {}
    if c["op"] == "sdpa":
        if "lens" in c:
            total = sum(c["lens"])
            t["q"] = alloc((total, c["hq"], c["d"]), c["dtype"])
            t["k"] = alloc((total, c["hkv"], c["d"]), c["dtype"])
            t["v"] = alloc((total, c["hkv"], c["d"]), c["dtype"])
            t["o"] = alloc((total, c["hq"], c["d"]), c["dtype"], fill="empty")
            cu = [0]
            for n in c["lens"]:
                cu.append(cu[-1] + n)
            t["cu"] = alloc((len(cu),), "i32", fill=cu)
        else:
            b, sq, sk = c["b"], c["sq"], c["sk"]
            t["q"] = alloc((b, sq, c["hq"], c["d"]), c["dtype"])
            t["k"] = alloc((b, sk, c["hkv"], c["d"]), c["dtype"])
            t["v"] = alloc((b, sk, c["hkv"], c["d"]), c["dtype"])
            t["o"] = alloc((b, sq, c["hq"], c["d"]), c["dtype"], fill="empty")
    elif c["op"] == "sdpa_bwd":  # o and lse: the forward's (prepare)
        b, sq, sk = c["b"], c["sq"], c["sk"]
        for name, s, h, fill in (("q", sq, c["hq"], "randn"), ("k", sk, c["hkv"], "randn"), ("v", sk, c["hkv"], "randn"),
                                 ("do", sq, c["hq"], "randn"), ("o", sq, c["hq"], "empty"),
                                 ("dq", sq, c["hq"], "empty"), ("dk", sk, c["hkv"], "empty"),
                                 ("dv", sk, c["hkv"], "empty")):
            t[name] = alloc((b, s, h, c["d"]), c["dtype"], fill=fill)
        t["lse"] = alloc((b, c["hq"], sq), "f32", fill="empty")
    elif c["op"] == "gemm":
        m, n, k = c["m"], c["n"], c["k"]
        t["a"] = alloc((m, k), c["dtype"])
        t["b"] = alloc((k, n), c["dtype"], strides=(1, k))  # w [N, K] K-major, read as w.T
        t["d"] = alloc((m, n), c["dtype"], fill="empty")
    else:
        rows, cols = c["rows"], c["cols"]
        t["x"] = alloc((rows, cols), c["dtype"])
        if c["op"] == "reduce":
            t["y"] = alloc((rows,) if c["axis"] == 1 else (cols,), "f32", fill="empty")
        else:
            t["w"] = alloc((cols,), c["dtype"])
            t["bias"] = alloc((cols,), c["dtype"])
            t["y"] = alloc((rows, cols), c["dtype"], fill="empty")
    return t


def prepare(opslib, c, t):
    """What an input set needs from opslib before it is timed: the backward's o and lse."""
    if c["op"] == "sdpa_bwd":
        opslib.sdpa(t["q"], t["k"], t["v"], causal=c["causal"], out=t["o"], lse=t["lse"])


def opslib_output(c, t):
    """opslib's output in the logical shape of PyTorch's (the backward's: dq)."""
    if c["op"] == "sdpa_bwd":
        return t["dq"].transpose(1, 2)
    if c["op"] == "sdpa":
        return t["o"] if "lens" in c else t["o"].transpose(1, 2)
    return t["d"] if c["op"] == "gemm" else t["y"]


def opslib_call(opslib, c, t, **kw):
    """Runs the case through opslib (kw: handle=, _explain=True)."""
    if c["op"] == "sdpa":
        if "lens" in c:
            m = max(c["lens"])
            return opslib.sdpa(t["q"], t["k"], t["v"], causal=c["causal"], cu_seqlens_q=t["cu"],
                               cu_seqlens_k=t["cu"], max_seqlen_q=m, max_seqlen_k=m, out=t["o"], **kw)
        return opslib.sdpa(t["q"], t["k"], t["v"], causal=c["causal"], out=t["o"], **kw)
    if c["op"] == "sdpa_bwd":
        return opslib.sdpa_backward(t["do"], t["q"], t["k"], t["v"], t["o"], t["lse"], causal=c["causal"],
                                    dq=t["dq"], dk=t["dk"], dv=t["dv"], **kw)
    if c["op"] == "gemm":
        return opslib.gemm(t["a"], t["b"], out=t["d"], **kw)
    if c["op"] == "rmsnorm":
        return opslib.rmsnorm(t["x"], t["w"], out=t["y"], **kw)
    if c["op"] == "layernorm":
        return opslib.layernorm(t["x"], t["w"], t["bias"], out=t["y"], **kw)
    if c["op"] == "softmax":
        return opslib.softmax(t["x"], out=t["y"], **kw)
    return opslib.sum(t["x"], c["axis"], out=t["y"], **kw)


def torch_calls(torch, c):
    """PyTorch's ways of doing the case: {backend: fn(tensors)}."""
    F = torch.nn.functional
    if c["op"] == "sdpa_bwd":  # the forward once an input set (outside the timing), then autograd
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def backward(bk):
            graphs = {}

            def run(t):
                if id(t) not in graphs:
                    q, k, v = (t[n].transpose(1, 2).detach().requires_grad_(True) for n in ("q", "k", "v"))
                    with sdpa_kernel(bk):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"],
                                                           enable_gqa=c["hq"] != c["hkv"])
                    graphs[id(t)] = (o, q, k, v)
                o, q, k, v = graphs[id(t)]
                return torch.autograd.grad(o, (q, k, v), t["do"].transpose(1, 2), retain_graph=True)[0]
            return run
        return {"flash": backward(SDPBackend.FLASH_ATTENTION), "cudnn": backward(SDPBackend.CUDNN_ATTENTION)}
    if c["op"] == "sdpa":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        gqa = c["hq"] != c["hkv"]

        def bhsd(x):
            return x.transpose(1, 2)

        if "lens" in c:
            def varlen_flash(t, c=c):  # the varlen flash kernel PyTorch's nested tensors use
                m = max(c["lens"])
                return torch.ops.aten._flash_attention_forward(t["q"], t["k"], t["v"], t["cu"], t["cu"], m, m,
                                                               0.0, c["causal"], False)[0]
            return {"flash_varlen": varlen_flash}
        causal = c["causal"] and c["sq"] > 1
        mask = None
        if causal and c["sq"] != c["sk"]:
            from torch.nn.attention.bias import causal_lower_right
            mask = causal_lower_right(c["sq"], c["sk"])

        def backend(bk):
            def run(t):
                with sdpa_kernel(bk):
                    if mask is not None:
                        return F.scaled_dot_product_attention(bhsd(t["q"]), bhsd(t["k"]), bhsd(t["v"]),
                                                              attn_mask=mask, enable_gqa=gqa)
                    return F.scaled_dot_product_attention(bhsd(t["q"]), bhsd(t["k"]), bhsd(t["v"]),
                                                          is_causal=causal, enable_gqa=gqa)
            return run
        return {"flash": backend(SDPBackend.FLASH_ATTENTION), "cudnn": backend(SDPBackend.CUDNN_ATTENTION),
                "efficient": backend(SDPBackend.EFFICIENT_ATTENTION)}
    if c["op"] == "gemm":
        return {"matmul": lambda t: torch.matmul(t["a"], t["b"])}
    cols = c.get("cols")
    if c["op"] == "rmsnorm":
        return {"eager": lambda t: F.rms_norm(t["x"], (cols,), t["w"], 1e-5)}
    if c["op"] == "layernorm":
        return {"eager": lambda t: F.layer_norm(t["x"], (cols,), t["w"], t["bias"], 1e-5)}
    if c["op"] == "softmax":
        return {"eager": lambda t: torch.softmax(t["x"], -1)}
    return {"eager": lambda t: t["x"].sum(c["axis"], dtype=torch.float32)}


# ---- explain: the choice, the estimates and their terms -------------------------------------

COST_RE = re.compile(r"memory (?P<mem_us>[\d.e+-]+) us \((?P<mb>[\d.e+-]+) MB\), math (?P<math_us>[\d.e+-]+|inf) us "
                     r"\((?P<gflop>[\d.e+-]+) GFLOP\), waves (?P<waves>\d+) x(?P<wave_factor>[\d.]+) "
                     r"\((?P<blocks>[\d.e+]+) blocks\), padding x(?P<pad>[\d.]+)")


def explained(opslib, c, t, handle):
    e = opslib_call(opslib, c, t, handle=handle, _explain=True)
    kernels = {}
    for v in e.verdicts:
        if v["reason"] != "eligible":
            continue
        k = {"est_us": v["est_us"], "terms": v["message"]}
        if v.get("plan"):
            k["plan"] = v["plan"]
        m = COST_RE.search(v["message"])
        if m:
            k.update({key: float(val) for key, val in m.groupdict().items()})
        kernels[v["kernel"]] = k
    return e.chosen, kernels


# ---- timing ------------------------------------------------------------------------------

class Timer:
    """between: None, or a callable queued before every timed call, which is then timed alone
    (events around it; the median of reps x 20 calls; isolate sets it)."""

    def __init__(self, torch, cooldown, between=None):
        self.torch, self.cooldown, self.busy_s, self.between = torch, cooldown, 0.0, between

    def time(self, fn, sets, reps=5):
        """Median GPU us a call of fn over rotating input sets (see the module's docstring)."""
        torch = self.torch
        torch.cuda.synchronize()
        time.sleep(self.cooldown + min(self.busy_s, 2.0))
        t0 = time.perf_counter()
        for i in range(2):
            fn(sets[i % len(sets)])
        if self.between is not None:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(20 * reps)]
            for i, (a, b) in enumerate(ev):
                self.between()
                a.record()
                fn(sets[i % len(sets)])
                b.record()
            torch.cuda.synchronize()
            self.busy_s = time.perf_counter() - t0
            return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(sets[0])
        b.record()
        torch.cuda.synchronize()
        one_us = max(a.elapsed_time(b) * 1e3, 1.0)
        n = int(min(200, max(3, 2000.0 / one_us)))
        per = []
        for _ in range(reps):
            torch.cuda._sleep(int(2e6 * max(20, n * 0.15)))  # ~1 ms per 2e6 cycles: n * 150 us of host time
            a.record()
            for i in range(n):
                fn(sets[i % len(sets)])
            b.record()
            torch.cuda.synchronize()
            per.append(a.elapsed_time(b) * 1e3 / n)
        self.busy_s = time.perf_counter() - t0
        return statistics.median(per)


def torch_alloc(torch, gen):
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "i32": torch.int32}

    def alloc(shape, dtype, strides=None, fill="randn"):
        if isinstance(fill, list):
            return torch.tensor(fill, dtype=dt[dtype], device="cuda")
        if strides is None:
            x = torch.empty(shape, dtype=dt[dtype], device="cuda")
        else:
            x = torch.empty_strided(shape, strides, dtype=dt[dtype], device="cuda")
        if fill == "randn":
            x.normal_(generator=gen)
        else:
            x.fill_(float("nan"))
        return x
    return alloc


def input_sets(torch, c, gen, l2, budget=6 << 30):
    first = operands(c, torch_alloc(torch, gen))
    size = sum(x.numel() * x.element_size() for x in first.values())
    n = 1 if size >= 2 * l2 else min(math.ceil(2 * l2 / max(size, 1)), 32, max(1, budget // max(size, 1)))
    return [first] + [operands(c, torch_alloc(torch, gen)) for _ in range(n - 1)]


def rel_err(got, want):
    if tuple(got.shape) != tuple(want.shape):
        return math.inf
    got, want = got.float(), want.float()
    if not bool(got.isfinite().all()):
        return math.inf
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def pinned_run(torch, opslib, c, sets, timer, name, ref):
    """Kernel `name` pinned on case c: its output poisoned (NaN, so that any of it left unwritten
    shows), one call checked against ref (PyTorch's output; None: unchecked), then timed over the
    sets. {"rel_err", "us"}, or {"error"} where opslib refuses the call."""
    pinned = opslib.Handle("cuda:0")
    pinned.pin_kernel(name)
    fn = (lambda t: opslib_call(opslib, c, t, handle=pinned))
    k = {}
    try:
        opslib_output(c, sets[0]).fill_(float("nan"))
        fn(sets[0])
        torch.cuda.synchronize()
        if ref is not None:
            k["rel_err"] = rel_err(opslib_output(c, sets[0]), ref)
        k["us"] = timer.time(fn, sets)
    except opslib.OpsError as e:
        k["error"] = f"{e.status_name}: {e.message[:160]}"
    return k


def pinned_line(times, prefix, other_us):
    """The pinned rows of one grid shape (name without `prefix`: us), fastest first, and the
    fastest's ratio to `other_us` (PyTorch's time)."""
    fastest = min(times, key=times.get)
    return ("    " + "  ".join(f"{x[len(prefix):]} {us:.1f}" for x, us in sorted(times.items(), key=lambda kv: kv[1]))
            + f" | best {times[fastest]:.1f} = {other_us / times[fastest]:.2f}x")


def measure(torch, opslib, c, timer, gen, l2, log):
    sets = input_sets(torch, c, gen, l2)
    for t in sets:
        prepare(opslib, c, t)
    nbytes, flops = work(c)
    row = dict(c, bytes=nbytes, flops=flops, input_sets=len(sets), kernels={}, torch={})
    h = opslib.Handle("cuda:0")
    choice, kernels = explained(opslib, c, sets[0], h)
    row["choice"] = choice
    # PyTorch first: its output is the reference the opslib kernels are checked against
    ref = None
    for name, fn in torch_calls(torch, c).items():
        try:
            out = fn(sets[0])
            if out is None:
                continue
            torch.cuda.synchronize()
            row["torch"][name] = timer.time(fn, sets)
            if ref is None:
                ref = out
        except Exception as e:  # a backend that does not take this case
            row.setdefault("torch_errors", {})[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    for name, k in kernels.items():
        k.update(pinned_run(torch, opslib, c, sets, timer, name, ref))
        row["kernels"][name] = k
    if choice is not None:
        row["choice_us"] = timer.time(lambda t: opslib_call(opslib, c, t, handle=h), sets)
        row["choice_est_us"] = kernels[choice]["est_us"]
    del sets
    torch.cuda.empty_cache()
    log(row)
    return row


# ---- the summary -------------------------------------------------------------------------

def case_stats(r):
    """Regret, model error and speed vs PyTorch of one measured case (None where unmeasured)."""
    times = {k: v["us"] for k, v in r["kernels"].items() if "us" in v}
    s = {"id": r["id"], "family": r["family"] + (" (held out)" if r.get("heldout") else ""),
         "choice": r.get("choice")}
    if not times or r.get("choice") not in times:
        return s
    best = min(times, key=times.get)
    s.update(best=best, best_us=times[best], choice_us=times[r["choice"]])
    s["regret"] = times[r["choice"]] / times[best]
    est = r["kernels"][r["choice"]]["est_us"]
    s["model"] = est / times[r["choice"]]
    s["models_all"] = [r["kernels"][k]["est_us"] / times[k] for k in times]
    tt = {k: v for k, v in r.get("torch", {}).items() if v}
    if tt:
        tb = min(tt, key=tt.get)
        s.update(torch_best=tb, torch_us=tt[tb], vs_torch=tt[tb] / times[r["choice"]])
    s["sm80_on_sm90"] = "_mma" in r["choice"] and any("sm90" in k for k in times) and \
        times[r["choice"]] > min(v for k, v in times.items() if "sm90" in k)
    return s


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summarize(result, md=False):
    stats = [case_stats(r) for r in result["rows"]]
    done = [s for s in stats if "regret" in s]
    out = []
    p = out.append
    p(f"# sweep: {result.get('device', '?')}, {result.get('date', '?')}, opslib {result.get('commit', '?')}, "
      f"torch {result.get('torch', '-')}; {len(done)} of {len(stats)} shapes measured")
    if result.get("estimates_from"):
        p(f"# choices and estimates re-evaluated by {result['estimates_from']}")
    head = ("| family | shapes | regret <= 1.05 | regret <= 1.15 | max regret | estimate within 25% | "
            "est / measured (median, min-max) | vs PyTorch best (geomean, min) |")
    p(head if md else head.replace("|", " ").strip())
    if md:
        p("|" + "---|" * 8)
    for fam in sorted({s["family"] for s in done}) + ["all"]:
        ss = [s for s in done if fam in ("all", s["family"], s["family"].split(" ")[0])]
        if not ss:
            continue
        reg = [s["regret"] for s in ss]
        mod = [s["model"] for s in ss]
        vt = [s["vs_torch"] for s in ss if "vs_torch" in s]
        cells = [fam, str(len(ss)), f"{sum(r <= 1.05 for r in reg) / len(ss):.0%}",
                 f"{sum(r <= 1.15 for r in reg) / len(ss):.0%}", f"{max(reg):.2f}",
                 f"{sum(0.75 <= m <= 1.25 for m in mod) / len(ss):.0%}",
                 f"{statistics.median(mod):.2f} ({min(mod):.2f}-{max(mod):.2f})",
                 f"{geomean(vt):.2f}x ({min(vt):.2f}x)" if vt else "-"]
        p(("| " + " | ".join(cells) + " |") if md else "  ".join(f"{x:<12}" for x in cells))
    bad = [s for s in done if s.get("sm80_on_sm90")]
    p(f"sm_80-class kernel chosen where a Hopper kernel measured faster: {len(bad)} shape(s)"
      + ("".join(f"\n  {s['id']}: {s['choice']}" for s in bad)))
    p("worst regret:")
    for s in sorted(done, key=lambda s: -s["regret"])[:8]:
        p(f"  {s['regret']:.2f}  {s['id']}: chose {s['choice']} {s['choice_us']:.1f} us, "
          f"fastest {s['best']} {s['best_us']:.1f} us")
    p("worst model error (estimate / measured of the choice):")
    for s in sorted(done, key=lambda s: -abs(math.log(s["model"])))[:8]:
        p(f"  {s['model']:.2f}  {s['id']}: {s['choice']} measured {s['choice_us']:.1f} us")
    vt = [s for s in done if "vs_torch" in s]
    if vt:
        p("slowest against PyTorch's best (its time / opslib's choice):")
        for s in sorted(vt, key=lambda s: s["vs_torch"])[:10]:
            p(f"  {s['vs_torch']:.2f}x  {s['id']}: opslib {s['choice']} {s['choice_us']:.1f} us, "
              f"{s['torch_best']} {s['torch_us']:.1f} us")
        p("fastest against PyTorch's best:")
        for s in sorted(vt, key=lambda s: -s["vs_torch"])[:5]:
            p(f"  {s['vs_torch']:.2f}x  {s['id']}: opslib {s['choice']} {s['choice_us']:.1f} us, "
              f"{s['torch_best']} {s['torch_us']:.1f} us")
    return "\n".join(out)


def described(opslib, result, sm):
    """A described device of a measured run's name (the calibration measured on it, where there
    is one): its handle, the operands' specs for explain, and what re-estimated the run, in words."""
    h = opslib.Handle.virtual(sm, result.get("device"))
    spec = (lambda shape, dtype, strides=None, fill="randn":
            opslib.TensorSpec(shape, {"i32": 4}.get(dtype, dtype), "cuda:0", strides=strides))
    return h, spec, f"opslib {opslib.version()} ({git_commit()}), described sm_{sm} ({result.get('device')})"


def reestimate(result, opslib, sm):
    """This build's choice and estimates for every measured case, on a described device of the
    sweep's name."""
    h, spec, result["estimates_from"] = described(opslib, result, sm)
    for r in result["rows"]:
        choice, kernels = explained(opslib, r, operands(r, spec), h)
        r["choice"] = choice
        for name, k in r["kernels"].items():
            if name in kernels:  # the estimate and its terms (shape features included) of this build
                k.update(kernels[name])
    return result


def grid_reestimate(path, case_of, prefix, sm=90):
    """A grid script's --pinned run (gemm_grid.py, attn_grid.py; the JSON at `path`) re-read by
    this build: each shape's choice on a described device of the run's name, timed by the run's
    pinned times (no GPU). Prints a line a shape whose choice is over 3% slower than its fastest
    pinned row (or not pinned), then PyTorch's time over the choice's and over the fastest row's:
    geomean and min. Returns 0, or 1 where the run has no pinned times."""
    import opslib
    with open(path) as f:
        result = json.load(f)
    h, spec, estimates_from = described(opslib, result, sm)
    chosen, fastest = [], []
    for r in result["rows"]:
        times = r.get("pinned") or {}
        if not times or not r.get("torch_us"):
            continue
        c = case_of(r)
        choice, _ = explained(opslib, c, operands(c, spec), h)
        best = min(times, key=times.get)
        shape = " ".join(f"{key}{r[key]}" for key in ("m", "n", "k", "b", "s", "hq", "hkv", "d") if key in r)
        shape += " causal" if r.get("causal") else ""
        if choice not in times:
            print(f"  {shape}: {choice} was not pinned in the run")
            continue
        chosen.append(r["torch_us"] / times[choice])
        fastest.append(r["torch_us"] / times[best])
        if times[choice] > 1.03 * times[best]:
            print(f"  {shape}: {choice[len(prefix):]} {times[choice]:.1f} us, {best[len(prefix):]} {times[best]:.1f}")
    if not chosen:
        print("no pinned times in this run (run the grid with --pinned)")
        return 1
    print(f"{len(chosen)} shapes, estimates of {estimates_from}: the choices {geomean(chosen):.4f}x of PyTorch "
          f"(min {min(chosen):.3f}), "
          f"the fastest pinned row a shape {geomean(fastest):.4f}x (min {min(fastest):.3f})")
    return 0


def torch_and_opslib(script, why):
    """(torch, opslib) where the host has PyTorch and a CUDA device; else None, having said why
    `script` measures nothing (`why`: what PyTorch is there for)."""
    try:
        import torch
    except ImportError:
        print(f"{script}: needs PyTorch ({why}); nothing to measure")
        return None
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA device; nothing to measure")
        return None
    import opslib
    return torch, opslib


def isolation_args(ap):
    """The grid scripts' --cold / --apart / --chain (isolate)."""
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--cold", action="store_true", help="time each call alone, after a 4096^3 bf16 GEMM")
    g.add_argument("--apart", action="store_true", help="time each call alone, after a GPU sleep")
    g.add_argument("--chain", action="store_true",
                   help="each call's time after a 1024^3 GEMM of its own library, back to back")


def isolate(torch, opslib, args, timer, out):
    """Each call timed alone (Timer's between), ours and PyTorch's alike, where args ask:
    --cold: after a 4096 x 4096 x 4096 bf16 torch.matmul, so that the L2 and the SMs'
    instruction caches hold its bytes when the call starts, as in a model step, where other
    kernels run between two calls of one; --apart: after a GPU sleep of 1e6 cycles (which keeps
    the host's issue ahead of the GPU), caches as the previous call left them. Back-to-back
    calls (the default) overlap a call's launch with the one before it: our kernels' programmatic
    dependent launches start their prologue under the previous call's tail. --chain: pairs of
    calls back to back, each after a 1024 x 1024 x 1024 bf16 GEMM of its own library
    (opslib.gemm before ours, torch.matmul before PyTorch's), less that GEMM's own back-to-back
    time (chained): what the call adds to a chain of one library's kernels, where ours may start
    under the GEMM's tail. Recorded in out. Returns the GEMMs for chained (ours, PyTorch's), or
    (None, None)."""
    def square(n):  # a GEMM's A, B and D: n x n bf16
        ga, gb = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        return ga, gb, torch.empty_like(ga)

    if args.chain:
        ga, gb, gc = square(1024)
        out["isolation"] = "chain: after a 1024^3 bf16 GEMM of the same library, less its own time"
        return (lambda: opslib.gemm(ga, gb.t(), out=gc)), (lambda: torch.matmul(ga, gb.t(), out=gc))
    if args.cold:
        ga, gb, gc = square(4096)
        timer.between = lambda: torch.matmul(ga, gb, out=gc)
        out["isolation"] = "cold: each call timed alone after a 4096 x 4096 x 4096 bf16 torch.matmul"
    elif args.apart:
        timer.between = lambda: torch.cuda._sleep(1000000)
        out["isolation"] = "apart: each call timed alone after a GPU sleep of 1e6 cycles"
    return None, None


def chained(timer, fn, sets, pre, rec=None):
    """fn's time a call (timer.time), or with pre (isolate's --chain) the time of pre and fn back
    to back less pre's own; both times go into the dict rec (pair_us, pre_us) where given."""
    if pre is None:
        return timer.time(fn, sets)
    both = timer.time(lambda t: (pre(), fn(t)), sets)
    alone = timer.time(lambda t: pre(), sets)
    if rec is not None:
        rec.update(pair_us=both, pre_us=alone)
    return both - alone


def grid_session(torch, opslib):
    """What the grid scripts (attn_grid.py, gemm_grid.py) start from: the L2 size that sizes their
    input sets, sweep's timer (0.05 s cool-down), a generator of fixed seed, and the result's
    header with no rows yet."""
    timer = Timer(torch, 0.05)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    out = {"device": torch.cuda.get_device_name(0), "opslib": opslib.version(), "commit": git_commit(), "rows": []}
    return torch.cuda.get_device_properties(0).L2_cache_size, timer, gen, out


def git_commit():
    """The measured library's commit: the GPU bundle's BUILD_INFO beside this script (the
    device's checkout may be another commit), else git, else OPSLIB_COMMIT."""
    info = os.path.join(HERE, "BUILD_INFO")
    if os.path.exists(info):
        m = re.search(r"commit=(\S+)", open(info).read())
        if m:
            return m.group(1)
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE, check=True).stdout.strip()
    except Exception:
        return os.environ.get("OPSLIB_COMMIT", "unknown")


# ---- main --------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default=",".join(GRIDS))
    ap.add_argument("--quick", action="store_true", help="a few shapes an op (a smoke run)")
    ap.add_argument("--shapes", default=None, metavar="REGEX", help="only the shapes whose id matches")
    ap.add_argument("--cooldown", type=float, default=0.1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--summary", metavar="JSON")
    ap.add_argument("--reestimate", metavar="JSON")
    ap.add_argument("--sm", type=int, default=90, help="--reestimate: the described device's SM")
    ap.add_argument("--md", action="store_true", help="the summary table in Markdown")
    args = ap.parse_args()
    ops = args.ops.split(",")
    if args.list:
        for c in grid(ops, args.quick, args.shapes):
            print(c["id"])
        print(f"{len(grid(ops, args.quick, args.shapes))} shapes")
        return 0
    if args.summary or args.reestimate:
        with open(args.summary or args.reestimate) as f:
            result = json.load(f)
        if args.reestimate:
            import opslib
            result = reestimate(result, opslib, args.sm)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=1)
        print(summarize(result, args.md))
        return 0

    import torch
    if not torch.cuda.is_available():
        print("sweep.py: no CUDA device; nothing to measure (--list and --summary need none)")
        return 0
    import opslib
    props = torch.cuda.get_device_properties(0)
    timer = Timer(torch, args.cooldown)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = timer.time(lambda s: dst.copy_(src), [None])
    del src, dst
    result = {"device": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
              "l2_bytes": props.L2_cache_size, "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%MZ"),
              "torch": torch.__version__, "opslib": opslib.version(), "commit": git_commit(),
              "copy_tbps": 2 * (1 << 30) / copy_us / 1e6, "cooldown_s": args.cooldown, "rows": []}
    print(f"{result['device']}: copy {result['copy_tbps']:.3f} TB/s; torch {torch.__version__}; "
          f"opslib {result['opslib']} ({result['commit']})", flush=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int(time.time()))

    def log(r):
        s = case_stats(r)
        ks = " ".join(f"{k.replace('cuda_', '')}={v['us']:.1f}" for k, v in r["kernels"].items() if "us" in v)
        errs = [v["rel_err"] for v in r["kernels"].values() if "rel_err" in v]
        line = f"{r['id']:<44} choice {str(r.get('choice')).replace('cuda_', ''):<20} "
        if "regret" in s:
            line += f"regret {s['regret']:.2f} est/meas {s['model']:.2f} "
        if "vs_torch" in s:
            line += f"vs {s['torch_best']} {s['vs_torch']:.2f}x "
        line += f"| {ks}" + (f" | max err {max(errs):.1e}" if errs else "")
        print(line, flush=True)

    t0 = time.time()
    path = args.json or f"sweep_{result['date'][:10]}.json"
    for c in grid(ops, args.quick, args.shapes):
        try:
            result["rows"].append(measure(torch, opslib, c, timer, gen, props.L2_cache_size, log))
        except torch.cuda.OutOfMemoryError as e:
            print(f"{c['id']}: out of memory ({e}); skipped", flush=True)
            torch.cuda.empty_cache()
        result["seconds"] = time.time() - t0
        with open(path, "w") as f:  # after every shape: a run cut short keeps what it measured
            json.dump(result, f, indent=1)
    print(f"json: {path} ({result['seconds']:.0f} s)")
    print(summarize(result))
    bad = [(r["id"], k) for r in result["rows"] for k, v in r["kernels"].items() if v.get("rel_err", 0) > 2e-2]
    for case_id, k in bad:
        print(f"DIFFERS from PyTorch: {case_id}: {k}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
