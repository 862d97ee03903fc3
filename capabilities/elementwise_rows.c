/* Capability rows of the elementwise ops: ops_sin_affine, ops_unary, ops_binary. */
#include "capabilities/cpu_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/elementwise/ew_chain_cpu.h"
#include "kernels/elementwise/ew_cpu.h"

#define EW_CPU_FIELDS                                          \
  OPSI_CPU_ROW_COMMON, .out_dtypes = OPSI_FLOAT_DTYPES,        \
  .variants = OPSI_ALL_VARIANTS, .flags = OPSI_F_BROADCAST | OPSI_F_STRIDED, \
  .reduction_order = "none (pointwise)", .launch = opsi_elementwise_cpu,   \
  .workspace_formula = "0",                                                \
  .tests = "//tests/kernels:elementwise_test //tests/errors:elementwise_errors_test"

const opsi_kernel_row opsi_sin_affine_rows[] = {
    {.id = OPSI_KERNEL_CPU_SIN_AFFINE, .name = "cpu_sin_affine_ref", .op = OPS_OP_SIN_AFFINE, EW_CPU_FIELDS},
};
const size_t opsi_sin_affine_row_count = sizeof opsi_sin_affine_rows / sizeof opsi_sin_affine_rows[0];

const opsi_kernel_row opsi_unary_rows[] = {
    {.id = OPSI_KERNEL_CPU_UNARY, .name = "cpu_unary_ref", .op = OPS_OP_UNARY, EW_CPU_FIELDS},
};
const size_t opsi_unary_row_count = sizeof opsi_unary_rows / sizeof opsi_unary_rows[0];

const opsi_kernel_row opsi_binary_rows[] = {
    {.id = OPSI_KERNEL_CPU_BINARY, .name = "cpu_binary_ref", .op = OPS_OP_BINARY, EW_CPU_FIELDS},
};
const size_t opsi_binary_row_count = sizeof opsi_binary_rows / sizeof opsi_binary_rows[0];

const opsi_kernel_row opsi_scale_rows[] = {
    {.id = OPSI_KERNEL_CPU_SCALE, .name = "cpu_scale_ref", .op = OPS_OP_SCALE, EW_CPU_FIELDS},
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
};
const size_t opsi_ew_chain_row_count = sizeof opsi_ew_chain_rows / sizeof opsi_ew_chain_rows[0];
