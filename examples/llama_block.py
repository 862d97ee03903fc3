"""A Llama-style decoder block written with opslib's PyTorch operators (opslib.torch), beside
the same block in PyTorch, eager and under torch.compile:

    x = x + o_proj(attention(rope(qkv_proj(rmsnorm(x)))))          (GQA, causal)
    x = x + down_proj(silu(gate_proj(h)) * up_proj(h)), h = rmsnorm(x)

opslib's version fuses what its epilogues allow: the residual adds into the output
projections' GEMMs, SiLU into the gate projection's. The forward is checked against
PyTorch's (bf16 tolerance), then each variant is timed on the GPU (CUDA events, median) and
on the host. Backward: this block's RoPE and SiLU-fused GEMM have no backward in opslib, so
it is timed forward only; a block of the differentiable ops (RMSNorm, GEMMs, sdpa) trains
beside PyTorch's in python/tests/test_torch_ops.py (test_block_trains_like_torch).

    python3 examples/llama_block.py [--batch 1] [--seq 2048] [--json FILE]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import opslib
from opslib import torch as ot

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336  # Llama 3 8B
THETA = 500000.0


def weights(g):
    def w(*shape, scale=0.02):
        return (torch.randn(*shape, generator=g, device="cuda") * scale).to(torch.bfloat16)

    q_out, kv_out = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return {"attn_norm": 1 + w(HIDDEN, scale=0.1), "mlp_norm": 1 + w(HIDDEN, scale=0.1),
            "qkv": w(HIDDEN, q_out + 2 * kv_out), "o": w(q_out, HIDDEN),
            "gate": w(HIDDEN, FFN), "up": w(HIDDEN, FFN), "down": w(FFN, HIDDEN)}


def split_heads(qkv, b, s):
    q_out, kv_out = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    q, k, v = qkv.split([q_out, kv_out, kv_out], dim=-1)
    return (q.reshape(b, s, HEADS, HEAD_DIM), k.reshape(b, s, KV_HEADS, HEAD_DIM),
            v.reshape(b, s, KV_HEADS, HEAD_DIM))


def block_opslib(x, p, positions):
    """x [B, S, HIDDEN] bf16 -> the block's output; opslib's operators only."""
    b, s, _ = x.shape
    x2 = x.reshape(b * s, HIDDEN)
    h = ot.rmsnorm(x2, p["attn_norm"])
    q, k, v = split_heads(ot.gemm(h, p["qkv"]), b, s)
    q, k = ot.rope(positions, q, k, "neox", THETA, 0)
    o = ot.sdpa(q, k, v, causal=True)
    x2 = ot.gemm(o.reshape(b * s, HEADS * HEAD_DIM), p["o"], residual=x2)
    h = ot.rmsnorm(x2, p["mlp_norm"])
    a = ot.binary(ot.gemm(h, p["gate"], activation="silu"), ot.gemm(h, p["up"]), "mul")
    return ot.gemm(a, p["down"], residual=x2).reshape(b, s, HIDDEN)


def rope_torch(t, positions):
    half = HEAD_DIM // 2
    inv = THETA ** (-torch.arange(half, device=t.device, dtype=torch.float32) / half)
    ang = positions.float()[..., None] * inv                   # [B, S, half]
    cos, sin = ang.cos()[:, :, None, :], ang.sin()[:, :, None, :]
    t1, t2 = t.float()[..., :half], t.float()[..., half:]
    return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], -1).to(t.dtype)


def block_torch(x, p, positions):
    b, s, _ = x.shape
    h = F.rms_norm(x, (HIDDEN,), p["attn_norm"], 1e-5)
    q, k, v = split_heads(h @ p["qkv"], b, s)
    q, k = rope_torch(q, positions), rope_torch(k, positions)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                       enable_gqa=True).transpose(1, 2)
    x = x + o.reshape(b, s, HEADS * HEAD_DIM) @ p["o"]
    h = F.rms_norm(x, (HIDDEN,), p["mlp_norm"], 1e-5)
    return x + (F.silu(h @ p["gate"]) * (h @ p["up"])) @ p["down"]


def timed(fn, iters=20):
    """(median GPU ms per call, host ms per call) of fn()."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    gpu = statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))
    torch.cuda._sleep(int(2e8))  # the host's cost alone, calls queued behind a spin
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    host = (time.perf_counter() - t0) / 5 * 1e3
    torch.cuda.synchronize()
    return gpu, host


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    p = weights(g)
    b, s = args.batch, args.seq
    x = torch.randn(b, s, HIDDEN, generator=g, device="cuda").to(torch.bfloat16)
    positions = torch.arange(s, device="cuda", dtype=torch.int32).expand(b, s).contiguous()

    ours, ref = block_opslib(x, p, positions), block_torch(x, p, positions)
    err = ((ours.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    print(f"block B{b} S{s} (Llama 3 8B dims, bf16): max |opslib - PyTorch| / max |PyTorch| = {err:.2e}")
    if not err < 2e-2:
        raise SystemExit("llama_block: opslib's block does not match PyTorch's")

    compiled_torch = torch.compile(block_torch)
    compiled_opslib = torch.compile(block_opslib, fullgraph=True)  # raises on a graph break
    err_c = ((compiled_opslib(x, p, positions).float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    flops = 2 * b * s * (HIDDEN * (HEADS + 2 * KV_HEADS) * HEAD_DIM + HEADS * HEAD_DIM * HIDDEN + 3 * HIDDEN * FFN) \
        + 4 * b * HEADS * HEAD_DIM * s * s / 2  # projections + causal attention
    rows = []
    for name, fn in (("opslib (eager)", lambda: block_opslib(x, p, positions)),
                     ("opslib (torch.compile fullgraph)", lambda: compiled_opslib(x, p, positions)),
                     ("PyTorch eager", lambda: block_torch(x, p, positions)),
                     ("PyTorch torch.compile", lambda: compiled_torch(x, p, positions))):
        gpu, host = timed(fn)
        rows.append({"variant": name, "gpu_ms": gpu, "host_ms": host, "tflops": flops / gpu / 1e9})
        print(f"{name:<34} {gpu:8.3f} ms GPU  {flops / gpu / 1e9:6.1f} TFLOP/s  {host:7.3f} ms host", flush=True)
    print(f"compiled opslib block vs PyTorch: {err_c:.2e}; opslib {opslib.version()}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}, C path: {opslib.extension()['loaded']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": b, "seq": s, "err": err, "err_compiled": err_c, "rows": rows,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date": time.strftime("%Y-%m-%d")}, f, indent=1)


if __name__ == "__main__":
    main()
