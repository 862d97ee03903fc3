"""opslib's ops as PyTorch operators: `import opslib.torch` registers them with torch.library
(namespace `opslib`, torch.ops.opslib.*), each with a fake implementation for shape
inference, so that a model using them runs under torch.compile(fullgraph=True) without a
graph break, inside CUDA graph capture, and under autograd where opslib has the backward:

    from opslib import torch as ot
    y = ot.rmsnorm(x, w)                          # differentiable (x, weight, bias)
    o = ot.sdpa(q, k, v, causal=True)             # [B, S, H, D], GQA; differentiable (q, k, v)
    h = ot.gemm(a, w_t, bias=b, activation="silu")  # differentiable without an activation

Operators: rmsnorm, layernorm, softmax, sdpa (autograd through opslib's backward kernels;
sdpa keeps the forward's LSE for its backward); gemm (autograd for activation "none": the
gradients are opslib gemms of the transposed views); sdpa_kv_cache (decode against a
contiguous or paged cache), rope, unary, binary (forward only: their autograd kernels raise). Each runs on the current stream of the
inputs' device through opslib's fast path, on CPU tensors through the CPU backend.
"""
from typing import Optional

import torch
from torch import Tensor

import opslib

_LIB = "opslib"


def _op(name, mutates_args=()):
    return torch.library.custom_op(f"{_LIB}::{name}", mutates_args=mutates_args)


def _rows(x):
    return x.shape[:-1]


def _no_backward(name):
    def backward(ctx, *grads):
        raise RuntimeError(f"opslib::{name} has no backward in opslib yet; use PyTorch's op where "
                           f"gradients are needed")
    return backward


# ---- normalization and softmax: differentiable ---------------------------------------------

@_op("rmsnorm")
def _rmsnorm(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float) -> tuple[Tensor, Tensor]:
    rstd = torch.empty(_rows(x), dtype=torch.float32, device=x.device)
    return opslib.rmsnorm(x, weight, bias, eps=eps, rstd_out=rstd), rstd


@_rmsnorm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(_rows(x), dtype=torch.float32)


@_op("rmsnorm_backward")
def _rmsnorm_backward(dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return opslib.rmsnorm_backward(dy.contiguous(), x, weight, rstd, dweight=True, dbias=True)


@_rmsnorm_backward.register_fake
def _(dy, x, weight, rstd):
    n = x.shape[-1:]
    return (torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(n, dtype=torch.float32),
            x.new_empty(n, dtype=torch.float32))


@_op("layernorm")
def _layernorm(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float) -> tuple[Tensor, Tensor, Tensor]:
    mean = torch.empty(_rows(x), dtype=torch.float32, device=x.device)
    rstd = torch.empty_like(mean)
    return opslib.layernorm(x, weight, bias, eps=eps, mean_out=mean, rstd_out=rstd), mean, rstd


@_layernorm.register_fake
def _(x, weight, bias, eps):
    stats = x.new_empty(_rows(x), dtype=torch.float32)
    return torch.empty_like(x, memory_format=torch.contiguous_format), stats, torch.empty_like(stats)


@_op("layernorm_backward")
def _layernorm_backward(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor,
                        rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return opslib.layernorm_backward(dy.contiguous(), x, weight, mean, rstd, dweight=True, dbias=True)


@_layernorm_backward.register_fake
def _(dy, x, weight, mean, rstd):
    n = x.shape[-1:]
    return (torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(n, dtype=torch.float32),
            x.new_empty(n, dtype=torch.float32))


def _norm_context(ctx, inputs, output):
    x, weight, bias = inputs[0], inputs[1], inputs[2]
    ctx.save_for_backward(x, weight, *output[1:])
    ctx.has_bias = bias is not None


def _rmsnorm_grad(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw, db = torch.ops.opslib.rmsnorm_backward(dy, x, weight, rstd)
    return dx, dw.to(weight.dtype), db.to(weight.dtype) if ctx.has_bias else None, None


def _layernorm_grad(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = torch.ops.opslib.layernorm_backward(dy, x, weight, mean, rstd)
    return dx, dw.to(weight.dtype), db.to(weight.dtype) if ctx.has_bias else None, None


_rmsnorm.register_autograd(_rmsnorm_grad, setup_context=_norm_context)
_layernorm.register_autograd(_layernorm_grad, setup_context=_norm_context)


@_op("softmax")
def _softmax(x: Tensor, scale: float) -> Tensor:
    return opslib.softmax(x, scale=scale)


@_softmax.register_fake
def _(x, scale):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_op("softmax_backward")
def _softmax_backward(dy: Tensor, y: Tensor, scale: float) -> Tensor:
    return opslib.softmax_backward(dy.contiguous(), y, scale=scale)


@_softmax_backward.register_fake
def _(dy, y, scale):
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _softmax_context(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.scale = inputs[1]


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return torch.ops.opslib.softmax_backward(dy, y, ctx.scale), None


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_context)


# ---- GEMM: differentiable without an activation ---------------------------------------------

def _gemm_shape(a, b):
    batch = ()
    if a.dim() == 3 or b.dim() == 3:
        batch = (max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1),)
    return batch + (a.shape[-2], b.shape[-1])


@_op("gemm")
def _gemm(a: Tensor, b: Tensor, bias: Optional[Tensor], residual: Optional[Tensor], activation: str,
          alpha: float) -> Tensor:
    return opslib.gemm(a, b, bias=bias, residual=residual, activation=activation, alpha=alpha)


@_gemm.register_fake
def _(a, b, bias, residual, activation, alpha):
    return a.new_empty(_gemm_shape(a, b))


def _gemm_context(ctx, inputs, output):
    a, b, bias, residual, activation, alpha = inputs
    ctx.save_for_backward(a, b)
    ctx.activation, ctx.alpha = activation, alpha
    ctx.bias_shape = None if bias is None else bias.shape
    ctx.residual_shape = None if residual is None else residual.shape


def _gemm_grad(ctx, dd):
    if ctx.activation != "none":
        raise RuntimeError(f"opslib::gemm: no backward through activation {ctx.activation!r} (opslib's "
                           f"epilogue does not keep the pre-activation); use activation='none' and "
                           f"apply the activation separately where gradients are needed")
    a, b = ctx.saved_tensors
    da = db = dbias = None
    gemm = torch.ops.opslib.gemm
    if ctx.needs_input_grad[0]:  # alpha dD B^T, batched like dD, summed over a's broadcast
        da = gemm(dd, b.mT, None, None, "none", ctx.alpha).sum_to_size(a.shape)
    if ctx.needs_input_grad[1]:  # alpha A^T dD; a 2-D b sums over the batch
        if b.dim() == 2 and dd.dim() == 3:
            db = gemm(a.expand(dd.shape[0], *a.shape[-2:]).reshape(-1, a.shape[-1]).mT,
                      dd.reshape(-1, dd.shape[-1]), None, None, "none", ctx.alpha)
        else:
            db = gemm(a.mT, dd, None, None, "none", ctx.alpha).sum_to_size(b.shape)
    if ctx.bias_shape is not None and ctx.needs_input_grad[2]:  # [N] or [M, 1]: summed over its broadcast
        dbias = dd.sum_to_size(ctx.bias_shape)
    dres = dd.sum_to_size(ctx.residual_shape) if ctx.residual_shape is not None and ctx.needs_input_grad[3] else None
    return da, db, dbias, dres, None, None


_gemm.register_autograd(_gemm_grad, setup_context=_gemm_context)


# ---- attention: differentiable (the forward keeps its LSE for the backward) ---------------------

@_op("sdpa")
def _sdpa(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: Optional[float], window_left: int,
          window_right: int) -> tuple[Tensor, Tensor]:
    return opslib.sdpa(q, k, v, causal=causal, scale=scale, window=(window_left, window_right), return_lse=True)


@_sdpa.register_fake
def _(q, k, v, causal, scale, window_left, window_right):
    b, s, h = q.shape[0], q.shape[1], q.shape[2]
    return q.new_empty(q.shape[:-1] + v.shape[-1:]), q.new_empty((b, h, s), dtype=torch.float32)


@_op("sdpa_backward")
def _sdpa_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
                   scale: Optional[float], window_left: int, window_right: int) -> tuple[Tensor, Tensor, Tensor]:
    return opslib.sdpa_backward(dout.contiguous(), q, k, v, o, lse, causal=causal, scale=scale,
                                window=(window_left, window_right))


@_sdpa_backward.register_fake
def _(dout, q, k, v, o, lse, causal, scale, window_left, window_right):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _sdpa_context(ctx, inputs, output):
    q, k, v = inputs[:3]
    ctx.save_for_backward(q, k, v, *output)
    ctx.options = inputs[3:]
    ctx.mark_non_differentiable(output[1])


def _sdpa_grad(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.opslib.sdpa_backward(do, q, k, v, o, lse, *ctx.options)
    return dq, dk, dv, None, None, None, None


_sdpa.register_autograd(_sdpa_grad, setup_context=_sdpa_context)

# ---- KV-cache attention, RoPE, elementwise: forward only ---------------------------------------


@_op("sdpa_kv_cache")
def _sdpa_kv_cache(q: Tensor, k_cache: Tensor, v_cache: Tensor, kv_lens: Tensor, block_table: Optional[Tensor],
                   causal: bool, scale: Optional[float]) -> Tensor:
    return opslib.sdpa(q, k_cache, v_cache, kv_lens=kv_lens, block_table=block_table, causal=causal, scale=scale)


@_sdpa_kv_cache.register_fake
def _(q, k_cache, v_cache, kv_lens, block_table, causal, scale):
    return q.new_empty(q.shape[:-1] + v_cache.shape[-1:])


@_op("rope")
def _rope(positions: Tensor, q: Tensor, k: Tensor, style: str, theta: float,
          rotary_dim: int) -> tuple[Tensor, Tensor]:
    return opslib.rope(positions, q, k, style=style, theta=theta, rotary_dim=rotary_dim)


@_rope.register_fake
def _(positions, q, k, style, theta, rotary_dim):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format))


@_op("unary")
def _unary(x: Tensor, fn: str) -> Tensor:
    return opslib.unary(x, fn)


@_unary.register_fake
def _(x, fn):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@_op("binary")
def _binary(a: Tensor, b: Tensor, op: str) -> Tensor:
    return opslib.binary(a, b, op)


@_binary.register_fake
def _(a, b, op):
    return a.new_empty(torch.broadcast_shapes(a.shape, b.shape))


for _name, _fn in (("sdpa_kv_cache", _sdpa_kv_cache), ("rope", _rope), ("unary", _unary),
                   ("binary", _binary)):
    _fn.register_autograd(_no_backward(_name))


# ---- the functions to call ----------------------------------------------------------------------

def rmsnorm(x, weight, bias=None, eps=1e-5):
    """RMSNorm over the last axis; differentiable in x, weight and bias."""
    return torch.ops.opslib.rmsnorm(x, weight, bias, eps)[0]


def layernorm(x, weight, bias=None, eps=1e-5):
    """LayerNorm over the last axis; differentiable in x, weight and bias."""
    return torch.ops.opslib.layernorm(x, weight, bias, eps)[0]


def softmax(x, scale=1.0):
    """softmax(scale x) over the last axis; differentiable."""
    return torch.ops.opslib.softmax(x, scale)


def gemm(a, b, bias=None, residual=None, activation="none", alpha=1.0):
    """act(alpha a b + bias) + residual; a [.., M, K], b [.., K, N] (transposes as views).
    Differentiable when activation is "none"."""
    return torch.ops.opslib.gemm(a, b, bias, residual, activation, alpha)


def sdpa(q, k, v, causal=False, scale=None, window=(-1, -1)):
    """Attention over [B, S, H, D] (GQA when k, v have fewer heads); differentiable in q, k, v."""
    return torch.ops.opslib.sdpa(q, k, v, causal, scale, window[0], window[1])[0]


def sdpa_kv_cache(q, k_cache, v_cache, kv_lens, block_table=None, causal=True, scale=None):
    """Decode / chunked prefill against a KV cache (see opslib.sdpa); forward only."""
    return torch.ops.opslib.sdpa_kv_cache(q, k_cache, v_cache, kv_lens, block_table, causal, scale)


def rope(positions, q, k, style="neox", theta=10000.0, rotary_dim=0):
    """(q, k) rotated at positions; forward only."""
    return torch.ops.opslib.rope(positions, q, k, style, theta, rotary_dim)


def unary(x, fn):
    return torch.ops.opslib.unary(x, fn)


def binary(a, b, op):
    return torch.ops.opslib.binary(a, b, op)


def silu_mul(gate, up):
    """silu(gate) * up (SwiGLU's product), two opslib elementwise ops."""
    return binary(unary(gate, "silu"), up, "mul")
