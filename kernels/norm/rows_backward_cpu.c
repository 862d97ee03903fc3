/*
 * Backward of the row-wise ops on the CPU, in double, no workspace:
 *   norms:   per row, the two means mean(g) and mean(g xhat), g = dy w, then dx;
 *            dweight / dbias column by column over every row (a second walk of dy and x).
 *   softmax: per row, sum(dy y), then dx = scale y (dy - sum).
 * dweight / dbias are summed before any dx is written, and each row's dx after its sums,
 * so dx == dy (in place) is safe.
 */
#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/norm/rows_args.h"
#include "kernels/norm/rows_cpu.h"

enum { OP_X, OP_DX, OP_DY, OP_MEAN, OP_RSTD };

static const int64_t k_zero[OPS_MAX_DIMS] = {0};

static void iter_init(opsi_iter *it, const opsi_rows_args *a) {
  opsi_iter_init(it, a->lead_ndim, a->lead_shape);
  opsi_iter_add(it, a->x.strides);
  opsi_iter_add(it, a->y.strides);
  opsi_iter_add(it, a->dy.strides);
  opsi_iter_add(it, a->has_mean_out ? a->mean_out.strides : k_zero);
  opsi_iter_add(it, a->has_rstd_out ? a->rstd_out.strides : k_zero);
}

#define AT(t, op, j) opsi_load((t).data, it.off[op] + (j) * (t).strides[last], (t).dtype)

ops_status opsi_norm_backward_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_rows_args *a = (const opsi_rows_args *)argp;
  const int last = a->x.ndim - 1;
  const double n = (double)a->cols;
  /* dweight and dbias first: dx may be dy itself (in place) */
  for (int64_t j = 0; (a->has_dweight || a->has_dbias) && j < a->cols; ++j) {
    double dw = 0.0, db = 0.0;
    if (a->rows > 0) {
      opsi_iter it;
      iter_init(&it, a);
      do {
        const double mean = a->rms ? 0.0 : ((const float *)a->mean_out.data)[it.off[OP_MEAN]];
        const double rstd = ((const float *)a->rstd_out.data)[it.off[OP_RSTD]];
        const double dy = AT(a->dy, OP_DY, j);
        dw += dy * (AT(a->x, OP_X, j) - mean) * rstd;
        db += dy;
      } while (opsi_iter_next(&it));
    }
    if (a->has_dweight) opsi_store(a->dweight.data, j * a->dweight.strides[0], a->dweight.dtype, dw);
    if (a->has_dbias) opsi_store(a->dbias.data, j * a->dbias.strides[0], a->dbias.dtype, db);
  }
  if (a->rows > 0 && a->cols > 0) {
    opsi_iter it;
    iter_init(&it, a);
    do {
      const double mean = a->rms ? 0.0 : ((const float *)a->mean_out.data)[it.off[OP_MEAN]];
      const double rstd = ((const float *)a->rstd_out.data)[it.off[OP_RSTD]];
      double sg = 0.0, sgx = 0.0;
      for (int64_t j = 0; j < a->cols; ++j) {
        const double g = AT(a->dy, OP_DY, j) * opsi_load(a->weight.data, j * a->weight.strides[0], a->weight.dtype);
        sg += g;
        sgx += g * (AT(a->x, OP_X, j) - mean) * rstd;
      }
      sg /= n;
      sgx /= n;
      for (int64_t j = 0; j < a->cols; ++j) {
        const double g = AT(a->dy, OP_DY, j) * opsi_load(a->weight.data, j * a->weight.strides[0], a->weight.dtype);
        const double xhat = (AT(a->x, OP_X, j) - mean) * rstd;
        const double dx = rstd * (g - (a->rms ? 0.0 : sg) - xhat * sgx);
        opsi_store(a->y.data, it.off[OP_DX] + j * a->y.strides[last], a->y.dtype, dx);
      }
    } while (opsi_iter_next(&it));
  }
  return OPS_OK;
}

ops_status opsi_softmax_backward_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_rows_args *a = (const opsi_rows_args *)argp;
  if (a->rows == 0 || a->cols == 0) return OPS_OK;
  const int last = a->x.ndim - 1;
  opsi_iter it;
  iter_init(&it, a);
  do {
    double dot = 0.0;
    for (int64_t j = 0; j < a->cols; ++j) dot += AT(a->dy, OP_DY, j) * AT(a->x, OP_X, j);
    for (int64_t j = 0; j < a->cols; ++j) {
      const double dx = a->scale * AT(a->x, OP_X, j) * (AT(a->dy, OP_DY, j) - dot);
      opsi_store(a->y.data, it.off[OP_DX] + j * a->y.strides[last], a->y.dtype, dx);
    }
  } while (opsi_iter_next(&it));
  return OPS_OK;
}
