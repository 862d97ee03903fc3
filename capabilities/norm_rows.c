/* Capability rows of the row-wise ops: ops_layernorm, ops_rmsnorm, ops_softmax. */
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/norm/rows_cpu.h"
#include "kernels/norm/rows_cuda.h"
#include "kernels/norm/rows_plan.h"

#define NORM_FLAGS (OPSI_F_BIAS | OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT | OPSI_F_STATS_OUT | OPSI_F_STRIDED)

/* ---- CUDA rows (kernels/norm/rows_*.cuh; work layout in rows_plan.c) ---------------- */

#define ROWS_CUDA_COMMON                                                                       \
  OPSI_CUDA_ROW_COMMON, .variants = OPSI_ALL_VARIANTS, .stages = 0, .deterministic = 1,        \
  .unit = OPSI_UNIT_FFMA, .tiling = OPSI_NO_TILING, .tests = OPSI_GPU_TESTS

#define FWD_ORDER(stats)                                                                        \
  "per row: " stats " over the thread's registers, butterfly shuffles, the row's warps in order"

/* The five forward variants of one op; `features` its flags (the vec16 ones drop STRIDED). */
#define FWD_ROWS(OPNAME, OPID, ID, features, fused, stats)                                                      \
  {                                                                                                            \
      .id = ID##_WARP_VEC16, .name = "cuda_" OPNAME "_warp_vec16", .op = OPID, ROWS_CUDA_COMMON,              \
      .flags = (features) & ~OPSI_F_STRIDED, .fuses = (fused), .align = 16,                                    \
      .dim_multiple = {[OPSI_ROWS_COLS] = 8}, .dim_max = {[OPSI_ROWS_COLS] = OPSI_ROWS_WARP_MAX_COLS},        \
      .threads = 256, .vector_bytes = 16, .efficiency = 0.92f, .bytes_factor = 1.0f,                            \
      .roles = {{"row warps", 8, "1 warp per row, 8 rows per block; a lane holds <= 32 floats of its row: "    \
                                 "one read, one write"}},                                                    \
      .smem_layout = "none: warp shuffles only", .smem_bytes = 128,                                            \
      .reduction_order = FWD_ORDER(stats), .workspace_formula = "0", .launch = opsi_rows_cuda_warp_vec16,       \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_BLOCK_VEC16, .name = "cuda_" OPNAME "_block_vec16", .op = OPID, ROWS_CUDA_COMMON,            \
      .flags = (features) & ~OPSI_F_STRIDED, .fuses = (fused), .align = 16,                                    \
      .dim_multiple = {[OPSI_ROWS_COLS] = 8}, .dim_max = {[OPSI_ROWS_COLS] = OPSI_ROWS_FWD_MAX_COLS},          \
      .threads = 1024, .vector_bytes = 16, .efficiency = 0.90f, .bytes_factor = 1.0f,                           \
      .roles = {{"row groups", 32, "1..32 warps a row, the fewest whose threads hold <= 64 bytes (4 vectors)"}}, \
      .smem_layout = "128 B: one partial per warp for the row's cross-warp reduction", .smem_bytes = 128,      \
      .reduction_order = FWD_ORDER(stats), .workspace_formula = "0", .launch = opsi_rows_cuda_block_vec16,      \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_BLOCK, .name = "cuda_" OPNAME "_block", .op = OPID, ROWS_CUDA_COMMON, .flags = (features),   \
      .fuses = (fused), .align = 1, .dim_max = {[OPSI_ROWS_COLS] = OPSI_ROWS_FWD_MAX_COLS}, .threads = 1024,   \
      .vector_bytes = 0, .efficiency = 0.55f, .bytes_factor = 1.0f,                                            \
      .roles = {{"row groups", 32, "1..32 warps per row, one element per load at any stride; "                 \
                                   "a thread holds <= 16 floats"}},                                        \
      .smem_layout = "128 B: one partial per warp for the row's cross-warp reduction", .smem_bytes = 128,      \
      .reduction_order = FWD_ORDER(stats), .workspace_formula = "0", .launch = opsi_rows_cuda_block,            \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_SPLIT, .name = "cuda_" OPNAME "_split", .op = OPID, ROWS_CUDA_COMMON, .flags = (features),   \
      .fuses = (fused), .align = 1, .threads = 256, .vector_bytes = 0, .efficiency = 0.75f,                    \
      .bytes_factor = 1.5f,                                                                                    \
      .roles = {{"slice blocks", 8, "a block per 8192-element slice of a row: stats pass, then apply pass "    \
                                    "(the row is read twice)"}},                                           \
      .smem_layout = "64 B: per-warp partials of the slice", .smem_bytes = 64,                                 \
      .reduction_order = "per slice: lane-strided partials, butterfly, warps in order; slices merged in order",\
      .workspace_formula = "rows * slices * 8 bytes, slices = ceil(N / 8192)",                                 \
      .workspace = opsi_rows_split_workspace, .launch = opsi_rows_cuda_split,                                  \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_SPLIT_VEC16, .name = "cuda_" OPNAME "_split_vec16", .op = OPID, ROWS_CUDA_COMMON,            \
      .flags = (features) & ~OPSI_F_STRIDED, .fuses = (fused), .align = 16,                                    \
      .dim_multiple = {[OPSI_ROWS_COLS] = 8}, .threads = 256, .vector_bytes = 16, .efficiency = 0.85f,         \
      .bytes_factor = 1.5f,                                                                                    \
      .roles = {{"slice blocks", 8, "a block per 8192-element slice, 16-byte loads 4 deep: stats, then apply"}}, \
      .smem_layout = "64 B: per-warp partials of the slice", .smem_bytes = 64,                                 \
      .reduction_order = "per slice: lane-strided partials, butterfly, warps in order; slices merged in order",\
      .workspace_formula = "rows * slices * 8 bytes, slices = ceil(N / 8192)",                                 \
      .workspace = opsi_rows_split_workspace, .launch = opsi_rows_cuda_split_vec16,                            \
  }

#define BWD_ORDER "per row: sums over registers, butterfly, warps in order; dweight / dbias: " \
  "per-thread over its group's rows, then the groups' partial rows in order"

#define STREAM_ORDER "per row: lane-strided sums, butterfly, warps in order; dweight / dbias: each block's " \
  "rows in order, then the blocks' partial rows in order"
#define STREAM_WS "groups * N * 4 bytes per requested dweight / dbias, groups = clamp(2^22 / N, 32, 128) " \
  "capped at the rows (rows_plan.c), else 0"

/* The four backward variants of one op; `held` floats per thread in the register ones. */
#define BWD_ROWS(OPNAME, OPID, ID, features, max_cols, held_text, ws_vec, ws_block, ws_stream)                 \
  {                                                                                                            \
      .id = ID##_VEC16, .name = "cuda_" OPNAME "_vec16", .op = OPID, ROWS_CUDA_COMMON,                         \
      .flags = (features) & ~OPSI_F_STRIDED, .align = 16, .dim_multiple = {[OPSI_ROWS_COLS] = 8},              \
      .dim_max = {[OPSI_ROWS_COLS] = (max_cols)}, .threads = 1024, .vector_bytes = 16, .efficiency = 0.85f,    \
      .bytes_factor = 1.05f,                                                                                   \
      .roles = {{"row groups", 32, "1..32 warps a row, the fewest whose threads hold " held_text}}, \
      .smem_layout = "256 B: two partials per warp (the row's two sums reduced together)", .smem_bytes = 256, \
      .reduction_order = BWD_ORDER,                                                                            \
      .workspace_formula = "groups * N * 4 bytes per requested dweight / dbias (rows_plan.c), else 0",         \
      .workspace = ws_vec, .launch = opsi_rows_cuda_bwd_vec16,                                                 \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_BLOCK, .name = "cuda_" OPNAME "_block", .op = OPID, ROWS_CUDA_COMMON, .flags = (features),   \
      .align = 1, .dim_max = {[OPSI_ROWS_COLS] = (max_cols)}, .threads = 1024, .vector_bytes = 0,              \
      .efficiency = 0.45f, .bytes_factor = 1.05f,                                                              \
      .roles = {{"row groups", 32, "1..32 warps a row, one element a load at any stride; <= " held_text}}, \
      .smem_layout = "256 B: two partials per warp (the row's two sums reduced together)", .smem_bytes = 256, \
      .reduction_order = BWD_ORDER,                                                                            \
      .workspace_formula = "groups * N * 4 bytes per requested dweight / dbias (rows_plan.c), else 0",         \
      .workspace = ws_block, .launch = opsi_rows_cuda_bwd_block,                                               \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_STREAM, .name = "cuda_" OPNAME "_stream", .op = OPID, ROWS_CUDA_COMMON, .flags = (features), \
      .align = 1, .threads = OPSI_ROWS_STREAM_THREADS, .vector_bytes = 0, .efficiency = 0.45f,                 \
      .bytes_factor = 1.1f,                                                                                    \
      .roles = {{"row walkers", 16, "blocks of 512 walk the rows, each read twice (sums, then dx); per-block dweight rows"}}, \
      .smem_layout = "256 B: two partials per warp", .smem_bytes = 256, .reduction_order = STREAM_ORDER,        \
      .workspace_formula = STREAM_WS,                                                                          \
      .workspace = ws_stream, .launch = opsi_rows_cuda_bwd_stream,                                             \
  },                                                                                                           \
  {                                                                                                            \
      .id = ID##_STREAM_VEC16, .name = "cuda_" OPNAME "_stream_vec16", .op = OPID, ROWS_CUDA_COMMON,          \
      .flags = (features) & ~OPSI_F_STRIDED, .align = 16, .dim_multiple = {[OPSI_ROWS_COLS] = 8},              \
      .threads = OPSI_ROWS_STREAM_THREADS, .vector_bytes = 16, .efficiency = 0.8f, .bytes_factor = 1.1f,       \
      .roles = {{"row walkers", 16, "blocks of 512 walk the rows, read twice by 16-byte loads 4 deep; per-block dweight rows"}}, \
      .smem_layout = "256 B: two partials per warp", .smem_bytes = 256, .reduction_order = STREAM_ORDER,        \
      .workspace_formula = STREAM_WS, .workspace = ws_stream, .launch = opsi_rows_cuda_bwd_stream_vec16,       \
  }

#define STAGED_ORDER "per row: sums over the thread's vectors, butterfly, then the warps' partials by a " \
  "butterfly; dweight / dbias: per thread over its group's rows, the block's groups in order, then the "  \
  "blocks' partial rows in order"

/* The staged norm backward (sm_90: 3 stages of 64 KB and the weight row; 16-bit rows; f32 rows,
 * and other GPUs, take the register or stream variants). */
#define STAGED_BWD_ROW(OPNAME, OPID, ID)                                                                       \
  {                                                                                                            \
      .id = ID##_STAGED, .name = "cuda_" OPNAME "_staged", .op = OPID, .backend = OPS_DEVICE_CUDA,             \
      .sm_min = 90, .sm_max = 90, .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),    \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                            \
      .variants = OPSI_ALL_VARIANTS, .deterministic = 1, .unit = OPSI_UNIT_FFMA, .tiling = OPSI_NO_TILING,     \
      .tests = OPSI_GPU_TESTS, .flags = OPSI_F_DWEIGHT | OPSI_F_BIAS, .align = 16,                             \
      .dim_multiple = {[OPSI_ROWS_COLS] = 8},                                                                  \
      .dim_max = {[OPSI_ROWS_ROWS] = 2147483647, [OPSI_ROWS_COLS] = OPSI_ROWS_STAGED_MAX_COLS},                \
      .threads = OPSI_ROWS_STAGED_THREADS, .vector_bytes = 16, .stages = OPSI_ROWS_STAGED_STAGES,              \
      .efficiency = 0.9f, .bytes_factor = 1.02f,                                                               \
      .roles = {{"row groups", 32, "1024-thread blocks walk row batches, cp.async 1..3 batches ahead, rows read from smem"}}, \
      .smem_layout = "3 stages of 1024 x 2 x 2 16-byte vectors of dy and x, each thread's slots its own "     \
                     "(no barrier between copy and use); 32 KB: the weight row when it fits; stage 0 reused "  \
                     "to fold the block's partials; 512 B: the warps' two row partials, two halves taken in "  \
                     "turn (one barrier a row)",                                                               \
      .smem_bytes = OPSI_ROWS_STAGED_SMEM + 512,                              \
      .reduction_order = STAGED_ORDER,                                                                         \
      .workspace_formula = "blocks * N * 4 bytes per requested dweight / dbias, blocks = min(rows / rows a "   \
                           "block, 256), else 0",                                                              \
      .workspace = opsi_rows_bwd_staged_workspace, .launch = opsi_rows_cuda_bwd_staged,                        \
  }

const opsi_kernel_row opsi_layernorm_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_LAYERNORM,
        .name = "cpu_layernorm_ref",
        .tests = "//tests/kernels:norm_test //tests/errors:rows_errors_test",
        .workspace_formula = "0",
        .op = OPS_OP_LAYERNORM,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = NORM_FLAGS,
        .fuses = OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT,
        .reduction_order = "per row: mean, then centred variance, double, index order",
        .launch = opsi_norm_cpu,
    },
    FWD_ROWS("layernorm", OPS_OP_LAYERNORM, OPSI_KERNEL_CUDA_LAYERNORM, NORM_FLAGS,
             OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT, "sum, then centred sum of squares"),
};
const size_t opsi_layernorm_row_count = sizeof opsi_layernorm_rows / sizeof opsi_layernorm_rows[0];

const opsi_kernel_row opsi_rmsnorm_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_RMSNORM,
        .name = "cpu_rmsnorm_ref",
        .tests = "//tests/kernels:norm_test //tests/errors:rows_errors_test",
        .workspace_formula = "0",
        .op = OPS_OP_RMSNORM,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = NORM_FLAGS,
        .fuses = OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT,
        .reduction_order = "per row: sum of squares in double, index order",
        .launch = opsi_norm_cpu,
    },
    FWD_ROWS("rmsnorm", OPS_OP_RMSNORM, OPSI_KERNEL_CUDA_RMSNORM, NORM_FLAGS, OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT,
             "sum of squares"),
};
const size_t opsi_rmsnorm_row_count = sizeof opsi_rmsnorm_rows / sizeof opsi_rmsnorm_rows[0];

const opsi_kernel_row opsi_softmax_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_SOFTMAX,
        .name = "cpu_softmax_ref",
        .tests = "//tests/kernels:softmax_test //tests/errors:rows_errors_test",
        .workspace_formula = "0",
        .op = OPS_OP_SOFTMAX,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_STRIDED,
        .fuses = 0,
        .reduction_order = "per row: max, then sum of exp in double, index order",
        .launch = opsi_softmax_cpu,
    },
    FWD_ROWS("softmax", OPS_OP_SOFTMAX, OPSI_KERNEL_CUDA_SOFTMAX, OPSI_F_STRIDED, 0, "max, then sum of exp"),
};
const size_t opsi_softmax_row_count = sizeof opsi_softmax_rows / sizeof opsi_softmax_rows[0];

const opsi_kernel_row opsi_layernorm_backward_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_LAYERNORM_BWD,
        .name = "cpu_layernorm_backward_ref",
        .op = OPS_OP_LAYERNORM_BACKWARD,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_DWEIGHT | OPSI_F_BIAS | OPSI_F_STRIDED,
        .reduction_order = "per row: mean(g), mean(g xhat) in double; dweight / dbias per column over rows in order",
        .workspace_formula = "0",
        .launch = opsi_norm_backward_cpu,
        .tests = "//tests/kernels:norm_backward_test //tests/errors:backward_errors_test",
    },
    BWD_ROWS("layernorm_backward", OPS_OP_LAYERNORM_BACKWARD, OPSI_KERNEL_CUDA_LAYERNORM_BWD, OPSI_F_DWEIGHT | OPSI_F_BIAS | OPSI_F_STRIDED,
             OPSI_ROWS_NORM_BWD_MAX_COLS, "<= 8 floats of dy * w and of xhat", opsi_rows_bwd_vec16_workspace,
             opsi_rows_bwd_scalar_workspace, opsi_rows_bwd_stream_workspace),
    STAGED_BWD_ROW("layernorm_backward", OPS_OP_LAYERNORM_BACKWARD, OPSI_KERNEL_CUDA_LAYERNORM_BWD),
};
const size_t opsi_layernorm_backward_row_count = sizeof opsi_layernorm_backward_rows / sizeof opsi_layernorm_backward_rows[0];

const opsi_kernel_row opsi_rmsnorm_backward_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_RMSNORM_BWD,
        .name = "cpu_rmsnorm_backward_ref",
        .op = OPS_OP_RMSNORM_BACKWARD,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_DWEIGHT | OPSI_F_BIAS | OPSI_F_STRIDED,
        .reduction_order = "per row: mean(g xhat) in double; dweight / dbias per column over rows in order",
        .workspace_formula = "0",
        .launch = opsi_norm_backward_cpu,
        .tests = "//tests/kernels:norm_backward_test //tests/errors:backward_errors_test",
    },
    BWD_ROWS("rmsnorm_backward", OPS_OP_RMSNORM_BACKWARD, OPSI_KERNEL_CUDA_RMSNORM_BWD, OPSI_F_DWEIGHT | OPSI_F_BIAS | OPSI_F_STRIDED,
             OPSI_ROWS_NORM_BWD_MAX_COLS, "<= 8 floats of dy * w and of xhat", opsi_rows_bwd_vec16_workspace,
             opsi_rows_bwd_scalar_workspace, opsi_rows_bwd_stream_workspace),
    STAGED_BWD_ROW("rmsnorm_backward", OPS_OP_RMSNORM_BACKWARD, OPSI_KERNEL_CUDA_RMSNORM_BWD),
};
const size_t opsi_rmsnorm_backward_row_count = sizeof opsi_rmsnorm_backward_rows / sizeof opsi_rmsnorm_backward_rows[0];

const opsi_kernel_row opsi_softmax_backward_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_SOFTMAX_BWD,
        .name = "cpu_softmax_backward_ref",
        .op = OPS_OP_SOFTMAX_BACKWARD,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_STRIDED,
        .reduction_order = "per row: sum(dy y) in double, index order",
        .workspace_formula = "0",
        .launch = opsi_softmax_backward_cpu,
        .tests = "//tests/kernels:norm_backward_test //tests/errors:backward_errors_test",
    },
    BWD_ROWS("softmax_backward", OPS_OP_SOFTMAX_BACKWARD, OPSI_KERNEL_CUDA_SOFTMAX_BWD, OPSI_F_STRIDED,
             OPSI_ROWS_SM_BWD_MAX_COLS, "<= 16 floats of dy and of y", NULL, NULL, NULL),
};
const size_t opsi_softmax_backward_row_count = sizeof opsi_softmax_backward_rows / sizeof opsi_softmax_backward_rows[0];
