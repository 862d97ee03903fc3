/*
 * ops_gemm on the CPU: each output element is one double-precision sum over K in index
 * order, then the epilogue D = act(alpha * acc + beta * C + bias) + residual, rounded once
 * into D's dtype. C and residual may be D itself: each is read at (i, j) just before D is
 * written there. No workspace.
 *
 * Two loop orders with the same arithmetic (bitwise the same results): the reference takes
 * one output at a time (a dot product: A's row and B's column walked along K), the panel
 * kernel a row of A against PANEL columns of B at once (B's rows walked along N, each A
 * element loaded once a panel), which reads an N-major B in order and a K-major one across.
 */
#include "kernels/gemm/gemm_cpu.h"

#include "kernels/common/cpu_elem.h"
#include "kernels/common/pointwise.h"
#include "kernels/gemm/gemm_args.h"

static inline int64_t off3(const ops_tensor *t, int64_t b, int64_t i, int64_t j) {
  return b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
}

/* The epilogue of output (bt, i, j) from its accumulated product. */
static void store_out(const opsi_gemm_args *g, int64_t bt, int64_t i, int64_t j, double acc) {
  double v = g->alpha * acc;
  if (g->has_c) v += g->beta * opsi_load(g->c.data, off3(&g->c, bt, i, j), g->c.dtype);
  if (g->has_bias) v += opsi_load(g->bias.data, off3(&g->bias, bt, i, j), g->bias.dtype);
  v = opsi_act_apply(g->activation, v);
  if (g->has_residual) v += opsi_load(g->residual.data, off3(&g->residual, bt, i, j), g->residual.dtype);
  opsi_store(g->d.data, off3(&g->d, bt, i, j), g->d.dtype, v);
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
        store_out(g, bt, i, j, acc);
      }
    }
  }
  return OPS_OK;
}

enum { PANEL = 64 };

ops_status opsi_gemm_cpu_panel(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_gemm_args *g = (const opsi_gemm_args *)argp;
  double acc[PANEL];
  for (int64_t bt = 0; bt < g->batch; ++bt) {
    for (int64_t i = 0; i < g->m; ++i) {
      for (int64_t j0 = 0; j0 < g->n; j0 += PANEL) {
        const int64_t w = g->n - j0 < PANEL ? g->n - j0 : PANEL;
        for (int64_t j = 0; j < w; ++j) acc[j] = 0.0;
        for (int64_t p = 0; p < g->k; ++p) {
          const double a = opsi_load(g->a.data, off3(&g->a, bt, i, p), g->a.dtype);
          const int64_t row = off3(&g->b, bt, p, j0);
          for (int64_t j = 0; j < w; ++j) {
            acc[j] += a * opsi_load(g->b.data, row + j * g->b.strides[2], g->b.dtype);
          }
        }
        for (int64_t j = 0; j < w; ++j) store_out(g, bt, i, j0 + j, acc[j]);
      }
    }
  }
  return OPS_OK;
}
