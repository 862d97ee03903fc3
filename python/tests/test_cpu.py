"""The binding on the CPU backend with NumPy arrays: every exposed op against the NumPy
reference on fresh random data (odd sizes, strided views, poisoned outputs), zero-copy
in/out, errors that carry the library's status and leave outputs untouched, explain and
the catalog."""
import ctypes

import numpy as np
import pytest

import opslib
import reference as ref
from opslib import _capi

F16_TOL = 2e-3
F32_TOL = 1e-5


def poisoned(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype=dtype)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- the C ABI as ctypes sees it -----------------------------------------------------------

def test_struct_layouts_match_the_library():
    lib = opslib._lib
    t = _capi.Tensor()
    shape = (ctypes.c_int64 * 3)(2, 3, 5)
    assert lib.ops_tensor_init(ctypes.byref(t), 0x1000, _capi.DTYPE_BF16, _capi.Device(2, 1), 3, shape, None) == 0
    assert t.struct_size == ctypes.sizeof(_capi.Tensor)
    assert (t.dtype, t.device.type, t.device.ordinal, t.ndim, t.data) == (3, 2, 1, 3, 0x1000)
    assert list(t.shape[:3]) == [2, 3, 5] and list(t.strides[:3]) == [15, 5, 1]
    for name, (struct, _) in _capi.OPS.items():
        p = struct()
        getattr(lib, _capi.PARAMS_INIT.get(name, f"ops_{name}_params_init"))(ctypes.byref(p))
        assert p.struct_size == ctypes.sizeof(struct), name
    assert opslib._call.params("layernorm").eps == pytest.approx(1e-5)
    assert opslib._call.params("gemm").alpha == 1.0


def test_library_identity():
    assert opslib.version().count(".") == 2
    assert opslib.library_path.endswith("libopslib.so")


# ---- ops against NumPy --------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", [(np.float32, F32_TOL), (np.float16, F16_TOL)])
def test_layernorm_with_residual_bias_and_statistics(rng, dtype, tol):
    rows, n = int(rng.integers(1, 9)), int(rng.integers(1, 300))
    x, r = randn(rng, rows, n, dtype=dtype), randn(rng, rows, n, dtype=dtype)
    w, b = randn(rng, n, dtype=dtype), randn(rng, n, dtype=dtype)
    s_out, mean, rstd = poisoned((rows, n), dtype), poisoned(rows), poisoned(rows)
    y = opslib.layernorm(x, w, b, residual=r, residual_out=s_out, mean_out=mean, rstd_out=rstd)
    s = x.astype(np.float64) + r
    want, mu, rs = ref.layernorm(s, w.astype(np.float64), b.astype(np.float64))
    assert y.dtype == dtype and y.shape == x.shape
    assert ref.rel_err(y, want) < tol * 4
    assert ref.rel_err(s_out, s) < tol
    assert ref.rel_err(mean, mu) < 1e-4 and ref.rel_err(rstd, rs) < 1e-4


def test_rmsnorm_reads_strided_views_without_copy(rng):
    base = randn(rng, 6, 2 * 129)
    x = base[:, ::2]                        # stride 2 on the normalized axis
    w = randn(rng, 129)
    y = poisoned((6, 129))
    got = opslib.rmsnorm(x, w, out=y)
    assert got is y                         # written in place, the array the caller gave
    assert ref.rel_err(y, ref.rmsnorm(x, w)[0]) < F32_TOL


def test_softmax_in_place_with_scale_and_masked_rows(rng):
    x = randn(rng, 5, 77)
    x[2] = -np.inf
    want = ref.softmax(x, 0.7)
    opslib.softmax(x, scale=0.7, out=x)     # in place on x
    assert ref.rel_err(x, want) < F32_TOL
    assert np.all(x[2] == 0)


def test_norm_and_softmax_backward(rng):
    rows, n = 7, int(rng.integers(2, 200))
    x, dy, w = randn(rng, rows, n), randn(rng, rows, n), randn(rng, n)
    _, mu, rs = ref.layernorm(x, w)
    mean, rstd = mu.astype(np.float32), rs.astype(np.float32)
    dx, dw, db = opslib.layernorm_backward(dy, x, w, mean, rstd, dweight=True, dbias=True)
    wdx, wdw, wdb = ref.layernorm_backward(dy, x, w, mean.astype(np.float64), rstd.astype(np.float64))
    assert ref.rel_err(dx, wdx) < 1e-4 and ref.rel_err(dw, wdw) < 1e-4 and ref.rel_err(db, wdb) < 1e-4
    y = ref.softmax(x).astype(np.float32)
    dxs = opslib.softmax_backward(dy, y)
    want = y * (dy - (dy.astype(np.float64) * y).sum(-1, keepdims=True))
    assert ref.rel_err(dxs, want) < 1e-4


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_gqa_bhsd_strides_and_lse(rng, causal):
    b, sq, sk, hkv, rep, d = 2, int(rng.integers(1, 20)), int(rng.integers(1, 24)), 2, 2, 16
    q = randn(rng, b, hq := hkv * rep, sq, d).transpose(0, 2, 1, 3)    # a BHSD buffer seen as BSHD
    k, v = randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, d)
    o, lse = opslib.sdpa(q, k, v, causal=causal, return_lse=True)
    want_o, want_l = ref.sdpa(q, k, v, causal=causal, lse=True)
    assert o.shape == (b, sq, hq, d) and lse.shape == (b, hq, sq)
    assert ref.rel_err(o, want_o) < 1e-4
    assert ref.rel_err(lse, want_l) < 1e-4


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_gqa(rng, causal):
    """dq, dk, dv from the forward's o and lse match the full-Jacobian formulation; GQA sums a
    KV head's gradients over its query heads."""
    b, sq, sk, hkv, rep, d = 2, int(rng.integers(1, 12)), int(rng.integers(1, 14)), 2, 3, 8
    q, k, v = randn(rng, b, sq, hkv * rep, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, d)
    dout = randn(rng, b, sq, hkv * rep, d)
    o, lse = opslib.sdpa(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = opslib.sdpa_backward(dout, q, k, v, o, lse, causal=causal)
    want = ref.sdpa_backward(dout, q, k, v, causal=causal)
    for got, w in zip((dq, dk, dv), want):
        assert got.shape == w.shape
        assert ref.rel_err(got, w) < 1e-4


def test_sdpa_paged_kv_cache(rng):
    """Decode-style queries against a paged cache (pages in random order, table entries past
    each sequence's pages never read) equal attention over the gathered keys."""
    b, sq, hkv, rep, d, page, max_pages = 3, 2, 2, 4, 16, 8, 6
    lens = [int(rng.integers(sq, page * max_pages + 1)) for _ in range(b)]
    num_pages = b * max_pages + 3
    kp, vp = randn(rng, num_pages, page, hkv, d), randn(rng, num_pages, page, hkv, d)
    perm = rng.permutation(num_pages).astype(np.int32)
    table = np.full((b, max_pages), -7, np.int32)
    for i, n in enumerate(lens):
        used = -(-n // page)
        table[i, :used] = perm[i * max_pages:i * max_pages + used]
    q = randn(rng, b, sq, hkv * rep, d)
    o, lse = opslib.sdpa(q, kp, vp, causal=True, kv_lens=np.array(lens, np.int32), block_table=table,
                         return_lse=True)
    for i, n in enumerate(lens):
        rows = [table[i, j // page] for j in range(n)]
        kk = np.stack([kp[r, j % page] for j, r in enumerate(rows)])[None]
        vv = np.stack([vp[r, j % page] for j, r in enumerate(rows)])[None]
        want_o, want_l = ref.sdpa(q[i:i + 1], kk, vv, causal=True, lse=True)
        assert ref.rel_err(o[i:i + 1], want_o) < 1e-4
        assert ref.rel_err(lse[i:i + 1], want_l) < 1e-4


def _rope_ref(x, pos, theta, r, style):
    x = x.astype(np.float64).copy()
    f = theta ** (-np.arange(0, r, 2) / r)
    a = pos.astype(np.float64)[..., None, None] * f  # [.., 1, r/2]
    i1, i2 = (np.arange(0, r, 2), np.arange(1, r, 2)) if style == "gptj" else (np.arange(r // 2), np.arange(r // 2, r))
    x1, x2 = x[..., i1].copy(), x[..., i2].copy()
    x[..., i1], x[..., i2] = x1 * np.cos(a) - x2 * np.sin(a), x2 * np.cos(a) + x1 * np.sin(a)
    return x


def test_rope_q_and_k_partial_rotary(rng):
    """NeoX and GPT-J pairs, a partial rotary dim, q and k in one call, in place on q."""
    for style in ("neox", "gptj"):
        pos = rng.integers(0, 100000, size=(2, 5)).astype(np.int64)
        q, k = randn(rng, 2, 5, 4, 24), randn(rng, 2, 5, 2, 24)
        want_q, want_k = _rope_ref(q, pos, 500000.0, 16, style), _rope_ref(k, pos, 500000.0, 16, style)
        qo, ko = opslib.rope(pos, q, k, style=style, theta=500000.0, rotary_dim=16)
        assert ref.rel_err(qo, want_q) < 1e-5 and ref.rel_err(ko, want_k) < 1e-5
        opslib.rope(pos, q, style=style, theta=500000.0, rotary_dim=16, out=q)
        assert ref.rel_err(q, want_q) < 1e-5


def test_kv_cache_append_with_rope(rng):
    """Tokens land in the slots named (pages in any order), -1 skips, k rotated on the way in."""
    pages, page, h, d = 4, 4, 2, 8
    kc, vc = np.zeros((pages, page, h, d), np.float32), np.zeros((pages, page, h, d), np.float32)
    k, v = randn(rng, 6, h, d), randn(rng, 6, h, d)
    slots = np.array([9, -1, 0, 15, 4, -1], np.int64)
    pos = np.arange(6, dtype=np.int32) + 40
    opslib.kv_cache_append(k, v, slots, kc, vc, positions=pos, rope={"style": "gptj"})
    kr = _rope_ref(k[None], pos[None], 10000.0, d, "gptj")[0]
    for t, s in enumerate(slots):
        if s >= 0:
            assert ref.rel_err(kc[s // page, s % page], kr[t]) < 1e-5
            assert np.array_equal(vc[s // page, s % page], v[t])
    assert np.count_nonzero(kc.reshape(pages * page, -1).any(axis=1)) == 4


def test_rope_and_append_explained_for_an_h100():
    """On a described sm_90 device: aligned unit-stride heads take the 16-byte kernels, a
    strided head dim the any-stride ones, and a fused RoPE shows as a feature of the append;
    the append of tokens whose heads are one run in every operand takes the whole-row kernel,
    of heads apart (a head stride past the head dim) the 16-byte one."""
    T, h = opslib.TensorSpec, opslib.Handle.virtual(90)
    pos, q, k = T([4096], "i64", "cuda"), T([4096, 32, 128], "bf16", "cuda"), T([4096, 8, 128], "bf16", "cuda")
    assert opslib.explain("rope", pos, q, k, handle=h).chosen == "cuda_rope_vec16"
    qs = T([4096, 32, 128], "bf16", "cuda", strides=(8192, 256, 2))
    assert opslib.explain("rope", pos, qs, handle=h).chosen == "cuda_rope_strided"
    kc = T([512, 16, 8, 128], "bf16", "cuda")
    e = opslib.explain("kv_cache_append", k, k, pos, kc, kc, positions=pos, rope=True, handle=h)
    assert e.chosen == "cuda_kv_cache_append_rows" and "[rope]" in e.problem
    kh = T([4096, 8, 128], "bf16", "cuda", strides=(8 * 256, 256, 1))
    e = opslib.explain("kv_cache_append", kh, k, pos, kc, kc, handle=h)
    assert e.chosen == "cuda_kv_cache_append_vec16" and "heads_apart" in e.problem
    assert "cuda_kv_cache_append_rows" in {v["kernel"] for v in e.verdicts if v["reason"] != "eligible"}


def test_gemm_explained_with_the_calibration_of_the_named_device():
    """A described sm_90 device named as a device some calibration was measured on (the H200)
    costs the GEMM rows with that set; the reference device, with the H100's."""
    T = opslib.TensorSpec
    a, w, d = T([16, 8192], "bf16", "cuda"), T([8192, 28672], "bf16", "cuda", strides=(1, 8192)), \
        T([16, 28672], "bf16", "cuda")
    for name, tag in ((None, "calibrated h100-"), ("NVIDIA H200", "calibrated h200-")):
        e = opslib.explain("gemm", a, w, out=d, handle=opslib.Handle.virtual(90, name))
        chosen = next(v for v in e.verdicts if v["kernel"] == e.chosen)
        assert tag in chosen["message"], (name, chosen["message"])


def test_gemm_transposed_operand_bias_gelu(rng):
    m, n, k = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 70))
    a = randn(rng, k, m).T                                      # transposed through strides
    b, bias = randn(rng, k, n), randn(rng, n)
    d = opslib.gemm(a, b, bias=bias, activation="gelu_tanh")
    want = ref.gelu_tanh(a.astype(np.float64) @ b + bias)
    assert ref.rel_err(d, want) < 1e-5


def test_gemm_batched_broadcast_alpha_beta(rng):
    a, b, c = randn(rng, 3, 5, 7), randn(rng, 7, 4), randn(rng, 3, 5, 4)
    d = opslib.gemm(a, b, alpha=0.5, beta=2.0, c=c)
    assert ref.rel_err(d, 0.5 * (a.astype(np.float64) @ b) + 2.0 * c) < 1e-5


def test_elementwise_broadcasting(rng):
    x = randn(rng, 4, 1, 33)
    a = randn(rng, 33)
    assert ref.rel_err(opslib.sin_affine(x, 2.0, 1.0), np.sin(2.0 * x.astype(np.float64) + 1.0)) < F32_TOL
    assert ref.rel_err(opslib.sin_affine(x, a, 0.5), np.sin(a * x.astype(np.float64) + 0.5)) < F32_TOL
    y = randn(rng, 3, 33)
    assert opslib.add(x, y).shape == (4, 3, 33)
    assert ref.rel_err(opslib.mul(x, y), x.astype(np.float64) * y) < F32_TOL
    assert ref.rel_err(opslib.maximum(x, y), np.maximum(x, y)) == 0
    assert ref.rel_err(opslib.unary(x, "silu"), x / (1 + np.exp(-x.astype(np.float64)))) < F32_TOL
    assert ref.rel_err(opslib.scale(x, -3.0), -3.0 * x) < F32_TOL


def test_dropout_is_a_pure_function_of_seed_and_offset(rng):
    x = randn(rng, 1000) + 5
    y1 = opslib.dropout(x, 0.3, seed=1234, offset=8)
    y2 = opslib.dropout(x, 0.3, seed=1234, offset=8)
    y3 = opslib.dropout(x, 0.3, seed=1234, offset=9)
    assert np.array_equal(y1, y2) and not np.array_equal(y1, y3)
    kept = y1 != 0
    assert 0.6 < kept.mean() < 0.8
    assert ref.rel_err(y1[kept], x[kept] / 0.7) < F32_TOL
    assert np.array_equal(opslib.dropout(x, 0.0, seed=1), x)


@pytest.mark.parametrize("op", opslib.REDUCE_OPS)
def test_reduce_axes_keepdim(rng, op):
    x = randn(rng, 3, int(rng.integers(1, 50)), 5)
    f = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op]
    assert ref.rel_err(opslib.reduce(x, op, axes=1), f(x.astype(np.float64), axis=1)) < F32_TOL
    got = opslib.reduce(x, op, axes=(0, -1), keepdim=True, out_dtype="f32")
    assert got.shape == (1, x.shape[1], 1)
    assert ref.rel_err(got, f(x.astype(np.float64), axis=(0, 2), keepdims=True)) < F32_TOL
    assert ref.rel_err(opslib.reduce(x, op), f(x.astype(np.float64))) < F32_TOL


def test_empty_tensors_are_valid():
    x = np.zeros((0, 16), np.float32)
    assert opslib.softmax(x).shape == (0, 16)
    assert opslib.sum(np.zeros((4, 0), np.float32), axes=1).tolist() == [0, 0, 0, 0]


# ---- errors ------------------------------------------------------------------------------

def test_errors_carry_status_and_message_and_write_nothing(rng):
    x, w = randn(rng, 4, 64), randn(rng, 32)
    y = poisoned((4, 64))
    with pytest.raises(opslib.OpsError) as e:
        opslib.layernorm(x, w, out=y)
    assert e.value.status == 5 and e.value.status_name == "OPS_ERR_SHAPE_MISMATCH"
    assert "weight" in e.value.message and "expected [64]" in e.value.message
    assert np.all(np.isnan(y))              # nothing written
    with pytest.raises(opslib.OpsError) as e:
        opslib.softmax(np.zeros((2, 3)))    # float64: no such opslib dtype
    assert e.value.status_name == "OPS_ERR_DTYPE_MISMATCH" and "float32" in e.value.message
    with pytest.raises(opslib.OpsError) as e:
        opslib.softmax(x, scale=float("inf"))
    assert e.value.status_name == "OPS_ERR_INVALID_ARGUMENT" and "scale" in e.value.message
    with pytest.raises(TypeError, match="DLPack"):
        opslib.softmax([[1.0, 2.0]])
    with pytest.raises(TypeError, match="unexpected keyword argument.*out_dtype"):
        opslib.rmsnorm(x, randn(rng, 64), out_dtype="f32")   # rmsnorm has no such option


# ---- explain and the catalog -------------------------------------------------------------

def test_explain_names_the_choice_without_running(rng):
    x, w = randn(rng, 3, 40), randn(rng, 40)
    e = opslib.explain("rmsnorm", x, w)
    assert e.chosen == "cpu_rmsnorm_ref" and "cols=40" in e.problem
    assert "chosen: cpu_rmsnorm_ref" in str(e)
    j = e.json()
    assert isinstance(j, dict) and j and "cpu_rmsnorm_ref" in str(j)
    reasons = {v["kernel"]: v["reason"] for v in e.verdicts}
    assert reasons["cpu_rmsnorm_ref"] == "eligible"
    assert all(r == "backend" for k, r in reasons.items() if k.startswith("cuda_"))


def test_explain_for_an_h100_that_is_not_here():
    T = opslib.TensorSpec
    h = opslib.Handle.virtual(90)
    e = opslib.explain("softmax", T([16384, 4096], "bf16", "cuda"), handle=h)
    assert e.chosen is not None and e.chosen.startswith("cuda_softmax")
    e = opslib.explain("sdpa", *(T([2, 4096, 8, 64], "bf16", "cuda") for _ in range(3)), handle=h)
    # a Hopper kernel of head dim 64 (one block or the pair; the calibration picks)
    assert e.chosen.startswith("cuda_sdpa_sm90_d64") and "sdpa" in e.problem
    assert e.choice == "model" and "autotune is off" in e.choice_note
    assert any(v["plan"] for v in e.verdicts if v["reason"] == "eligible")


def test_catalog_carries_the_capability_metadata():
    ks = opslib.kernels()
    names = [k["name"] for k in ks]
    assert len(ks) == opslib._lib.ops_kernel_count() and len(set(names)) == len(names)
    assert {k["op"] for k in ks} >= {"sdpa", "gemm", "layernorm", "rmsnorm", "softmax", "reduce"}
    k = opslib.kernel_info("cuda_rmsnorm_warp_vec16")
    assert k["backend"] == "cuda" and k["threads"] > 0 and k["vector_bytes"] == 16
    assert "bf16" in k["dtypes"] and k["kernel_id"] == 401
    roles = opslib.kernel_info("cuda_sdpa_sm90_d128")["warp_roles"]
    assert [(r["name"], r["warps"]) for r in roles] == [("producer", 4), ("consumers", 8)]
    assert all(0 < len(r["work"]) <= 100 for r in roles)
    assert opslib.kernel_info("cpu_sdpa_ref")["warp_roles"] == []
    assert [x["name"] for x in opslib.kernels("softmax")][0] == "cpu_softmax_ref"
    with pytest.raises(opslib.OpsError):
        opslib.kernel_info("no_such_kernel")


def test_handle_settings_and_pins(rng):
    h = opslib.Handle("cpu")
    h.set_deterministic(True)
    h.set_math_mode("tf32")
    assert h.device_info()["name"] == "cpu"
    h.pin_kernel("cpu_softmax_ref")
    x = randn(rng, 2, 8)
    assert ref.rel_err(opslib.softmax(x, handle=h), ref.softmax(x)) < F32_TOL
    with pytest.raises(opslib.OpsError) as e:
        h.pin_kernel("no_such_kernel")
    assert e.value.status_name == "OPS_ERR_INVALID_ARGUMENT"
