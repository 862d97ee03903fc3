#!/usr/bin/env python3
"""opslib beside PyTorch's own kernels, op family by op family, in one run on one GPU.

    python3 bench/compare.py [--families memory,gemm,sdpa] [--no-compile] [--quick]
                             [--json compare.json] [--png compare.png]
    python3 bench/compare.py --plot compare.json --png compare.png     (redraw only)

For each case: opslib through its Python binding (preallocated outputs, the current torch
stream) and every PyTorch equivalent (eager; torch.compile for the fusable memory ops;
SDPA's flash, cuDNN and efficient backends; matmul, addmm + GELU), timed alike:
  - warm-up, then `--iters` launches each between its own pair of CUDA events, median;
  - a GPU sleep queued first, so that every launch is queued before the GPU reaches it:
    the events time the device alone, not Python's launch overhead (reported apart: the
    host microseconds per call of back-to-back calls, for opslib and the best PyTorch);
  - inputs rotated over enough copies to exceed twice the L2 when one set would fit in it;
  - the GPU left idle for `--cooldown` seconds before each contender's warm-up: an H100
    running a long tensor-core case reaches its 700 W cap within a few hundred ms and
    drops its clock (1980 -> ~1550 MHz, reason SW power cap, seen with nvidia-smi), so
    without a pause whoever runs after a long case (opslib runs last) is timed hotter.
Each opslib result is checked against PyTorch's (relative error, max-normalized). Where
this build has no CUDA kernel for a case, the row says so with the dispatcher's reason.
Bytes are the minimal ones (every input read once, every output written once); the
memory roof is the device-to-device copy bandwidth measured first in the same run, the
compute roof the device's dense peak. Prints one table, writes JSON, draws a PNG
(achieved vs the roofline) when matplotlib is there.
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "python"), os.path.join(HERE, "..", "python")):  # bundle, checkout
    if os.path.isdir(os.path.join(p, "opslib")):
        sys.path.insert(0, p)
        break

# dense peak (TFLOP/s) by device name and dtype, from the vendor's data sheets
PEAKS = {"H100 80GB HBM3": {"bf16": 989.4, "f16": 989.4, "tf32": 494.7, "f32": 66.9},
         "H200": {"bf16": 989.4, "f16": 989.4, "tf32": 494.7, "f32": 66.9},
         "A100": {"bf16": 312.0, "f16": 312.0, "tf32": 156.0, "f32": 19.5}}


# ---- timing ---------------------------------------------------------------------------

COOLDOWN_S = 1.0


def timed(torch, fn, sets, iters, warmup=5):
    """(median device us, host us per call) of fn(set) over rotating input sets, from an idle GPU."""
    torch.cuda.synchronize()
    time.sleep(COOLDOWN_S)
    for i in range(warmup):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda._sleep(int(4e7))          # ~20 ms of GPU spin: the queue fills behind it
    for i in range(iters):
        starts[i].record()
        fn(sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    device_us = statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends))
    # the host's cost of one call, alone: back-to-back calls queued behind another sleep
    torch.cuda._sleep(int(4e7))
    t0 = time.perf_counter()
    for i in range(iters):
        fn(sets[i % len(sets)])
    host_us = (time.perf_counter() - t0) / iters * 1e6
    torch.cuda.synchronize()
    return device_us, host_us


def input_sets(torch, make, l2_bytes, budget_bytes=8 << 30):
    """Enough independent copies of one input set that together they exceed 2 x L2."""
    first = make()
    size = sum(t.numel() * t.element_size() for t in first.values() if hasattr(t, "numel"))
    n = 1 if size >= 2 * l2_bytes else min(math.ceil(2 * l2_bytes / max(size, 1)), 64,
                                            max(1, budget_bytes // max(size, 1)))
    return [first] + [make() for _ in range(n - 1)]


def rel_err(torch, got, want):
    got, want = got.float(), want.float()
    fin = torch.isfinite(want)
    if not bool(torch.equal(torch.isfinite(got), fin)):
        return math.inf
    if not bool(fin.any()):
        return 0.0
    return float((got[fin] - want[fin]).abs().max() / want[fin].abs().max().clamp_min(1e-30))


# ---- the cases ---------------------------------------------------------------------------

class Case:
    """One (op, shape): how to make an input set, opslib's call, PyTorch's calls, and the
    minimal bytes and flops. `opslib` returns its output; `torch_fns` return theirs, the
    first being the reference for the agreement check."""

    def __init__(self, family, op, shape, dtype, nbytes, flops, make, opslib_fn, torch_fns,
                 explain=None, tol=1e-2, compare=True):
        self.family, self.op, self.shape, self.dtype = family, op, shape, dtype
        self.bytes, self.flops = nbytes, flops
        self.make, self.opslib_fn, self.torch_fns = make, opslib_fn, torch_fns
        self.explain, self.tol, self.compare = explain, tol, compare


def memory_cases(torch, opslib, compile_on, quick):
    F = torch.nn.functional
    bf = torch.bfloat16
    cases = []

    def comp(fn):
        return torch.compile(fn, dynamic=False) if compile_on else None

    shapes = ((16384, 4096),) if quick else ((16384, 4096), (65536, 1024), (4096, 16384))
    for rows, cols in shapes:
        n, e, shape = rows * cols, 2, f"{rows}x{cols}"

        def mk(rows=rows, cols=cols):
            x = torch.randn(rows, cols, device="cuda", dtype=bf)
            return {"x": x, "r": torch.randn_like(x), "w": torch.randn(cols, device="cuda", dtype=bf),
                    "b": torch.randn(cols, device="cuda", dtype=bf), "y": torch.empty_like(x),
                    "s": torch.empty_like(x), "dy": torch.randn_like(x)}

        c = cols
        ln = lambda s, c=c: F.layer_norm(s["x"], (c,), s["w"], s["b"], 1e-5)  # noqa: E731
        rms = lambda s, c=c: F.rms_norm(s["x"], (c,), s["w"], 1e-5)  # noqa: E731
        sm = lambda s: torch.softmax(s["x"], -1)  # noqa: E731
        def addrms(s, c=c):  # the sum is an output too (the next residual), as opslib's residual_out
            h = s["x"] + s["r"]
            return F.rms_norm(h, (c,), s["w"], 1e-5), h
        for op, fn, nb, ops_fn in (
                ("layernorm", ln, 2 * n * e, lambda s: opslib.layernorm(s["x"], s["w"], s["b"], out=s["y"])),
                ("rmsnorm", rms, 2 * n * e, lambda s: opslib.rmsnorm(s["x"], s["w"], out=s["y"])),
                ("softmax", sm, 2 * n * e, lambda s: opslib.softmax(s["x"], out=s["y"])),
                ("add_rmsnorm", addrms, 4 * n * e,
                 lambda s: opslib.rmsnorm(s["x"], s["w"], residual=s["r"], residual_out=s["s"], out=s["y"]))):
            fns = {"eager": fn}
            if compile_on:
                fns["compile"] = comp(fn)
            cases.append(Case("memory", op, shape, "bf16", nb, 8 * n, mk, ops_fn, fns))

        # backward: the aten ops autograd calls; y / mean / rstd computed once per input set
        def mk_bwd(rows=rows, cols=cols):
            s = mk(rows, cols)
            s["y_sm"] = torch.softmax(s["x"], -1)
            _, s["mean"], s["rstd"] = torch.ops.aten.native_layer_norm(s["x"], (cols,), s["w"], s["b"], 1e-5)
            s["mean"], s["rstd"] = s["mean"].reshape(rows), s["rstd"].reshape(rows)
            s["dw"] = torch.empty(cols, device="cuda")
            s["db"] = torch.empty(cols, device="cuda")
            return s

        ln_bwd = lambda s, c=c, r=rows: torch.ops.aten.native_layer_norm_backward(  # noqa: E731
            s["dy"], s["x"], (c,), s["mean"].reshape(r, 1), s["rstd"].reshape(r, 1), s["w"], s["b"],
            [True, True, True])[0]
        cases.append(Case("memory", "layernorm_bwd", shape, "bf16", 3 * n * e, 10 * n, mk_bwd,
                          lambda s: opslib.layernorm_backward(s["dy"], s["x"], s["w"], s["mean"], s["rstd"],
                                                              dweight=s["dw"], dbias=s["db"], dx=s["y"])[0],
                          {"eager": ln_bwd}))
        sm_bwd = lambda s: torch.ops.aten._softmax_backward_data(s["dy"], s["y_sm"], -1, bf)  # noqa: E731
        cases.append(Case("memory", "softmax_bwd", shape, "bf16", 3 * n * e, 4 * n, mk_bwd,
                          lambda s: opslib.softmax_backward(s["dy"], s["y_sm"], dx=s["y"]), {"eager": sm_bwd}))
        if quick:
            continue

    # reductions, f32 results from bf16
    def mk_red():
        return {"x": torch.randn(16384, 4096, device="cuda", dtype=bf),
                "y0": torch.empty(4096, device="cuda"), "y1": torch.empty(16384, device="cuda")}

    n = 16384 * 4096
    cases.append(Case("memory", "sum_last", "16384x4096", "bf16", 2 * n, n, mk_red,
                      lambda s: opslib.sum(s["x"], 1, out=s["y1"]),
                      {"eager": lambda s: s["x"].sum(-1, dtype=torch.float32)}))
    cases.append(Case("memory", "sum_axis0", "16384x4096", "bf16", 2 * n, n, mk_red,
                      lambda s: opslib.sum(s["x"], 0, out=s["y0"]),
                      {"eager": lambda s: s["x"].sum(0, dtype=torch.float32)}))

    # elementwise: sin(2x + 1) f32 on 2^28 elements, add bf16
    n = 1 << (24 if quick else 28)

    def mk_sin(n=n):
        x = torch.randn(n, device="cuda")
        return {"x": x, "y": torch.empty_like(x)}

    sinf = lambda s: torch.sin(2 * s["x"] + 1)  # noqa: E731
    fns = {"eager": sinf}
    if compile_on:
        fns["compile"] = comp(sinf)
    cases.append(Case("memory", "sin_affine", f"2^{int(math.log2(n))}", "f32", 8 * n, 3 * n, mk_sin,
                      lambda s: opslib.sin_affine(s["x"], 2.0, 1.0, out=s["y"]), fns, tol=1e-5))

    def mk_add():
        a = torch.randn(16384, 4096, device="cuda", dtype=bf)
        return {"a": a, "b": torch.randn_like(a), "y": torch.empty_like(a)}

    n = 16384 * 4096
    cases.append(Case("memory", "add", "16384x4096", "bf16", 6 * n, n, mk_add,
                      lambda s: opslib.add(s["a"], s["b"], out=s["y"]), {"eager": lambda s: s["a"] + s["b"]}))
    cases.append(Case("memory", "dropout", "16384x4096", "bf16", 4 * n, 2 * n, mk_add,
                      lambda s: opslib.dropout(s["a"], 0.1, seed=1, out=s["y"]),
                      {"eager": lambda s: F.dropout(s["a"], 0.1, training=True)}, compare=False))
    return cases


def gemm_cases(torch, opslib, compile_on, quick):
    F = torch.nn.functional
    bf = torch.bfloat16
    cases = []
    shapes = ((4096, 4096, 4096),) if quick else ((4096, 4096, 4096), (8192, 8192, 8192),
                                                  (16384, 4096, 4096), (4096, 14336, 4096))
    for m, n, k in shapes:
        def mk(m=m, n=n, k=k):
            return {"a": torch.randn(m, k, device="cuda", dtype=bf) / 8,
                    "b": torch.randn(k, n, device="cuda", dtype=bf) / 8,
                    "d": torch.empty(m, n, device="cuda", dtype=bf)}
        cases.append(Case("gemm", "gemm", f"{m}x{n}x{k}", "bf16", 2 * (m * k + k * n + m * n), 2 * m * n * k, mk,
                          lambda s: opslib.gemm(s["a"], s["b"], out=s["d"]),
                          {"matmul": lambda s: s["a"] @ s["b"]},
                          explain=lambda s: opslib.explain("gemm", s["a"], s["b"], out=s["d"])))
    m, n, k = 8192, 4096, 4096

    def mk_epi():
        s = mk(m, n, k)
        s["bias"] = torch.randn(n, device="cuda", dtype=bf)
        return s

    epi = lambda s: F.gelu(torch.addmm(s["bias"], s["a"], s["b"]), approximate="tanh")  # noqa: E731
    fns = {"addmm+gelu": epi}
    if compile_on:
        fns["compile"] = torch.compile(epi, dynamic=False)
    cases.append(Case("gemm", "gemm_bias_gelu", f"{m}x{n}x{k}", "bf16", 2 * (m * k + k * n + m * n + n),
                      2 * m * n * k, mk_epi,
                      lambda s: opslib.gemm(s["a"], s["b"], bias=s["bias"], activation="gelu_tanh", out=s["d"]),
                      fns, explain=lambda s: opslib.explain("gemm", s["a"], s["b"], bias=s["bias"],
                                                            activation="gelu_tanh", out=s["d"])))
    m, k = 14336, 4096

    def mk_gemv():
        return {"a": torch.randn(m, k, device="cuda", dtype=bf), "b": torch.randn(k, 1, device="cuda", dtype=bf),
                "d": torch.empty(m, 1, device="cuda", dtype=bf)}
    cases.append(Case("gemm", "gemv", f"{m}x{k}", "bf16", 2 * (m * k + k + m), 2 * m * k, mk_gemv,
                      lambda s: opslib.gemm(s["a"], s["b"], out=s["d"]), {"matmul": lambda s: s["a"] @ s["b"]},
                      explain=lambda s: opslib.explain("gemm", s["a"], s["b"], out=s["d"])))
    return cases


# (name, batch, seqlen, heads, head dim, causal): the attention rows, forward and backward
SDPA_CONFIGS = [("d128 s16k", 1, 16384, 16, 128, False), ("d128 s16k causal", 1, 16384, 16, 128, True),
                ("d128 s4k", 4, 4096, 16, 128, False), ("d64 s16k", 1, 16384, 32, 64, False),
                ("d128 s1k b16", 16, 1024, 16, 128, False)]


# the backward's head dim 256 (the sm_80-class kernel's column-split warp pairs on every SM)
SDPA_BWD_EXTRA = [("d256 s4k b2", 2, 4096, 8, 256, False), ("d256 s4k b2 causal", 2, 4096, 8, 256, True)]


def sdpa_cases(torch, opslib, compile_on, quick):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    configs = SDPA_CONFIGS[2:3] if quick else SDPA_CONFIGS
    cases = []
    for name, b, s, h, d, causal in configs:
        def mk(b=b, s=s, h=h, d=d):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            # O in PyTorch's BHSD memory too, so that the outputs compare element for element
            return {"q": q, "k": k, "v": v, "o": torch.empty(b, h, s, d, device="cuda", dtype=torch.bfloat16)}

        def backend(bk, causal=causal):
            def run(st):
                with sdpa_kernel(bk):
                    return F.scaled_dot_product_attention(st["q"], st["k"], st["v"], is_causal=causal)
            return run

        def bshd(t):
            return t.transpose(1, 2)  # a BHSD buffer as the BSHD view opslib reads (no copy)

        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        nb = 2 * 4 * b * h * s * d
        cases.append(Case(
            "sdpa", "sdpa", name, "bf16", nb, flops, mk,
            lambda st, causal=causal: (opslib.sdpa(bshd(st["q"]), bshd(st["k"]), bshd(st["v"]), causal=causal,
                                                   out=bshd(st["o"])), st["o"])[1],
            {"flash": backend(SDPBackend.FLASH_ATTENTION), "cudnn": backend(SDPBackend.CUDNN_ATTENTION),
             "efficient": backend(SDPBackend.EFFICIENT_ATTENTION)},
            explain=lambda st, causal=causal: opslib.explain("sdpa", bshd(st["q"]), bshd(st["k"]), bshd(st["v"]),
                                                             causal=causal, out=bshd(st["o"]))))
    return cases


def sdpa_bwd_cases(torch, opslib, compile_on, quick):
    """The attention backward on the forward rows' shapes: dq, dk, dv from dout, with the
    forward's o and LSE made once a set (outside the timing) by each implementation itself;
    each shape twice, the second (" det") on a handle that asks for deterministic kernels.
    FLOPs: 2.5 x the forward's (five products for its two)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    configs = SDPA_CONFIGS[2:3] if quick else SDPA_CONFIGS + SDPA_BWD_EXTRA
    cases = []
    det = []

    def det_handle():
        if not det:
            det.append(opslib.Handle("cuda"))
            det[0].set_deterministic()
        return det[0]

    def bshd(t):
        return t.transpose(1, 2)

    for name, b, s, h, d, causal in configs:
        def mk(b=b, s=s, h=h, d=d):
            st = {n: torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for n in ("q", "k", "v", "do")}
            st.update({n: torch.empty(b, h, s, d, device="cuda", dtype=torch.bfloat16) for n in ("dq", "dk", "dv")})
            return st

        def backend(bk, causal=causal):
            def run(st):
                key = ("fwd", bk)
                if key not in st:
                    with sdpa_kernel(bk):
                        qkv = [st[n].detach().requires_grad_() for n in ("q", "k", "v")]
                        st[key] = (F.scaled_dot_product_attention(*qkv, is_causal=causal), qkv)
                o, qkv = st[key]
                return torch.autograd.grad(o, qkv, st["do"], retain_graph=True)
            return run

        def run_ops(st, causal=causal, handle=None):
            if "ops_fwd" not in st:
                st["ops_fwd"] = opslib.sdpa(bshd(st["q"]), bshd(st["k"]), bshd(st["v"]), causal=causal,
                                            return_lse=True)
            o, lse = st["ops_fwd"]
            opslib.sdpa_backward(bshd(st["do"]), bshd(st["q"]), bshd(st["k"]), bshd(st["v"]), o, lse, causal=causal,
                                 dq=bshd(st["dq"]), dk=bshd(st["dk"]), dv=bshd(st["dv"]),
                                 **({"handle": handle} if handle is not None else {}))
            return st["dq"]

        flops = 2.5 * 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        nb = 2 * 8 * b * h * s * d
        torch_fns = {"flash": backend(SDPBackend.FLASH_ATTENTION), "cudnn": backend(SDPBackend.CUDNN_ATTENTION)}
        cases.append(Case("sdpa_bwd", "sdpa_backward", name, "bf16", nb, flops, mk, run_ops, torch_fns, tol=2e-2))
        # the handle's determinism flag: bitwise reproducible gradients (PyTorch's rows: its defaults)
        cases.append(Case("sdpa_bwd", "sdpa_backward", name + " det", "bf16", nb, flops, mk,
                          lambda st, run_ops=run_ops: run_ops(st, handle=det_handle()), torch_fns, tol=2e-2))
    return cases


def decode_cases(torch, opslib, compile_on, quick):
    """Decode (Sq 1) and speculative decoding (Sq 4, 16; causal, bottom-right) against a long
    KV cache, bf16 d128: opslib on the contiguous cache and on paged pools (pages of 16 and 64
    in shuffled order holding the same keys), PyTorch's backends with enable_gqa on the
    contiguous cache. Bytes: K and V once, Q and O."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    try:
        from torch.nn.attention.bias import causal_lower_right
    except ImportError:
        causal_lower_right = None
    configs = [("B1 kv128k", 1, 131072, 32, 8, 1), ("B8 kv32k", 8, 32768, 32, 8, 1),
               ("B64 kv4k", 64, 4096, 32, 8, 1), ("B16 kv8k h64:8", 16, 8192, 64, 8, 1),
               ("B8 kv32k sq4", 8, 32768, 32, 8, 4), ("B8 kv32k sq16", 8, 32768, 32, 8, 16),
               ("B1 kv1k", 1, 1024, 32, 8, 1), ("B1 kv2k", 1, 2048, 32, 8, 1), ("B1 kv4k", 1, 4096, 32, 8, 1),
               ("B8 kv1k", 8, 1024, 32, 8, 1)]
    if quick:
        configs = configs[1:2]
    d, bf = 128, torch.bfloat16
    cases = []
    for name, b, skv, hq, hkv, sq in configs:
        for page in (0, 16, 64):
            def mk(b=b, skv=skv, hq=hq, hkv=hkv, sq=sq, page=page):
                st = {"q": torch.randn(b, hq, sq, d, device="cuda", dtype=bf),
                      "k": torch.randn(b, hkv, skv, d, device="cuda", dtype=bf),
                      "v": torch.randn(b, hkv, skv, d, device="cuda", dtype=bf),
                      "o": torch.empty(b, hq, sq, d, device="cuda", dtype=bf),
                      "lens": torch.full((b,), skv, device="cuda", dtype=torch.int32)}
                if page:
                    per = skv // page
                    perm = torch.randperm(b * per, device="cuda")
                    for t in ("k", "v"):
                        pool = torch.empty(b * per, page, hkv, d, device="cuda", dtype=bf)
                        pool[perm] = st[t].transpose(1, 2).reshape(b * per, page, hkv, d)
                        st[t + "p"] = pool
                    st["table"] = perm.view(b, per).to(torch.int32)
                    del st["k"], st["v"]  # the paged rows time opslib alone (no PyTorch paged kernel)
                return st

            def backend(bk, sq=sq, skv=skv):
                def run(st):
                    with sdpa_kernel(bk):
                        if sq == 1:
                            return F.scaled_dot_product_attention(st["q"], st["k"], st["v"], enable_gqa=True)
                        return F.scaled_dot_product_attention(st["q"], st["k"], st["v"], enable_gqa=True,
                                                              attn_mask=causal_lower_right(sq, skv))
                return run

            def bshd(t):
                return t.transpose(1, 2)

            def run_ops(st, page=page, causal=sq > 1):
                if page:
                    opslib.sdpa(bshd(st["q"]), st["kp"], st["vp"], causal=causal, kv_lens=st["lens"],
                                block_table=st["table"], out=bshd(st["o"]))
                else:
                    opslib.sdpa(bshd(st["q"]), bshd(st["k"]), bshd(st["v"]), causal=causal, out=bshd(st["o"]))
                return st["o"]

            def explain(st, page=page, causal=sq > 1):
                if page:
                    return opslib.explain("sdpa", bshd(st["q"]), st["kp"], st["vp"], causal=causal,
                                          kv_lens=st["lens"], block_table=st["table"], out=bshd(st["o"]))
                return opslib.explain("sdpa", bshd(st["q"]), bshd(st["k"]), bshd(st["v"]), causal=causal,
                                      out=bshd(st["o"]))

            torch_fns = {}
            if page == 0 and (sq == 1 or causal_lower_right is not None):
                torch_fns = {"flash": backend(SDPBackend.FLASH_ATTENTION), "cudnn": backend(SDPBackend.CUDNN_ATTENTION),
                             "efficient": backend(SDPBackend.EFFICIENT_ATTENTION)}
            nb = 2 * (2 * b * hkv * skv * d + 2 * b * hq * sq * d)
            flops = 4 * b * hq * sq * skv * d
            label = name + (f" p{page}" if page else "")
            cases.append(Case("decode", "sdpa", label, "bf16", nb, flops, mk, run_ops, torch_fns, explain=explain,
                              compare=bool(torch_fns)))
    return cases


def cache_cases(torch, opslib, compile_on, quick):
    """RoPE and the KV cache append, bf16 d128, GQA 32:8, NeoX: 16384-token batches (prefill)
    and 64 tokens (one decode step of B64). PyTorch: the rotation as Hugging Face writes it (a
    cos / sin table gathered at the positions, rotate_half), and the append as an indexed store
    into the flattened pages. Bytes: every element read and written once, positions, slots."""
    bf, d, hq, hkv, page = torch.bfloat16, 128, 32, 8, 16
    cases = []

    def comp(fn):
        return torch.compile(fn, dynamic=False) if compile_on else None

    def rotate(x, cos, sin):  # x [T, H, D]; cos, sin [T, 1, D]
        h = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin

    for t in ((16384, 64) if not quick else (16384,)):
        def mk(t=t):
            inv = 10000.0 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d)
            ang = torch.arange(t + 4096, device="cuda", dtype=torch.float64)[:, None] * inv
            tab = torch.cat((ang, ang), -1)
            pages = (t + 4096) // page
            st = {"pos": torch.randperm(t + 4096, device="cuda")[:t].to(torch.int64),
                  "qkv": torch.randn(t, hq + 2 * hkv, d, device="cuda", dtype=bf),
                  "cos": tab.cos().to(bf), "sin": tab.sin().to(bf),
                  "kc": torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf),
                  "vc": torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf),
                  "kc_t": torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf),
                  "vc_t": torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf)}
            st["q"], st["k"], st["v"] = st["qkv"][:, :hq], st["qkv"][:, hq:hq + hkv], st["qkv"][:, hq + hkv:]
            st["qo"], st["ko"] = torch.empty(t, hq, d, device="cuda", dtype=bf), torch.empty(t, hkv, d, device="cuda", dtype=bf)
            st["slots"] = torch.randperm(pages * page, device="cuda")[:t].to(torch.int64)
            return st

        def rope_torch(st):
            cos, sin = st["cos"][st["pos"]][:, None], st["sin"][st["pos"]][:, None]
            return rotate(st["q"], cos, sin), rotate(st["k"], cos, sin)

        def append_torch(st, rope=False):
            k = st["k"]
            if rope:
                k = rotate(k, st["cos"][st["pos"]][:, None], st["sin"][st["pos"]][:, None])
            st["kc_t"].view(-1, hkv, d)[st["slots"]] = k
            st["vc_t"].view(-1, hkv, d)[st["slots"]] = st["v"]
            return st["kc_t"]

        def append_ops(st, rope=False):
            opslib.kv_cache_append(st["k"], st["v"], st["slots"], st["kc"], st["vc"],
                                   positions=st["pos"] if rope else None, rope=True if rope else None)
            return st["kc"]

        n_qk, n_kv = t * (hq + hkv) * d, 2 * t * hkv * d
        fns = {"eager": rope_torch}
        if compile_on:
            fns["compile"] = comp(rope_torch)
        cases.append(Case("cache", "rope", f"T{t} q+k", "bf16", 4 * n_qk + 8 * t, 6 * n_qk, mk,
                          lambda st: opslib.rope(st["pos"], st["q"], st["k"], out=st["qo"], k_out=st["ko"]), fns))
        cases.append(Case("cache", "rope", f"T{t} qkv in place", "bf16", 4 * n_qk + 8 * t, 6 * n_qk, mk,
                          lambda st: opslib.rope(st["pos"], st["q"], st["k"], out=st["q"], k_out=st["k"]), fns,
                          compare=False))
        for rope in (False, True):
            fns = {"eager": lambda st, rope=rope: append_torch(st, rope)}
            if compile_on:
                fns["compile"] = comp(lambda st, rope=rope: append_torch(st, rope))
            cases.append(Case("cache", "kv_append", f"T{t} p16" + (" rope" if rope else ""), "bf16",
                              4 * n_kv + 16 * t, 3 * n_kv if rope else 0, mk,
                              lambda st, rope=rope: append_ops(st, rope), fns))
    return cases


# ---- running -----------------------------------------------------------------------------

def run_case(torch, opslib, case, l2, iters, log):
    sets = input_sets(torch, case.make, l2)
    row = {"family": case.family, "op": case.op, "shape": case.shape, "dtype": case.dtype,
           "bytes": case.bytes, "flops": case.flops, "input_sets": len(sets), "tol": case.tol, "torch": {}}
    outs = {}
    for name, fn in case.torch_fns.items():
        try:
            us, host_us = timed(torch, fn, sets, iters)
            row["torch"][name] = us
            row.setdefault("torch_host_us", {})[name] = host_us
            ref_out = fn(sets[0])
            outs.setdefault("ref", ref_out[0] if isinstance(ref_out, tuple) else ref_out)
        except Exception as e:  # a backend that does not take this case
            row["torch"][name] = None
            row.setdefault("torch_errors", {})[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    ex = case.explain(sets[0]) if case.explain else None
    if ex is not None and ex.chosen is None:
        reasons = "; ".join(f"{v['kernel']}: {v['reason']}" for v in ex.verdicts)
        row["opslib"] = {"status": "no kernel", "reason": reasons}
    else:
        try:
            us, host_us = timed(torch, case.opslib_fn, sets, iters)
            out = case.opslib_fn(sets[0])
            torch.cuda.synchronize()
            row["opslib"] = {"us": us, "host_us": host_us}
            if case.compare and "ref" in outs:
                got = out[0] if isinstance(out, tuple) else out
                row["opslib"]["rel_err"] = rel_err(torch, got.reshape(outs["ref"].shape), outs["ref"])
        except opslib.OpsError as e:
            row["opslib"] = {"status": e.status_name, "reason": e.message}
    times = {k: v for k, v in row["torch"].items() if v is not None}
    if times:
        best = min(times, key=times.get)
        row["best_torch"], row["best_torch_us"] = best, times[best]
    if "us" in row.get("opslib", {}) and times:
        row["speedup"] = row["best_torch_us"] / row["opslib"]["us"]
    log(row)
    del sets
    torch.cuda.empty_cache()
    return row


def fmt_rate(row, us):
    if us is None:
        return "-"
    if row["family"] in ("memory", "decode", "cache"):
        return f"{us:8.1f} us {row['bytes'] / us / 1e6:5.2f} TB/s"
    return f"{us:8.1f} us {row['flops'] / us / 1e6:6.1f} TF/s"


def print_row(row):
    o = row.get("opslib", {})
    ours = fmt_rate(row, o.get("us")) if "us" in o else f"n/a ({o.get('status', '?')})"
    check = "" if "rel_err" not in o else ("ok" if o["rel_err"] < row["tol"] else "DIFFERS") + f" {o['rel_err']:.1e}"
    theirs = fmt_rate(row, row.get("best_torch_us")) + f" {row.get('best_torch', '-')}"
    ratio = f"{row['speedup']:.2f}x" if "speedup" in row else "-"
    host = f"{o['host_us']:5.0f}/{row['torch_host_us'][row['best_torch']]:<4.0f}" if "host_us" in o and "best_torch" in row \
        else f"{o['host_us']:5.0f}/-" if "host_us" in o else ""
    print(f"{row['op']:<15} {row['shape']:<17} {ours:<30} {theirs:<40} {ratio:>6}  {check:<13} {host}",
          flush=True)


def plot(result, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    bw = result["copy_tbps"] * 1e12
    peak = result["peak_tflops"] * 1e12
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(16, 7), gridspec_kw={"width_ratios": [1, 1.3]})
    ai = [10 ** (i / 10) for i in range(-20, 41)]
    ax.loglog(ai, [min(peak, a * bw) / 1e12 for a in ai], "k-", lw=1)
    ax.text(0.02, bw * 0.02 / 1e12 * 1.3, f"copy {result['copy_tbps']:.2f} TB/s", fontsize=8)
    ax.text(0.1, peak / 1e12 * 1.15, f"{result['peak_tflops']:.0f} TFLOP/s ({result['peak_name']})", fontsize=8)
    labels, ours, theirs = [], [], []
    for r in result["rows"]:
        a = r["flops"] / r["bytes"]
        bound_us = max(r["flops"] / peak, r["bytes"] / bw) * 1e6  # the roofline's time (a copy has no flops)
        o = r.get("opslib", {})
        if "us" in o and r["flops"] > 0:
            ax.plot(a, r["flops"] / o["us"] / 1e6, "o", color="tab:blue", ms=5)
        if r.get("best_torch_us") and r["flops"] > 0:
            ax.plot(a, r["flops"] / r["best_torch_us"] / 1e6, "x", color="tab:red", ms=5)
        labels.append(f"{r['op']} {r['shape']}")
        ours.append(100 * bound_us / o["us"] if "us" in o else 0)
        theirs.append(100 * bound_us / r["best_torch_us"] if r.get("best_torch_us") else 0)
    ax.set_xlabel("arithmetic intensity (flop / minimal byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("roofline: opslib (o) vs best PyTorch (x)")
    ys = range(len(labels))
    bx.barh([y + 0.2 for y in ys], ours, 0.4, label="opslib", color="tab:blue")
    bx.barh([y - 0.2 for y in ys], theirs, 0.4, label="best PyTorch", color="tab:red")
    bx.set_yticks(list(ys))
    bx.set_yticklabels(labels, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel("% of the roofline (copy bandwidth or dense peak), 0 = no opslib kernel yet")
    bx.axvline(100, color="k", lw=0.5)
    bx.legend(fontsize=8)
    fig.suptitle(f"{result['device']}, {result['date']}, torch {result['torch']}, opslib {result['opslib']}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"chart: {png}")


def main():
    global COOLDOWN_S
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="memory,gemm,sdpa")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--cooldown", type=float, default=COOLDOWN_S,
                    help="seconds of idle GPU before each contender is timed (power cap; see above)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one shape per family (a smoke run)")
    ap.add_argument("--shapes", metavar="REGEX", help="only the cases whose shape name matches")
    ap.add_argument("--json", default="compare.json")
    ap.add_argument("--png", default="compare.png")
    ap.add_argument("--plot", metavar="JSON", help="only redraw the chart of an earlier run")
    args = ap.parse_args()
    COOLDOWN_S = args.cooldown
    if args.plot:
        with open(args.plot) as f:
            plot(json.load(f), args.png)
        return 0

    import torch
    if not torch.cuda.is_available():
        print("compare.py: no CUDA device; nothing to compare")
        return 0
    import opslib
    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    peak_key = next((k for k in PEAKS if k in name), None)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us, _ = timed(torch, lambda s: dst.copy_(src), [None], args.iters)
    result = {"device": name, "sm_count": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
              "date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "opslib": opslib.version(), "copy_tbps": 2 * src.numel() / us / 1e6, "cooldown_s": COOLDOWN_S,
              "peak_tflops": PEAKS[peak_key]["bf16"] if peak_key else 0.0,
              "peak_name": f"{peak_key} bf16 dense, data sheet" if peak_key else "unknown device",
              "rows": []}
    src = dst = None  # 2 GiB back to the allocator
    print(f"{name}: copy {result['copy_tbps']:.3f} TB/s (1 GiB d2d, same run); torch {torch.__version__}; "
          f"opslib {opslib.version()} from {opslib.library_path}")
    print(f"{'op':<15} {'shape':<17} {'opslib':<30} {'best PyTorch':<40} {'ratio':>6}  {'agree':<13} "
          f"host us/call (opslib/PyTorch)")
    builders = {"memory": memory_cases, "gemm": gemm_cases, "sdpa": sdpa_cases, "sdpa_bwd": sdpa_bwd_cases,
                "decode": decode_cases, "cache": cache_cases}
    for fam in args.families.split(","):
        t0 = time.time()
        for case in builders[fam](torch, opslib, not args.no_compile, args.quick):
            if args.shapes and not re.search(args.shapes, case.shape):
                continue
            result["rows"].append(run_case(torch, opslib, case, props.L2_cache_size, args.iters, print_row))
        print(f"# {fam}: {time.time() - t0:.0f} s", flush=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"json: {args.json}")
    try:
        plot(result, args.png)
    except ImportError:
        print("chart: matplotlib is not installed here; redraw with --plot", args.json)
    bad = [r for r in result["rows"] if r.get("opslib", {}).get("rel_err", 0) >= r["tol"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
