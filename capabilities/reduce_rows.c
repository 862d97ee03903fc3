/* Capability rows of ops_reduce. */
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/reduce/reduce_cpu.h"
#include "kernels/reduce/reduce_cuda.h"
#include "kernels/reduce/reduce_plan.h"

#define REDUCE_KERNEL_FIELDS                                                          \
  .variants = OPSI_ALL_VARIANTS, .threads = 256, .stages = 0,                         \
  .deterministic = 1, .unit = OPSI_UNIT_FFMA, .bytes_factor = 1.0f,                   \
  .tiling = OPSI_NO_TILING, .tests = OPSI_GPU_TESTS
#define REDUCE_CUDA_FIELDS OPSI_CUDA_ROW_COMMON, REDUCE_KERNEL_FIELDS

const opsi_kernel_row opsi_reduce_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_REDUCE,
        .name = "cpu_reduce_ref",
        .tests = "//tests/kernels:reduce_test //tests/errors:reduce_errors_test",
        .workspace_formula = "0",
        .op = OPS_OP_REDUCE,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_INNER | OPSI_F_REDUCE_NOT_COLUMNS,
        .reduction_order = "per output: sequential fold in double over the reduced axes",
        .launch = opsi_reduce_cpu,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_ROWS_VEC16,
        .name = "cuda_reduce_rows_vec16",
        .op = OPS_OP_REDUCE,
        REDUCE_CUDA_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_COLUMNS,
        .align = 16,
        .dim_multiple = {[OPSI_REDUCE_INNER] = 8},
        .vector_bytes = 16,
        .efficiency = 0.92f,
        .roles = {{"row reducers", 8, "a warp per output (runs <= 8192), else the block; 4 x 16-byte loads in flight"}},
        .smem_layout = "32 B: one partial per warp for the block-wide combine",
        .smem_bytes = 32,
        .reduction_order = "per output: fixed lane-strided partials, butterfly shuffle, warps in order; "
                           "long rows: chunks combined in chunk order",
        .workspace_formula = "outputs * row_splits * 4 bytes when few long rows are split (reduce_plan.c), else 0",
        .workspace = opsi_reduce_rows_workspace,
        .launch = opsi_reduce_cuda_rows_vec16,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_ROWS,
        .name = "cuda_reduce_rows",
        .op = OPS_OP_REDUCE,
        REDUCE_CUDA_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_COLUMNS,
        .align = 1,
        .vector_bytes = 0,
        .efficiency = 0.5f,
        .roles = {{"row reducers", 8, "a warp per output (runs <= 8192), else the block; one element per load"}},
        .smem_layout = "32 B: one partial per warp for the block-wide combine",
        .smem_bytes = 32,
        .reduction_order = "per output: fixed lane-strided partials, butterfly shuffle, warps in order",
        .workspace_formula = "outputs * row_splits * 4 bytes when few long rows are split (reduce_plan.c), else 0",
        .workspace = opsi_reduce_rows_workspace,
        .launch = opsi_reduce_cuda_rows,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_COLUMNS_VEC16,
        .name = "cuda_reduce_columns_vec16",
        .op = OPS_OP_REDUCE,
        REDUCE_CUDA_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_INNER,
        .align = 16,
        .dim_multiple = {[OPSI_REDUCE_OUT] = 8},
        .vector_bytes = 16,
        .efficiency = 0.92f,
        .roles = {{"column walkers", 8, "a thread owns 16 bytes of columns over a chunk of rows, 16 loads deep"}},
        .smem_layout = "none: registers only",
        .smem_bytes = 0,
        .reduction_order = "per output: runs of 16 rows folded in order, runs (then the last < 16 rows) in order within a chunk, "
                           "chunks combined in order",
        .workspace_formula = "row_chunks * outputs * 4 bytes (column_splits in reduce_plan.c), 0 for one chunk",
        .workspace = opsi_reduce_columns_workspace,
        .launch = opsi_reduce_cuda_columns_vec16,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_COLUMNS,
        .name = "cuda_reduce_columns",
        .op = OPS_OP_REDUCE,
        REDUCE_CUDA_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_INNER,
        .align = 1,
        .vector_bytes = 0,
        .efficiency = 0.5f,
        .roles = {{"column walkers", 8, "each thread owns one column over one chunk of rows"}},
        .smem_layout = "none: registers only",
        .smem_bytes = 0,
        .reduction_order = "per output: rows in order within a chunk, chunks combined in order",
        .workspace_formula = "row_chunks * outputs * 4 bytes (column_splits in reduce_plan.c), 0 for one chunk",
        .workspace = opsi_reduce_columns_workspace,
        .launch = opsi_reduce_cuda_columns,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_COLUMNS_CLUSTER,
        .name = "cuda_reduce_columns_cluster",
        .op = OPS_OP_REDUCE,
        /* thread block clusters and distributed shared memory: sm_90 */
        .backend = OPS_DEVICE_CUDA, .sm_min = 90, .sm_max = 90, .dtypes = OPSI_FLOAT_DTYPES,
        .out_dtypes = OPSI_FLOAT_DTYPES, REDUCE_KERNEL_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_INNER,
        .align = 16,
        .dim_multiple = {[OPSI_REDUCE_OUT] = 8},
        /* >= 16 bands x 4 blocks (fewer: too few bytes in flight) and >= 32 rows a warp */
        .dim_min = {[OPSI_REDUCE_OUT] = 4096, [OPSI_REDUCE_INNER] = 1024},
        .vector_bytes = 16,
        .efficiency = 0.95f,
        .roles = {{"column walkers", 8, "clusters of 4 blocks, a quarter of the rows each; a warp a band of 32 vectors"}},
        .smem_layout = "8 x 32 16-byte vectors of floats: the warps' sums (8 KB bf16, 4 KB f32); the band's sums "
                       "(1 KB / 512 B), read by cluster rank 0 through distributed shared memory",
        .smem_bytes = 9 * 32 * 8 * 4,
        .reduction_order = "per output: a warp's rows in order (runs of 16), the block's warps in order, the "
                           "cluster's blocks (quarters of the rows) in rank order",
        .workspace_formula = "0",
        .launch = opsi_reduce_cuda_columns_cluster,
    },
    {
        .id = OPSI_KERNEL_CUDA_REDUCE_STRIDED,
        .name = "cuda_reduce_strided",
        .op = OPS_OP_REDUCE,
        REDUCE_CUDA_FIELDS,
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED | OPSI_F_REDUCE_NOT_INNER | OPSI_F_REDUCE_NOT_COLUMNS,
        .align = 1,
        .vector_bytes = 0,
        .efficiency = 0.25f,
        .roles = {{"element walkers", 8, "a block per output; each thread unravels reduced indices"}},
        .smem_layout = "32 B: one partial per warp for the block-wide combine",
        .smem_bytes = 32,
        .reduction_order = "per output: fixed thread-strided partials, butterfly shuffle, warps in order",
        .workspace_formula = "0",
        .launch = opsi_reduce_cuda_strided,
    },
};
const size_t opsi_reduce_row_count = sizeof opsi_reduce_rows / sizeof opsi_reduce_rows[0];
