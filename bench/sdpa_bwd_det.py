#!/usr/bin/env python3
"""The deterministic attention backward beside the default one, by shape: each shape's Hopper
rows pinned (cuda_sdpa_backward_sm90_d<D> and its _det_ twin), GPU time of 20 calls captured in
a CUDA graph (median of 7 replays), bf16, and the largest relative difference between the two
rows' dq, dk, dv, and the deterministic row's plan (explain's). The shapes are small-batch ones
where the deterministic rows' turns and parts matter: causal, and without a mask in a wave of
blocks (the walks round). In the GPU bundle, with its PYTHONPATH and OPSLIB_LIBRARY:
    python3 sdpa_bwd_det.py
    python3 sdpa_bwd_det.py --handover
The second times a turn's hand-over: 64 query rows of one head over K key tiles of 128, no mask,
so that every key tile's walk is one step at the same query tile and the deterministic row's
turns there run one after the other (more key tiles than steps: ascending); the slope of the
deterministic row's time over K, beside the default row's, is one hand-over.
"""
import sys

import opslib
import torch

# (batch, seqlen, query heads, KV heads, head dim, causal)
SHAPES = [(1, 512, 32, 8, 128, 1), (1, 512, 32, 8, 128, 0), (1, 1024, 32, 8, 128, 1), (1, 512, 16, 16, 128, 0),
          (2, 512, 16, 4, 64, 1), (2, 300, 8, 2, 128, 1), (1, 2048, 16, 16, 128, 1), (2, 128, 8, 2, 128, 0),
          (1, 1024, 16, 4, 64, 1), (1, 4096, 8, 8, 128, 1), (2, 2048, 32, 8, 128, 1), (4, 512, 16, 16, 64, 1),
          (1, 512, 16, 16, 64, 0), (4, 512, 8, 8, 64, 0), (1, 2048, 8, 8, 128, 0), (2, 1024, 8, 2, 128, 0),
          (1, 1024, 4, 4, 256, 0), (2, 1024, 4, 4, 256, 0), (1, 4096, 2, 2, 256, 0)]


def timed(fn, n=20, reps=7):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / n)
    return sorted(times)[len(times) // 2]


def handover():
    for d in (128, 64):
        for tiles in (8, 32, 64, 128):
            q, do = (torch.randn(1, 64, 1, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            k, v = (torch.randn(1, 128 * tiles, 1, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            o, lse = opslib.sdpa(q, k, v, return_lse=True)
            us = []
            for name in (f"cuda_sdpa_backward_sm90_d{d}", f"cuda_sdpa_backward_sm90_det_d{d}"):
                h = opslib.Handle("cuda")
                h.pin_kernel(name)
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                us.append(timed(lambda: opslib.sdpa_backward(do, q, k, v, o, lse, dq=dq, dk=dk, dv=dv, handle=h)))
            print(f"d{d}, {tiles:3d} key tiles: default {us[0]:7.1f} us, deterministic {us[1]:7.1f} us, "
                  f"{(us[1] - us[0]) / tiles:5.2f} us more a key tile", flush=True)


def main():
    for b, s, hq, hkv, d, causal in SHAPES:
        q, do = (torch.randn(b, s, hq, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        o, lse = opslib.sdpa(q, k, v, causal=bool(causal), return_lse=True)
        us, grads = [], []
        for name in (f"cuda_sdpa_backward_sm90_d{d}", f"cuda_sdpa_backward_sm90_det_d{d}"):
            h = opslib.Handle("cuda")
            h.pin_kernel(name)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            us.append(timed(lambda: opslib.sdpa_backward(do, q, k, v, o, lse, causal=bool(causal), dq=dq, dk=dk,
                                                         dv=dv, handle=h)))
            grads.append((dq.float(), dk.float(), dv.float()))
        err = max(((x - y).abs().max() / y.abs().max().clamp_min(1e-6)).item() for x, y in zip(*grads))
        ex = opslib.explain("sdpa_backward", do, q, k, v, o, lse, causal=bool(causal), handle=h)
        plan = next((v["plan"] for v in ex.verdicts if v["kernel"] == f"cuda_sdpa_backward_sm90_det_d{d}"), None)
        print(f"B{b} S{s} H{hq}:{hkv} d{d}{' causal' if causal else ''}: default {us[0]:8.1f} us, "
              f"deterministic {us[1]:8.1f} us, det / default speed {us[0] / us[1]:.2f}, max rel diff {err:.2e}; "
              f"det plan: {plan}", flush=True)


if __name__ == "__main__":
    handover() if "--handover" in sys.argv[1:] else main()
