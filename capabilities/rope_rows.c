/* Capability rows of ops_rope and ops_kv_cache_append: one CPU reference, and one CUDA kernel
 * (kernels/rope/rope_gpu.cuh) built twice, with 16-byte vectors and for any strides; the
 * append has a third, for tokens whose heads are one run in every operand (no HEADS_APART). */
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/rope/rope_cpu.h"
#include "kernels/rope/rope_args.h"
#include "kernels/rope/rope_cuda.h"

#define ROPE_CPU_FIELDS(features)                                                                \
  OPSI_CPU_ROW_COMMON, .out_dtypes = OPSI_FLOAT_DTYPES, .variants = OPSI_ALL_VARIANTS,           \
  .flags = (features),                                                                           \
  .reduction_order = "none (pointwise); each pair read whole before it is written; angles in double", \
  .workspace_formula = "0", .launch = opsi_rope_cpu,                                             \
  .tests = "//tests/kernels:rope_test //tests/errors:rope_errors_test"

/* How a kernel takes its tokens: a block a token (rope: 20 KB a token for 40 heads of 128), or
 * a warp a token, 4 a block at once (the append: 4 KB a token for 8 heads of K and V). */
#define ROPE_BLOCK_TOKENS                                                                                    \
  .smem_bytes = 2048, .tiling = {{OPSI_ROPE_TOKENS, -1, -1}, {1, 0, 0}, {1, 0, 0}, {-1, -1, -1}, 16},       \
  .smem_layout = "cos and sin of up to 256 frequencies (f32, 2 KB); data in registers"
#define ROPE_WARP_TOKENS                                                                                     \
  .smem_bytes = 8192, .tiling = {{OPSI_ROPE_TOKENS, -1, -1}, {4, 0, 0}, {1, 0, 0}, {-1, -1, -1}, 16},       \
  .smem_layout = "a warp's cos and sin of up to 256 frequencies (f32, 2 KB a warp); data in registers"

#define ROPE_VEC16_FIELDS(features, TOKENS, WHO, EFF, LAUNCH)                                                \
  OPSI_CUDA_ROW_COMMON, .variants = OPSI_ALL_VARIANTS, .threads = 128, .stages = 0, TOKENS,                 \
  .deterministic = 1, .reduction_order = "none (pointwise)", .workspace_formula = "0",                      \
  .unit = OPSI_UNIT_FFMA, .bytes_factor = 1.0f, .tests = OPSI_GPU_TESTS,                                   \
  .flags = (features), .align = 16, .vector_bytes = 16, .efficiency = (EFF),                                \
  .dim_max = {[OPSI_ROPE_ROTARY] = 2 * OPSI_ROPE_MAX_FREQS},                                                \
  .dim_multiple = {[OPSI_ROPE_D] = 8, [OPSI_ROPE_ROTARY] = 16, [OPSI_ROPE_DV] = 8},                         \
  .roles = {{"token workers", 4, WHO ": cos / sin once into shared memory, then 16-byte vectors of pairs"}}, \
  .launch = LAUNCH

#define ROPE_STRIDED_FIELDS(features, TOKENS, WHO, LAUNCH)                                                   \
  OPSI_CUDA_ROW_COMMON, .variants = OPSI_ALL_VARIANTS, .threads = 128, .stages = 0, TOKENS,                 \
  .deterministic = 1, .reduction_order = "none (pointwise)", .workspace_formula = "0",                      \
  .unit = OPSI_UNIT_FFMA, .bytes_factor = 1.0f, .tests = OPSI_GPU_TESTS,                                   \
  .flags = (features), .align = 1, .vector_bytes = 0, .efficiency = 0.3f,                                   \
  .dim_max = {[OPSI_ROPE_ROTARY] = 2 * OPSI_ROPE_MAX_FREQS},                                                \
  .roles = {{"token workers", 4, WHO ": cos / sin once into shared memory, then a pair or element a thread"}}, \
  .launch = LAUNCH

const opsi_kernel_row opsi_rope_rows[] = {
    {.id = OPSI_KERNEL_CPU_ROPE, .name = "cpu_rope_ref", .op = OPS_OP_ROPE, ROPE_CPU_FIELDS(OPSI_F_STRIDED)},
    {.id = OPSI_KERNEL_CUDA_ROPE_VEC16, .name = "cuda_rope_vec16", .op = OPS_OP_ROPE,
     ROPE_VEC16_FIELDS(0, ROPE_BLOCK_TOKENS, "a block a token", 0.85f, opsi_rope_cuda_vec16)},
    {.id = OPSI_KERNEL_CUDA_ROPE_STRIDED, .name = "cuda_rope_strided", .op = OPS_OP_ROPE,
     ROPE_STRIDED_FIELDS(OPSI_F_STRIDED, ROPE_BLOCK_TOKENS, "a block a token", opsi_rope_cuda_strided)},
};
const size_t opsi_rope_row_count = sizeof opsi_rope_rows / sizeof opsi_rope_rows[0];

const opsi_kernel_row opsi_kv_cache_append_rows[] = {
    {.id = OPSI_KERNEL_CPU_KV_CACHE_APPEND, .name = "cpu_kv_cache_append_ref", .op = OPS_OP_KV_CACHE_APPEND,
     ROPE_CPU_FIELDS(OPSI_F_STRIDED | OPSI_F_ROPE | OPSI_F_HEADS_APART), .fuses = OPSI_F_ROPE},
    {.id = OPSI_KERNEL_CUDA_KV_CACHE_APPEND_VEC16, .name = "cuda_kv_cache_append_vec16",
     .op = OPS_OP_KV_CACHE_APPEND,
     ROPE_VEC16_FIELDS(OPSI_F_ROPE | OPSI_F_HEADS_APART, ROPE_WARP_TOKENS, "a warp a token", 0.85f,
                       opsi_kv_cache_append_cuda_vec16),
     .fuses = OPSI_F_ROPE},
    {.id = OPSI_KERNEL_CUDA_KV_CACHE_APPEND_STRIDED, .name = "cuda_kv_cache_append_strided",
     .op = OPS_OP_KV_CACHE_APPEND,
     ROPE_STRIDED_FIELDS(OPSI_F_STRIDED | OPSI_F_ROPE | OPSI_F_HEADS_APART, ROPE_WARP_TOKENS, "a warp a token",
                         opsi_kv_cache_append_cuda_strided),
     .fuses = OPSI_F_ROPE},
    /* a token's K and V rows whole: no head or dim arithmetic, the NeoX pair's other vector
     * loaded beside each K vector */
    {.id = OPSI_KERNEL_CUDA_KV_CACHE_APPEND_ROWS, .name = "cuda_kv_cache_append_rows",
     .op = OPS_OP_KV_CACHE_APPEND,
     ROPE_VEC16_FIELDS(OPSI_F_ROPE, ROPE_WARP_TOKENS, "a warp a token's K and V rows", 0.87f,
                       opsi_kv_cache_append_cuda_rows),
     .fuses = OPSI_F_ROPE},
};
const size_t opsi_kv_cache_append_row_count = sizeof opsi_kv_cache_append_rows / sizeof opsi_kv_cache_append_rows[0];
