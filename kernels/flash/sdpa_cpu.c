/*
 * ops_sdpa on the CPU, in double: for each (batch, query head, query row) the masked,
 * scaled scores of the whole key row (a KV cache: the sequence's kv_lens keys, through the
 * block table when paged) are formed, then one exact softmax (max-subtracted)
 * and the weighted sum of V. A row that sees no key gets O = 0 and LSE = -inf.
 *
 * Workspace: the score row (max_seqlen_k doubles) and the output accumulator (Dv doubles),
 * so the reference allocates nothing, like every kernel.
 */
#include "kernels/flash/sdpa_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/flash/sdpa_args.h"

size_t opsi_sdpa_cpu_workspace(const opsi_problem *p) {
  /* the key count (a cache's capacity) may be near 2^63 when another extent is 0: a size that
   * does not fit asks for SIZE_MAX, which no caller has */
  int64_t n, bytes;
  if (__builtin_add_overflow(p->dims[OPSI_SDPA_SK], p->dims[OPSI_SDPA_DV], &n) ||
      __builtin_mul_overflow(n, (int64_t)sizeof(double), &bytes) || (uint64_t)bytes > SIZE_MAX)
    return SIZE_MAX;
  return (size_t)bytes;
}

/* Element d of key (value) row j of sequence b, head h: through the block table when paged
 * (validation has checked the page ids the sequence's length uses). */
static inline int64_t key_off(const opsi_sdpa_args *a, const ops_tensor *t, int64_t b, int64_t k0, int64_t j,
                              int64_t h, int64_t d) {
  if (!a->paged) return opsi_sdpa_off4(t, b, k0 + j, h, d);
  const int64_t page = a->block_table[b * a->bt_sb + (j / a->page_size) * a->bt_sp];
  return opsi_sdpa_off4(t, page, j % a->page_size, h, d);
}

ops_status opsi_sdpa_cpu(const opsi_launch *ctx, const void *argp) {
  const opsi_sdpa_args *a = (const opsi_sdpa_args *)argp;
  double *scores = (double *)ctx->workspace;
  double *acc = scores != NULL ? scores + a->seqlen_k : NULL; /* no workspace: no keys, no value dims */
  const int64_t group = a->heads_q / a->heads_kv;

  for (int64_t b = 0; b < a->batch; ++b) {
    const int64_t q0 = a->varlen ? a->cu_seqlens_q[b * a->cu_stride_q] : 0;
    const int64_t k0 = a->cu_seqlens_k != NULL ? a->cu_seqlens_k[b * a->cu_stride_k] : 0;
    const int64_t sq = a->varlen ? a->cu_seqlens_q[(b + 1) * a->cu_stride_q] - q0 : a->seqlen_q;
    const int64_t sk = a->cache                  ? a->kv_lens[b * a->kv_lens_stride]
                       : a->cu_seqlens_k != NULL ? a->cu_seqlens_k[(b + 1) * a->cu_stride_k] - k0
                                                 : a->seqlen_k;
    const int64_t diag = sk - sq;
    for (int64_t h = 0; h < a->heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < sq; ++i) {
        double row_max = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          if (!opsi_sdpa_key_visible(a, i, j, diag)) {
            scores[j] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int64_t d = 0; d < a->head_dim; ++d) {
            dot += opsi_load(a->q.data, opsi_sdpa_off4(&a->q, b, q0 + i, h, d), a->q.dtype) *
                   opsi_load(a->k.data, key_off(a, &a->k, b, k0, j, hk, d), a->k.dtype);
          }
          double s = a->scale * dot;
          if (a->has_mask) {
            s += opsi_load(a->mask.data, opsi_sdpa_off4(&a->mask, b, h, i, j), a->mask.dtype);
          }
          scores[j] = s;
          if (s > row_max || s != s) row_max = s; /* NaN propagates */
        }
        double lse = -INFINITY;
        for (int64_t d = 0; d < a->head_dim_v; ++d) acc[d] = 0.0;
        if (row_max != -INFINITY) { /* some key is visible */
          double sum = 0.0;
          for (int64_t j = 0; j < sk; ++j) {
            const double p = exp(scores[j] - row_max);
            if (p == 0.0) continue;
            sum += p;
            for (int64_t d = 0; d < a->head_dim_v; ++d) {
              acc[d] += p * opsi_load(a->v.data, key_off(a, &a->v, b, k0, j, hk, d), a->v.dtype);
            }
          }
          for (int64_t d = 0; d < a->head_dim_v; ++d) acc[d] /= sum;
          lse = row_max + log(sum);
        }
        for (int64_t d = 0; d < a->head_dim_v; ++d) {
          opsi_store(a->o.data, opsi_sdpa_off4(&a->o, b, q0 + i, h, d), a->o.dtype, acc[d]);
        }
        if (a->has_lse) {
          const int64_t off = b * a->lse.strides[0] + h * a->lse.strides[1] + (q0 + i) * a->lse.strides[2];
          ((float *)a->lse.data)[off] = (float)lse;
        }
      }
    }
  }
  return OPS_OK;
}
