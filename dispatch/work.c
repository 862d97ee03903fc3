/* Each op's minimal work: the bytes it must move through device memory (every input read
 * once, every output written once) and its floating-point operations. */
#include <math.h>
#include <stdint.h>

#include "dispatch/cost.h"
#include "opslib/ops.h"

double opsi_tiled_extent(const opsi_problem *p, int dim) {
  if (p->op == OPS_OP_SDPA && dim == OPSI_SDPA_SQ) return ceil(opsi_sdpa_rows_per_batch(p));
  return (double)p->dims[dim];
}

void opsi_work(const opsi_problem *p, double *bytes, double *flops) {
  const double in = (double)ops_dtype_size((ops_dtype)p->dtype);
  const double out = (double)ops_dtype_size((ops_dtype)p->out_dtype);
  const int64_t *d = p->dims;
  double b = 0.0, f = 0.0;
  switch (p->op) {
    case OPS_OP_SDPA:
    case OPS_OP_SDPA_BACKWARD: {
      /* Varlen: the sequences' lengths are on the device, so each batch entry counts as
       * tokens_q / batch query rows of a sequence of the longest length (exact when all are
       * equal; an upper bound of the pairs otherwise). */
      const double bh = (double)d[OPSI_SDPA_B] * (double)d[OPSI_SDPA_HQ];
      const double bhk = (double)d[OPSI_SDPA_B] * (double)d[OPSI_SDPA_HKV];
      const double sq = opsi_sdpa_rows_per_batch(p), sk = (double)d[OPSI_SDPA_SK];
      const double pairs =
          d[OPSI_SDPA_SQ] > 0
              ? opsi_sdpa_visible_pairs(d[OPSI_SDPA_SQ], d[OPSI_SDPA_SK], p->extra[0], p->extra[1]) * sq /
                    (double)d[OPSI_SDPA_SQ]
              : 0.0;
      const double dqk = (double)d[OPSI_SDPA_D], dv = (double)d[OPSI_SDPA_DV];
      f = 2.0 * bh * pairs * (dqk + dv);
      b = in * (bh * sq * dqk + bhk * sk * (dqk + dv)) + out * bh * sq * dv;
      if (p->flags & OPSI_F_LSE) b += 4.0 * bh * sq;
      if (p->op == OPS_OP_SDPA_BACKWARD) { /* five products for the forward's two; o, dout in, dq, dk, dv out */
        f *= 2.5;
        b += in * bh * sq * dv + out * (bh * sq * dqk + bhk * sk * (dqk + dv));
      }
      break;
    }
    case OPS_OP_GEMM: {
      const double batch = (double)d[OPSI_GEMM_BATCH], m = (double)d[OPSI_GEMM_M], n = (double)d[OPSI_GEMM_N],
                   k = (double)d[OPSI_GEMM_K];
      f = 2.0 * batch * m * n * k;
      double mn_passes = 1.0 + ((p->flags & OPSI_F_BETA_C) ? 1.0 : 0.0) + ((p->flags & OPSI_F_RESIDUAL) ? 1.0 : 0.0);
      b = in * batch * (m * k + k * n) + out * batch * m * n * mn_passes;
      if (p->flags & OPSI_F_BIAS) b += out * n;
      break;
    }
    case OPS_OP_LAYERNORM:
    case OPS_OP_RMSNORM:
    case OPS_OP_SOFTMAX: {
      const double n = (double)d[OPSI_ROWS_ROWS] * (double)d[OPSI_ROWS_COLS];
      double passes = 2.0;
      if (p->flags & OPSI_F_RESIDUAL) passes += 1.0;
      if (p->flags & OPSI_F_RESIDUAL_OUT) passes += 1.0;
      b = in * n * passes + 4.0 * (double)d[OPSI_ROWS_COLS];
      if (p->flags & OPSI_F_STATS_OUT) b += 8.0 * (double)d[OPSI_ROWS_ROWS];
      f = (p->op == OPS_OP_SOFTMAX ? 4.0 : 7.0) * n;
      break;
    }
    case OPS_OP_LAYERNORM_BACKWARD:
    case OPS_OP_RMSNORM_BACKWARD:
    case OPS_OP_SOFTMAX_BACKWARD: { /* dy and x (softmax: y) read, dx written */
      const double rows = (double)d[OPSI_ROWS_ROWS], cols = (double)d[OPSI_ROWS_COLS], n = rows * cols;
      b = in * n * 3.0;
      if (p->op != OPS_OP_SOFTMAX_BACKWARD) {
        b += 4.0 * cols + 4.0 * rows * (p->op == OPS_OP_LAYERNORM_BACKWARD ? 2.0 : 1.0);
        if (p->flags & OPSI_F_DWEIGHT) b += 4.0 * cols;
        if (p->flags & OPSI_F_BIAS) b += 4.0 * cols;
      }
      f = (p->op == OPS_OP_SOFTMAX_BACKWARD ? 3.0 : 10.0) * n;
      break;
    }
    case OPS_OP_REDUCE: {
      const double n = (double)d[OPSI_REDUCE_OUT] * (double)d[OPSI_REDUCE_INNER];
      b = in * n + out * (double)d[OPSI_REDUCE_OUT];
      f = n;
      break;
    }
    case OPS_OP_ROPE:
    case OPS_OP_KV_CACHE_APPEND: { /* every element read and written once, an index a token */
      const double t = (double)d[OPSI_ROPE_TOKENS];
      const double n = t * ((double)d[OPSI_ROPE_HEADS] * (double)d[OPSI_ROPE_D] +
                            (double)d[OPSI_ROPE_HEADS_V] * (double)d[OPSI_ROPE_DV]);
      b = 2.0 * in * n + 8.0 * t * (p->op == OPS_OP_KV_CACHE_APPEND ? 2.0 : 1.0);
      f = 3.0 * t * (double)d[OPSI_ROPE_HEADS] * (double)d[OPSI_ROPE_ROTARY];
      break;
    }
    default: { /* elementwise: every input at most the output's size, one output */
      const double n = (double)d[OPSI_EW_NUMEL];
      b = out * n * (1.0 + (double)d[OPSI_EW_INPUTS]);
      f = 8.0 * n;
      break;
    }
  }
  *bytes = b;
  *flops = f;
}
