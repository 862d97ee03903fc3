/* Capability rows of the row-wise ops: ops_layernorm, ops_rmsnorm, ops_softmax. */
#include "capabilities/cpu_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/norm/rows_cpu.h"

#define NORM_FLAGS (OPSI_F_BIAS | OPSI_F_RESIDUAL | OPSI_F_RESIDUAL_OUT | OPSI_F_STATS_OUT | OPSI_F_STRIDED)

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
        .tests = "//tests/kernels:norm_backward_test",
    },
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
        .tests = "//tests/kernels:norm_backward_test",
    },
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
        .tests = "//tests/kernels:norm_backward_test",
    },
};
const size_t opsi_softmax_backward_row_count = sizeof opsi_softmax_backward_rows / sizeof opsi_softmax_backward_rows[0];
