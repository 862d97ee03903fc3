"""PyTorch's own kernels on the ops of bench/memory_bench.c, for the same-run comparison.

   python3 torch_memory_ops.py            (run from the GPU bundle by run_all.sh --bench)

Bytes are the minimal ones memory_bench.c counts (each input read once, each output
written once), so the TB/s columns compare directly. Eager mode, bf16 unless stated.
"""
import torch
import torch.nn.functional as F


def timed(fn, reps=50):
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps * 1e-3


def report(name, sec, nbytes, copy_tbps):
    tbps = nbytes / sec / 1e12
    pct = 100.0 * tbps / copy_tbps if copy_tbps else 0.0
    print(f"torch {name:<34} {sec * 1e6:9.1f} us {tbps:6.3f} TB/s {pct:5.1f}% of copy", flush=True)


def main():
    if not torch.cuda.is_available():
        print("torch_memory_ops: no CUDA device")
        return
    print("torch", torch.__version__, torch.cuda.get_device_name())
    src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    sec = timed(lambda: dst.copy_(src))
    copy = 2 * src.numel() / sec / 1e12
    report("copy/d2d_512MiB", sec, 2 * src.numel(), copy)
    bf = torch.bfloat16
    for rows, cols in ((16384, 4096), (65536, 1024), (4096, 16384)):
        x = torch.randn(rows, cols, device="cuda", dtype=bf)
        r = torch.randn_like(x)
        w = torch.randn(cols, device="cuda", dtype=bf)
        bias = torch.randn_like(w)
        dy = torch.randn_like(x)
        e = 2
        n = x.numel()
        shape = f"{rows}x{cols}"
        report(f"layernorm/{shape}", timed(lambda: F.layer_norm(x, (cols,), w, bias, 1e-5)), 2 * n * e, copy)
        report(f"rmsnorm/{shape}", timed(lambda: F.rms_norm(x, (cols,), w, 1e-5)), 2 * n * e, copy)
        report(f"softmax/{shape}", timed(lambda: torch.softmax(x, -1)), 2 * n * e, copy)
        report(f"add_rmsnorm/{shape}", timed(lambda: F.rms_norm(x + r, (cols,), w, 1e-5)), 4 * n * e, copy)
        # backward through the aten ops autograd calls
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, (cols,), w, bias, 1e-5)
        report(f"layernorm_bwd/{shape}",
               timed(lambda: torch.ops.aten.native_layer_norm_backward(dy, x, (cols,), mean, rstd, w, bias,
                                                                       [True, True, True])),
               3 * n * e, copy)
        y = torch.softmax(x, -1)
        report(f"softmax_bwd/{shape}",
               timed(lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, bf)), 3 * n * e, copy)
        s = x.sum(-1)
        report(f"sum_last/{shape}", timed(lambda: x.sum(-1)), n * e + s.numel() * e, copy)
        report(f"sum_axis0/{shape}", timed(lambda: x.sum(0)), n * e + cols * e, copy)
        del x, r, dy, y
    xs = torch.randn(1 << 28, device="cuda", dtype=torch.float32)
    report("sin(2x+1)/f32/2^28", timed(lambda: torch.sin(2 * xs + 1), reps=20), 2 * xs.numel() * 4, copy)
    f = torch.compile(lambda t: torch.sin(2 * t + 1))
    try:
        report("sin(2x+1)/f32/2^28 compiled", timed(lambda: f(xs), reps=20), 2 * xs.numel() * 4, copy)
    except Exception as ex:  # no compiler toolchain on the host
        print("torch compile unavailable:", type(ex).__name__)


if __name__ == "__main__":
    main()
