/*
 * The validated operands of the row-wise ops (layernorm, rmsnorm, softmax): each works on
 * rows of length `cols` along the last axis. The rows are addressed by a multi-index over
 * the leading axes (lead_shape), so any strides work, with no copy to make rows contiguous.
 * mean_out / rstd_out have the leading shape itself.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_ARGS_H_
#define OPSLIB_KERNELS_NORM_ROWS_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

typedef struct opsi_rows_args {
  int32_t op; /* ops_op: which of the row-wise ops */
  int lead_ndim;
  int64_t lead_shape[OPS_MAX_DIMS];
  int64_t rows; /* product of lead_shape */
  int64_t cols;
  ops_tensor x, y;
  /* norms only; each valid when its has_ flag is set */
  ops_tensor weight, bias, residual, residual_out, mean_out, rstd_out;
  int has_bias, has_residual, has_residual_out, has_mean_out, has_rstd_out;
  int rms;      /* 1: RMSNorm, 0: LayerNorm */
  double eps;   /* norms */
  double scale; /* softmax */
  /* backward: dy in, x as above (softmax: the forward's y), y receives dx; the saved
   * statistics come in through mean_out / rstd_out (inputs then); dweight / dbias out */
  int backward;
  ops_tensor dy, dweight, dbias;
  int has_dweight, has_dbias;
} opsi_rows_args;

#endif /* OPSLIB_KERNELS_NORM_ROWS_ARGS_H_ */
