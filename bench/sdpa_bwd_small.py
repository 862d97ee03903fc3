#!/usr/bin/env python3
"""The attention backward on small and short shapes: opslib (the dispatcher, or the kernel
OPSLIB_FORCE_KERNEL pins) beside PyTorch's flash and cuDNN backward (autograd.grad), GPU time
from CUDA events (median of 30), bf16. In the GPU bundle, with its PYTHONPATH and OPSLIB_LIBRARY:
    python3 sdpa_bwd_small.py
    OPSLIB_FORCE_KERNEL=cuda_sdpa_backward_mma_d64 python3 sdpa_bwd_small.py   (d64 shapes only)
    SDPA_BWD_SHAPES=d256 python3 sdpa_bwd_small.py    (head dim 256 shapes instead)
"""
import os
import statistics

import opslib
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
F = torch.nn.functional
shapes = [(2, 128, 8, 2, 64, False), (1, 512, 16, 16, 64, False), (4, 512, 16, 16, 64, True),
          (1, 512, 32, 8, 128, True), (16, 256, 32, 32, 128, True), (32, 512, 16, 16, 128, True),
          (8, 1024, 16, 16, 64, True)]
if os.environ.get("SDPA_BWD_SHAPES") == "d256":
    shapes = [(1, 128, 8, 8, 256, False), (4, 512, 8, 8, 256, True), (2, 1024, 16, 4, 256, True),
              (8, 1024, 8, 8, 256, False), (1, 4096, 8, 8, 256, True)]
def t(fn, n=30):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    torch.cuda._sleep(int(2e7))
    for a, b in ev:
        a.record(); fn(); b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)
tag = os.environ.get("OPSLIB_FORCE_KERNEL", "dispatcher")
for b, s, h, hk, d, causal in shapes:
    if tag.endswith("_d64") and d > 64:
        continue
    q, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = opslib.sdpa(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    us = t(lambda: opslib.sdpa_backward(do, q, k, v, o, lse, causal=causal, dq=dq, dk=dk, dv=dv))
    line = f"{tag:30s} B{b} S{s} H{h}:{hk} d{d}{' causal' if causal else ''}: opslib {us:8.1f} us"
    if tag == "dispatcher":
        res = {}
        for name, bk in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(bk):
                    qq, kk, vv = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
                    oo = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, enable_gqa=hk != h)
                g = do.transpose(1, 2)
                res[name] = t(lambda: torch.autograd.grad(oo, (qq, kk, vv), g, retain_graph=True))
            except Exception as e:
                res[name] = None
        line += "  " + "  ".join(f"{k} {v:8.1f} us" if v else f"{k} -" for k, v in res.items())
    print(line, flush=True)
