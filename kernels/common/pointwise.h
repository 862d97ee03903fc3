/*
 * The pointwise functions of the catalog in double precision: ops_unary, GEMM epilogue
 * activations and ops_binary all evaluate them here, so the CPU backend defines each once.
 */
#ifndef OPSLIB_KERNELS_COMMON_POINTWISE_H_
#define OPSLIB_KERNELS_COMMON_POINTWISE_H_

#include <math.h>

#include "opslib/ops.h"

static inline double opsi_act_apply(int32_t fn, double x) {
  switch (fn) {
    case OPS_ACT_NONE: return x;
    case OPS_ACT_RELU: return x > 0.0 ? x : (x == x ? 0.0 : x); /* NaN stays NaN */
    case OPS_ACT_GELU_TANH: {
      const double k = 0.79788456080286535588; /* sqrt(2 / pi) */
      return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    case OPS_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
    case OPS_ACT_SILU: return x / (1.0 + exp(-x));
    case OPS_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case OPS_ACT_TANH: return tanh(x);
    case OPS_ACT_EXP: return exp(x);
    case OPS_ACT_NEG: return -x;
    case OPS_ACT_ABS: return fabs(x);
    case OPS_ACT_SIN: return sin(x);
    default: return NAN;
  }
}

static inline int opsi_act_known(int32_t fn) { return fn >= OPS_ACT_NONE && fn <= OPS_ACT_SIN; }

static inline double opsi_binary_apply(int32_t op, double a, double b) {
  switch (op) {
    case OPS_BINARY_ADD: return a + b;
    case OPS_BINARY_SUB: return a - b;
    case OPS_BINARY_MUL: return a * b;
    case OPS_BINARY_DIV: return a / b;
    case OPS_BINARY_MAX: return (a != a || b != b) ? NAN : (a > b ? a : b);
    case OPS_BINARY_MIN: return (a != a || b != b) ? NAN : (a < b ? a : b);
    default: return NAN;
  }
}

static inline int opsi_binary_known(int32_t op) { return op >= OPS_BINARY_ADD && op <= OPS_BINARY_MIN; }

#endif /* OPSLIB_KERNELS_COMMON_POINTWISE_H_ */
