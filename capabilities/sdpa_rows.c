/* Capability rows of ops_sdpa. */
#include "capabilities/cpu_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/flash/sdpa_cpu.h"

const opsi_kernel_row opsi_sdpa_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_SDPA,
        .name = "cpu_sdpa_ref",
        .tests = "//tests/kernels:sdpa_test //tests/errors:sdpa_errors_test",
        .workspace_formula = "(max_seqlen_k + head_dim_v) * 8 bytes",
        .op = OPS_OP_SDPA,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE |
                 OPSI_F_MASK | OPSI_F_STRIDED | OPSI_F_DV_NE_D,
        .fuses = OPSI_F_MASK,
        .reduction_order = "per query row: exact softmax in double, keys in index order",
        .workspace = opsi_sdpa_cpu_workspace,
        .launch = opsi_sdpa_cpu,
    },
};
const size_t opsi_sdpa_row_count = sizeof opsi_sdpa_rows / sizeof opsi_sdpa_rows[0];
