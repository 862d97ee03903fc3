"""The C path (opslib._ext) on CUDA torch tensors against the Python path (opslib._ops): the
same results bit for bit, the same errors with nothing written, each call counted where it
ran, the current stream honoured (streams, threads, CUDA graph capture). Skipped, saying
why, without the module, torch or a CUDA device."""
import os
import threading

import pytest

import opslib
from opslib import _ops

if not opslib.extension()["loaded"]:
    pytest.skip(f"opslib._ext not in use: {opslib.extension()['reason']}", allow_module_level=True)

torch = pytest.importorskip("torch", reason="PyTorch is not installed on this host")
if not torch.cuda.is_available() or opslib.cuda_device_count() == 0:
    pytest.skip("no CUDA device (torch.cuda.is_available() is False or the driver is missing)",
                allow_module_level=True)

DEV = "cuda"


def rand(g, *shape, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=g, device=DEV, dtype=torch.float32).to(dtype)


def bits(t):
    return t.contiguous().view(-1).view(torch.uint8)


def same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def clone(r):
    return tuple(t.clone() for t in r) if isinstance(r, tuple) else r.clone()


def counts():
    e = opslib.extension()
    return e["fast_calls"], e["python_calls"]


def calls(g):
    """(name, args, kwargs) on CUDA tensors: each op with its options, views and outputs."""
    f32 = torch.float32
    q, k, v = rand(g, 2, 77, 8, 64), rand(g, 2, 90, 2, 64), rand(g, 2, 90, 2, 64)
    yield "sdpa", (q, k, v), dict(causal=True, scale=0.3)
    yield "sdpa", (q, k, v), dict(window=(16, 0), return_lse=True)
    yield "sdpa", (q.transpose(1, 2).contiguous().transpose(1, 2), k, v), dict(out=torch.full_like(q, float("nan")))
    # decode against a paged cache: 3 sequences, pages of 16 rows
    qd, kp, vp = rand(g, 3, 1, 8, 128), rand(g, 10, 16, 2, 128), rand(g, 10, 16, 2, 128)
    lens = torch.tensor([1, 40, 64], dtype=torch.int32, device=DEV)
    table = torch.tensor([[9, 0, 0, 0], [1, 2, 3, 0], [4, 5, 6, 7]], dtype=torch.int32, device=DEV)
    yield "sdpa", (qd, kp, vp), dict(kv_lens=lens, block_table=table)
    # varlen: q [T, H, D] with cu_seqlens
    cu = torch.tensor([0, 5, 37], dtype=torch.int32, device=DEV)
    yield "sdpa", (rand(g, 37, 4, 64), rand(g, 37, 4, 64), rand(g, 37, 4, 64)), dict(
        cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=32, max_seqlen_k=32, causal=True, return_lse=True)
    a, b = rand(g, 65, 96), rand(g, 96, 80)
    yield "gemm", (a, b), dict(bias=rand(g, 80), activation="gelu_tanh", alpha=0.5)
    yield "gemm", (rand(g, 96, 65).t(), b), dict(out_dtype=f32)
    yield "gemm", (rand(g, 3, 17, 32), rand(g, 32, 24)), {}
    yield "gemm", (a, b), dict(c=rand(g, 65, 80), beta=2.0, residual=rand(g, 65, 80))
    x, w = rand(g, 33, 1000), rand(g, 1000)
    yield "layernorm", (x, w, rand(g, 1000)), dict(
        residual=rand(g, 33, 1000), residual_out=torch.empty_like(x),
        mean_out=torch.empty(33, device=DEV), rstd_out=torch.empty(33, device=DEV))
    yield "rmsnorm", (rand(g, 33, 2000)[:, 500:1500], w), dict(eps=1e-6)
    # an axis of one element with a stride of its own (torch's DLPack export writes 1 there)
    yield "rmsnorm", (rand(g, 33, 1000).as_strided((33, 1, 1000), (1000, 7, 1)), w), {}
    yield "rmsnorm", (x, w), dict(out=torch.empty_like(x), rstd_out=torch.empty(33, device=DEV))
    yield "softmax", (rand(g, 300, 777, dtype=torch.float16),), dict(scale=0.7)
    yield "softmax", (rand(g, 4, 5000, dtype=f32),), {}
    yield "unary", (x, "silu"), {}
    yield "binary", (rand(g, 5, 1, 64), rand(g, 7, 64), "max"), {}
    for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        yield name, (rand(g, 9, 64), rand(g, 64)), {}
    yield "add", (x, x), dict(out=torch.empty_like(x))


def test_c_and_python_paths_agree_bit_for_bit():
    g = torch.Generator(device=DEV).manual_seed(7)
    n = 0
    for name, args, kw in calls(g):
        outs = {key: val for key, val in kw.items() if key in ("out", "residual_out", "mean_out", "rstd_out")}
        fast, slow = counts()
        got = getattr(opslib, name)(*args, **kw)
        assert counts() == (fast + 1, slow), f"{name} {kw}: not taken by the C path"
        first = got[0] if isinstance(got, tuple) else got
        if "out" in kw:
            assert first is kw["out"]
        else:  # allocated here: contiguous, on the inputs' device
            assert first.is_contiguous() and first.device == args[0].device
        got = clone(got)  # the Python path writes the same given outputs next
        got_outs = {key: val.clone() for key, val in outs.items()}
        want = getattr(_ops, name)(*args, **kw)
        assert same(got, want), f"{name} {kw}: the C and Python paths differ"
        for key, val in outs.items():
            assert same(got_outs[key], val), f"{name}: {key} differs"
        n += 1
    torch.cuda.synchronize()
    assert n >= 20


def test_errors_are_the_same_and_nothing_is_written():
    g = torch.Generator(device=DEV).manual_seed(8)
    x = rand(g, 4, 64)
    y = torch.full_like(x, float("nan"))
    for fn in (opslib.rmsnorm, _ops.rmsnorm):
        with pytest.raises(opslib.OpsError) as e:
            fn(x, rand(g, 63), out=y)
        assert e.value.status_name == "OPS_ERR_SHAPE_MISMATCH" and "weight" in e.value.message
        assert torch.isnan(y).all()
    errors = []
    for fn in (opslib.gemm, _ops.gemm):
        with pytest.raises(opslib.OpsError) as e:
            fn(rand(g, 8, 16), rand(g, 17, 8))
        errors.append(e.value)
    # the same status and words; the function named is the one each path called first
    # (ops_gemm here, ops_gemm_workspace_size through ctypes)
    assert errors[0].status_name == errors[1].status_name == "OPS_ERR_SHAPE_MISMATCH"
    assert errors[0].message.split(": ", 1)[1] == errors[1].message.split(": ", 1)[1]
    for fn in (opslib.sdpa, _ops.sdpa):  # dtype mismatch between q and k
        with pytest.raises(opslib.OpsError):
            fn(rand(g, 1, 4, 2, 64), rand(g, 1, 4, 2, 64, dtype=torch.float16), rand(g, 1, 4, 2, 64))


def test_what_the_c_path_does_not_take_goes_to_python():
    g = torch.Generator(device=DEV).manual_seed(9)
    x, w = rand(g, 8, 256), rand(g, 256)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # x and w were made on the default stream
    fast, slow = counts()
    with torch.cuda.stream(s):   # the current stream is the C path's
        y1 = opslib.rmsnorm(x, w)
    s.synchronize()
    assert counts() == (fast + 1, slow)
    y2 = opslib.rmsnorm(x, w, stream=s)        # stream=: Python
    s.synchronize()
    y3 = opslib.rmsnorm(x.cpu(), w.cpu())      # CPU tensors: Python
    assert counts() == (fast + 1, slow + 2)
    assert same(y1, y2) and torch.allclose(y1.float().cpu(), y3.float(), atol=2e-2)
    with pytest.raises(opslib.OpsError):       # a virtual handle: Python explains the refusal
        opslib.rmsnorm(x, w, handle=opslib.Handle.virtual(90))
    h = opslib.Handle("cuda")                  # a handle of one's own: the C path
    h.set_deterministic(True)
    fast, slow = counts()
    assert same(opslib.rmsnorm(x, w, handle=h), y1)
    assert counts() == (fast + 1, slow)


def test_threads_use_their_own_handles():
    g = torch.Generator(device=DEV).manual_seed(10)
    x, w = rand(g, 64, 1024), rand(g, 1024)
    want = _ops.rmsnorm(x, w)
    torch.cuda.synchronize()
    bad = []

    def work():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(50):
                y = opslib.rmsnorm(x, w)
        s.synchronize()
        if not same(y, want):
            bad.append(y)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_cuda_graph_capture_replays():
    g = torch.Generator(device=DEV).manual_seed(11)
    x, w = rand(g, 16, 4096), rand(g, 4096)
    y = torch.empty_like(x)
    opslib.rmsnorm(x, w, out=y)  # warm: the plan exists before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    fast, _ = counts()
    with torch.cuda.graph(graph):
        opslib.rmsnorm(x, w, out=y)
    assert counts()[0] == fast + 1
    y.fill_(float("nan"))
    x.copy_(rand(g, 16, 4096))
    graph.replay()
    torch.cuda.synchronize()
    assert same(y, _ops.rmsnorm(x, w))


def test_workspaces_are_kept_per_stream_and_released():
    g = torch.Generator(device=DEV).manual_seed(12)
    # decode against 4k keys: the split-KV kernel, whose parts need a workspace
    q, k, v = rand(g, 2, 1, 8, 128), rand(g, 2, 4096, 2, 128), rand(g, 2, 4096, 2, 128)
    assert opslib.kernel_info(opslib.explain("sdpa", q, k, v).chosen)["workspace_formula"]
    opslib.release_workspaces()
    assert opslib.extension()["workspace_bytes"] == 0
    want = _ops.sdpa(q, k, v)
    first = opslib.sdpa(q, k, v)
    kept = opslib.extension()["workspace_bytes"]
    assert kept > 0
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s1):
        a = [opslib.sdpa(q, k, v) for _ in range(20)]
    with torch.cuda.stream(s2):
        b = [opslib.sdpa(q, k, v) for _ in range(20)]
    torch.cuda.synchronize()
    assert opslib.extension()["workspace_bytes"] == 3 * kept  # default stream, s1, s2
    assert same(first, want) and all(same(x, want) for x in a + b)
    graph = torch.cuda.CUDAGraph()
    o = torch.empty_like(want)
    with torch.cuda.graph(graph):  # under capture: a workspace of its own, kept by the graph
        opslib.sdpa(q, k, v, out=o)
    assert opslib.extension()["workspace_bytes"] == 3 * kept
    o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert same(o, want)
    opslib.release_workspaces()
    assert opslib.extension()["workspace_bytes"] == 0


def test_a_negative_view_is_never_read_as_its_positive():
    z = torch.randn(64, 33, dtype=torch.complex64, device=DEV)
    r = z.conj().imag  # f32 values of -imag(z), stored as imag(z) with torch's negative bit
    assert r.is_neg()
    try:
        y = opslib.softmax(r)
    except ValueError as e:  # refusing is allowed; a silently wrong answer is not
        assert "negative" in str(e)
        return
    assert torch.allclose(y, torch.softmax(r, -1), atol=1e-6)


def test_tensors_are_read_the_way_this_torch_allows():
    """Through torch's DLPack C exchange table where torch.Tensor has one (and
    OPSLIB_NO_EXCHANGE_API is unset), else through DLPack capsules; the bit-for-bit test above
    runs in the bundle both ways."""
    opslib.rmsnorm(torch.ones(2, 64, device=DEV), torch.ones(64, device=DEV))
    off = os.environ.get("OPSLIB_NO_EXCHANGE_API", "") not in ("", "0")
    has = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    want = "exchange api" if has and not off else "dlpack capsules"
    assert opslib.extension()["tensor_reads"] == want
