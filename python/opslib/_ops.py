"""The ops, one function each, over Call (see _call.py). Every function takes arrays that
export DLPack, allocates the outputs it is not given in the caller's framework, runs on the
framework's current CUDA stream (or stream=), and returns its outputs. With explain=True
(through opslib.explain) the same arguments give an Explanation instead of running."""
import builtins
import ctypes

from . import _capi
from ._call import Call, params, ref
from ._tensors import dtype_code


def _shape(op):
    return tuple(op.t.shape[i] for i in range(op.t.ndim))


def _ctx(kw):
    call = Call(explain=kw.pop("_explain", False), handle=kw.pop("handle", None),
                stream=kw.pop("stream", None))
    if kw:  # a misspelt option must not pass silently
        raise TypeError(f"opslib: unexpected keyword argument(s): {', '.join(sorted(kw))}")
    return call


def _done(call, result, outputs):
    return result if call.explain else outputs


# ---- attention, GEMM --------------------------------------------------------------------

def _sdpa_params(c, name, causal, scale, window, attn_mask, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                 max_seqlen_k):
    """The params sdpa and sdpa_backward share (the KV cache is the forward's alone)."""
    p = params(name)
    p.scale = 0.0 if scale is None else float(scale)
    p.causal = int(bool(causal))
    p.window_left, p.window_right = (int(w) for w in window)
    tm, tcq, tck = c.tensor(attn_mask), c.tensor(cu_seqlens_q), c.tensor(cu_seqlens_k)
    p.attn_mask, p.cu_seqlens_q, p.cu_seqlens_k = ref(tm), ref(tcq), ref(tck)
    p.max_seqlen_q, p.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    return p


def sdpa(q, k, v, *, causal=False, scale=None, window=(-1, -1), attn_mask=None,
         cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0,
         kv_lens=None, block_table=None, out=None, lse=None, return_lse=False, **kw):
    """softmax(scale q k^T + mask) v over [B, S, H, D] views (BHSD through strides); GQA when
    k and v have fewer heads. Returns o, or (o, lse) with return_lse (lse f32 [B, Hq, Sq]).
    A KV cache: kv_lens (int32 [B]) keys of k / v [B, capacity, Hkv, D] a sequence, or with
    block_table (int32 [B, max_pages]) of the paged pools k / v [num_pages, page_size, Hkv, D]."""
    c = _ctx(kw)
    tq, tk, tv = c.tensor(q), c.tensor(k), c.tensor(v)
    sq, sv = _shape(tq), _shape(tv)
    p = _sdpa_params(c, "sdpa", causal, scale, window, attn_mask, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k)
    tkl, tbt = c.tensor(kv_lens), c.tensor(block_table)
    p.kv_lens, p.block_table = ref(tkl), ref(tbt)
    to, o = c.output(out, sq[:-1] + sv[-1:], tq.t.dtype)
    tl, lse_arr = None, lse
    if lse is not None or return_lse:
        lse_shape = (sq[1], sq[0]) if len(sq) == 3 else (sq[0], sq[2], sq[1])
        tl, lse_arr = c.output(lse, lse_shape, _capi.DTYPE_F32)
    r = c.run("sdpa", p, tq, tk, tv, to, tl)
    return _done(c, r, (o, lse_arr) if return_lse else o)


def sdpa_backward(dout, q, k, v, o, lse, *, causal=False, scale=None, window=(-1, -1), attn_mask=None,
                  cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, dq=None, dk=None,
                  dv=None, **kw):
    """The gradients of sdpa for the upstream gradient dout, from the forward's o and lse (same
    options as the forward but a KV cache). Returns (dq, dk, dv), allocated like q, k, v."""
    c = _ctx(kw)
    tdo, tq, tk, tv, to, tl = (c.tensor(t) for t in (dout, q, k, v, o, lse))
    p = _sdpa_params(c, "sdpa_backward", causal, scale, window, attn_mask, cu_seqlens_q, cu_seqlens_k,
                     max_seqlen_q, max_seqlen_k)
    tdq, dq = c.output(dq, _shape(tq), tq.t.dtype)
    tdk, dk = c.output(dk, _shape(tk), tk.t.dtype)
    tdv, dv = c.output(dv, _shape(tv), tv.t.dtype)
    r = c.run("sdpa_backward", p, tq, tk, tv, to, tl, tdo, tdq, tdk, tdv)
    return _done(c, r, (dq, dk, dv))


def gemm(a, b, *, alpha=1.0, beta=0.0, c=None, bias=None, activation="none", residual=None,
         out=None, out_dtype=None, **kw):
    """act(alpha a b + beta c + bias) + residual; a [.., M, K], b [.., K, N]; transposes
    through strides (pass a.T / a.mT); activation one of opslib.ACTIVATIONS."""
    call = _ctx(kw)
    ta, tb = call.tensor(a), call.tensor(b)
    sa, sb = _shape(ta), _shape(tb)
    p = params("gemm")
    p.alpha, p.beta = float(alpha), float(beta)
    p.activation = _capi.ACTS[activation]
    tc, tbias, tres = call.tensor(c), call.tensor(bias), call.tensor(residual)
    p.c, p.bias, p.residual = ref(tc), ref(tbias), ref(tres)
    batch = max(sa[:-2] or (1,), sb[:-2] or (1,)) if max(len(sa), len(sb)) == 3 else ()
    dtype = ta.t.dtype if out_dtype is None else dtype_code(out_dtype)
    td, d = call.output(out, tuple(batch) + (sa[-2], sb[-1]), dtype)
    return _done(call, call.run("gemm", p, ta, tb, td), d)


# ---- normalization, softmax ---------------------------------------------------------------

def _norm(name, x, weight, bias, eps, residual, residual_out, mean_out, rstd_out, out, kw):
    c = _ctx(kw)
    tx, tw = c.tensor(x), c.tensor(weight)
    p = params(name)
    p.eps = float(eps)
    tb, tr, tro = c.tensor(bias), c.tensor(residual), c.tensor(residual_out)
    tm, ts = c.tensor(mean_out), c.tensor(rstd_out)
    p.bias, p.residual, p.residual_out, p.mean_out, p.rstd_out = (ref(t) for t in (tb, tr, tro, tm, ts))
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run(name, p, tx, tw, ty), y)


def layernorm(x, weight, bias=None, *, eps=1e-5, residual=None, residual_out=None,
              mean_out=None, rstd_out=None, out=None, **kw):
    """LayerNorm over the last axis of x (+ residual); optional outputs residual_out (the sum),
    mean_out and rstd_out (f32, x's shape without the last axis) must be given. Returns y."""
    return _norm("layernorm", x, weight, bias, eps, residual, residual_out, mean_out, rstd_out, out, kw)


def rmsnorm(x, weight, bias=None, *, eps=1e-5, residual=None, residual_out=None, rstd_out=None,
            out=None, **kw):
    """RMSNorm over the last axis of x (+ residual). Returns y."""
    return _norm("rmsnorm", x, weight, bias, eps, residual, residual_out, None, rstd_out, out, kw)


def _norm_backward(name, dy, x, weight, stats, dweight, dbias, dx, kw):
    c = _ctx(kw)
    tdy, tx, tw = c.tensor(dy), c.tensor(x), c.tensor(weight)
    tstats = [c.tensor(s) for s in stats]
    p = params(name)
    n = _shape(tx)[-1:]
    tdw = tdb = None
    if dweight is not None:
        tdw, dweight = c.output(None if dweight is True else dweight, n, _capi.DTYPE_F32)
    if dbias is not None:
        tdb, dbias = c.output(None if dbias is True else dbias, n, _capi.DTYPE_F32)
    p.dweight, p.dbias = ref(tdw), ref(tdb)
    tdx, dx = c.output(dx, _shape(tx), tx.t.dtype)
    return _done(c, c.run(name, p, tdy, tx, tw, *tstats, tdx), (dx, dweight, dbias))


def layernorm_backward(dy, x, weight, mean, rstd, *, dweight=None, dbias=None, dx=None, **kw):
    """dx (and dweight, dbias: True allocates them in f32) from the forward's mean and rstd.
    Returns (dx, dweight, dbias)."""
    return _norm_backward("layernorm_backward", dy, x, weight, (mean, rstd), dweight, dbias, dx, kw)


def rmsnorm_backward(dy, x, weight, rstd, *, dweight=None, dbias=None, dx=None, **kw):
    """As layernorm_backward, without the mean."""
    return _norm_backward("rmsnorm_backward", dy, x, weight, (rstd,), dweight, dbias, dx, kw)


def softmax(x, *, scale=1.0, out=None, **kw):
    """softmax(scale x) over the last axis."""
    c = _ctx(kw)
    tx = c.tensor(x)
    p = params("softmax")
    p.scale = float(scale)
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run("softmax", p, tx, ty), y)


def softmax_backward(dy, y, *, scale=1.0, dx=None, **kw):
    """dx = scale y (dy - sum(dy y)) from the forward's output y."""
    c = _ctx(kw)
    tdy, ty = c.tensor(dy), c.tensor(y)
    p = params("softmax_backward")
    p.scale = float(scale)
    tdx, dx = c.output(dx, _shape(ty), ty.t.dtype)
    return _done(c, c.run("softmax_backward", p, tdy, ty, tdx), dx)


# ---- elementwise ----------------------------------------------------------------------------

def _broadcast(*shapes):
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        dims = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"opslib: shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def sin_affine(x, a=1.0, b=0.0, *, out=None, **kw):
    """sin(a x + b); a and b are numbers or arrays that broadcast to x."""
    c = _ctx(kw)
    tx = c.tensor(x)
    p = params("sin_affine")
    if isinstance(a, (int, float)):
        p.a = float(a)
    else:
        p.a_tensor = ref(c.tensor(a))
    if isinstance(b, (int, float)):
        p.b = float(b)
    else:
        p.b_tensor = ref(c.tensor(b))
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run("sin_affine", p, tx, ty), y)


def unary(x, fn, *, out=None, **kw):
    """fn(x), fn one of opslib.ACTIVATIONS ("gelu_tanh", "silu", "exp", ...)."""
    c = _ctx(kw)
    tx = c.tensor(x)
    p = params("unary")
    p.fn = _capi.ACTS[fn]
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run("unary", p, tx, ty), y)


def binary(a, b, op, *, out=None, **kw):
    """a op b with NumPy broadcasting; op one of "add", "sub", "mul", "div", "max", "min"."""
    c = _ctx(kw)
    ta, tb = c.tensor(a), c.tensor(b)
    p = params("binary")
    p.op = _capi.BINARY_OPS[op]
    ty, y = c.output(out, _broadcast(_shape(ta), _shape(tb)), ta.t.dtype)
    return _done(c, c.run("binary", p, ta, tb, ty), y)


def add(a, b, **kw):
    return binary(a, b, "add", **kw)


def sub(a, b, **kw):
    return binary(a, b, "sub", **kw)


def mul(a, b, **kw):
    return binary(a, b, "mul", **kw)


def div(a, b, **kw):
    return binary(a, b, "div", **kw)


def maximum(a, b, **kw):
    return binary(a, b, "max", **kw)


def minimum(a, b, **kw):
    return binary(a, b, "min", **kw)


def scale(x, alpha, *, out=None, **kw):
    """alpha x."""
    c = _ctx(kw)
    tx = c.tensor(x)
    p = params("scale")
    p.alpha = float(alpha)
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run("scale", p, tx, ty), y)


def dropout(x, p, *, seed, offset=0, out=None, **kw):
    """x * keep / (1 - p) with a Philox mask that depends only on (seed, offset, index):
    the same call on dy is the backward."""
    c = _ctx(kw)
    tx = c.tensor(x)
    prm = params("dropout")
    prm.p, prm.seed, prm.offset = float(p), int(seed), int(offset)
    ty, y = c.output(out, _shape(tx), tx.t.dtype)
    return _done(c, c.run("dropout", prm, tx, ty), y)


# ---- rotary embedding, the KV cache --------------------------------------------------------

def _rope_settings(p, style, theta, rotary_dim, scaling, factor, low_freq_factor, high_freq_factor,
                   original_max_positions):
    p.style = _capi.ROPE_STYLES[style]
    p.theta, p.rotary_dim = float(theta), int(rotary_dim)
    p.scaling, p.factor = _capi.ROPE_SCALINGS[scaling], float(factor)
    p.low_freq_factor, p.high_freq_factor = float(low_freq_factor), float(high_freq_factor)
    p.original_max_positions = int(original_max_positions)


def rope(positions, q, k=None, *, style="neox", theta=10000.0, rotary_dim=0, scaling=None, factor=1.0,
         low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192, out=None, k_out=None,
         **kw):
    """Rotary embedding of q [T, H, D] or [B, S, H, D] (and k, same leading axes) at positions
    (int32 / int64, [T] or [B, S]); style "neox" or "gptj", scaling None, "linear" or "llama3".
    out=q (k_out=k) rotates in place. Returns q_out, or (q_out, k_out) with k."""
    c = _ctx(kw)
    tpos, tq, tk = c.tensor(positions), c.tensor(q), c.tensor(k)
    p = params("rope")
    _rope_settings(p, style, theta, rotary_dim, scaling, factor, low_freq_factor, high_freq_factor,
                   original_max_positions)
    tqo, qo = c.output(out, _shape(tq), tq.t.dtype)
    tko = ko = None
    if tk is not None:
        tko, ko = c.output(k_out, _shape(tk), tk.t.dtype)
    p.k, p.k_out = ref(tk), ref(tko)
    r = c.run("rope", p, tpos, tq, tqo)
    return _done(c, r, qo if tk is None else (qo, ko))


def kv_cache_append(k, v, slot_mapping, k_cache, v_cache, *, positions=None, rope=None, **kw):
    """Writes k [T, Hkv, D] and v [T, Hkv, Dv] into the caches [num_pages, page_size, Hkv, D]
    at slot_mapping's slots (int32 / int64 [T]; < 0 skips a token). rope: a dict of ops.rope's
    settings (or True for the defaults) rotates k on its way in, at positions. Returns the caches."""
    c = _ctx(kw)
    tk, tv, ts = c.tensor(k), c.tensor(v), c.tensor(slot_mapping)
    tkc, tvc = c.tensor(k_cache), c.tensor(v_cache)
    p = params("kv_cache_append")
    rp = None
    if rope is not None and rope is not False:
        rp = params("rope")
        settings = dict(style="neox", theta=10000.0, rotary_dim=0, scaling=None, factor=1.0, low_freq_factor=1.0,
                        high_freq_factor=4.0, original_max_positions=8192)
        settings.update({} if rope is True else rope)
        _rope_settings(rp, **settings)
        p.rope = ctypes.pointer(rp)
    tpos = c.tensor(positions)
    p.positions = ref(tpos)
    return _done(c, c.run("kv_cache_append", p, tk, tv, ts, tkc, tvc), (k_cache, v_cache))


# ---- reductions ----------------------------------------------------------------------------

def reduce(x, op="sum", axes=None, *, keepdim=False, out=None, out_dtype=None, **kw):
    """op ("sum", "mean", "max", "min") over axes (an int, a sequence, or None for all)."""
    c = _ctx(kw)
    tx = c.tensor(x)
    shape = _shape(tx)
    p = params("reduce")
    p.op = _capi.REDUCE_OPS[op]
    if axes is None:
        mask = _capi.REDUCE_ALL_AXES
        reduced = set(range(len(shape)))
    else:
        reduced = {a + len(shape) if a < 0 else a for a in ((axes,) if isinstance(axes, int) else axes)}
        mask = builtins.sum(1 << a for a in reduced)
    p.axes, p.keepdim = mask, int(bool(keepdim))
    oshape = tuple(1 if i in reduced else s for i, s in enumerate(shape) if keepdim or i not in reduced)
    dtype = tx.t.dtype if out_dtype is None else dtype_code(out_dtype)
    ty, y = c.output(out, oshape, dtype)
    return _done(c, c.run("reduce", p, tx, ty), y)


def sum(x, axes=None, **kw):  # noqa: A001 (the op's name)
    return reduce(x, "sum", axes, **kw)


def mean(x, axes=None, **kw):
    return reduce(x, "mean", axes, **kw)


def amax(x, axes=None, **kw):
    return reduce(x, "max", axes, **kw)


def amin(x, axes=None, **kw):
    return reduce(x, "min", axes, **kw)


OPS = {f.__name__: f for f in (sdpa, gemm, layernorm, rmsnorm, layernorm_backward, rmsnorm_backward,
                               softmax, softmax_backward, sin_affine, unary, binary, scale, dropout,
                               reduce, rope, kv_cache_append, sdpa_backward)}
