/* Capability rows of ops_reduce. */
#include "capabilities/cpu_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/reduce/reduce_cpu.h"

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
        .flags = OPSI_F_KEEPDIM | OPSI_F_STRIDED,
        .reduction_order = "per output: sequential fold in double over the reduced axes",
        .launch = opsi_reduce_cpu,
    },
};
const size_t opsi_reduce_row_count = sizeof opsi_reduce_rows / sizeof opsi_reduce_rows[0];
