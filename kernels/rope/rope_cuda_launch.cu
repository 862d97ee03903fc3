/* ops_rope's and ops_kv_cache_append's CUDA launchers: opsi_rope_args -> the geometry of
 * rope_kernel, by value (the frequencies travel as kernel parameters). */
#include <string.h>

#include "kernels/rope/rope_args.h"
#include "kernels/rope/rope_cuda.h"
#include "kernels/rope/rope_gpu.cuh"

extern template void opsi::launch_rope<float>(const opsi::rope_gpu_geom &, int, int, cudaStream_t, int, int32_t *,
                                              int32_t *);
extern template void opsi::launch_rope<__half>(const opsi::rope_gpu_geom &, int, int, cudaStream_t, int, int32_t *,
                                               int32_t *);
extern template void opsi::launch_rope<__nv_bfloat16>(const opsi::rope_gpu_geom &, int, int, cudaStream_t, int,
                                                      int32_t *, int32_t *);

namespace {

ops_status run(const opsi_launch *ctx, const void *argp, int vec, int warp_tokens, int rows = 0) {
  const opsi_rope_args *a = static_cast<const opsi_rope_args *>(argp);
  opsi::rope_gpu_geom g;
  memset(&g, 0, sizeof g);
  g.n_streams = a->n_streams;
  for (int k = 0; k < a->n_streams; ++k) {
    const opsi_rope_stream &st = a->s[k];
    opsi::rope_gpu_stream &d = g.s[k];
    d.in = st.in.data;
    d.out = st.out.data;
    memcpy(d.in_s, st.in.strides, sizeof d.in_s);
    memcpy(d.out_s, st.out.strides, sizeof d.out_s);
    d.heads = (int32_t)st.in.shape[2];
    d.dim = (int32_t)st.in.shape[3];
    d.rotate = st.rotate;
    d.to_slots = st.to_slots;
    g.any_rotate |= st.rotate;
  }
  g.style = a->style;
  g.rotary_dim = a->rotary_dim;
  g.batch = a->batch;
  g.seq = a->seq;
  g.page_size = a->page_size;
  g.capacity = a->capacity;
  if (a->positions.dtype != 0) {
    g.positions = a->positions.data;
    g.pos_s[0] = a->positions.strides[0];
    g.pos_s[1] = a->positions.strides[1];
    g.pos_i64 = a->positions.dtype == OPS_DTYPE_I64;
  }
  if (a->slots.dtype != 0) {
    g.slots = a->slots.data;
    g.slot_s = a->slots.strides[0];
    g.slot_i64 = a->slots.dtype == OPS_DTYPE_I64;
  }
  memcpy(g.inv_freq, a->inv_freq, sizeof g.inv_freq);
  g.warp_tokens = warp_tokens;
  int32_t *grid = ctx->info->grid, *block = ctx->info->block;
  grid[1] = grid[2] = block[1] = block[2] = 1;
  OPSI_DISPATCH_FLOAT(a->s[0].in.dtype, T,
                      opsi::launch_rope<T>(g, vec, rows, (cudaStream_t)ctx->stream, ctx->sm_count, grid, block));
  return OPS_OK;
}

}  // namespace

extern "C" ops_status opsi_rope_cuda_vec16(const opsi_launch *ctx, const void *args) { return run(ctx, args, 1, 0); }
extern "C" ops_status opsi_rope_cuda_strided(const opsi_launch *ctx, const void *args) { return run(ctx, args, 0, 0); }
extern "C" ops_status opsi_kv_cache_append_cuda_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, 1, 1);
}
extern "C" ops_status opsi_kv_cache_append_cuda_strided(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, 0, 1);
}
extern "C" ops_status opsi_kv_cache_append_cuda_rows(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, 1, 1, 1);
}
