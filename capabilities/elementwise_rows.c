/* Capability rows of the elementwise ops: ops_sin_affine, ops_unary, ops_binary. */
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/elementwise/dropout_cpu.h"
#include "kernels/elementwise/ew_chain_cpu.h"
#include "kernels/elementwise/ew_cuda.h"
#include "kernels/elementwise/ew_cpu.h"

#define EW_CPU_FIELDS                                          \
  OPSI_CPU_ROW_COMMON, .out_dtypes = OPSI_FLOAT_DTYPES,        \
  .variants = OPSI_ALL_VARIANTS, .flags = OPSI_F_BROADCAST | OPSI_F_STRIDED, \
  .reduction_order = "none (pointwise)", .launch = opsi_elementwise_cpu,   \
  .workspace_formula = "0",                                                \
  .tests = "//tests/kernels:elementwise_test //tests/errors:elementwise_errors_test"

/* The two CUDA elementwise kernels (kernels/elementwise/ew_gpu_kernels.cuh). */
#define EW_CUDA_FIELDS                                                                          \
  OPSI_CUDA_ROW_COMMON, .variants = OPSI_ALL_VARIANTS, .threads = 256, .stages = 0,             \
  .smem_bytes = 0, .deterministic = 1, .reduction_order = "none (pointwise)",                   \
  .workspace_formula = "0", .unit = OPSI_UNIT_FFMA, .bytes_factor = 1.0f,                       \
  .tiling = OPSI_NO_TILING, .tests = OPSI_GPU_TESTS

#define EW_VEC16_FIELDS                                                                         \
  EW_CUDA_FIELDS, .flags = 0, .align = 16, .vector_bytes = 16, .efficiency = 0.93f,              \
  .roles = {{"element workers", 8, "each thread streams 16-byte vectors, 2 in flight per loop trip"}}, \
  .smem_layout = "none: registers only, 16-byte vectors (4 x f32 or 8 x f16/bf16) per access"

#define EW_STRIDED_FIELDS EW_STRIDED_FIELDS_FLAGS(OPSI_F_BROADCAST | OPSI_F_STRIDED)
#define EW_STRIDED_FIELDS_FLAGS(features)                                                       \
  EW_CUDA_FIELDS, .flags = (features), .align = 1, .vector_bytes = 0,                           \
  .efficiency = 0.5f,                                                                           \
  .roles = {{"element workers", 8, "each thread computes every operand's offset of one element"}}, \
  .smem_layout = "none: registers only, one element per access"

const opsi_kernel_row opsi_sin_affine_rows[] = {
    {.id = OPSI_KERNEL_CPU_SIN_AFFINE, .name = "cpu_sin_affine_ref", .op = OPS_OP_SIN_AFFINE, EW_CPU_FIELDS},
    {.id = OPSI_KERNEL_CUDA_SIN_AFFINE_VEC16, .name = "cuda_sin_affine_vec16", .op = OPS_OP_SIN_AFFINE,
     EW_VEC16_FIELDS, .launch = opsi_ew_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_SIN_AFFINE_STRIDED, .name = "cuda_sin_affine_strided", .op = OPS_OP_SIN_AFFINE,
     EW_STRIDED_FIELDS, .launch = opsi_ew_cuda_strided},
};
const size_t opsi_sin_affine_row_count = sizeof opsi_sin_affine_rows / sizeof opsi_sin_affine_rows[0];

const opsi_kernel_row opsi_unary_rows[] = {
    {.id = OPSI_KERNEL_CPU_UNARY, .name = "cpu_unary_ref", .op = OPS_OP_UNARY, EW_CPU_FIELDS},
    {.id = OPSI_KERNEL_CUDA_UNARY_VEC16, .name = "cuda_unary_vec16", .op = OPS_OP_UNARY, EW_VEC16_FIELDS,
     .launch = opsi_ew_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_UNARY_STRIDED, .name = "cuda_unary_strided", .op = OPS_OP_UNARY, EW_STRIDED_FIELDS,
     .launch = opsi_ew_cuda_strided},
};
const size_t opsi_unary_row_count = sizeof opsi_unary_rows / sizeof opsi_unary_rows[0];

const opsi_kernel_row opsi_binary_rows[] = {
    {.id = OPSI_KERNEL_CPU_BINARY, .name = "cpu_binary_ref", .op = OPS_OP_BINARY, EW_CPU_FIELDS},
    {.id = OPSI_KERNEL_CUDA_BINARY_VEC16, .name = "cuda_binary_vec16", .op = OPS_OP_BINARY, EW_VEC16_FIELDS,
     .launch = opsi_ew_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_BINARY_STRIDED, .name = "cuda_binary_strided", .op = OPS_OP_BINARY, EW_STRIDED_FIELDS,
     .launch = opsi_ew_cuda_strided},
};
const size_t opsi_binary_row_count = sizeof opsi_binary_rows / sizeof opsi_binary_rows[0];

const opsi_kernel_row opsi_scale_rows[] = {
    {.id = OPSI_KERNEL_CPU_SCALE, .name = "cpu_scale_ref", .op = OPS_OP_SCALE, EW_CPU_FIELDS},
    {.id = OPSI_KERNEL_CUDA_SCALE_VEC16, .name = "cuda_scale_vec16", .op = OPS_OP_SCALE, EW_VEC16_FIELDS,
     .launch = opsi_ew_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_SCALE_STRIDED, .name = "cuda_scale_strided", .op = OPS_OP_SCALE, EW_STRIDED_FIELDS,
     .launch = opsi_ew_cuda_strided},
};
const size_t opsi_scale_row_count = sizeof opsi_scale_rows / sizeof opsi_scale_rows[0];

const opsi_kernel_row opsi_ew_chain_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_EW_CHAIN,
        .name = "cpu_ew_chain_ref",
        .op = OPS_OP_EW_CHAIN,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_BROADCAST | OPSI_F_STRIDED,
        .fuses = OPSI_F_BROADCAST,
        .reduction_order = "none (pointwise); intermediates kept in double",
        .workspace_formula = "0",
        .launch = opsi_ew_chain_cpu,
        .tests = "//tests/dispatch:fusion_test",
    },
    {.id = OPSI_KERNEL_CUDA_EW_CHAIN_VEC16, .name = "cuda_ew_chain_vec16", .op = OPS_OP_EW_CHAIN, EW_VEC16_FIELDS,
     .fuses = OPSI_F_BROADCAST, .launch = opsi_ew_chain_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_EW_CHAIN_STRIDED, .name = "cuda_ew_chain_strided", .op = OPS_OP_EW_CHAIN,
     EW_STRIDED_FIELDS, .fuses = OPSI_F_BROADCAST, .launch = opsi_ew_chain_cuda_strided},
};
const size_t opsi_ew_chain_row_count = sizeof opsi_ew_chain_rows / sizeof opsi_ew_chain_rows[0];

const opsi_kernel_row opsi_dropout_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_DROPOUT,
        .name = "cpu_dropout_ref",
        .op = OPS_OP_DROPOUT,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_STRIDED,
        .reduction_order = "none (pointwise); Philox4x32-10 per 4 logical elements",
        .workspace_formula = "0",
        .launch = opsi_dropout_cpu,
        .tests = "//tests/kernels:dropout_test //tests/errors:backward_errors_test",
    },
    {.id = OPSI_KERNEL_CUDA_DROPOUT_VEC16, .name = "cuda_dropout_vec16", .op = OPS_OP_DROPOUT, EW_VEC16_FIELDS,
     .launch = opsi_dropout_cuda_vec16},
    {.id = OPSI_KERNEL_CUDA_DROPOUT_STRIDED, .name = "cuda_dropout_strided", .op = OPS_OP_DROPOUT,
     EW_STRIDED_FIELDS_FLAGS(OPSI_F_STRIDED), .launch = opsi_dropout_cuda_strided},
};
const size_t opsi_dropout_row_count = sizeof opsi_dropout_rows / sizeof opsi_dropout_rows[0];
