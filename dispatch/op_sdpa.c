/*
 * ops_sdpa: validation and normalization into opsi_sdpa_args (4-D BSHD views; varlen as
 * batch-stride-0 views over the packed tensors), then the dispatcher.
 */
#include <math.h>
#include <string.h>

#include "capabilities/rows.h"
#include "dispatch/dispatch.h"
#include "kernels/flash/sdpa_args.h"
#include "kernels/flash/sdpa_bwd_cpu.h"
#include "opslib/ops.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"

void ops_sdpa_params_init(ops_sdpa_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->scale = 0.0f;
  p->causal = 0;
  p->window_left = -1;
  p->window_right = -1;
}

/* cu_seqlens: int32 [batch + 1]; on the CPU its contents are checked too (on a GPU they
 * cannot be read without synchronizing; kernels clamp them instead). */
static ops_status check_cu_seqlens(const opsi_vctx *v, const char *arg, const ops_tensor *cu,
                                   int64_t expected_len, int64_t total, int32_t max_seqlen,
                                   const char *max_arg) {
  int64_t n;
  OPSI_TRY(opsi_check_tensor(v, arg, cu, &n));
  OPSI_TRY(opsi_check_dtype_in(v, arg, cu, OPSI_DTYPE_BIT(OPS_DTYPE_I32)));
  OPSI_TRY(opsi_check_ndim(v, arg, cu, 1, 1));
  if (expected_len >= 0) {
    OPSI_TRY(opsi_check_extent(v, arg, cu, 0, expected_len, "batch + 1, from cu_seqlens_q"));
  }
  if (n < 1) {
    return opsi_fail(OPS_ERR_BAD_SIZE, "%s: %s: expected batch + 1 >= 1 offsets, got 0", v->fn, arg);
  }
  if (max_seqlen < 0) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->%s: expected >= 0, got %d", v->fn,
                     max_arg, (int)max_seqlen);
  }
  if (cu->device.type != OPS_DEVICE_CPU || v->mode != OPSI_RUN) {
    return OPS_OK; /* contents unreadable: on a GPU (no sync allowed), or a query (no data yet) */
  }
  const int32_t *c = (const int32_t *)cu->data;
  const int64_t s = cu->strides[0];
  if (c[0] != 0) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s[0]: expected 0, got %d", v->fn, arg, (int)c[0]);
  }
  for (int64_t i = 1; i < n; ++i) {
    const int64_t len = (int64_t)c[i * s] - c[(i - 1) * s];
    if (len < 0 || len > max_seqlen) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                       "%s: %s: sequence %lld has length %lld; expected 0..%d (params->%s)", v->fn,
                       arg, (long long)(i - 1), (long long)len, (int)max_seqlen, max_arg);
    }
  }
  if (c[(n - 1) * s] != total) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: %s[%lld]: expected %lld (the packed rows), got %d", v->fn, arg,
                     (long long)(n - 1), (long long)total, (int)c[(n - 1) * s]);
  }
  return OPS_OK;
}

/* The KV cache's key counts (int32 [batch]) and block table (int32 [batch, max_pages]) as
 * descriptors; sets the capacity a sequence. */
static ops_status check_cache(const opsi_vctx *v, const ops_sdpa_params *p, const ops_tensor *k, int64_t batch,
                              int64_t *capacity) {
  OPSI_TRY(opsi_check_tensor(v, "params->kv_lens", p->kv_lens, NULL));
  OPSI_TRY(opsi_check_dtype_in(v, "params->kv_lens", p->kv_lens, OPSI_DTYPE_BIT(OPS_DTYPE_I32)));
  const int64_t l_shape[1] = {batch};
  OPSI_TRY(opsi_check_shape(v, "params->kv_lens", p->kv_lens, 1, l_shape, "[batch]"));
  const ops_tensor *bt = p->block_table;
  *capacity = k->shape[1]; /* keys of a sequence (paged: of a page) */
  if (bt != NULL) {
    OPSI_TRY(opsi_check_tensor(v, "params->block_table", bt, NULL));
    OPSI_TRY(opsi_check_dtype_in(v, "params->block_table", bt, OPSI_DTYPE_BIT(OPS_DTYPE_I32)));
    OPSI_TRY(opsi_check_ndim(v, "params->block_table", bt, 2, 2));
    OPSI_TRY(opsi_check_extent(v, "params->block_table", bt, 0, batch, "batch"));
    OPSI_TRY(opsi_mul_size(v, "the cache's capacity (k's page_size x params->block_table's axis 1)", capacity,
                           bt->shape[1]));
  }
  return OPS_OK;
}

/* On the CPU (after the aliasing check): the key counts within the capacity, the pages they
 * use within the pool. On a GPU they cannot be read without synchronizing: kernels clamp. */
static ops_status check_cache_contents(const opsi_vctx *v, const ops_sdpa_params *p, const ops_tensor *k,
                                       int64_t batch, int64_t capacity) {
  if (p->kv_lens->device.type != OPS_DEVICE_CPU || v->mode != OPSI_RUN) return OPS_OK;
  const ops_tensor *bt = p->block_table;
  const int32_t *lens = (const int32_t *)p->kv_lens->data;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t len = lens[b * p->kv_lens->strides[0]];
    if (len < 0 || len > capacity) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->kv_lens[%lld]: expected 0..%lld (the cache's %s), got %d",
                       v->fn, (long long)b, (long long)capacity,
                       bt != NULL ? "pages a sequence times page_size" : "capacity, k's axis 1", (int)len);
    }
    if (bt == NULL || len == 0) continue; /* len <= capacity: the table has a page for each key */
    const int32_t *row = (const int32_t *)bt->data + b * bt->strides[0];
    for (int64_t pg = 0; pg * k->shape[1] < len; ++pg) {
      const int32_t id = row[pg * bt->strides[1]];
      if (id < 0 || id >= k->shape[0]) {
        return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                         "%s: params->block_table[%lld, %lld]: expected a page id in 0..%lld (k's axis 0), got %d",
                         v->fn, (long long)b, (long long)pg, (long long)k->shape[0] - 1, (int)id);
      }
    }
  }
  return OPS_OK;
}

static ops_status check_params(const opsi_vctx *v, const ops_sdpa_params *p) {
  if (!isfinite(p->scale)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->scale: expected a finite value (0 for 1/sqrt(head_dim)), got %g",
                     v->fn, (double)p->scale);
  }
  if (p->causal != 0 && p->causal != 1) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->causal: expected 0 or 1, got %d", v->fn,
                     (int)p->causal);
  }
  if (p->window_left < -1 || p->window_right < -1) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->window_%s: expected -1 (unbounded) or >= 0, got %d", v->fn,
                     p->window_left < -1 ? "left" : "right",
                     (int)(p->window_left < -1 ? p->window_left : p->window_right));
  }
  if (p->causal && p->window_right > 0) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->window_right: expected -1 or 0 with causal (which ends the window "
                     "at the diagonal), got %d", v->fn, (int)p->window_right);
  }
  if (p->block_table != NULL && p->kv_lens == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "%s: params->kv_lens: expected a tensor (a paged cache, block_table, needs the key "
                     "counts), got NULL", v->fn);
  }
  if (p->kv_lens != NULL) {
    if (p->cu_seqlens_k != NULL || p->attn_mask != NULL) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                       "%s: params->%s: expected NULL with a KV cache (kv_lens set), got a tensor", v->fn,
                       p->cu_seqlens_k != NULL ? "cu_seqlens_k" : "attn_mask");
    }
    return OPS_OK;
  }
  if ((p->cu_seqlens_q == NULL) != (p->cu_seqlens_k == NULL)) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "%s: params->%s: expected a tensor (varlen needs both cu_seqlens), got NULL",
                     v->fn, p->cu_seqlens_q == NULL ? "cu_seqlens_q" : "cu_seqlens_k");
  }
  if (p->cu_seqlens_q != NULL && p->attn_mask != NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->attn_mask: expected NULL with varlen (cu_seqlens set), got a mask",
                     v->fn);
  }
  return OPS_OK;
}

/* A [T, H, D] packed tensor as a [batch, T, H, D] view whose batch stride is 0. */
static ops_tensor packed_as_batched(const ops_tensor *t, int64_t batch) {
  ops_tensor r = *t;
  r.ndim = 4;
  for (int i = 3; i >= 1; --i) {
    r.shape[i] = t->shape[i - 1];
    r.strides[i] = t->strides[i - 1];
  }
  r.shape[0] = batch;
  r.strides[0] = 0;
  return r;
}

static opsi_sdpa_view view_of(const ops_tensor *t) {
  const opsi_sdpa_view r = {t->data, t->strides[0], t->strides[1], t->strides[2], t->strides[3]};
  return r;
}

/* Unit-stride rows whose base and every stride are 16-byte aligned (batch stride included:
 * varlen's is 0), or no element: the kernels' 16-byte copy paths. */
static int rows_aligned(const ops_tensor *t) {
  if (ops_tensor_numel(t) == 0) return 1; /* as opsi_tensor_align, which the rows' rule reads */
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t->dtype);
  if (t->shape[3] > 1 && t->strides[3] != 1) return 0;
  if ((uintptr_t)t->data % 16 != 0) return 0;
  for (int i = 0; i < 3; ++i) {
    /* unsigned: an empty view's strides are unchecked, and the low bits of the product are
     * the same modulo 2^64 */
    if (t->shape[i] > 1 && ((uint64_t)t->strides[i] * (uint64_t)elem) % 16 != 0) return 0;
  }
  return 1;
}

/* The call as the CUDA kernels read it (kernels/flash/sdpa_geom.h), from the normalized args.
 * The int32 fields hold: the rows bound batch and heads to 65535 and sequences to 2^31 - 1. */
static opsi_sdpa_geom device_geom(const opsi_sdpa_args *a) {
  opsi_sdpa_geom g;
  memset(&g, 0, sizeof g);
  g.q = view_of(&a->q), g.k = view_of(&a->k), g.v = view_of(&a->v), g.o = view_of(&a->o);
  if (a->has_lse) {
    g.lse = (float *)a->lse.data;
    g.lb = a->lse.strides[0], g.lh = a->lse.strides[1], g.ls = a->lse.strides[2];
  }
  if (a->has_mask) {
    g.mask = a->mask.data;
    g.mb = a->mask.strides[0], g.mh = a->mask.strides[1], g.mi = a->mask.strides[2], g.mj = a->mask.strides[3];
    g.mask_dtype = a->mask.dtype;
  }
  if (a->varlen) {
    g.cu_q = a->cu_seqlens_q, g.cu_k = a->cu_seqlens_k; /* cu_k NULL with a KV cache */
    g.cu_sq = a->cu_stride_q, g.cu_sk = a->cu_stride_k;
  }
  if (a->cache) g.kv_lens = a->kv_lens, g.kl_s = a->kv_lens_stride;
  if (a->paged) {
    g.pages = a->block_table, g.pg_sb = a->bt_sb, g.pg_sp = a->bt_sp, g.num_pages = a->num_pages;
    g.page_size = (int32_t)a->page_size, g.pages_per_seq = (int32_t)a->pages_per_seq;
  }
  g.batch = (int32_t)a->batch, g.heads_q = (int32_t)a->heads_q;
  g.group = a->heads_kv > 0 ? (int32_t)(a->heads_q / a->heads_kv) : 1;
  g.seqlen_q = (int32_t)a->seqlen_q, g.seqlen_k = (int32_t)a->seqlen_k;
  g.d = (int32_t)a->head_dim, g.dv = (int32_t)a->head_dim_v;
  g.scale_log2 = (float)(a->scale * 1.4426950408889634);
  g.window_left = a->window_left >= a->seqlen_k ? -1 : (int32_t)a->window_left;
  g.window_right = a->window_right >= a->seqlen_q ? -1 : (int32_t)a->window_right;
  g.aligned = rows_aligned(&a->q) && rows_aligned(&a->k) && rows_aligned(&a->v) && rows_aligned(&a->o);
  return g;
}

/* The backward as its CUDA kernels read it: the forward's call, the gradients' views, D's
 * layout in the workspace (the launcher sets its address). */
static opsi_sdpa_bwd_geom device_bwd_geom(const opsi_sdpa_bwd_args *ba) {
  const opsi_sdpa_args *a = &ba->fwd;
  opsi_sdpa_bwd_geom g;
  memset(&g, 0, sizeof g);
  g.f = a->geom;
  g.dout = view_of(&ba->dout), g.dq = view_of(&ba->dq), g.dk = view_of(&ba->dk), g.dv = view_of(&ba->dv);
  g.dsum_sb = a->varlen ? 0 : a->seqlen_q;
  g.rows = a->varlen ? a->q.shape[1] : a->batch * a->seqlen_q;
  g.row_heads = g.f.heads_q > 0 ? g.f.heads_q : 1; /* every head a unit; the launchers narrow it */
  g.scale = (float)a->scale;
  g.aligned = g.f.aligned && rows_aligned(&ba->dout) && rows_aligned(&ba->dq) && rows_aligned(&ba->dk) &&
              rows_aligned(&ba->dv);
  return g;
}

/* Four row-wise operands into the problem: their alignment, and OPSI_F_STRIDED for a row
 * that is not unit-stride or an axis walked backwards or broadcast (stride <= 0), which a TMA
 * map cannot describe. */
static void add_rows(opsi_problem *pr, const ops_tensor *const rows[4]) {
  for (size_t i = 0; i < 4; ++i) {
    const ops_tensor *t = rows[i];
    opsi_problem_add_align(pr, t);
    for (int ax = 0; ax < t->ndim; ++ax) {
      if (t->shape[ax] > 1 && (ax == t->ndim - 1 ? t->strides[ax] != 1 : t->strides[ax] <= 0)) pr->flags |= OPSI_F_STRIDED;
    }
  }
}

/* The caller's params (whatever its struct_size) into a whole struct, defaults past its end. */
static ops_status read_params(const opsi_vctx *v, const ops_sdpa_params *params, ops_sdpa_params *p) {
  ops_sdpa_params_init(p);
  return opsi_read_params(v, "ops_sdpa_params", params, sizeof *p, p);
}

/* `params` as read_params gives them. */
static ops_status sdpa_prepare(const opsi_vctx *v, const ops_sdpa_params *params,
                               const ops_tensor *q, const ops_tensor *k, const ops_tensor *val,
                               const ops_tensor *o, const ops_tensor *lse, opsi_sdpa_args *a,
                               opsi_problem *pr, int *empty) {
  const ops_sdpa_params p = *params;
  OPSI_TRY(check_params(v, &p));

  int64_t no, nl = 0;
  OPSI_TRY(opsi_check_tensor(v, "q", q, NULL));
  OPSI_TRY(opsi_check_tensor(v, "k", k, NULL));
  OPSI_TRY(opsi_check_tensor(v, "v", val, NULL));
  OPSI_TRY(opsi_check_tensor(v, "o", o, &no));
  if (lse != NULL) OPSI_TRY(opsi_check_tensor(v, "lse", lse, &nl));
  OPSI_TRY(opsi_check_dtype_in(v, "q", q, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_dtype_eq(v, "k", k, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_dtype_eq(v, "v", val, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_dtype_eq(v, "o", o, q->dtype, "q's dtype"));
  if (lse != NULL) OPSI_TRY(opsi_check_dtype_eq(v, "lse", lse, OPS_DTYPE_F32, "LSE is always f32"));

  const int varlen = p.cu_seqlens_q != NULL; /* packed queries */
  const int cache = p.kv_lens != NULL, paged = p.block_table != NULL;
  const int nd = varlen ? 3 : 4, nd_kv = varlen && !cache ? 3 : 4;
  const int ax = varlen ? 0 : 1;      /* q's S (or packed T) axis */
  const int ax_k = nd_kv == 3 ? 0 : 1; /* k's (a page's rows with a block table) */
  OPSI_TRY(opsi_check_ndim(v, "q", q, nd, nd));
  OPSI_TRY(opsi_check_ndim(v, "k", k, nd_kv, nd_kv));
  OPSI_TRY(opsi_check_ndim(v, "v", val, nd_kv, nd_kv));
  OPSI_TRY(opsi_check_ndim(v, "o", o, nd, nd));
  if (paged) {
    OPSI_TRY(opsi_check_extent(v, "v", val, 0, k->shape[0], "num_pages, from k"));
  } else if (!varlen) {
    OPSI_TRY(opsi_check_extent(v, "k", k, 0, q->shape[0], "batch, from q"));
    OPSI_TRY(opsi_check_extent(v, "v", val, 0, q->shape[0], "batch, from q"));
  }
  const int64_t sq = q->shape[ax], hq = q->shape[ax + 1], d = q->shape[ax + 2];
  const int64_t sk = k->shape[ax_k], hkv = k->shape[ax_k + 1];
  OPSI_TRY(opsi_check_extent(v, "k", k, ax_k + 2, d, "head_dim, from q"));
  OPSI_TRY(opsi_check_extent(v, "v", val, ax_k, sk,
                             paged ? "page_size, from k" : varlen && !cache ? "packed key rows, from k" : "seqlen_k, from k"));
  OPSI_TRY(opsi_check_extent(v, "v", val, ax_k + 1, hkv, "heads_kv, from k"));
  const int64_t dv = val->shape[ax_k + 2];
  if ((hkv == 0 && hq != 0) || (hkv != 0 && hq % hkv != 0)) {
    return opsi_fail(OPS_ERR_SHAPE_MISMATCH,
                     "%s: k: axis %d (heads_kv): expected a divisor of heads_q = %lld (GQA), got %lld",
                     v->fn, ax + 1, (long long)hq, (long long)hkv);
  }
  int64_t batch, capacity = 0;
  if (varlen) {
    OPSI_TRY(check_cu_seqlens(v, "params->cu_seqlens_q", p.cu_seqlens_q, -1, sq, p.max_seqlen_q, "max_seqlen_q"));
    batch = p.cu_seqlens_q->shape[0] - 1; /* checked: one axis of at least one offset */
    if (cache && !paged) OPSI_TRY(opsi_check_extent(v, "k", k, 0, batch, "batch, from cu_seqlens_q"));
    if (cache && !paged) OPSI_TRY(opsi_check_extent(v, "v", val, 0, batch, "batch, from cu_seqlens_q"));
    if (!cache) {
      OPSI_TRY(check_cu_seqlens(v, "params->cu_seqlens_k", p.cu_seqlens_k, batch + 1, sk, p.max_seqlen_k,
                                "max_seqlen_k"));
    }
    const int64_t o_shape[3] = {sq, hq, dv};
    OPSI_TRY(opsi_check_shape(v, "o", o, 3, o_shape, "[Tq, Hq, Dv] from q and v"));
    if (lse != NULL) {
      const int64_t l_shape[2] = {hq, sq};
      OPSI_TRY(opsi_check_shape(v, "lse", lse, 2, l_shape, "[Hq, Tq] from q"));
    }
  } else {
    batch = q->shape[0];
    const int64_t o_shape[4] = {batch, sq, hq, dv};
    OPSI_TRY(opsi_check_shape(v, "o", o, 4, o_shape, "[B, Sq, Hq, Dv] from q and v"));
    if (lse != NULL) {
      const int64_t l_shape[3] = {batch, hq, sq};
      OPSI_TRY(opsi_check_shape(v, "lse", lse, 3, l_shape, "[B, Hq, Sq] from q"));
    }
  }
  if (cache) OPSI_TRY(check_cache(v, &p, k, batch, &capacity));
  /* with no query (key) rows at all, every sequence is empty whatever max_seqlen says */
  const int64_t seqlen_q = sq == 0 ? 0 : varlen ? p.max_seqlen_q : sq;
  const int64_t seqlen_k = cache ? capacity : sk == 0 ? 0 : varlen ? p.max_seqlen_k : sk;

  memset(a, 0, sizeof *a);
  if (p.attn_mask != NULL) {
    OPSI_TRY(opsi_check_tensor(v, "params->attn_mask", p.attn_mask, NULL));
    OPSI_TRY(opsi_check_dtype_in(v, "params->attn_mask", p.attn_mask,
                                 OPSI_DTYPE_BIT(OPS_DTYPE_F32) | OPSI_DTYPE_BIT(q->dtype)));
    const int64_t m_shape[4] = {batch, hq, sq, sk};
    OPSI_TRY(opsi_broadcast_to(v, "params->attn_mask", p.attn_mask, 4, m_shape, "[B, Hq, Sq, Sk]", &a->mask));
    a->has_mask = 1;
  }

  const opsi_operand operands[] = {
      {"q", q, 0, {NULL, NULL}}, {"k", k, 0, {NULL, NULL}}, {"v", val, 0, {NULL, NULL}},
      {"params->attn_mask", p.attn_mask, 0, {NULL, NULL}},
      {"params->cu_seqlens_q", p.cu_seqlens_q, 0, {NULL, NULL}},
      {"params->cu_seqlens_k", p.cu_seqlens_k, 0, {NULL, NULL}},
      {"params->kv_lens", p.kv_lens, 0, {NULL, NULL}}, {"params->block_table", p.block_table, 0, {NULL, NULL}},
      {"o", o, 1, {NULL, NULL}}, {"lse", lse, 1, {NULL, NULL}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, (int)(sizeof operands / sizeof operands[0])));
  if (cache) OPSI_TRY(check_cache_contents(v, &p, k, batch, capacity));

  if (varlen) {
    a->q = packed_as_batched(q, batch);
    a->k = cache ? *k : packed_as_batched(k, batch);
    a->v = cache ? *val : packed_as_batched(val, batch);
    a->o = packed_as_batched(o, batch);
    if (lse != NULL) {
      a->lse = *lse; /* [Hq, Tq] -> [batch, Hq, Tq] with batch stride 0 */
      a->lse.ndim = 3;
      a->lse.shape[0] = batch, a->lse.shape[1] = hq, a->lse.shape[2] = sq;
      a->lse.strides[0] = 0, a->lse.strides[1] = lse->strides[0], a->lse.strides[2] = lse->strides[1];
    }
    a->cu_seqlens_q = (const int32_t *)p.cu_seqlens_q->data;
    a->cu_stride_q = p.cu_seqlens_q->strides[0];
    if (!cache) {
      a->cu_seqlens_k = (const int32_t *)p.cu_seqlens_k->data;
      a->cu_stride_k = p.cu_seqlens_k->strides[0];
    }
  } else {
    a->q = *q, a->k = *k, a->v = *val, a->o = *o;
    if (lse != NULL) a->lse = *lse;
  }
  if (cache) {
    a->cache = 1;
    a->kv_lens = (const int32_t *)p.kv_lens->data;
    a->kv_lens_stride = p.kv_lens->strides[0];
  }
  if (paged) {
    a->paged = 1;
    a->block_table = (const int32_t *)p.block_table->data;
    a->bt_sb = p.block_table->strides[0], a->bt_sp = p.block_table->strides[1];
    a->pages_per_seq = p.block_table->shape[1];
    a->num_pages = k->shape[0];
    a->page_size = k->shape[1];
  }
  a->has_lse = lse != NULL;
  a->varlen = varlen;
  a->batch = batch;
  a->seqlen_q = seqlen_q;
  a->seqlen_k = seqlen_k;
  a->heads_q = hq;
  a->heads_kv = hkv;
  a->head_dim = d;
  a->head_dim_v = dv;
  a->scale = p.scale != 0.0f ? (double)p.scale : (d > 0 ? 1.0 / sqrt((double)d) : 1.0);
  a->window_left = p.window_left;
  a->window_right = p.causal ? 0 : p.window_right;

  int64_t tq = sq; /* query rows of the whole call (q may be empty in another axis) */
  if (!varlen) OPSI_TRY(opsi_mul_size(v, "q: batch x seqlen_q", &tq, batch));

  opsi_problem_init(pr, OPS_OP_SDPA, v->handle);
  pr->dtype = q->dtype;
  pr->out_dtype = o->dtype;
  pr->dims[OPSI_SDPA_B] = batch;
  pr->dims[OPSI_SDPA_SQ] = seqlen_q;
  pr->dims[OPSI_SDPA_SK] = seqlen_k;
  pr->dims[OPSI_SDPA_HQ] = hq;
  pr->dims[OPSI_SDPA_HKV] = hkv;
  pr->dims[OPSI_SDPA_D] = d;
  pr->dims[OPSI_SDPA_DV] = dv;
  pr->dims[OPSI_SDPA_TQ] = tq;
  pr->extra[0] = a->window_left;
  pr->extra[1] = a->window_right;
  if (p.causal) pr->flags |= OPSI_F_CAUSAL;
  if (p.window_left >= 0 || (!p.causal && p.window_right >= 0)) pr->flags |= OPSI_F_WINDOW;
  if (hq != hkv) pr->flags |= OPSI_F_GQA;
  if (varlen) pr->flags |= OPSI_F_VARLEN;
  if (cache) pr->flags |= OPSI_F_KV_CACHE;
  if (paged) pr->flags |= OPSI_F_PAGED, pr->page_size = (int32_t)(a->page_size < INT32_MAX ? a->page_size : INT32_MAX);
  if (lse != NULL) pr->flags |= OPSI_F_LSE;
  if (a->has_mask) pr->flags |= OPSI_F_MASK;
  if (dv != d) pr->flags |= OPSI_F_DV_NE_D;
  a->uniform = opsi_uniform_work(pr);
  a->persistent = opsi_sdpa_persistent(pr);
  if (pr->backend == OPS_DEVICE_CUDA && v->mode == OPSI_RUN) a->geom = device_geom(a); /* what the kernels read */
  add_rows(pr, (const ops_tensor *const[]){q, k, val, o});
  *empty = no == 0 && nl == 0;
  return OPS_OK;
}

static ops_status sdpa_entry(const opsi_vctx *vc, const ops_sdpa_params *params, const ops_tensor *q,
                             const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                             const ops_tensor *lse, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_sdpa_args args;
  opsi_problem pr;
  int empty = 0;
  ops_sdpa_params p;
  OPSI_TRY(read_params(vc, params, &p));
  OPSI_TRY(sdpa_prepare(vc, &p, q, k, v, o, lse, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

ops_status ops_sdpa(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                    const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                    const ops_tensor *lse, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_sdpa", handle, OPSI_RUN, NULL, NULL};
  return sdpa_entry(&vc, params, q, k, v, o, lse, workspace, workspace_bytes);
}

ops_status ops_sdpa_workspace_size(ops_handle handle, const ops_sdpa_params *params,
                                   const ops_tensor *q, const ops_tensor *k, const ops_tensor *v,
                                   const ops_tensor *o, const ops_tensor *lse, size_t *bytes) {
  const opsi_vctx vc = {"ops_sdpa_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return sdpa_entry(&vc, params, q, k, v, o, lse, NULL, 0);
}

ops_status ops_sdpa_explain(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                            const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                            const ops_tensor *lse, ops_explain *out) {
  const opsi_vctx vc = {"ops_sdpa_explain", handle, OPSI_EXPLAIN, NULL, out};
  return sdpa_entry(&vc, params, q, k, v, o, lse, NULL, 0);
}

/* ---- backward ---------------------------------------------------------------------- */

/* The forward's operands through sdpa_prepare (o and lse are read here), then dout like o and
 * the gradients like q, k and v, none overlapping an input or each other. */
static ops_status sdpa_backward_prepare(const opsi_vctx *v, const ops_sdpa_params *params, const ops_tensor *q,
                                        const ops_tensor *k, const ops_tensor *val, const ops_tensor *o,
                                        const ops_tensor *lse, const ops_tensor *dout, const ops_tensor *dq,
                                        const ops_tensor *dk, const ops_tensor *dv, opsi_sdpa_bwd_args *ba,
                                        opsi_problem *pr, int *empty) {
  ops_sdpa_params p;
  OPSI_TRY(read_params(v, params, &p));
  if (p.kv_lens != NULL || p.block_table != NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->%s: expected NULL (a KV cache is for inference; the backward takes the "
                     "keys as k and v, varlen through cu_seqlens), got a tensor",
                     v->fn, p.kv_lens != NULL ? "kv_lens" : "block_table");
  }
  if (lse == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: lse: expected the forward's LSE [B, Hq, Sq] f32, got NULL", v->fn);
  }
  int unused;
  OPSI_TRY(sdpa_prepare(v, &p, q, k, val, o, lse, &ba->fwd, pr, &unused));
  const opsi_sdpa_args *a = &ba->fwd;
  int64_t n_dq, n_dk, n_dv;
  OPSI_TRY(opsi_check_tensor(v, "dout", dout, NULL));
  OPSI_TRY(opsi_check_tensor(v, "dq", dq, &n_dq));
  OPSI_TRY(opsi_check_tensor(v, "dk", dk, &n_dk));
  OPSI_TRY(opsi_check_tensor(v, "dv", dv, &n_dv));
  OPSI_TRY(opsi_check_dtype_eq(v, "dout", dout, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_dtype_eq(v, "dq", dq, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_dtype_eq(v, "dk", dk, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_dtype_eq(v, "dv", dv, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_shape(v, "dout", dout, o->ndim, o->shape, "o's shape"));
  OPSI_TRY(opsi_check_shape(v, "dq", dq, q->ndim, q->shape, "q's shape"));
  OPSI_TRY(opsi_check_shape(v, "dk", dk, k->ndim, k->shape, "k's shape"));
  OPSI_TRY(opsi_check_shape(v, "dv", dv, val->ndim, val->shape, "v's shape"));
  const opsi_operand operands[] = {
      {"q", q, 0, {NULL, NULL}},
      {"k", k, 0, {NULL, NULL}},
      {"v", val, 0, {NULL, NULL}},
      {"o", o, 0, {NULL, NULL}},
      {"lse", lse, 0, {NULL, NULL}},
      {"dout", dout, 0, {NULL, NULL}},
      {"params->attn_mask", p.attn_mask, 0, {NULL, NULL}},
      {"params->cu_seqlens_q", p.cu_seqlens_q, 0, {NULL, NULL}},
      {"params->cu_seqlens_k", p.cu_seqlens_k, 0, {NULL, NULL}},
      {"dq", dq, 1, {NULL, NULL}},
      {"dk", dk, 1, {NULL, NULL}},
      {"dv", dv, 1, {NULL, NULL}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, (int)(sizeof operands / sizeof operands[0])));

  if (a->varlen) {
    ba->dout = packed_as_batched(dout, a->batch);
    ba->dq = packed_as_batched(dq, a->batch);
    ba->dk = packed_as_batched(dk, a->batch);
    ba->dv = packed_as_batched(dv, a->batch);
  } else {
    ba->dout = *dout, ba->dq = *dq, ba->dk = *dk, ba->dv = *dv;
  }
  pr->op = OPS_OP_SDPA_BACKWARD; /* its flags are the forward's (OPSI_F_LSE with them) */
  add_rows(pr, (const ops_tensor *const[]){dout, dq, dk, dv});
  if (pr->backend == OPS_DEVICE_CUDA && v->mode == OPSI_RUN) ba->geom = device_bwd_geom(ba);
  *empty = n_dq == 0 && n_dk == 0 && n_dv == 0;
  return OPS_OK;
}

static ops_status sdpa_backward_entry(const opsi_vctx *vc, const ops_sdpa_params *params, const ops_tensor *q,
                                      const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                                      const ops_tensor *lse, const ops_tensor *dout, const ops_tensor *dq,
                                      const ops_tensor *dk, const ops_tensor *dv, void *workspace,
                                      size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_sdpa_bwd_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(sdpa_backward_prepare(vc, params, q, k, v, o, lse, dout, dq, dk, dv, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

ops_status ops_sdpa_backward(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                             const ops_tensor *k, const ops_tensor *v, const ops_tensor *o, const ops_tensor *lse,
                             const ops_tensor *dout, const ops_tensor *dq, const ops_tensor *dk,
                             const ops_tensor *dv, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_sdpa_backward", handle, OPSI_RUN, NULL, NULL};
  return sdpa_backward_entry(&vc, params, q, k, v, o, lse, dout, dq, dk, dv, workspace, workspace_bytes);
}

ops_status ops_sdpa_backward_workspace_size(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                                            const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                                            const ops_tensor *lse, const ops_tensor *dout, const ops_tensor *dq,
                                            const ops_tensor *dk, const ops_tensor *dv, size_t *bytes) {
  const opsi_vctx vc = {"ops_sdpa_backward_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return sdpa_backward_entry(&vc, params, q, k, v, o, lse, dout, dq, dk, dv, NULL, 0);
}

ops_status ops_sdpa_backward_explain(ops_handle handle, const ops_sdpa_params *params, const ops_tensor *q,
                                     const ops_tensor *k, const ops_tensor *v, const ops_tensor *o,
                                     const ops_tensor *lse, const ops_tensor *dout, const ops_tensor *dq,
                                     const ops_tensor *dk, const ops_tensor *dv, ops_explain *out) {
  const opsi_vctx vc = {"ops_sdpa_backward_explain", handle, OPSI_EXPLAIN, NULL, out};
  return sdpa_backward_entry(&vc, params, q, k, v, o, lse, dout, dq, dk, dv, NULL, 0);
}
