# Decode shapes timed with each split-KV kernel pinned (OPSLIB_FORCE_KERNEL, one process each)
# and with the dispatcher's own pick: does the model choose the fastest? bf16, d128, GQA 32:8.
import os, subprocess, sys
SHAPES = [("B64 kv4k", 64, 4096, 1), ("B8 kv32k sq16", 8, 32768, 16), ("B8 kv32k sq4", 8, 32768, 4),
          ("B1 kv4k", 1, 4096, 1), ("B16 kv8k h64", 16, 8192, 1), ("B1 kv1k", 1, 1024, 1),
          ("B1 kv2k", 1, 2048, 1), ("B1 kv4k sq16", 1, 4096, 16)]
KERNELS = ["", "cuda_sdpa_split_d128_m16", "cuda_sdpa_split_d128_m64", "cuda_sdpa_split_d256_m16"]
if len(sys.argv) > 1:
    import torch, opslib
    name, b, skv, sq = SHAPES[int(sys.argv[1])]
    hq = 64 if "h64" in name else 32
    bf = torch.bfloat16
    q = torch.randn(b, sq, hq, 128, device="cuda", dtype=bf)
    k, v = (torch.randn(b, skv, 8, 128, device="cuda", dtype=bf) for _ in range(2))
    o = torch.empty_like(q)
    f = lambda: opslib.sdpa(q, k, v, causal=sq > 1, out=o)
    for _ in range(5): f()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(42)]
    ts = []
    for i in range(20):
        ev[2 * i].record(); f(); ev[2 * i + 1].record()
    torch.cuda.synchronize()
    ts = sorted(ev[2 * i].elapsed_time(ev[2 * i + 1]) * 1e3 for i in range(20))
    chosen = opslib.explain("sdpa", q, k, v, causal=sq > 1, out=o).chosen
    print(f"{ts[10]:.1f} us  {(2 * b * 8 * skv * 128 * 2) / ts[10] / 1e6:.2f} TB/s  {chosen}")
else:
    for i, (name, *_ ) in enumerate(SHAPES):
        for kname in KERNELS:
            env = dict(os.environ)
            if kname: env["OPSLIB_FORCE_KERNEL"] = kname
            r = subprocess.run([sys.executable, __file__, str(i)], env=env, capture_output=True, text=True)
            out = r.stdout.strip() or r.stderr.strip().splitlines()[-1]
            print(f"{name:<16} {kname or '(dispatcher)':<28} {out}", flush=True)
