/*
 * The validated operands of one ops_reduce call, normalized by the dispatcher: the axes
 * of x are split into kept axes (the outer walk, one output each) and reduced axes (the
 * inner walk). y is seen through y_strides, one stride per kept axis of x. Both groups are
 * collapsed: extents of 1 dropped, neighbours merged where they step as one dim.
 */
#ifndef OPSLIB_KERNELS_REDUCE_REDUCE_ARGS_H_
#define OPSLIB_KERNELS_REDUCE_REDUCE_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

typedef struct opsi_reduce_args {
  int32_t op; /* ops_reduce_op */
  ops_tensor x;
  void *y_data;
  int32_t y_dtype;
  int kept_ndim;
  int64_t kept_shape[OPS_MAX_DIMS];
  int64_t kept_x_strides[OPS_MAX_DIMS];
  int64_t kept_y_strides[OPS_MAX_DIMS];
  int red_ndim;
  int64_t red_shape[OPS_MAX_DIMS];
  int64_t red_x_strides[OPS_MAX_DIMS];
  int64_t out_count; /* elements of y */
  int64_t red_count; /* elements reduced into each output */
} opsi_reduce_args;

#endif /* OPSLIB_KERNELS_REDUCE_REDUCE_ARGS_H_ */
