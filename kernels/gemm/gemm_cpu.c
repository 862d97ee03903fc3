/*
 * ops_gemm on the CPU: each output element is one double-precision dot product over K in
 * index order, then the epilogue D = act(alpha * acc + beta * C + bias) + residual, rounded
 * once into D's dtype. C and residual may be D itself: each is read at (i, j) just before
 * D is written there. No workspace.
 */
#include "kernels/gemm/gemm_cpu.h"

#include "kernels/common/cpu_elem.h"
#include "kernels/common/pointwise.h"
#include "kernels/gemm/gemm_args.h"

static inline int64_t off3(const ops_tensor *t, int64_t b, int64_t i, int64_t j) {
  return b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
}

ops_status opsi_gemm_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_gemm_args *g = (const opsi_gemm_args *)argp;
  for (int64_t bt = 0; bt < g->batch; ++bt) {
    for (int64_t i = 0; i < g->m; ++i) {
      for (int64_t j = 0; j < g->n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < g->k; ++p) {
          acc += opsi_load(g->a.data, off3(&g->a, bt, i, p), g->a.dtype) *
                 opsi_load(g->b.data, off3(&g->b, bt, p, j), g->b.dtype);
        }
        double v = g->alpha * acc;
        if (g->has_c) v += g->beta * opsi_load(g->c.data, off3(&g->c, bt, i, j), g->c.dtype);
        if (g->has_bias) v += opsi_load(g->bias.data, off3(&g->bias, bt, i, j), g->bias.dtype);
        v = opsi_act_apply(g->activation, v);
        if (g->has_residual) {
          v += opsi_load(g->residual.data, off3(&g->residual, bt, i, j), g->residual.dtype);
        }
        opsi_store(g->d.data, off3(&g->d, bt, i, j), g->d.dtype, v);
      }
    }
  }
  return OPS_OK;
}
