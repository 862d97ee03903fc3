"""One ops_kv_cache_append call as compare.py's cache family builds it (T16384 bf16, GQA 8,
d128, K and V views of a qkv projection, random int64 slots into pages of 16), made a few
times, for a profiler:

    ncu --clock-control none --kernel-name regex:append_rows --launch-skip 3 --launch-count 1 \\
        python3 bench/append_one.py [rope] [ITERS]

It prints the kernel the dispatcher chose (OPSLIB_FORCE_KERNEL pins another)."""
import sys

import torch

import opslib

rope = len(sys.argv) > 1 and sys.argv[1] == "rope"
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 6
t, d, hq, hkv, page, bf = 16384, 128, 32, 8, 16, torch.bfloat16
pages = (t + 4096) // page
qkv = torch.randn(t, hq + 2 * hkv, d, device="cuda", dtype=bf)
k, v = qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
kc = torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf)
vc = torch.zeros(pages, page, hkv, d, device="cuda", dtype=bf)
slots = torch.randperm(pages * page, device="cuda")[:t].to(torch.int64)
pos = torch.randperm(t + 4096, device="cuda")[:t].to(torch.int64)
kw = {"positions": pos, "rope": True} if rope else {}
for _ in range(iters):
    opslib.kv_cache_append(k, v, slots, kc, vc, **kw)
torch.cuda.synchronize()
print("ok", opslib.explain("kv_cache_append", k, v, slots, kc, vc, **kw).chosen)
