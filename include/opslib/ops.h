/*
 * opslib/ops.h: the operator catalog.
 *
 * Conventions shared by every op (read once; each op's contract below only adds to them):
 *
 *  - Call shape: ops_X(handle, params, operands..., workspace, workspace_bytes).
 *    Required operands are arguments; optional operands (bias, residual, saved statistics)
 *    are tensor pointers in the params struct, NULL when absent.
 *  - params may be NULL for the defaults. Otherwise it must have been filled by
 *    ops_X_params_init(), which sets struct_size; a struct_size this library does not know
 *    fails with OPS_ERR_STRUCT_SIZE (a smaller one from an older release is accepted, and
 *    its missing fields take their defaults).
 *  - Every tensor lives on the handle's device (OPS_ERR_DEVICE_MISMATCH otherwise). Data
 *    pointers must be aligned to their element size (OPS_ERR_MISALIGNED); a kernel may
 *    need more, which the dispatcher takes into account when it chooses one.
 *  - workspace: scratch memory on the handle's device, at least the bytes that
 *    ops_X_workspace_size() reports for the same operands, 16-byte aligned; NULL when that
 *    size is 0. Too little gives OPS_ERR_WORKSPACE_TOO_SMALL. The size query (like
 *    ops_X_explain) reads descriptors only: data may be NULL, which counts as 16-byte
 *    aligned, so it can be asked before the tensors are allocated; pass the real pointers
 *    when they may be less aligned, since alignment can change the kernel and its workspace.
 *  - Outputs must not overlap inputs or each other, except where an op says "in place":
 *    then the output may be the very same view (same data, shape and strides) as the input.
 *  - Checking happens before anything runs: a failing call writes nothing, returns a
 *    specific status, and leaves a message for ops_last_error().
 *  - Tensors with no elements are valid; the op then does nothing.
 *  - CUDA: the op is queued on the handle's stream and returns without waiting; it
 *    allocates nothing and never synchronizes the host (CUDA-graph capturable). Errors
 *    from the launch itself come back as OPS_ERR_CUDA. CPU: the op runs before returning.
 *  - f16 and bf16 operands are computed with f32 accumulation (double on the CPU backend).
 */
#ifndef OPSLIB_OPS_H_
#define OPSLIB_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/handle.h"
#include "opslib/status.h"
#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operator ids: stable, never renumbered; new ops are appended. */
typedef enum ops_op {
  OPS_OP_SDPA = 1,
  OPS_OP_GEMM = 2,
  OPS_OP_LAYERNORM = 3,
  OPS_OP_RMSNORM = 4,
  OPS_OP_SOFTMAX = 5,
  OPS_OP_SIN_AFFINE = 6,
  OPS_OP_UNARY = 7,
  OPS_OP_BINARY = 8,
  OPS_OP_REDUCE = 9,
  OPS_OP_SCALE = 10,
  OPS_OP_EW_CHAIN = 11, /* a fused chain of elementwise ops; reached through ops_fuse plans */
  OPS_OP_DROPOUT = 12,
  OPS_OP_LAYERNORM_BACKWARD = 13,
  OPS_OP_RMSNORM_BACKWARD = 14,
  OPS_OP_SOFTMAX_BACKWARD = 15,
  OPS_OP_ROPE = 16,
  OPS_OP_KV_CACHE_APPEND = 17,
  OPS_OP_SDPA_BACKWARD = 18
} ops_op;

/* Pointwise functions: ops_unary, and the activation of a GEMM epilogue. Stable values. */
typedef enum ops_act {
  OPS_ACT_NONE = 0,      /* identity */
  OPS_ACT_RELU = 1,
  OPS_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  OPS_ACT_GELU_ERF = 3,  /* 0.5 x (1 + erf(x / sqrt(2))) */
  OPS_ACT_SILU = 4,      /* x / (1 + exp(-x)) */
  OPS_ACT_SIGMOID = 5,
  OPS_ACT_TANH = 6,
  OPS_ACT_EXP = 7,
  OPS_ACT_NEG = 8,
  OPS_ACT_ABS = 9,
  OPS_ACT_SIN = 10
} ops_act;

/* ------------------------------------------------------------------------------------ */
/* Scaled dot-product attention                                                          */
/* ------------------------------------------------------------------------------------ */

typedef struct ops_sdpa_params {
  uint32_t struct_size;
  float scale;          /* multiplies Q K^T; 0 means 1/sqrt(head_dim) (default) */
  int32_t causal;       /* 1: query i sees keys j <= i + (Sk - Sq) (bottom-right aligned) */
  int32_t window_left;  /* >= 0: keys j >= i + (Sk - Sq) - window_left; -1: unbounded */
  int32_t window_right; /* >= 0: keys j <= i + (Sk - Sq) + window_right; -1: unbounded */
  /* Optional additive mask, broadcastable to [B, Hq, Sq, Sk] (f32 or q's dtype; -inf
   * removes a key). Not with varlen. */
  const ops_tensor *attn_mask;
  /* Variable-length batches: both set or both NULL. int32 [batch + 1] on the handle's
   * device, non-decreasing, starting at 0, ending at the number of rows of q (resp. k). */
  const ops_tensor *cu_seqlens_q;
  const ops_tensor *cu_seqlens_k;
  int32_t max_seqlen_q; /* varlen: an upper bound of every sequence length (grid sizing) */
  int32_t max_seqlen_k;
  /* Appended after 0.1.0's first layout: a KV cache. kv_lens: int32 [batch] on the handle's
   * device; sequence b attends to the first kv_lens[b] keys of its cache, and its queries
   * are its newest tokens (causal and windows align to kv_lens[b]). The cache is k [batch,
   * capacity, Hkv, D] (v alike), or with block_table a paged pool. Not with cu_seqlens_k or
   * attn_mask; q is [batch, Sq, Hq, D], or varlen (cu_seqlens_q, max_seqlen_q). */
  const ops_tensor *kv_lens;
  /* Paged KV cache: int32 [batch, max_pages] on the handle's device; needs kv_lens. k is
   * [num_pages, page_size, Hkv, D] and v [num_pages, page_size, Hkv, Dv]; key j of sequence b
   * is row j % page_size of page block_table[b, j / page_size]. Entries past a sequence's
   * last page are not read. */
  const ops_tensor *block_table;
} ops_sdpa_params;

OPS_API void ops_sdpa_params_init(ops_sdpa_params *params);

/* O = softmax(scale * Q K^T + mask) V per batch and head, with optional LSE.
 *
 * Layout: the logical axes are [B, S, H, D] (BSHD); a BHSD buffer is passed through
 * its strides (ops_tensor_permute). Varlen: q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv],
 * o [Tq, Hq, Dv], lse [Hq, Tq], sequences delimited by cu_seqlens.
 *   q   [B, Sq, Hq, D]    f32, f16 or bf16
 *   k   [B, Sk, Hkv, D]   q's dtype; Hq must be a multiple of Hkv (GQA / MQA)
 *   v   [B, Sk, Hkv, Dv]  q's dtype
 *   o   [B, Sq, Hq, Dv]   output, q's dtype
 *   lse [B, Hq, Sq]       optional output (NULL), f32: log(sum_j exp(s_ij)) of the scaled,
 *                         masked scores s; -inf for a row that sees no key.
 * A query that sees no key (masked by causal, window or mask) gets O = 0, never NaN.
 * Query head h reads key/value head h / (Hq / Hkv).
 * Errors: as the conventions; OPS_ERR_INVALID_ARGUMENT for window < -1, causal with
 * window_right > 0, a non-finite scale, a mask with varlen, a bad cu_seqlens or max_seqlen,
 * kv_lens with cu_seqlens_k or a mask, block_table without kv_lens; on a CPU handle also
 * kv_lens over the capacity and a page id outside [0, num_pages) (the GPU kernels clamp
 * lengths and skip such pages, reading zeros). */
OPS_API ops_status ops_sdpa(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                            const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                            const ops_tensor *lse, void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_sdpa_workspace_size(ops_handle handle, const ops_sdpa_params *params,
                                           const ops_tensor *q, const ops_tensor *k,
                                           const ops_tensor *v, const ops_tensor *o,
                                           const ops_tensor *lse, size_t *bytes);

/* The gradients of ops_sdpa: dq, dk, dv from the upstream gradient dout, with the forward's
 * o and lse (lse is required) and the forward's params (scale, causal, window, GQA / MQA,
 * varlen through cu_seqlens, an additive mask, which gets no gradient):
 *   P = exp(scale Q K^T + mask - lse), D = rowsum(dout * o), dS = P (dout V^T - D),
 *   dq = scale dS K,  dk = scale dS^T Q,  dv = P^T dout.
 * With GQA a KV head's dk and dv sum over the query heads that read it. Shapes and dtypes as
 * the forward: dout and o [B, Sq, Hq, Dv], dq like q, dk like k, dv like v (varlen: packed),
 * lse [B, Hq, Sq] f32. Every element of dq, dk and dv is written: keys no query sees get 0,
 * a query row with lse = -inf (it saw no key) gets dq = 0, never NaN.
 * Errors: as ops_sdpa, and OPS_ERR_NULL_POINTER for a NULL lse, OPS_ERR_INVALID_ARGUMENT for
 * a KV cache (kv_lens or block_table: decode has no backward), OPS_ERR_ALIASING where dq, dk
 * or dv overlaps an input or another output. The CPU reference: a fixed order of every sum.
 * CUDA: f16 / bf16 with head dims up to 256, a workspace (ops_sdpa_backward_workspace_size).
 * On sm_90 with unit-stride rows, 16-byte aligned, and no mask, the Hopper kernels (every
 * head dim up to 256) sum dq by f32 atomics: not bitwise reproducible; on a handle set
 * deterministic (ops_handle_set_deterministic) the atomics take turns in a fixed order
 * (bitwise the same from run to run, a larger workspace). The sm_80-class kernels (any SM >=
 * 80, every layout, head dims up to 256, no atomics: bitwise reproducible) take the calls the
 * Hopper kernels do not. */
OPS_API ops_status ops_sdpa_backward(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                                     const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                                     const ops_tensor *lse, const ops_tensor *dout, const ops_tensor *dq,
                                     const ops_tensor *dk, const ops_tensor *dv, void *workspace,
                                     size_t workspace_bytes);

OPS_API ops_status ops_sdpa_backward_workspace_size(ops_handle handle, const ops_sdpa_params *params,
                                                    const ops_tensor *q, const ops_tensor *k,
                                                    const ops_tensor *v, const ops_tensor *o,
                                                    const ops_tensor *lse, const ops_tensor *dout,
                                                    const ops_tensor *dq, const ops_tensor *dk,
                                                    const ops_tensor *dv, size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* GEMM with a fused epilogue                                                            */
/* ------------------------------------------------------------------------------------ */

typedef struct ops_gemm_params {
  uint32_t struct_size;
  float alpha;                /* default 1 */
  float beta;                 /* default 0; nonzero needs c */
  int32_t activation;         /* ops_act, default OPS_ACT_NONE */
  const ops_tensor *c;        /* optional, broadcastable to D, D's dtype; may be D (in place) */
  const ops_tensor *bias;     /* optional, broadcastable to D, D's dtype: [N] per column,
                                 [M, 1] per row */
  const ops_tensor *residual; /* optional, broadcastable to D, D's dtype; may be D (in place) */
} ops_gemm_params;

OPS_API void ops_gemm_params_init(ops_gemm_params *params);

/* D = act(alpha * A B + beta * C + bias) + residual.
 *   a [M, K] or [batch, M, K]   f32, f16 or bf16; transposes through strides
 *   b [K, N] or [batch, K, N]   a's dtype; a batch of 1 (or a 2-D operand) is broadcast
 *   d [M, N] or [batch, M, N]   output: a's dtype or f32
 * f32 inputs follow the handle's math mode (OPS_MATH_ALLOW_TF32 permits tf32). */
OPS_API ops_status ops_gemm(ops_handle handle, const ops_gemm_params *params, const ops_tensor *a,
                            const ops_tensor *b, const ops_tensor *d, void *workspace,
                            size_t workspace_bytes);

OPS_API ops_status ops_gemm_workspace_size(ops_handle handle, const ops_gemm_params *params,
                                           const ops_tensor *a, const ops_tensor *b,
                                           const ops_tensor *d, size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* LayerNorm, RMSNorm (over the last axis), with an optional fused residual add          */
/* ------------------------------------------------------------------------------------ */

typedef struct ops_norm_params {
  uint32_t struct_size;
  float eps;                      /* default 1e-5; must be >= 0 and finite */
  const ops_tensor *bias;         /* optional [N], weight's dtype */
  const ops_tensor *residual;     /* optional, x's shape and dtype: x + residual is normalized */
  const ops_tensor *residual_out; /* optional output, x's shape and dtype: receives x + residual
                                     (needs residual) */
  const ops_tensor *mean_out;     /* optional output f32, x's shape without the last axis
                                     (layernorm only) */
  const ops_tensor *rstd_out;     /* optional output f32, x's shape without the last axis:
                                     1 / sqrt(var + eps) (layernorm), 1 / sqrt(mean(x^2) + eps) */
} ops_norm_params;

OPS_API void ops_norm_params_init(ops_norm_params *params);

/* LayerNorm: y = (s - mean(s)) / sqrt(var(s) + eps) * weight + bias, s = x (+ residual),
 * mean and (biased) variance over the last axis.
 *   x      [..., N]  f32, f16 or bf16 (any strides)
 *   weight [N]       x's dtype or f32
 *   y      [..., N]  output, x's dtype; in place on x allowed */
OPS_API ops_status ops_layernorm(ops_handle handle, const ops_norm_params *params,
                                 const ops_tensor *x, const ops_tensor *weight, const ops_tensor *y,
                                 void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_layernorm_workspace_size(ops_handle handle, const ops_norm_params *params,
                                                const ops_tensor *x, const ops_tensor *weight,
                                                const ops_tensor *y, size_t *bytes);

/* RMSNorm: y = s / sqrt(mean(s^2) + eps) * weight (+ bias), s = x (+ residual). As layernorm. */
OPS_API ops_status ops_rmsnorm(ops_handle handle, const ops_norm_params *params,
                               const ops_tensor *x, const ops_tensor *weight, const ops_tensor *y,
                               void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_rmsnorm_workspace_size(ops_handle handle, const ops_norm_params *params,
                                              const ops_tensor *x, const ops_tensor *weight,
                                              const ops_tensor *y, size_t *bytes);

/* ---- backward ------------------------------------------------------------------------- */

typedef struct ops_norm_backward_params {
  uint32_t struct_size;
  const ops_tensor *dweight; /* optional output [N]: sum over rows of dy * xhat; f32 or weight's dtype */
  const ops_tensor *dbias;   /* optional output [N]: sum over rows of dy; f32 or weight's dtype */
} ops_norm_backward_params;

OPS_API void ops_norm_backward_params_init(ops_norm_backward_params *params);

/* LayerNorm backward: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy * weight,
 * xhat = (x - mean) rstd, means over the last axis.
 *   dy, x  [..., N]  the forward's output gradient and normalized input (x + residual when
 *                    the add was fused); f32, f16 or bf16, one dtype
 *   weight [N]       as in the forward
 *   mean, rstd       f32, x's shape without the last axis: the forward's mean_out, rstd_out
 *   dx     [..., N]  output, x's dtype; in place on dy allowed */
OPS_API ops_status ops_layernorm_backward(ops_handle handle, const ops_norm_backward_params *params,
                                          const ops_tensor *dy, const ops_tensor *x,
                                          const ops_tensor *weight, const ops_tensor *mean,
                                          const ops_tensor *rstd, const ops_tensor *dx, void *workspace,
                                          size_t workspace_bytes);

OPS_API ops_status ops_layernorm_backward_workspace_size(ops_handle handle,
                                                         const ops_norm_backward_params *params,
                                                         const ops_tensor *dy, const ops_tensor *x,
                                                         const ops_tensor *weight, const ops_tensor *mean,
                                                         const ops_tensor *rstd, const ops_tensor *dx,
                                                         size_t *bytes);

/* RMSNorm backward: dx = rstd (g - xhat mean(g xhat)), xhat = x rstd. As layernorm, no mean. */
OPS_API ops_status ops_rmsnorm_backward(ops_handle handle, const ops_norm_backward_params *params,
                                        const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                        const ops_tensor *rstd, const ops_tensor *dx, void *workspace,
                                        size_t workspace_bytes);

OPS_API ops_status ops_rmsnorm_backward_workspace_size(ops_handle handle,
                                                       const ops_norm_backward_params *params,
                                                       const ops_tensor *dy, const ops_tensor *x,
                                                       const ops_tensor *weight, const ops_tensor *rstd,
                                                       const ops_tensor *dx, size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* Softmax over the last axis                                                            */
/* ------------------------------------------------------------------------------------ */

typedef struct ops_softmax_params {
  uint32_t struct_size;
  float scale; /* default 1: y = softmax(scale * x); must be finite */
} ops_softmax_params;

OPS_API void ops_softmax_params_init(ops_softmax_params *params);

/* y[..., i] = exp(scale x_i - m) / sum_j exp(scale x_j - m), m the row maximum.
 *   x [..., N]  f32, f16 or bf16;  y: x's shape and dtype; in place on x allowed.
 * A row whose scaled entries are all -inf gives 0 (never NaN). */
OPS_API ops_status ops_softmax(ops_handle handle, const ops_softmax_params *params,
                               const ops_tensor *x, const ops_tensor *y, void *workspace,
                               size_t workspace_bytes);

OPS_API ops_status ops_softmax_workspace_size(ops_handle handle, const ops_softmax_params *params,
                                              const ops_tensor *x, const ops_tensor *y,
                                              size_t *bytes);

/* Softmax backward: dx = scale * y * (dy - sum_j dy_j y_j), y the forward's output.
 *   dy, y, dx  [..., N], one dtype; dx in place on dy allowed. params: the forward's. */
OPS_API ops_status ops_softmax_backward(ops_handle handle, const ops_softmax_params *params,
                                        const ops_tensor *dy, const ops_tensor *y, const ops_tensor *dx,
                                        void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_softmax_backward_workspace_size(ops_handle handle, const ops_softmax_params *params,
                                                       const ops_tensor *dy, const ops_tensor *y,
                                                       const ops_tensor *dx, size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* Elementwise                                                                           */
/* ------------------------------------------------------------------------------------ */
/* Inputs broadcast to the output's shape NumPy-style (axes aligned from the right; an
 * extent of 1, or a missing leading axis, repeats). The output never broadcasts. All
 * operands share one dtype: f32, f16 or bf16. In place: the output may be the same view
 * as an input of the same shape. They take a workspace like every op; today's kernels
 * need none (the size query reports 0). */

typedef struct ops_sin_affine_params {
  uint32_t struct_size;
  float a;                  /* default 1 */
  float b;                  /* default 0 */
  const ops_tensor *a_tensor; /* optional: broadcast tensor used instead of a */
  const ops_tensor *b_tensor; /* optional: broadcast tensor used instead of b */
} ops_sin_affine_params;

OPS_API void ops_sin_affine_params_init(ops_sin_affine_params *params);

/* y = sin(a * x + b). */
OPS_API ops_status ops_sin_affine(ops_handle handle, const ops_sin_affine_params *params,
                                  const ops_tensor *x, const ops_tensor *y, void *workspace,
                                  size_t workspace_bytes);

OPS_API ops_status ops_sin_affine_workspace_size(ops_handle handle,
                                                 const ops_sin_affine_params *params,
                                                 const ops_tensor *x, const ops_tensor *y,
                                                 size_t *bytes);

typedef struct ops_unary_params {
  uint32_t struct_size;
  int32_t fn; /* ops_act; default OPS_ACT_NONE (a copy) */
} ops_unary_params;

OPS_API void ops_unary_params_init(ops_unary_params *params);

/* y = fn(x). */
OPS_API ops_status ops_unary(ops_handle handle, const ops_unary_params *params,
                             const ops_tensor *x, const ops_tensor *y, void *workspace,
                             size_t workspace_bytes);

OPS_API ops_status ops_unary_workspace_size(ops_handle handle, const ops_unary_params *params,
                                            const ops_tensor *x, const ops_tensor *y,
                                            size_t *bytes);

typedef enum ops_binary_op {
  OPS_BINARY_ADD = 0,
  OPS_BINARY_SUB = 1,
  OPS_BINARY_MUL = 2,
  OPS_BINARY_DIV = 3,
  OPS_BINARY_MAX = 4,
  OPS_BINARY_MIN = 5
} ops_binary_op;

typedef struct ops_binary_params {
  uint32_t struct_size;
  int32_t op; /* ops_binary_op; default OPS_BINARY_ADD */
} ops_binary_params;

OPS_API void ops_binary_params_init(ops_binary_params *params);

/* y = a op b, a and b broadcast to y. */
OPS_API ops_status ops_binary(ops_handle handle, const ops_binary_params *params,
                              const ops_tensor *a, const ops_tensor *b, const ops_tensor *y,
                              void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_binary_workspace_size(ops_handle handle, const ops_binary_params *params,
                                             const ops_tensor *a, const ops_tensor *b,
                                             const ops_tensor *y, size_t *bytes);

typedef struct ops_scale_params {
  uint32_t struct_size;
  float alpha; /* default 1; must be finite */
} ops_scale_params;

OPS_API void ops_scale_params_init(ops_scale_params *params);

/* y = alpha * x. */
OPS_API ops_status ops_scale(ops_handle handle, const ops_scale_params *params, const ops_tensor *x,
                             const ops_tensor *y, void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_scale_workspace_size(ops_handle handle, const ops_scale_params *params,
                                            const ops_tensor *x, const ops_tensor *y, size_t *bytes);

typedef struct ops_dropout_params {
  uint32_t struct_size;
  float p;         /* probability of dropping an element, in [0, 1]; default 0 */
  uint64_t seed;   /* Philox key */
  uint64_t offset; /* Philox counter offset: lets successive calls draw fresh numbers */
} ops_dropout_params;

OPS_API void ops_dropout_params_init(ops_dropout_params *params);

/* y = x * keep / (1 - p) (y = 0 where dropped; p = 1 drops all). Element i, in x's logical
 * row-major order, is kept when u_i >= p, u_i a uniform in [0, 1) from Philox4x32-10 with
 * key = seed and counter = offset + i / 4 (word i % 4, top 24 bits). The mask is a pure
 * function of (seed, offset, i), identical on every backend and for any strides: the
 * backward pass is the same call on dy with the same seed and offset, no mask stored.
 * A caller that drops n elements per call advances offset by ceil(n / 4).
 *   x  f32, f16 or bf16;  y  x's shape and dtype; in place on x allowed. */
OPS_API ops_status ops_dropout(ops_handle handle, const ops_dropout_params *params, const ops_tensor *x,
                               const ops_tensor *y, void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_dropout_workspace_size(ops_handle handle, const ops_dropout_params *params,
                                              const ops_tensor *x, const ops_tensor *y, size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* Reductions                                                                            */
/* ------------------------------------------------------------------------------------ */

typedef enum ops_reduce_op {
  OPS_REDUCE_SUM = 0,
  OPS_REDUCE_MEAN = 1,
  OPS_REDUCE_MAX = 2,
  OPS_REDUCE_MIN = 3
} ops_reduce_op;

#define OPS_REDUCE_ALL_AXES 0xFFFFFFFFu

typedef struct ops_reduce_params {
  uint32_t struct_size;
  int32_t op;      /* ops_reduce_op; default OPS_REDUCE_SUM */
  uint32_t axes;   /* bit i reduces axis i; OPS_REDUCE_ALL_AXES (default) reduces all */
  int32_t keepdim; /* 1: reduced axes stay with extent 1; 0 (default): they are removed */
} ops_reduce_params;

OPS_API void ops_reduce_params_init(ops_reduce_params *params);

/* y = op over the chosen axes of x.
 *   x  f32, f16 or bf16, any strides;  y  x's dtype or f32, the reduced shape.
 * Reducing an axis of extent 0 gives the identity: sum 0, max -inf, min +inf; mean NaN
 * (0 / 0, as NumPy). No axes (axes == 0) copies x. NaN propagates through max and min. */
OPS_API ops_status ops_reduce(ops_handle handle, const ops_reduce_params *params,
                              const ops_tensor *x, const ops_tensor *y, void *workspace,
                              size_t workspace_bytes);

OPS_API ops_status ops_reduce_workspace_size(ops_handle handle, const ops_reduce_params *params,
                                             const ops_tensor *x, const ops_tensor *y,
                                             size_t *bytes);

/* ------------------------------------------------------------------------------------ */
/* Rotary position embedding and the KV cache                                            */
/* ------------------------------------------------------------------------------------ */

/* Which elements of a head form the rotated pairs. Stable values. */
typedef enum ops_rope_style {
  OPS_ROPE_NEOX = 0, /* (x[i], x[i + r/2]) for i < r/2: the halves (GPT-NeoX, Llama) */
  OPS_ROPE_GPTJ = 1  /* (x[2i], x[2i + 1]): interleaved (GPT-J) */
} ops_rope_style;

/* How the frequencies are rescaled for a longer context. Stable values. */
typedef enum ops_rope_scaling {
  OPS_ROPE_SCALING_NONE = 0,
  OPS_ROPE_SCALING_LINEAR = 1, /* every frequency divided by factor (positions / factor) */
  OPS_ROPE_SCALING_LLAMA3 = 2  /* Llama 3.1: wavelengths over original_max_positions /
                                  low_freq_factor divided by factor, under
                                  original_max_positions / high_freq_factor kept, a smooth
                                  blend between */
} ops_rope_scaling;

typedef struct ops_rope_params {
  uint32_t struct_size;
  int32_t style;      /* ops_rope_style; default OPS_ROPE_NEOX */
  float theta;        /* the base; default 10000; finite and > 0 */
  int32_t rotary_dim; /* r: the leading dims of a head that rotate; 0 (default) means the head
                         dim; else even and <= the head dim. Dims from r on pass through. */
  int32_t scaling;    /* ops_rope_scaling; default OPS_ROPE_SCALING_NONE */
  float factor;       /* LINEAR, LLAMA3: default 1; finite and > 0 */
  float low_freq_factor;          /* LLAMA3: default 1; > 0 */
  float high_freq_factor;         /* LLAMA3: default 4; > low_freq_factor */
  int32_t original_max_positions; /* LLAMA3: default 8192; > 0 */
  /* ops_rope: an optional second tensor rotated with the same positions (K beside Q, one
   * launch), and its output; both set or both NULL. Must be NULL in
   * ops_kv_cache_append_params.rope. */
  const ops_tensor *k;
  const ops_tensor *k_out;
} ops_rope_params;

OPS_API void ops_rope_params_init(ops_rope_params *params);

/* Rotary embedding: for each token t, head h and pair (x1, x2) of frequency index i < r/2,
 *   y1 = x1 cos(a) - x2 sin(a),  y2 = x2 cos(a) + x1 sin(a),  a = positions[t] * f_i,
 *   f_i = theta^(-2i / r), rescaled as `scaling` says.
 * Dims from r on are copied. The angle is exact (double) before its cosine and sine.
 *   positions [T] or [B, S]      int32 or int64, any value (negative positions rotate back)
 *   q         [T, H, D] or [B, S, H, D]  f32, f16 or bf16, any strides (q of a fused QKV
 *                                buffer is a view)
 *   q_out     q's shape and dtype; in place on q allowed
 *   params->k, k_out: as q, q_out with their own head count, q's dtype and head dim. */
OPS_API ops_status ops_rope(ops_handle handle, const ops_rope_params *params, const ops_tensor *positions,
                            const ops_tensor *q, const ops_tensor *q_out, void *workspace,
                            size_t workspace_bytes);

OPS_API ops_status ops_rope_workspace_size(ops_handle handle, const ops_rope_params *params,
                                           const ops_tensor *positions, const ops_tensor *q,
                                           const ops_tensor *q_out, size_t *bytes);

typedef struct ops_kv_cache_append_params {
  uint32_t struct_size;
  /* Optional: k is rotated as ops_rope with these settings on its way into the cache (k
   * itself is not written); needs positions. */
  const ops_rope_params *rope;
  const ops_tensor *positions; /* with rope: int32 or int64 [T] */
} ops_kv_cache_append_params;

OPS_API void ops_kv_cache_append_params_init(ops_kv_cache_append_params *params);

/* Writes T new tokens into a KV cache: token t goes to slot s = slot_mapping[t], row s %
 * page_size of page s / page_size; a negative slot skips the token (-1 by convention).
 *   k            [T, Hkv, D]     f32, f16 or bf16, any strides
 *   v            [T, Hkv, Dv]    k's dtype
 *   slot_mapping [T]             int32 or int64 on the handle's device
 *   k_cache      [num_pages, page_size, Hkv, D]  output, k's dtype (a contiguous cache
 *                                [B, capacity, Hkv, D] is the same with page_size = capacity)
 *   v_cache      [num_pages, page_size, Hkv, Dv] output, k's dtype, as many pages of one size
 * Slots past the cache: on a CPU handle OPS_ERR_INVALID_ARGUMENT (nothing written); the GPU
 * kernels skip them. Two tokens naming one slot leave one of them there (which is unspecified).
 * Only the named slots are written. */
OPS_API ops_status ops_kv_cache_append(ops_handle handle, const ops_kv_cache_append_params *params,
                                       const ops_tensor *k, const ops_tensor *v,
                                       const ops_tensor *slot_mapping, const ops_tensor *k_cache,
                                       const ops_tensor *v_cache, void *workspace, size_t workspace_bytes);

OPS_API ops_status ops_kv_cache_append_workspace_size(ops_handle handle,
                                                      const ops_kv_cache_append_params *params,
                                                      const ops_tensor *k, const ops_tensor *v,
                                                      const ops_tensor *slot_mapping,
                                                      const ops_tensor *k_cache, const ops_tensor *v_cache,
                                                      size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_OPS_H_ */
