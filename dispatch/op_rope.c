/*
 * ops_rope and ops_kv_cache_append: validation, the frequencies (in double, once, here), and
 * the problem. Both ops lower to opsi_rope_args: streams of heads copied token by token,
 * rotated or not, to their own view or to the cache slots a slot mapping names.
 */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/rope/rope_args.h"
#include "opslib/ops.h"
#include "runtime/error.h"

#define INDEX_DTYPES (OPSI_DTYPE_BIT(OPS_DTYPE_I32) | OPSI_DTYPE_BIT(OPS_DTYPE_I64))

void ops_rope_params_init(ops_rope_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->style = OPS_ROPE_NEOX;
  p->theta = 10000.0f;
  p->scaling = OPS_ROPE_SCALING_NONE;
  p->factor = 1.0f;
  p->low_freq_factor = 1.0f;
  p->high_freq_factor = 4.0f;
  p->original_max_positions = 8192;
}

void ops_kv_cache_append_params_init(ops_kv_cache_append_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
}

/* The settings of p against a head dim; *rotary receives r (0 meaning the head dim resolved). */
static ops_status check_settings(const opsi_vctx *v, const char *where, const ops_rope_params *p, int64_t head_dim,
                                 int32_t *rotary) {
  if (p->style != OPS_ROPE_NEOX && p->style != OPS_ROPE_GPTJ) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s->style: expected OPS_ROPE_NEOX (0) or OPS_ROPE_GPTJ (1), got %d",
                     v->fn, where, (int)p->style);
  }
  if (!(isfinite(p->theta) && p->theta > 0.0f)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s->theta: expected a finite value > 0, got %g", v->fn, where,
                     (double)p->theta);
  }
  const int64_t r = p->rotary_dim == 0 ? head_dim : p->rotary_dim;
  if (p->rotary_dim < 0 || r % 2 != 0 || r > head_dim || r > 2 * OPSI_ROPE_MAX_FREQS) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: %s->rotary_dim: expected 0 (the head dim) or an even count <= the head dim (%lld) "
                     "and <= %d, got %d%s",
                     v->fn, where, (long long)head_dim, 2 * OPSI_ROPE_MAX_FREQS, (int)p->rotary_dim,
                     p->rotary_dim == 0 ? " (the head dim is odd or too large)" : "");
  }
  if (p->scaling < OPS_ROPE_SCALING_NONE || p->scaling > OPS_ROPE_SCALING_LLAMA3) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: %s->scaling: expected OPS_ROPE_SCALING_NONE, _LINEAR or _LLAMA3 (0..2), got %d", v->fn,
                     where, (int)p->scaling);
  }
  if (p->scaling != OPS_ROPE_SCALING_NONE && !(isfinite(p->factor) && p->factor > 0.0f)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s->factor: expected a finite value > 0, got %g", v->fn, where,
                     (double)p->factor);
  }
  if (p->scaling == OPS_ROPE_SCALING_LLAMA3) {
    if (!(isfinite(p->low_freq_factor) && p->low_freq_factor > 0.0f && isfinite(p->high_freq_factor) &&
          p->high_freq_factor > p->low_freq_factor)) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                       "%s: %s->low_freq_factor, high_freq_factor: expected finite 0 < low < high, got %g and %g",
                       v->fn, where, (double)p->low_freq_factor, (double)p->high_freq_factor);
    }
    if (p->original_max_positions <= 0) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s->original_max_positions: expected > 0, got %d", v->fn,
                       where, (int)p->original_max_positions);
    }
  }
  *rotary = (int32_t)r;
  return OPS_OK;
}

/* f_i = theta^(-2i / r), then the scaling (Llama 3.1: by wavelength against the original
 * context: short ones kept, long ones divided by factor, a linear blend in 1 / wavelength). */
static void frequencies(const ops_rope_params *p, int32_t r, double *f) {
  const double pi = 3.14159265358979323846;
  for (int32_t i = 0; i < r / 2; ++i) {
    double x = pow((double)p->theta, -2.0 * (double)i / (double)r);
    if (p->scaling == OPS_ROPE_SCALING_LINEAR) {
      x /= (double)p->factor;
    } else if (p->scaling == OPS_ROPE_SCALING_LLAMA3) {
      const double orig = (double)p->original_max_positions, wavelen = 2.0 * pi / x;
      const double lo = (double)p->low_freq_factor, hi = (double)p->high_freq_factor;
      if (wavelen > orig / lo) {
        x /= (double)p->factor;
      } else if (wavelen >= orig / hi) {
        const double smooth = (orig / wavelen - lo) / (hi - lo);
        x = (1.0 - smooth) * x / (double)p->factor + smooth * x;
      }
    }
    f[i] = x;
  }
}

/* [T, ...] as [1, T, ...]: one batch entry whose sequence is every token. */
static ops_tensor with_batch(const ops_tensor *t) {
  ops_tensor r = *t;
  r.ndim = t->ndim + 1;
  for (int i = t->ndim; i > 0; --i) {
    r.shape[i] = t->shape[i - 1];
    r.strides[i] = t->strides[i - 1];
  }
  r.shape[0] = 1;
  r.strides[0] = 0;
  return r;
}

/* An int32 / int64 index tensor of the given leading shape. */
static ops_status check_index(const opsi_vctx *v, const char *arg, const ops_tensor *t, int ndim,
                              const int64_t *shape, const char *what) {
  OPSI_TRY(opsi_check_tensor(v, arg, t, NULL));
  OPSI_TRY(opsi_check_dtype_in(v, arg, t, INDEX_DTYPES));
  return opsi_check_shape(v, arg, t, ndim, shape, what);
}

/* ---- ops_rope --------------------------------------------------------------------------- */

static ops_status rope_entry(const opsi_vctx *vc, const ops_rope_params *params, const ops_tensor *positions,
                             const ops_tensor *q, const ops_tensor *q_out, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_rope_params p;
  ops_rope_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_rope_params", params, sizeof p, &p));
  int64_t nq, nk = 0;
  OPSI_TRY(opsi_check_tensor(vc, "q", q, NULL));
  OPSI_TRY(opsi_check_ndim(vc, "q", q, 3, 4));
  OPSI_TRY(opsi_check_dtype_in(vc, "q", q, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_tensor(vc, "q_out", q_out, &nq));
  OPSI_TRY(opsi_check_dtype_eq(vc, "q_out", q_out, q->dtype, "q's dtype"));
  OPSI_TRY(opsi_check_shape(vc, "q_out", q_out, q->ndim, q->shape, "q's shape"));
  const int lead = q->ndim - 2;
  OPSI_TRY(check_index(vc, "positions", positions, lead, q->shape, "q's leading axes ([T] or [B, S])"));
  if ((p.k == NULL) != (p.k_out == NULL)) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: params->%s: expected a tensor with params->%s, got NULL", vc->fn,
                     p.k == NULL ? "k" : "k_out", p.k == NULL ? "k_out" : "k");
  }
  const int64_t head_dim = q->shape[q->ndim - 1];
  if (p.k != NULL) {
    OPSI_TRY(opsi_check_tensor(vc, "params->k", p.k, NULL));
    OPSI_TRY(opsi_check_dtype_eq(vc, "params->k", p.k, q->dtype, "q's dtype"));
    OPSI_TRY(opsi_check_ndim(vc, "params->k", p.k, q->ndim, q->ndim));
    for (int i = 0; i < lead; ++i) OPSI_TRY(opsi_check_extent(vc, "params->k", p.k, i, q->shape[i], "q's tokens"));
    OPSI_TRY(opsi_check_extent(vc, "params->k", p.k, q->ndim - 1, head_dim, "q's head dim"));
    OPSI_TRY(opsi_check_tensor(vc, "params->k_out", p.k_out, &nk));
    OPSI_TRY(opsi_check_dtype_eq(vc, "params->k_out", p.k_out, q->dtype, "q's dtype"));
    OPSI_TRY(opsi_check_shape(vc, "params->k_out", p.k_out, p.k->ndim, p.k->shape, "params->k's shape"));
  }
  int32_t rotary = 0;
  OPSI_TRY(check_settings(vc, "params", &p, head_dim, &rotary));
  const opsi_operand operands[] = {{"positions", positions, 0, {NULL, NULL}}, {"q", q, 0, {NULL, NULL}},
                                   {"params->k", p.k, 0, {NULL, NULL}},      {"q_out", q_out, 1, {q, NULL}},
                                   {"params->k_out", p.k_out, 1, {p.k, NULL}}};
  OPSI_TRY(opsi_check_aliasing(vc, operands, 5));

  opsi_rope_args a;
  memset(&a, 0, sizeof a);
  const ops_tensor *in[2] = {q, p.k}, *out[2] = {q_out, p.k_out};
  a.n_streams = p.k != NULL ? 2 : 1;
  for (int s = 0; s < a.n_streams; ++s) {
    a.s[s].in = in[s]->ndim == 4 ? *in[s] : with_batch(in[s]);
    a.s[s].out = out[s]->ndim == 4 ? *out[s] : with_batch(out[s]);
    a.s[s].rotate = 1;
  }
  a.positions = lead == 2 ? *positions : with_batch(positions);
  a.batch = a.s[0].in.shape[0];
  a.seq = a.s[0].in.shape[1];
  a.style = p.style;
  a.rotary_dim = rotary;
  frequencies(&p, rotary, a.inv_freq);

  /* an empty q or k may carry extents whose products or sums pass int64 */
  int64_t tokens = a.batch, heads;
  OPSI_TRY(opsi_mul_size(vc, "q: tokens (batch x seqlen)", &tokens, a.seq));
  if (__builtin_add_overflow(a.s[0].in.shape[2], p.k != NULL ? a.s[1].in.shape[2] : 0, &heads)) {
    return opsi_fail(OPS_ERR_BAD_SIZE, "%s: params->k: heads: expected q's heads plus k's at most 2^63 - 1, got more",
                     vc->fn);
  }

  opsi_problem pr;
  opsi_problem_init(&pr, OPS_OP_ROPE, vc->handle);
  pr.dtype = pr.out_dtype = q->dtype;
  pr.variant = p.style;
  pr.dims[OPSI_ROPE_TOKENS] = tokens;
  pr.dims[OPSI_ROPE_HEADS] = heads;
  pr.dims[OPSI_ROPE_D] = head_dim;
  pr.dims[OPSI_ROPE_ROTARY] = rotary;
  for (int s = 0; s < a.n_streams; ++s) {
    opsi_problem_add_row_layout(&pr, in[s]);
    opsi_problem_add_row_layout(&pr, out[s]);
  }
  return opsi_finish(vc, &pr, &a, nq == 0 && nk == 0, workspace, workspace_bytes);
}

ops_status ops_rope(ops_handle handle, const ops_rope_params *params, const ops_tensor *positions, const ops_tensor *q,
                    const ops_tensor *q_out, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_rope", handle, OPSI_RUN, NULL, NULL};
  return rope_entry(&vc, params, positions, q, q_out, workspace, workspace_bytes);
}

ops_status ops_rope_workspace_size(ops_handle handle, const ops_rope_params *params, const ops_tensor *positions,
                                   const ops_tensor *q, const ops_tensor *q_out, size_t *bytes) {
  const opsi_vctx vc = {"ops_rope_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return rope_entry(&vc, params, positions, q, q_out, NULL, 0);
}

ops_status ops_rope_explain(ops_handle handle, const ops_rope_params *params, const ops_tensor *positions,
                            const ops_tensor *q, const ops_tensor *q_out, ops_explain *out) {
  const opsi_vctx vc = {"ops_rope_explain", handle, OPSI_EXPLAIN, NULL, out};
  return rope_entry(&vc, params, positions, q, q_out, NULL, 0);
}

/* ---- ops_kv_cache_append ---------------------------------------------------------------- */

/* On a CPU handle, every slot is < the cache's capacity (negative ones skip). */
static ops_status check_slots(const opsi_vctx *v, const ops_tensor *slots, int64_t capacity) {
  if (slots->device.type != OPS_DEVICE_CPU || v->mode != OPSI_RUN) return OPS_OK;
  for (int64_t t = 0; t < slots->shape[0]; ++t) {
    const int64_t s = opsi_index_at(slots, t * slots->strides[0]);
    if (s >= capacity) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                       "%s: slot_mapping[%lld]: expected a slot in 0..%lld (pages x page_size of k_cache) or < 0 "
                       "to skip, got %lld",
                       v->fn, (long long)t, (long long)capacity - 1, (long long)s);
    }
  }
  return OPS_OK;
}

/* A token's heads of t (its last two axes, heads and dims) are one unit-stride run. */
static int heads_one_run(const ops_tensor *t) {
  const int h = t->ndim - 2, d = t->ndim - 1;
  return (t->shape[d] <= 1 || t->strides[d] == 1) && (t->shape[h] <= 1 || t->strides[h] == t->shape[d]);
}

static ops_status append_entry(const opsi_vctx *vc, const ops_kv_cache_append_params *params, const ops_tensor *k,
                               const ops_tensor *val, const ops_tensor *slots, const ops_tensor *k_cache,
                               const ops_tensor *v_cache, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_kv_cache_append_params p;
  ops_kv_cache_append_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_kv_cache_append_params", params, sizeof p, &p));
  int64_t nk, nv;
  OPSI_TRY(opsi_check_tensor(vc, "k", k, &nk));
  OPSI_TRY(opsi_check_ndim(vc, "k", k, 3, 3));
  OPSI_TRY(opsi_check_dtype_in(vc, "k", k, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_tensor(vc, "v", val, &nv));
  OPSI_TRY(opsi_check_dtype_eq(vc, "v", val, k->dtype, "k's dtype"));
  OPSI_TRY(opsi_check_ndim(vc, "v", val, 3, 3));
  OPSI_TRY(opsi_check_extent(vc, "v", val, 0, k->shape[0], "k's tokens"));
  OPSI_TRY(opsi_check_extent(vc, "v", val, 1, k->shape[1], "k's heads"));
  OPSI_TRY(check_index(vc, "slot_mapping", slots, 1, k->shape, "k's tokens"));
  OPSI_TRY(opsi_check_tensor(vc, "k_cache", k_cache, NULL));
  OPSI_TRY(opsi_check_dtype_eq(vc, "k_cache", k_cache, k->dtype, "k's dtype"));
  OPSI_TRY(opsi_check_ndim(vc, "k_cache", k_cache, 4, 4));
  OPSI_TRY(opsi_check_extent(vc, "k_cache", k_cache, 2, k->shape[1], "k's heads"));
  OPSI_TRY(opsi_check_extent(vc, "k_cache", k_cache, 3, k->shape[2], "k's head dim"));
  OPSI_TRY(opsi_check_tensor(vc, "v_cache", v_cache, NULL));
  OPSI_TRY(opsi_check_dtype_eq(vc, "v_cache", v_cache, k->dtype, "k's dtype"));
  const int64_t v_shape[4] = {k_cache->shape[0], k_cache->shape[1], val->shape[1], val->shape[2]};
  OPSI_TRY(opsi_check_shape(vc, "v_cache", v_cache, 4, v_shape, "k_cache's pages and page size, v's heads and dim"));
  int32_t rotary = 0;
  ops_rope_params rope;
  ops_rope_params_init(&rope);
  if (p.rope != NULL) {
    if (p.rope->struct_size != sizeof rope) {
      return opsi_fail(OPS_ERR_STRUCT_SIZE,
                       "%s: params->rope->struct_size: expected %zu (sizeof(ops_rope_params); fill it with "
                       "ops_rope_params_init), got %u",
                       vc->fn, sizeof rope, (unsigned)p.rope->struct_size);
    }
    memcpy(&rope, p.rope, sizeof rope);
    if (rope.k != NULL || rope.k_out != NULL) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->rope->%s: expected NULL (k is the op's own operand), got a tensor",
                       vc->fn, rope.k != NULL ? "k" : "k_out");
    }
    OPSI_TRY(check_settings(vc, "params->rope", &rope, k->shape[2], &rotary));
    if (p.positions == NULL) {
      return opsi_fail(OPS_ERR_NULL_POINTER, "%s: params->positions: expected a tensor with params->rope, got NULL",
                       vc->fn);
    }
    OPSI_TRY(check_index(vc, "params->positions", p.positions, 1, k->shape, "k's tokens"));
  } else if (p.positions != NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->positions: expected NULL without params->rope, got a tensor",
                     vc->fn);
  }
  const opsi_operand operands[] = {{"k", k, 0, {NULL, NULL}},
                                   {"v", val, 0, {NULL, NULL}},
                                   {"slot_mapping", slots, 0, {NULL, NULL}},
                                   {"params->positions", p.positions, 0, {NULL, NULL}},
                                   {"k_cache", k_cache, 1, {NULL, NULL}},
                                   {"v_cache", v_cache, 1, {NULL, NULL}}};
  OPSI_TRY(opsi_check_aliasing(vc, operands, 6));
  int64_t capacity = k_cache->shape[0];
  OPSI_TRY(opsi_mul_size(vc, "the cache's capacity (k_cache's pages x page_size)", &capacity, k_cache->shape[1]));
  OPSI_TRY(check_slots(vc, slots, capacity));

  opsi_rope_args a;
  memset(&a, 0, sizeof a);
  a.n_streams = 2;
  a.s[0].in = with_batch(k);
  a.s[1].in = with_batch(val);
  a.s[0].out = *k_cache;
  a.s[1].out = *v_cache;
  a.s[0].to_slots = a.s[1].to_slots = 1;
  a.s[0].rotate = p.rope != NULL;
  a.slots = *slots;
  if (p.positions != NULL) a.positions = with_batch(p.positions);
  a.batch = 1;
  a.seq = k->shape[0];
  a.page_size = k_cache->shape[1];
  a.capacity = capacity;
  a.style = rope.style;
  a.rotary_dim = rotary;
  if (rotary > 0) frequencies(&rope, rotary, a.inv_freq);

  opsi_problem pr;
  opsi_problem_init(&pr, OPS_OP_KV_CACHE_APPEND, vc->handle);
  pr.dtype = pr.out_dtype = k->dtype;
  pr.variant = rope.style;
  pr.dims[OPSI_ROPE_TOKENS] = k->shape[0];
  pr.dims[OPSI_ROPE_HEADS] = k->shape[1];
  pr.dims[OPSI_ROPE_D] = k->shape[2];
  pr.dims[OPSI_ROPE_ROTARY] = rotary;
  pr.dims[OPSI_ROPE_HEADS_V] = val->shape[1];
  pr.dims[OPSI_ROPE_DV] = val->shape[2];
  if (p.rope != NULL) pr.flags |= OPSI_F_ROPE;
  if (!heads_one_run(k) || !heads_one_run(val) || !heads_one_run(k_cache) || !heads_one_run(v_cache)) {
    pr.flags |= OPSI_F_HEADS_APART;
  }
  opsi_problem_add_row_layout(&pr, k);
  opsi_problem_add_row_layout(&pr, val);
  opsi_problem_add_row_layout(&pr, k_cache);
  opsi_problem_add_row_layout(&pr, v_cache);
  return opsi_finish(vc, &pr, &a, nk == 0 && nv == 0, workspace, workspace_bytes);
}

ops_status ops_kv_cache_append(ops_handle handle, const ops_kv_cache_append_params *params, const ops_tensor *k,
                               const ops_tensor *v, const ops_tensor *slot_mapping, const ops_tensor *k_cache,
                               const ops_tensor *v_cache, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_kv_cache_append", handle, OPSI_RUN, NULL, NULL};
  return append_entry(&vc, params, k, v, slot_mapping, k_cache, v_cache, workspace, workspace_bytes);
}

ops_status ops_kv_cache_append_workspace_size(ops_handle handle, const ops_kv_cache_append_params *params,
                                              const ops_tensor *k, const ops_tensor *v, const ops_tensor *slot_mapping,
                                              const ops_tensor *k_cache, const ops_tensor *v_cache, size_t *bytes) {
  const opsi_vctx vc = {"ops_kv_cache_append_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return append_entry(&vc, params, k, v, slot_mapping, k_cache, v_cache, NULL, 0);
}

ops_status ops_kv_cache_append_explain(ops_handle handle, const ops_kv_cache_append_params *params,
                                       const ops_tensor *k, const ops_tensor *v, const ops_tensor *slot_mapping,
                                       const ops_tensor *k_cache, const ops_tensor *v_cache, ops_explain *out) {
  const opsi_vctx vc = {"ops_kv_cache_append_explain", handle, OPSI_EXPLAIN, NULL, out};
  return append_entry(&vc, params, k, v, slot_mapping, k_cache, v_cache, NULL, 0);
}
