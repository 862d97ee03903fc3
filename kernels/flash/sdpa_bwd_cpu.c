/*
 * ops_sdpa_backward on the CPU, in double. For each sequence and KV head, the dk and dv of its
 * keys accumulate over the query heads of the group and their rows, in index order:
 *   p_j = exp(s_j - lse), s_j = scale q . k_j + mask_ij (visible keys; p_j = 0 elsewhere),
 *   D = dout . o,  ds_j = p_j (dout . v_j - D),
 *   dq = scale sum_j ds_j k_j,  dk_j += scale ds_j q,  dv_j += p_j dout.
 * The forward's lse (f32) gives the probabilities, as the GPU kernels take them; a row whose
 * lse is -inf saw no key and contributes nothing (dq = 0). Then the group's dk and dv are
 * stored, zeros for the keys no query saw.
 */
#include "kernels/flash/sdpa_bwd_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"

size_t opsi_sdpa_bwd_cpu_workspace(const opsi_problem *p) {
  const int64_t *d = p->dims;
  int64_t n, bytes;
  /* a size that does not fit asks for SIZE_MAX, which no caller has */
  if (__builtin_add_overflow(d[OPSI_SDPA_D], d[OPSI_SDPA_DV], &n) || __builtin_add_overflow(n, 1, &n) ||
      __builtin_mul_overflow(n, d[OPSI_SDPA_SK], &n) || __builtin_add_overflow(n, d[OPSI_SDPA_D], &n) ||
      __builtin_mul_overflow(n, (int64_t)sizeof(double), &bytes) || (uint64_t)bytes > SIZE_MAX)
    return SIZE_MAX;
  return (size_t)bytes;
}

static inline double ld(const ops_tensor *t, int64_t off) { return opsi_load(t->data, off, t->dtype); }

ops_status opsi_sdpa_bwd_cpu(const opsi_launch *ctx, const void *argp) {
  const opsi_sdpa_bwd_args *ba = (const opsi_sdpa_bwd_args *)argp;
  const opsi_sdpa_args *a = &ba->fwd;
  const int64_t d = a->head_dim, dv = a->head_dim_v, group = a->heads_kv > 0 ? a->heads_q / a->heads_kv : 1;
  double *dk_acc = (double *)ctx->workspace; /* [seqlen_k, d] */
  double *dv_acc = dk_acc != NULL ? dk_acc + a->seqlen_k * d : NULL;
  double *prob = dv_acc != NULL ? dv_acc + a->seqlen_k * dv : NULL;
  double *dq_acc = prob != NULL ? prob + a->seqlen_k : NULL;

  for (int64_t b = 0; b < a->batch; ++b) {
    const int64_t q0 = a->varlen ? a->cu_seqlens_q[b * a->cu_stride_q] : 0;
    const int64_t k0 = a->varlen ? a->cu_seqlens_k[b * a->cu_stride_k] : 0;
    const int64_t sq = a->varlen ? a->cu_seqlens_q[(b + 1) * a->cu_stride_q] - q0 : a->seqlen_q;
    const int64_t sk = a->varlen ? a->cu_seqlens_k[(b + 1) * a->cu_stride_k] - k0 : a->seqlen_k;
    const int64_t diag = sk - sq;
    for (int64_t hk = 0; hk < a->heads_kv; ++hk) {
      for (int64_t x = 0; x < sk * d; ++x) dk_acc[x] = 0.0;
      for (int64_t x = 0; x < sk * dv; ++x) dv_acc[x] = 0.0;
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t i = 0; i < sq; ++i) {
          for (int64_t c = 0; c < d; ++c) dq_acc[c] = 0.0;
          const int64_t lse_off =
              b * a->lse.strides[0] + h * a->lse.strides[1] + (q0 + i) * a->lse.strides[2];
          const double lse = (double)((const float *)a->lse.data)[lse_off];
          if (lse != -INFINITY) {
            double dot_o = 0.0; /* D = dout . o */
            for (int64_t c = 0; c < dv; ++c) {
              dot_o += ld(&ba->dout, opsi_sdpa_off4(&ba->dout, b, q0 + i, h, c)) *
                       ld(&a->o, opsi_sdpa_off4(&a->o, b, q0 + i, h, c));
            }
            for (int64_t j = 0; j < sk; ++j) {
              prob[j] = 0.0;
              if (!opsi_sdpa_key_visible(a, i, j, diag)) continue;
              double s = 0.0;
              for (int64_t c = 0; c < d; ++c) {
                s += ld(&a->q, opsi_sdpa_off4(&a->q, b, q0 + i, h, c)) *
                     ld(&a->k, opsi_sdpa_off4(&a->k, b, k0 + j, hk, c));
              }
              s *= a->scale;
              if (a->has_mask) s += ld(&a->mask, opsi_sdpa_off4(&a->mask, b, h, i, j));
              prob[j] = exp(s - lse);
            }
            for (int64_t j = 0; j < sk; ++j) {
              const double p = prob[j];
              if (p == 0.0) continue;
              double dp = 0.0; /* dout . v_j */
              for (int64_t c = 0; c < dv; ++c) {
                const double g = ld(&ba->dout, opsi_sdpa_off4(&ba->dout, b, q0 + i, h, c));
                dp += g * ld(&a->v, opsi_sdpa_off4(&a->v, b, k0 + j, hk, c));
                dv_acc[j * dv + c] += p * g;
              }
              const double ds = p * (dp - dot_o) * a->scale;
              for (int64_t c = 0; c < d; ++c) {
                dq_acc[c] += ds * ld(&a->k, opsi_sdpa_off4(&a->k, b, k0 + j, hk, c));
                dk_acc[j * d + c] += ds * ld(&a->q, opsi_sdpa_off4(&a->q, b, q0 + i, h, c));
              }
            }
          }
          for (int64_t c = 0; c < d; ++c)
            opsi_store(ba->dq.data, opsi_sdpa_off4(&ba->dq, b, q0 + i, h, c), ba->dq.dtype, dq_acc[c]);
        }
      }
      for (int64_t j = 0; j < sk; ++j) {
        for (int64_t c = 0; c < d; ++c) {
          opsi_store(ba->dk.data, opsi_sdpa_off4(&ba->dk, b, k0 + j, hk, c), ba->dk.dtype, dk_acc[j * d + c]);
        }
        for (int64_t c = 0; c < dv; ++c) {
          opsi_store(ba->dv.data, opsi_sdpa_off4(&ba->dv, b, k0 + j, hk, c), ba->dv.dtype,
                     dv_acc[j * dv + c]);
        }
      }
    }
  }
  return OPS_OK;
}
