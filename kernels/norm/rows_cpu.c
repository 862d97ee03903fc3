/*
 * Row-wise ops on the CPU, in double, reading each row up to three times rather than
 * buffering it (no workspace):
 *   norm:    s = x (+ residual); LayerNorm subtracts the mean and divides by sqrt(var + eps)
 *            (two passes: the mean first, then the centred variance, so no cancellation);
 *            RMSNorm divides by sqrt(mean(s^2) + eps). The last pass writes y and
 *            residual_out, reading element j before writing it, which makes y == x and
 *            residual_out == residual (in place) safe.
 *   softmax: max, then the sum of exp(scale x - max), then the quotient. A row whose
 *            maximum is -inf (every entry -inf) gives zeros.
 * A row of length 0 has mean and rstd NaN (0 / 0).
 */
#include "kernels/norm/rows_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/norm/rows_args.h"

enum { OP_X, OP_Y, OP_RES, OP_RES_OUT, OP_MEAN, OP_RSTD };

static const int64_t k_zero_strides[OPS_MAX_DIMS] = {0};

/* An iterator over the rows: one operand per tensor, in the OP_* order; absent tensors
 * get stride 0 so their offsets stay 0 and are never used. */
static void rows_iter_init(opsi_iter *it, const opsi_rows_args *a) {
  opsi_iter_init(it, a->lead_ndim, a->lead_shape);
  opsi_iter_add(it, a->x.strides);
  opsi_iter_add(it, a->y.strides);
  opsi_iter_add(it, a->has_residual ? a->residual.strides : k_zero_strides);
  opsi_iter_add(it, a->has_residual_out ? a->residual_out.strides : k_zero_strides);
  opsi_iter_add(it, a->has_mean_out ? a->mean_out.strides : k_zero_strides);
  opsi_iter_add(it, a->has_rstd_out ? a->rstd_out.strides : k_zero_strides);
}

static inline double row_sum_input(const opsi_rows_args *a, const opsi_iter *it, int64_t j) {
  const int last = a->x.ndim - 1;
  double s = opsi_load(a->x.data, it->off[OP_X] + j * a->x.strides[last], a->x.dtype);
  if (a->has_residual) {
    s += opsi_load(a->residual.data, it->off[OP_RES] + j * a->residual.strides[last],
                   a->residual.dtype);
  }
  return s;
}

ops_status opsi_norm_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_rows_args *a = (const opsi_rows_args *)argp;
  if (a->rows == 0) return OPS_OK;
  const int last = a->x.ndim - 1;
  const double n = (double)a->cols;
  opsi_iter it;
  rows_iter_init(&it, a);
  do {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < a->cols; ++j) mean += row_sum_input(a, &it, j);
    mean /= n;
    for (int64_t j = 0; j < a->cols; ++j) {
      const double s = row_sum_input(a, &it, j);
      const double c = a->rms ? s : s - mean;
      var += c * c;
    }
    var /= n;
    const double rstd = 1.0 / sqrt(var + a->eps);
    for (int64_t j = 0; j < a->cols; ++j) {
      const double s = row_sum_input(a, &it, j);
      double v = (a->rms ? s : s - mean) * rstd * opsi_load(a->weight.data, j * a->weight.strides[0],
                                                            a->weight.dtype);
      if (a->has_bias) v += opsi_load(a->bias.data, j * a->bias.strides[0], a->bias.dtype);
      if (a->has_residual_out) {
        opsi_store(a->residual_out.data, it.off[OP_RES_OUT] + j * a->residual_out.strides[last],
                   a->residual_out.dtype, s);
      }
      opsi_store(a->y.data, it.off[OP_Y] + j * a->y.strides[last], a->y.dtype, v);
    }
    if (a->has_mean_out) ((float *)a->mean_out.data)[it.off[OP_MEAN]] = (float)mean;
    if (a->has_rstd_out) ((float *)a->rstd_out.data)[it.off[OP_RSTD]] = (float)rstd;
  } while (opsi_iter_next(&it));
  return OPS_OK;
}

ops_status opsi_softmax_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_rows_args *a = (const opsi_rows_args *)argp;
  if (a->rows == 0 || a->cols == 0) return OPS_OK;
  const int last = a->x.ndim - 1;
  const int64_t xs = a->x.strides[last], ys = a->y.strides[last];
  opsi_iter it;
  rows_iter_init(&it, a);
  do {
    double m = -INFINITY;
    for (int64_t j = 0; j < a->cols; ++j) {
      const double s = a->scale * opsi_load(a->x.data, it.off[OP_X] + j * xs, a->x.dtype);
      if (s > m || s != s) m = s; /* NaN propagates */
    }
    double sum = 0.0;
    if (m != -INFINITY) {
      for (int64_t j = 0; j < a->cols; ++j) {
        sum += exp(a->scale * opsi_load(a->x.data, it.off[OP_X] + j * xs, a->x.dtype) - m);
      }
    }
    for (int64_t j = 0; j < a->cols; ++j) {
      double v = 0.0;
      if (m != -INFINITY) {
        v = exp(a->scale * opsi_load(a->x.data, it.off[OP_X] + j * xs, a->x.dtype) - m) / sum;
      }
      opsi_store(a->y.data, it.off[OP_Y] + j * ys, a->y.dtype, v);
    }
  } while (opsi_iter_next(&it));
  return OPS_OK;
}
