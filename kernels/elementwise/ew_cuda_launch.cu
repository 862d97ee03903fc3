/*
 * The elementwise family's CUDA launchers: each op's validated arguments become one
 * opsi_ew_gpu_program (see ew_gpu_program.h), run by the vec16 or the strided kernel.
 */
#include <string.h>

#include "kernels/elementwise/dropout_args.h"
#include "kernels/elementwise/ew_args.h"
#include "kernels/elementwise/ew_chain_args.h"
#include "kernels/elementwise/ew_cuda.h"
#include "kernels/elementwise/ew_gpu_kernels.cuh"

extern template void opsi::launch_ew_program<float>(const opsi_ew_gpu_program &, int, int, cudaStream_t, int,
                                                     int32_t *, int32_t *);
extern template void opsi::launch_ew_program<__half>(const opsi_ew_gpu_program &, int, int, cudaStream_t, int,
                                                      int32_t *, int32_t *);
extern template void opsi::launch_ew_program<__nv_bfloat16>(const opsi_ew_gpu_program &, int, int, cudaStream_t,
                                                             int, int32_t *, int32_t *);

namespace {

/* y's index space with its dims collapsed: extents of 1 dropped, and neighbours merged
 * where every operand steps through them as through one dim. */
void set_geometry(opsi_ew_gpu_program *g, const ops_tensor *y, const ops_tensor *const *ops, int n) {
  int nd = 0;
  for (int d = 0; d < y->ndim; ++d) {
    if (y->shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; merge && k < n; ++k) {
      merge = ops[k]->strides[d] * y->shape[d] == g->stride[k][nd - 1];
    }
    if (merge) {
      g->shape[nd - 1] *= y->shape[d];
      for (int k = 0; k < n; ++k) g->stride[k][nd - 1] = ops[k]->strides[d];
    } else {
      g->shape[nd] = y->shape[d];
      for (int k = 0; k < n; ++k) g->stride[k][nd] = ops[k]->strides[d];
      ++nd;
    }
  }
  g->ndim = nd;
}

opsi_gpu_step step(int32_t kind, int32_t fn, int32_t operand, int32_t operand_first, double a, double b) {
  opsi_gpu_step s;
  s.kind = kind, s.fn = fn, s.operand = operand, s.operand_first = operand_first;
  s.a = (float)a, s.b = (float)b;
  return s;
}

/* Runs the program; `views` are y, x, then the operands, all broadcast to y's shape. */
ops_status run(const opsi_launch *ctx, opsi_ew_gpu_program *g, const ops_tensor *const *views, int n_ops, int vec) {
  const ops_tensor *y = views[0];
  g->y = y->data;
  g->x = views[1]->data;
  for (int k = 0; k < n_ops; ++k) g->operands[k] = views[2 + k]->data;
  g->dtype = y->dtype;
  int64_t numel = 1;
  for (int d = 0; d < y->ndim; ++d) numel *= y->shape[d];
  g->numel = numel;
  set_geometry(g, y, views, 2 + n_ops);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  const int sms = ctx->sm_count;
  int32_t *grid = ctx->info->grid, *block = ctx->info->block;
  OPSI_DISPATCH_FLOAT(g->dtype, T, opsi::launch_ew_program<T>(*g, n_ops, vec, stream, sms, grid, block));
  ctx->info->grid[1] = ctx->info->grid[2] = ctx->info->block[1] = ctx->info->block[2] = 1;
  return OPS_OK;
}

/* sin_affine, unary, binary, scale as programs. */
ops_status ew_op(const opsi_launch *ctx, const void *argp, int vec) {
  const opsi_ew_args *e = static_cast<const opsi_ew_args *>(argp);
  opsi_ew_gpu_program g;
  memset(&g, 0, sizeof g);
  const ops_tensor *views[2 + OPSI_CHAIN_MAX_OPERANDS] = {&e->y, &e->in[0]};
  int n_ops = 0;
  switch (e->kind) {
    case OPSI_EW_SIN_AFFINE:
      if (!e->has_in[1] && !e->has_in[2]) {
        g.steps[g.n_steps++] = step(OPSI_STEP_SIN_AFFINE, 0, 0, 0, e->a, e->b);
        break;
      }
      /* a or b as tensors: v * a (+ b), then sin */
      if (e->has_in[1]) {
        views[2 + n_ops] = &e->in[1];
        g.steps[g.n_steps++] = step(OPSI_STEP_BINARY, OPS_BINARY_MUL, n_ops++, 0, 0, 0);
      } else {
        g.steps[g.n_steps++] = step(OPSI_STEP_SCALE, 0, 0, 0, e->a, 0);
      }
      if (e->has_in[2]) {
        views[2 + n_ops] = &e->in[2];
        g.steps[g.n_steps++] = step(OPSI_STEP_BINARY, OPS_BINARY_ADD, n_ops++, 0, 0, 0);
        g.steps[g.n_steps++] = step(OPSI_STEP_SIN_AFFINE, 0, 0, 0, 1.0, 0.0);
      } else {
        g.steps[g.n_steps++] = step(OPSI_STEP_SIN_AFFINE, 0, 0, 0, 1.0, e->b);
      }
      break;
    case OPSI_EW_UNARY:
      g.steps[g.n_steps++] = step(OPSI_STEP_UNARY, e->fn, 0, 0, 0, 0);
      break;
    case OPSI_EW_BINARY:
      views[2 + n_ops++] = &e->in[1];
      g.steps[g.n_steps++] = step(OPSI_STEP_BINARY, e->fn, 0, 0, 0, 0);
      break;
    default: /* scale */
      g.steps[g.n_steps++] = step(OPSI_STEP_SCALE, 0, 0, 0, e->a, 0);
      break;
  }
  return run(ctx, &g, views, n_ops, vec);
}

ops_status chain_op(const opsi_launch *ctx, const void *argp, int vec) {
  const opsi_ew_chain_args *c = static_cast<const opsi_ew_chain_args *>(argp);
  opsi_ew_gpu_program g;
  memset(&g, 0, sizeof g);
  const ops_tensor *views[2 + OPSI_CHAIN_MAX_OPERANDS] = {&c->y, &c->x};
  for (int k = 0; k < c->n_operands; ++k) views[2 + k] = &c->operands[k];
  for (int s = 0; s < c->n_steps; ++s) {
    const opsi_chain_step &st = c->steps[s];
    g.steps[s] = step(st.kind, st.fn, st.operand, st.operand_first, st.a, st.b);
  }
  g.n_steps = c->n_steps;
  return run(ctx, &g, views, c->n_operands, vec);
}

ops_status dropout_op(const opsi_launch *ctx, const void *argp, int vec) {
  const opsi_dropout_args *d = static_cast<const opsi_dropout_args *>(argp);
  opsi_ew_gpu_program g;
  memset(&g, 0, sizeof g);
  const ops_tensor *views[2] = {&d->y, &d->x};
  const double keep_scale = d->p < 1.0 ? 1.0 / (1.0 - d->p) : 0.0;
  /* p = 1 drops everything: the threshold 2 is above every uniform */
  g.steps[g.n_steps++] = step(OPSI_STEP_DROPOUT, 0, 0, 0, d->p < 1.0 ? d->p : 2.0, keep_scale);
  g.seed = d->seed;
  g.offset = d->offset;
  return run(ctx, &g, views, 0, vec);
}

}  // namespace

extern "C" ops_status opsi_ew_cuda_vec16(const opsi_launch *ctx, const void *args) { return ew_op(ctx, args, 1); }
extern "C" ops_status opsi_ew_cuda_strided(const opsi_launch *ctx, const void *args) { return ew_op(ctx, args, 0); }
extern "C" ops_status opsi_ew_chain_cuda_vec16(const opsi_launch *ctx, const void *args) {
  return chain_op(ctx, args, 1);
}
extern "C" ops_status opsi_ew_chain_cuda_strided(const opsi_launch *ctx, const void *args) {
  return chain_op(ctx, args, 0);
}
extern "C" ops_status opsi_dropout_cuda_vec16(const opsi_launch *ctx, const void *args) {
  return dropout_op(ctx, args, 1);
}
extern "C" ops_status opsi_dropout_cuda_strided(const opsi_launch *ctx, const void *args) {
  return dropout_op(ctx, args, 0);
}
