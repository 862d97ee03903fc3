"""Plain NumPy formulas of the ops, in float64, independent of the library: the oracle of
both the CPU (NumPy) and the GPU (torch) binding tests."""
import math

import numpy as np


def layernorm(x, w, b=None, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * w
    return y + b if b is not None else y, mu[..., 0], 1 / np.sqrt(var[..., 0] + eps)


def rmsnorm(x, w, b=None, eps=1e-5):
    x = x.astype(np.float64)
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    y = x * r * w
    return y + b if b is not None else y, r[..., 0]


def softmax(x, scale=1.0):
    s = x.astype(np.float64) * scale
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    d = e.sum(-1, keepdims=True)
    return np.where(d > 0, e / np.where(d > 0, d, 1), 0)


def layernorm_backward(dy, x, w, mean, rstd):
    dy, x = dy.astype(np.float64), x.astype(np.float64)
    xhat = (x - mean[..., None]) * rstd[..., None]
    g = dy * w
    dx = rstd[..., None] * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    return dx, (dy * xhat).sum(rows), dy.sum(rows)


def sdpa(q, k, v, causal=False, scale=None, lse=False):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D]; causal bottom-right aligned."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    rep = hq // hkv
    kk = np.repeat(k, rep, axis=2)
    vv = np.repeat(v, rep, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if causal:
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        s = np.where(j <= i + (sk - sq), s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    p = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
    o = np.einsum("bhqk,bkhd->bqhd", p, vv)
    with np.errstate(divide="ignore"):
        l = np.where(den[..., 0] > 0, np.log(np.where(den[..., 0] > 0, den[..., 0], 1)) + m[..., 0], -np.inf)
    return (o, l) if lse else o


def sdpa_backward(dout, q, k, v, causal=False, scale=None):
    """dq, dk, dv of sdpa through the full softmax Jacobian: dS = P * (dP - rowsum(dP * P))."""
    q, k, v, dout = (t.astype(np.float64) for t in (q, k, v, dout))
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    rep = hq // hkv
    kk, vv = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if causal:
        i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
        s = np.where(j <= i + (sk - sq), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = e.sum(-1, keepdims=True)
    p = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
    dp = np.einsum("bqhd,bkhd->bhqk", dout, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kk) * scale
    dkk = np.einsum("bhqk,bqhd->bkhd", ds, q) * scale
    dvv = np.einsum("bhqk,bqhd->bkhd", p, dout)
    dk = dkk.reshape(b, sk, hkv, rep, d).sum(3)
    dv = dvv.reshape(b, sk, hkv, rep, v.shape[3]).sum(3)
    return dq, dk, dv


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def rel_err(got, want):
    """max |got - want| / max(|want|, tiny), over the whole array (NaN-aware)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} != {want.shape}")
    if not np.all(np.isfinite(got) == np.isfinite(want)):
        return math.inf
    fin = np.isfinite(want)
    if not fin.any():
        return 0.0
    return float(np.abs(got[fin] - want[fin]).max() / max(np.abs(want[fin]).max(), 1e-30))
