/* Capability rows of ops_gemm. */
#include "capabilities/cpu_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/gemm/gemm_cpu.h"

const opsi_kernel_row opsi_gemm_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_GEMM,
        .name = "cpu_gemm_ref",
        .tests = "//tests/kernels:gemm_test //tests/errors:gemm_errors_test",
        .workspace_formula = "0",
        .op = OPS_OP_GEMM,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_BIAS | OPSI_F_RESIDUAL | OPSI_F_BETA_C | OPSI_F_BATCHED | OPSI_F_STRIDED,
        .fuses = OPSI_F_BIAS | OPSI_F_RESIDUAL | OPSI_F_BETA_C,
        .reduction_order = "per output: double-precision dot product over K in index order",
        .launch = opsi_gemm_cpu,
    },
};
const size_t opsi_gemm_row_count = sizeof opsi_gemm_rows / sizeof opsi_gemm_rows[0];
