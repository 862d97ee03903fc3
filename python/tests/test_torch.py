"""The binding with PyTorch tensors on the GPU: ops against the float64 NumPy reference on
fresh random bf16 / f16 / f32 data (odd and long rows, strided views, NaN-poisoned
outputs), the current stream (proven by CUDA graph capture, where a launch on any other
stream fails), zero-copy outputs, explain on the real device. Skipped, saying why, where
torch or a CUDA device is missing."""
import numpy as np
import pytest

import opslib
import reference as ref

torch = pytest.importorskip("torch", reason="PyTorch is not installed on this host")
if not torch.cuda.is_available() or opslib.cuda_device_count() == 0:
    pytest.skip("no CUDA device (torch.cuda.is_available() is False or the driver is missing)",
                allow_module_level=True)

DEV = "cuda"
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 1e-2}
DTYPES = list(TOL)


def host(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


def randn(rng, *shape, dtype=torch.bfloat16):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(DEV, dtype)


def nan_like(t):
    return torch.full_like(t, float("nan"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [64, 333, 1024, 4096, 16384, 65536])
def test_rmsnorm_and_layernorm_by_row_length(rng, dtype, n):
    rows = int(rng.integers(1, 70))
    x, r, w, b = randn(rng, rows, n, dtype=dtype), randn(rng, rows, n, dtype=dtype), \
        randn(rng, n, dtype=dtype), randn(rng, n, dtype=dtype)
    y = nan_like(x)
    s = nan_like(x)
    opslib.rmsnorm(x, w, residual=r, residual_out=s, out=y)
    sv = host(x) + host(r)
    assert ref.rel_err(host(s), sv) < TOL[dtype]
    assert ref.rel_err(host(y), ref.rmsnorm(host(s), host(w))[0]) < TOL[dtype] * 2
    mean = torch.full((rows,), float("nan"), device=DEV)
    rstd = torch.full((rows,), float("nan"), device=DEV)
    y = opslib.layernorm(x, w, b, mean_out=mean, rstd_out=rstd)
    want, mu, rs = ref.layernorm(host(x), host(w), host(b))
    assert ref.rel_err(host(y), want) < TOL[dtype] * 2
    assert ref.rel_err(host(mean), mu) < 1e-4 and ref.rel_err(host(rstd), rs) < 1e-4


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_backward_agree_with_torch(rng, dtype):
    x = randn(rng, int(rng.integers(1, 300)), int(rng.integers(1, 5000)), dtype=dtype)
    y = opslib.softmax(x, scale=0.5)
    assert ref.rel_err(host(y), host(torch.softmax(x.float() * 0.5, -1))) < TOL[dtype]
    dy = randn(rng, *x.shape, dtype=dtype)
    dx = opslib.softmax_backward(dy, y, scale=0.5)
    yf, dyf = host(y), host(dy)
    assert ref.rel_err(host(dx), 0.5 * yf * (dyf - (dyf * yf).sum(-1, keepdims=True))) < TOL[dtype] * 2


def test_layernorm_backward_against_autograd(rng):
    x = randn(rng, 37, 1000, dtype=torch.float32).requires_grad_()
    w = randn(rng, 1000, dtype=torch.float32).requires_grad_()
    b = randn(rng, 1000, dtype=torch.float32).requires_grad_()
    y = torch.nn.functional.layer_norm(x, (1000,), w, b)
    dy = torch.randn_like(y)
    y.backward(dy)
    mean = x.detach().mean(-1)
    rstd = torch.rsqrt(x.detach().var(-1, unbiased=False) + 1e-5)
    dx, dw, db = opslib.layernorm_backward(dy, x.detach(), w.detach(), mean, rstd, dweight=True, dbias=True)
    assert ref.rel_err(host(dx), host(x.grad)) < 1e-4
    assert ref.rel_err(host(dw), host(w.grad)) < 1e-4 and ref.rel_err(host(db), host(b.grad)) < 1e-4


def test_strided_inputs_and_zero_copy_outputs(rng):
    base = randn(rng, 64, 2 * 2048)
    x = base[:, 1::2]                                  # stride 2, offset 1
    w = randn(rng, 2048)
    out = torch.empty(64, 2048, device=DEV, dtype=torch.bfloat16)
    got = opslib.rmsnorm(x, w, out=out)
    assert got is out and got.data_ptr() == out.data_ptr()
    assert ref.rel_err(host(out), ref.rmsnorm(host(x), host(w))[0]) < 1e-2
    xt = randn(rng, 512, 96, dtype=torch.float32).t()  # a transposed view
    assert ref.rel_err(host(opslib.softmax(xt)), host(torch.softmax(xt, -1))) < 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_reduce_dropout(rng, dtype):
    x = randn(rng, 33, int(rng.integers(1, 3000)), dtype=dtype)
    a = randn(rng, x.shape[1], dtype=dtype)
    assert ref.rel_err(host(opslib.sin_affine(x, 2.0, 1.0)), np.sin(2 * host(x) + 1)) < TOL[dtype] * 4
    assert ref.rel_err(host(opslib.add(x, a)), host(x) + host(a)) < TOL[dtype]
    assert ref.rel_err(host(opslib.unary(x, "gelu_erf")), host(torch.nn.functional.gelu(x.float()))) < TOL[dtype] * 2
    for op, f in (("sum", np.sum), ("max", np.max), ("mean", np.mean)):
        for axes in (1, 0, None):
            got = opslib.reduce(x, op, axes, out_dtype="f32")
            assert ref.rel_err(host(got), f(host(x), axis=axes)) < 1e-4, (op, axes)
    y = opslib.dropout(x, 0.25, seed=7, offset=3)
    torch.cuda.synchronize()
    keep = host(y) != 0
    assert 0.7 < keep.mean() < 0.8
    cpu = opslib.dropout(x.float().cpu(), 0.25, seed=7, offset=3)   # the CPU backend, same mask
    assert np.array_equal(cpu.numpy() != 0, keep)


def test_runs_on_the_current_stream_under_graph_capture(rng):
    x = randn(rng, 1024, 4096)
    w = randn(rng, 4096)
    y = torch.empty_like(x)
    opslib.rmsnorm(x, w, out=y)                      # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):                        # a launch on another stream would fail here
        opslib.rmsnorm(x, w, out=y)
    y.fill_(float("nan"))
    x.copy_(randn(rng, 1024, 4096))
    g.replay()
    torch.cuda.synchronize()
    assert ref.rel_err(host(y), ref.rmsnorm(host(x), host(w))[0]) < 1e-2


def test_side_stream_orders_after_the_producer(rng):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = randn(rng, 4096, 1024)
        y = opslib.softmax(x)
    s.synchronize()
    assert ref.rel_err(host(y), host(torch.softmax(x.float(), -1))) < 1e-2


def test_explain_on_this_device():
    x = torch.empty(16384, 4096, device=DEV, dtype=torch.bfloat16)
    w = torch.empty(4096, device=DEV, dtype=torch.bfloat16)
    e = opslib.explain("rmsnorm", x, w)
    assert e.chosen.startswith("cuda_rmsnorm") and "sm_" in e.problem


def test_gemm_and_sdpa_run_or_refuse_with_reasons(rng):
    """Where this build has a CUDA kernel the result must match torch; where it has none,
    the call must fail with OPS_ERR_UNSUPPORTED naming the refused candidates."""
    a, b = randn(rng, 128, 64), randn(rng, 64, 96)
    q = randn(rng, 2, 100, 4, 64)
    cases = [("gemm", (a, b), {}, lambda: a.float() @ b.float()),
             ("sdpa", (q, q, q), {"causal": True},
              lambda: torch.nn.functional.scaled_dot_product_attention(
                  q.transpose(1, 2).float(), q.transpose(1, 2).float(), q.transpose(1, 2).float(),
                  is_causal=True).transpose(1, 2))]
    for op, args, kw, want in cases:
        if opslib.explain(op, *args, **kw).chosen is None:
            with pytest.raises(opslib.OpsError) as e:
                getattr(opslib, op)(*args, **kw)
            assert e.value.status_name == "OPS_ERR_UNSUPPORTED" and f"cpu_{op}_ref" in e.value.message
        else:
            assert ref.rel_err(host(getattr(opslib, op)(*args, **kw)), host(want())) < 1e-2


def torch_attention(q, k, v, causal, window, scale):
    """PyTorch's SDPA (math, f32) on [S, H, D] tensors of one sequence, with opslib's
    bottom-right causal / window rule as a boolean mask and GQA by repeating K and V."""
    sq, hq, sk, hkv = q.shape[0], q.shape[1], k.shape[0], k.shape[1]
    i = torch.arange(sq, device=DEV)[:, None]
    j = torch.arange(sk, device=DEV)[None, :]
    diag = sk - sq
    keep = torch.ones(sq, sk, dtype=torch.bool, device=DEV)
    left, right = window[0], 0 if causal else window[1]
    if left >= 0:
        keep &= j >= i + diag - left
    if right >= 0:
        keep &= j <= i + diag + right
    kk = k.float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    vv = v.float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    o = torch.nn.functional.scaled_dot_product_attention(q.float().transpose(0, 1), kk, vv, attn_mask=keep,
                                                         scale=scale)
    o = torch.where(keep.any(dim=1)[None, :, None], o, torch.zeros_like(o))  # rows seeing no key: 0
    return o.transpose(0, 1)


@pytest.mark.parametrize("case", range(12))
def test_sdpa_matches_torch_over_random_configs(rng, case):
    """The dispatcher's kernel against PyTorch's SDPA: random batch, heads (GQA ratios 1-4,
    MQA), seqlens (1, 17, 1000, 4097 among them), head dims 64 / 128 / 256 / 96, causal and
    windows, varlen batches, BSHD and BHSD layouts, f16 and bf16."""
    dtype = torch.bfloat16 if case % 2 == 0 else torch.float16
    d = (64, 128, 256, 96)[case % 4]
    hkv = int(rng.integers(1, 3))
    hq = hkv * (1, 2, 4, 3)[case % 4]
    if case % 6 == 5:
        hkv, hq = 1, 4  # MQA
    seqs = (1, 17, 1000, 4097, 100, 333)
    sq, sk = seqs[case % 6], seqs[(case * 5 + 1) % 6]
    causal = case % 3 == 1
    window = (int(rng.integers(0, 300)), -1 if causal else int(rng.integers(-1, 50))) if case % 4 == 2 else (-1, -1)
    scale = None if case % 5 else 0.1
    varlen = case % 4 == 3
    bhsd = case % 2 == 1
    if varlen:
        lens_q = [int(rng.integers(0, 300)) for _ in range(3)]
        lens_k = [lq + int(rng.integers(0, 50)) if causal else int(rng.integers(1, 300)) for lq in lens_q]
        q, k, v = randn(rng, sum(lens_q), hq, d, dtype=dtype), randn(rng, sum(lens_k), hkv, d, dtype=dtype), \
            randn(rng, sum(lens_k), hkv, d, dtype=dtype)
        cq = torch.tensor(np.cumsum([0] + lens_q), dtype=torch.int32, device=DEV)
        ck = torch.tensor(np.cumsum([0] + lens_k), dtype=torch.int32, device=DEV)
        o = opslib.sdpa(q, k, v, causal=causal, window=window, scale=scale, cu_seqlens_q=cq, cu_seqlens_k=ck,
                        max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), out=nan_like(q[..., :d]))
        want = torch.cat([torch_attention(q[a:b], k[c:e], v[c:e], causal, window, scale)
                          for a, b, c, e in zip(cq[:-1].tolist(), cq[1:].tolist(), ck[:-1].tolist(),
                                                ck[1:].tolist())])
    else:
        b = int(rng.integers(1, 3)) if sq * sk < 4_000_000 else 1
        def make(s, h):
            t = randn(rng, b, h, s, d, dtype=dtype)
            return t.transpose(1, 2) if bhsd else t.transpose(1, 2).contiguous()
        q, k, v = make(sq, hq), make(sk, hkv), make(sk, hkv)
        o = opslib.sdpa(q, k, v, causal=causal, window=window, scale=scale, out=nan_like(q))
        want = torch.stack([torch_attention(q[i], k[i], v[i], causal, window, scale) for i in range(b)])
    err = ref.rel_err(host(o), host(want))
    assert err < TOL[dtype] * (2 if dtype == torch.float16 else 1), (case, err)


def test_cpu_tensors_from_torch_use_the_cpu_backend(rng):
    x = torch.randn(5, 300, dtype=torch.bfloat16)
    w = torch.randn(300, dtype=torch.bfloat16)
    y = opslib.rmsnorm(x, w)
    assert y.device.type == "cpu" and y.dtype == torch.bfloat16
    assert ref.rel_err(host(y), ref.rmsnorm(host(x), host(w))[0]) < 1e-2


def test_unsupported_tensors_fail_with_the_librarys_message():
    with pytest.raises(opslib.OpsError) as e:
        opslib.softmax(torch.zeros(2, 3, dtype=torch.float64, device=DEV))
    assert e.value.status_name == "OPS_ERR_DTYPE_MISMATCH" and "float32" in e.value.message
    x = torch.randn(4, 64, device=DEV)
    with pytest.raises(opslib.OpsError) as e:
        opslib.softmax(x, out=torch.empty(4, 64))          # output on the CPU, input on the GPU
    assert e.value.status_name == "OPS_ERR_DEVICE_MISMATCH"
